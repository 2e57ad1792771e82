"""gpu-max-per-pod: whole devices a pod holds at once (app containers and sidecars summed,
init containers max'ed) stay within `rules.maxGPUsPerPod`.

FAIL (maxGPUsPerPod: 8): two containers with `nvidia.com/gpu: 6`
PASS: one container with 8; an init container with 8 then an app container with 8
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.resources import WHOLE_DEVICE
from policies.view import PodView

ID = "gpu-max-per-pod"
INTRINSIC = False


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    limit = policy.spec.rules.max_gpus_per_pod
    if limit is None:
        return
    for name, total in view.demand.totals.items():
        if name in WHOLE_DEVICE and total > limit:
            yield Finding(
                ID, f"the pod holds {total} {name} at once; at most {limit} allowed",
                view.containers_path,
            )
