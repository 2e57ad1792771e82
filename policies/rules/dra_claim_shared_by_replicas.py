"""dra-claim-shared-by-replicas (advice): a pod template (Deployment, Job, a training job's
replicas...) whose `spec.resourceClaims` names a ResourceClaim of GPUs by
`resourceClaimName` makes every pod it creates share that one claim's devices, the new pod of
a rolling update included; a `resourceClaimTemplateName` gives each pod GPUs of its own.

WARN: a Deployment whose pod template has `resourceClaims: [{name: gpu, resourceClaimName: gpus}]`
PASS: the same with `resourceClaimTemplateName: one-gpu`; a bare Pod naming a ResourceClaim
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.view import PodView

ID = "dra-claim-shared-by-replicas"
INTRINSIC = True
NATIVE = "It reads the ResourceClaim a workload names, which is inventory."
FAMILIES = frozenset({"dra"})


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    if view.is_pod:
        return
    for use in view.demand.claims:
        if use.gpu and use.claim.kind == "ResourceClaim":
            yield Finding(ID, f"every pod this {view.kind} creates shares the GPUs of "
                          f"ResourceClaim {use.claim.name}; use a resourceClaimTemplateName "
                          "for GPUs of each pod's own", (*use.path, "resourceClaimName"),
                          "warning")
