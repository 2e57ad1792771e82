"""Everything review() needs besides the object: policies, catalog, nodes, namespaces.

A Context is immutable; the edges build a new one when a source changes, so the hot path
can memoise per-namespace lookups without locks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from functools import cached_property
from typing import TYPE_CHECKING

from policies.apiserver import ApiObjects
from policies.catalog import Catalog
from policies.inventory import Inventory
from policies.model import GPUPolicy
from policies.selectors import label_selector_matches
from policies.workloads import WORKLOAD_KINDS, KindTable

if TYPE_CHECKING:
    from policies.dra.objects import Claim

DEFAULT_EXCLUDED_NAMESPACES = frozenset({"kube-system"})
_CACHED_NAMESPACES = 4096


@dataclass(frozen=True, eq=False)
class Context:
    """Everything a review reads besides the object: policies, catalog, inventory, namespaces."""

    policies: Sequence[GPUPolicy]
    catalog: Catalog
    inventory: Inventory | None = None
    # Namespace name -> labels. A namespace not listed gets only the label the API server
    # always sets, `kubernetes.io/metadata.name`.
    namespaces: Mapping[str, Mapping[str, str]] = field(default_factory=dict)
    excluded_namespaces: frozenset[str] = DEFAULT_EXCLUDED_NAMESPACES
    workload_kinds: KindTable = WORKLOAD_KINDS
    # DRA: the ResourceClaims and ResourceClaimTemplates pods name in spec.resourceClaims,
    # by (kind, namespace, name); the drivers' devices are in `inventory.dra`.
    claims: Mapping[tuple[str, str, str], Claim] = field(default_factory=dict)
    # PriorityClasses, RuntimeClasses and ResourceQuotas (the API server's own admission
    # plugins read them): None when none of them were given
    api: ApiObjects | None = None

    @cached_property
    def _ordered(self) -> tuple[GPUPolicy, ...]:
        return tuple(sorted(self.policies, key=lambda p: (p.spec.priority, p.name)))

    @cached_property
    def _governing_cache(self) -> dict[str, tuple[GPUPolicy, ...]]:
        return {}

    def namespace_labels(self, namespace: str) -> Mapping[str, str]:
        labels = self.namespaces.get(namespace)
        if labels is None:
            return {"kubernetes.io/metadata.name": namespace}
        if "kubernetes.io/metadata.name" not in labels:
            return {**labels, "kubernetes.io/metadata.name": namespace}
        return labels

    def governing(self, namespace: str) -> tuple[GPUPolicy, ...]:
        """Policies that govern `namespace`, lowest priority (then name) first."""
        cached = self._governing_cache.get(namespace)
        if cached is not None:
            return cached
        if namespace in self.excluded_namespaces:
            found: tuple[GPUPolicy, ...] = ()
        else:
            labels = self.namespace_labels(namespace)
            found = tuple(p for p in self._ordered if _governs(p, namespace, labels))
        if len(self._governing_cache) >= _CACHED_NAMESPACES:
            self._governing_cache.clear()  # a namespace comes with the request: stay bounded
        self._governing_cache[namespace] = found
        return found


    def allowed_models(self, namespace: str) -> list[Sequence[str]]:
        """The `allowedModels` of every governing policy that sets one: a pod must run on a
        model in all of them (the one hardware verdict of review and explain)."""
        return [p.spec.rules.allowed_models for p in self.governing(namespace)
                if p.spec.rules.allowed_models is not None]


def _governs(policy: GPUPolicy, namespace: str, labels: Mapping[str, str]) -> bool:
    spec = policy.spec
    if spec.namespaces is not None and not any(
        fnmatchcase(namespace, pattern) for pattern in spec.namespaces
    ):
        return False
    return spec.namespace_selector is None or label_selector_matches(
        spec.namespace_selector.model_dump(by_alias=True), labels
    )
