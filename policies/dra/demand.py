"""A pod's GPU demand through DRA: `spec.resourceClaims` names ResourceClaims (by
`resourceClaimName`) or ResourceClaimTemplates (by `resourceClaimTemplateName`) of the pod's
namespace; the requests of those whose device class picks GPUs or MIG devices count as GPU
demand, so the pod is a GPU pod and the policies' injections apply to it (DESIGN.md §2.4)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.dra.claims import gpu_demand
from policies.dra.objects import Claim
from policies.dra.pools import DraInventory
from policies.paths import FieldPath

Claims = Mapping[tuple[str, str, str], Claim]


def claim_devices(spec: Mapping[str, Any], prefix: FieldPath, namespace: str, claims: Claims,
                  dra: DraInventory | None) -> tuple[tuple[FieldPath, str, int], ...]:
    """(path of the spec.resourceClaims entry, "gpu" | "mig", devices) for every GPU request
    of every claim the pod names and the inputs hold; malformed entries give nothing."""
    refs = spec.get("resourceClaims")
    if not isinstance(refs, list) or not claims:
        return ()
    found = []
    for i, ref in enumerate(refs):
        if not isinstance(ref, dict):
            continue
        name, template = ref.get("resourceClaimName"), ref.get("resourceClaimTemplateName")
        key = (("ResourceClaim", namespace, name) if isinstance(name, str) else
               ("ResourceClaimTemplate", namespace, template) if isinstance(template, str)
               else None)
        claim = claims.get(key) if key is not None else None
        if claim is None:
            continue
        for wanted in gpu_demand(claim, dra):
            if wanted.kind is not None:
                found.append(((*prefix, "resourceClaims", i), wanted.kind, wanted.count))
    return tuple(found)
