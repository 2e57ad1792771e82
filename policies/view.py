"""What a rule looks at: one pod spec of a workload, after mutation, with its GPU demand."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from policies.paths import FieldPath
from policies.resources import PodDemand


@dataclass(frozen=True, slots=True)
class PodView:
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

    def at(self, *parts: str | int) -> FieldPath:
        return (*self.prefix, *parts)
