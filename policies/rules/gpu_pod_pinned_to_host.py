"""gpu-pod-pinned-to-host: a GPU workload placed by hostname (`nodeName`, a nodeSelector or
required affinity on `kubernetes.io/hostname`, or `matchFields` on `metadata.name`) is tied to
one machine: it waits when that machine is down or full, though identical GPUs sit idle in the
pool. Select what the work needs (the pool label, `nvidia.com/gpu.product`, the GPU memory), never
a machine. Pods already running (the audit) are not judged, nor the nodeName of a Pod the API
server holds: the scheduler set it.
Advice.

FAIL: a GPU Job with `nodeSelector: {kubernetes.io/hostname: gpu-node-7}`
PASS: the same Job with `nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.gpunodes import HOSTNAME_KEY, required_expressions
from policies.model import GPUPolicy
from policies.view import PodView

ID = "gpu-pod-pinned-to-host"
INTRINSIC = True
NATIVE = "Advice (a warning): one binding has one action for all its validations."
SEVERITY = "warning"
CATEGORY = "scheduling"

_JOB = """\
    apiVersion: batch/v1
    kind: Job
    metadata: {{name: train}}
    spec:
      template:
        spec:
          restartPolicy: Never
          nodeSelector: {{{selector}}}
          containers:
          - {{name: main, image: "nvcr.io/nvidia/pytorch:24.08-py3",
              resources: {{limits: {{nvidia.com/gpu: 8}}}}}}
"""
EXAMPLES = f"""
- FAIL: a training Job placed on one machine by its hostname
  object:
{_JOB.format(selector="kubernetes.io/hostname: gpu-node-7")}
- PASS: a correctly pinned Job, selecting the GPU model
  object:
{_JOB.format(selector="nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB")}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    if view.started or not view.demand.gpu:
        return
    spec = view.spec
    name = spec.get("nodeName")
    if isinstance(name, str) and name and not view.exists:
        yield _finding(f"spec.nodeName {name}", view.at("nodeName"))
        return
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict) and HOSTNAME_KEY in selector:
        yield _finding(f"nodeSelector {HOSTNAME_KEY}", view.at("nodeSelector", HOSTNAME_KEY))
        return
    for part, expr in required_expressions(spec):
        if (part == "matchExpressions" and expr.get("key") == HOSTNAME_KEY
                and expr.get("operator") == "In") or (
                part == "matchFields" and expr.get("key") == "metadata.name"
                and expr.get("operator") == "In"):
            what = "matchFields metadata.name" if part == "matchFields" \
                else f"required affinity on {HOSTNAME_KEY}"
            yield _finding(what, view.at("affinity"))
            return


def _finding(what: str, path: tuple[str | int, ...]) -> Finding:
    return Finding(ID, f"a GPU workload placed by {what}: it waits whenever that machine is "
                   "down or full; select the pool or the GPU model instead", path,
                   level="warning")
