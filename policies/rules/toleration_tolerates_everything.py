"""toleration-tolerates-everything: a toleration with `operator: Exists` and no key tolerates
every taint, so the pod can land on every dedicated pool (GPU nodes of other teams, nodes being
drained with NoExecute). Node agents (the GPU stack's DaemonSets, monitoring and logging agents,
judged by what they are) need it and are excepted. Advice.

FAIL: a Job with `tolerations: [{operator: Exists}]`
PASS: a Job tolerating `nvidia.com/gpu` only; node-exporter's DaemonSet tolerating everything
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.gpunodes import is_node_agent, tolerates_everything
from policies.model import GPUPolicy
from policies.view import PodView

ID = "toleration-tolerates-everything"
INTRINSIC = True
NATIVE = "Advice (a warning): one binding has one action for all its validations."
SEVERITY = "warning"
CATEGORY = "scheduling"

EXAMPLES = """
- FAIL: a batch Job that tolerates every taint
  object:
    apiVersion: batch/v1
    kind: Job
    metadata: {name: report}
    spec:
      template:
        spec:
          restartPolicy: Never
          tolerations: [{operator: Exists}]
          containers: [{name: main, image: "python:3.12"}]
- PASS: node-exporter, a node agent reading /proc and /sys, tolerating every taint
  object:
    apiVersion: apps/v1
    kind: DaemonSet
    metadata: {name: node-exporter}
    spec:
      selector: {matchLabels: {app: node-exporter}}
      template:
        metadata: {labels: {app: node-exporter}}
        spec:
          hostPID: true
          tolerations: [{operator: Exists}]
          containers: [{name: exporter, image: "quay.io/prometheus/node-exporter:v1.8.2"}]
          volumes:
          - {name: proc, hostPath: {path: /proc}}
          - {name: sys, hostPath: {path: /sys}}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    listed = view.spec.get("tolerations")
    if not isinstance(listed, list) or not listed:
        return
    for index, toleration in enumerate(listed):
        if isinstance(toleration, dict) and tolerates_everything(toleration):
            if is_node_agent(view):
                return
            effect = toleration.get("effect")
            what = f"every {effect} taint" if isinstance(effect, str) and effect \
                else "every taint"
            yield Finding(ID, f"tolerates {what} (operator Exists, no key): the pod can land on "
                          "any dedicated pool, GPU nodes included; tolerate the taints it needs "
                          "by key", view.at("tolerations", index), level="warning")
            return
