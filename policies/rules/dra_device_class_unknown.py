"""dra-device-class-unknown: every request of a ResourceClaim names a DeviceClass the cluster
has; a pod whose claim names a missing class waits for it, Pending. Needs an inventory that
lists the cluster's DeviceClasses (`kubectl get nodes,resourceslices,deviceclasses`).

FAIL: `exactly: {deviceClassName: gpu.nvidia.co}` (a typo)
PASS: `exactly: {deviceClassName: gpu.nvidia.com}`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.claimfit import judged
from policies.context import Context
from policies.decision import Finding
from policies.dra.claims import unknown_classes
from policies.model import GPUPolicy
from policies.view import ClaimView

ID = "dra-device-class-unknown"
INTRINSIC = True


def check_claim(view: ClaimView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    dra = judged(context.inventory)
    if dra is None:
        return
    for problem in unknown_classes(view.claim, dra.classes):
        yield Finding(ID, problem.message, problem.path)
