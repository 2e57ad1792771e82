"""dra-device-class-unknown: every request of a ResourceClaim names a DeviceClass the cluster
has; a pod whose claim names a missing class waits for it, Pending, so the pod naming such a
claim is refused too (whatever the class would have held: GPUs or not). Needs an inventory
that lists the cluster's DeviceClasses (`kubectl get nodes,resourceslices,deviceclasses`).

FAIL: `exactly: {deviceClassName: gpu.nvidia.co}` (a typo); a pod whose
  `resourceClaims` names that claim (a warning when it names a template: the class may come
  with the driver synced beside it)
PASS: `exactly: {deviceClassName: gpu.nvidia.com}`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.claimfit import judged
from policies.context import Context
from policies.decision import Finding, Level
from policies.dra.claims import unknown_classes
from policies.model import GPUPolicy
from policies.view import ClaimView, PodView

ID = "dra-device-class-unknown"
INTRINSIC = True
FAMILIES = frozenset({"dra"})  # a pod's: only when it names claims


def check_claim(view: ClaimView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    dra = judged(context.inventory)
    if dra is None:
        return
    for problem in unknown_classes(view.claim, dra.classes):
        yield Finding(ID, problem.message, problem.path)


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    dra = judged(context.inventory)
    if dra is None:
        return
    for use in view.demand.claims:
        if not any(d.unknown_class for d in use.demands):
            continue
        # A claim exists already and is immutable: the pod waits until someone creates the
        # class. A template's claim is made with the pod; a driver synced with the workload
        # (GitOps) may bring the class a moment later: a warning, as for the template itself.
        level: Level = "error" if use.claim.kind == "ResourceClaim" else "warning"
        for problem in unknown_classes(use.claim, dra.classes):
            yield Finding(ID, f"{use.claim.kind} {use.claim.namespace}/{use.claim.name}: "
                          f"{problem.message}: the pod waits for it, Pending", use.path, level)
