"""gpu-fraction-annotation: NVIDIA KAI Scheduler gives a pod a share of a GPU through pod
annotations: `gpu-fraction` (a decimal in (0, 1], of each of `gpu-fraction-num-devices`
devices) or `gpu-memory` (MiB of one device), never both. KAI refuses malformed values, and
only KAI reads them: with another scheduler the pod runs with no GPU at all (advice).

FAIL: `gpu-fraction: "1.5"`; `gpu-fraction: "0.5"` with `gpu-memory: "2000"`
WARN: `gpu-fraction: "0.5"` without `schedulerName: kai-scheduler`
PASS: `gpu-fraction: "0.5"` with `schedulerName: kai-scheduler`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.resources import KAI_SCHEDULER
from policies.view import PodView

ID = "gpu-fraction-annotation"
INTRINSIC = True
NATIVE = "Not translated yet: KAI annotation checks (a fact the webhook reports)."

EXAMPLES = """
- FAIL: a GPU fraction over one
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p, annotations: {gpu-fraction: "1.5"}}
    spec:
      schedulerName: kai-scheduler
      containers: [{name: main, image: "server:1"}]
- PASS: half a GPU under KAI Scheduler
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p, annotations: {gpu-fraction: "0.5"}}
    spec:
      schedulerName: kai-scheduler
      containers: [{name: main, image: "server:1"}]
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    request = view.demand.fraction
    if request is None:
        return
    for key, why in request.problems:
        yield Finding(ID, f"annotation {key} {why}", (*request.path, key))
    scheduler = view.spec.get("schedulerName")
    if scheduler != KAI_SCHEDULER and "tolerations" in view.pod_fields:
        shown = f"schedulerName {scheduler}" if isinstance(scheduler, str) and scheduler \
            else "no schedulerName"
        yield Finding(
            ID, f"GPU share annotations with {shown}: only {KAI_SCHEDULER} reads them, so the "
            f"pod would run with no GPU; set schedulerName: {KAI_SCHEDULER}",
            view.at("schedulerName"), level="warning",
        )
