"""A pod's GPU demand through DRA: `spec.resourceClaims` names ResourceClaims (by
`resourceClaimName`) or ResourceClaimTemplates (by `resourceClaimTemplateName`) of the pod's
namespace; the requests of those whose device class picks GPUs or MIG devices count as GPU
demand, so the pod is a GPU pod and the policies' injections apply to it (DESIGN.md §2.4)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, NamedTuple

from policies.decision import Unresolved
from policies.dra.claims import Demand, GpuKind, devices_of, gpu_demand
from policies.paths import FieldPath

if TYPE_CHECKING:  # the DRA object model loads once an input holds a claim or a class
    from policies.dra.objects import Claim
    from policies.dra.pools import DraInventory

Claims = Mapping[tuple[str, str, str], "Claim"]


class ClaimUse(NamedTuple):
    """One entry of a pod's spec.resourceClaims, resolved to the claim it names."""

    path: FieldPath  # spec.resourceClaims[i]
    name: str  # the pod's name for it: containers list it in resources.claims[].name
    claim: Claim
    demands: tuple[Demand, ...]

    @property
    def gpu(self) -> bool:
        return any(d.kind is not None for d in self.demands)

    @property
    def doubtful(self) -> bool:
        """Not GPUs as far as can be told, yet to be judged: a request no device of the
        cluster matches (the pod never runs), or on a class the inventory lacks."""
        return any(not d.matched or d.unknown_class for d in self.demands)

    def devices(self, kind: GpuKind, request: str = "") -> int:
        """Devices of `kind` the claim gives (only request `request`'s, when named)."""
        return devices_of(self.demands, kind, request)


def claim_uses(spec: Mapping[str, Any], prefix: FieldPath, namespace: str, claims: Claims,
               dra: DraInventory | None) -> tuple[ClaimUse, ...]:
    """Every claim the pod names and the inputs hold, GPU or not (all of a pod's claims are
    allocated on one node); malformed entries and claims not among the inputs give nothing."""
    if not claims:
        return ()
    found = []
    demands: dict[int, tuple[Demand, ...]] = {}  # one claim named many times: worked out once
    for path, own, key in references(spec, prefix, namespace):
        claim = claims.get(key)
        if claim is not None:
            if id(claim) not in demands:
                demands[id(claim)] = tuple(gpu_demand(claim, dra))
            found.append(ClaimUse(path, own, claim, demands[id(claim)]))
    return tuple(found)


def unknown_claims(spec: Mapping[str, Any], prefix: FieldPath, namespace: str,
                   claims: Claims) -> Iterator[Unresolved]:
    """The claims a pod names that the inputs do not hold, at their resourceClaims entry: the
    pod's GPUs through them cannot be judged (a claim is not guessed at)."""
    for path, _own, (kind, ns, name) in references(spec, prefix, namespace):
        if (kind, ns, name) not in claims:
            yield Unresolved(path, f"{kind} {ns}/{name} is not known here (not among the "
                                   "inputs, or not watched yet), so the GPUs it may hold are "
                                   "not judged")


def references(spec: Mapping[str, Any], prefix: FieldPath, namespace: str
               ) -> Iterator[tuple[FieldPath, str, tuple[str, str, str]]]:
    """(path, the pod's name for it, (kind, namespace, name)) of each well-formed entry of
    spec.resourceClaims."""
    refs = spec.get("resourceClaims")
    for i, ref in enumerate(refs if isinstance(refs, list) else ()):
        if not isinstance(ref, dict):
            continue
        name, template = ref.get("resourceClaimName"), ref.get("resourceClaimTemplateName")
        key = (("ResourceClaim", namespace, name) if isinstance(name, str) else
               ("ResourceClaimTemplate", namespace, template) if isinstance(template, str)
               else None)
        if key is not None:
            own = ref.get("name")
            yield (*prefix, "resourceClaims", i), own if isinstance(own, str) else "", key

def devices(uses: Iterable[ClaimUse], kind: GpuKind) -> int:
    return sum(u.devices(kind) for u in uses)


def by_name(uses: Iterable[ClaimUse]) -> dict[str, ClaimUse]:
    """A pod's claims by the name its containers use, made once per pod (not per container:
    a hostile pod may list thousands of both)."""
    return {u.name: u for u in uses}


def container_devices(container: Mapping[str, Any], named: Mapping[str, ClaimUse],
                      kind: GpuKind) -> int:
    """Devices of `kind` a container is given: those of the claims (or of the one request of
    a claim) it lists in resources.claims; `named` is `by_name` of the pod's claims."""
    resources = container.get("resources")
    listed = resources.get("claims") if isinstance(resources, dict) else None
    if not isinstance(listed, list):
        return 0
    total = 0
    for entry in listed:
        name = entry.get("name") if isinstance(entry, dict) else None
        use = named.get(name) if isinstance(name, str) else None
        if use is None:
            continue
        request = entry.get("request")
        total += use.devices(kind, request if isinstance(request, str) else "")
    return total


def claims_gpu(container: Mapping[str, Any], named: Mapping[str, ClaimUse]) -> bool:
    """The container is given GPUs or MIG devices by a claim it lists in resources.claims."""
    if not named:
        return False
    return (container_devices(container, named, "gpu") > 0
            or container_devices(container, named, "mig") > 0)
