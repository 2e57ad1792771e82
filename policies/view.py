"""What a rule looks at: one pod spec of a workload, after mutation, with its GPU demand."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from policies.inventory import PRODUCT_LABELS
from policies.paths import FieldPath
from policies.resources import PodDemand
from policies.shape import REQUIRED
from policies.workloads import POD_FIELDS

if TYPE_CHECKING:
    from policies.dra.claims import Demand
    from policies.dra.objects import Claim


@dataclass(frozen=True, slots=True)
class PodView:
    """One pod spec as the rules read it: where it is, what it asks for, what it pins."""

    kind: str
    spec: Mapping[str, Any]
    prefix: FieldPath
    demand: PodDemand
    # A v1 Pod: the apiserver copies limits into missing requests. Templates are not defaulted.
    is_pod: bool
    namespace: str
    subresource: str = ""
    # GPU product names the pod pins itself to (nodeSelector, required affinity `In`).
    products: tuple[str, ...] = ()
    # The pod-level fields this kind has here; without tolerations the pod template lives
    # elsewhere (a Kubeflow Trainer runtime) and its scheduling constraints are unknown.
    pod_fields: frozenset[str] = POD_FIELDS
    # A Pod whose status says it runs or has run (an audited pod), not one being admitted.
    started: bool = False
    # A Pod the API server holds (its status has a phase, Pending included): admitted, so
    # counted in its namespace's quota usage already, its priority class resolved.
    admitted: bool = False
    # Answers several policies' rules share within one review (the pool verdicts of the
    # pod with its claims): worked out once per view.
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def at(self, *parts: str | int) -> FieldPath:
        return (*self.prefix, *parts)

    @property
    def containers_path(self) -> FieldPath:
        """Where a finding about the pod's containers as a whole points: `containers`, or the
        first GPU container-like object of a kind that has no such list (KServe `model`, an
        Argo `container`, a TrainJob's trainer)."""
        if "containers" not in self.spec:
            found = next((c.path for c in self.demand.containers if c.gpu), None)
            if found is not None:
                return found
        return self.at("containers")


def targeted_products(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """GPU product names the pod pins itself to (nodeSelector or required affinity `In`)."""
    found: list[str] = []
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict):
        found += [v for k in PRODUCT_LABELS if isinstance(v := selector.get(k), str)]
    for expr in _required_expressions(spec):
        values = expr.get("values")
        if (expr.get("key") in PRODUCT_LABELS and expr.get("operator") == "In"
                and isinstance(values, list)):
            found += [v for v in values if isinstance(v, str)]
    return tuple(dict.fromkeys(found))


def _required_expressions(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    """The requirements of every required node-affinity term; parts of the wrong type (which
    pod-field-invalid reports) are passed over."""
    affinity = _dict(spec.get("affinity"))
    required = _dict(_dict(affinity.get("nodeAffinity")).get(
        REQUIRED))
    terms = required.get("nodeSelectorTerms")
    for term in terms if isinstance(terms, list) else ():
        expressions = _dict(term).get("matchExpressions")
        for expr in expressions if isinstance(expressions, list) else ():
            if isinstance(expr, dict):
                yield expr


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


class ClaimView(NamedTuple):
    """A ResourceClaim or ResourceClaimTemplate reviewed as an object of its own."""

    claim: Claim
    namespace: str
    demands: tuple[Demand, ...]  # each request (and subrequest), GPU kind and device count

    @property
    def kind(self) -> str:
        return self.claim.kind

    @property
    def gpu(self) -> bool:
        return any(d.kind is not None for d in self.demands)
