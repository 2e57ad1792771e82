"""What the node-fact rules share: the GPU nodes of a ClusterView grouped by node pool."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable

from policies.pools.nodes import NodeRecord


def gpu_nodes(records: Iterable[NodeRecord]) -> list[NodeRecord]:
    return [r for r in records if r.gpu_node and r.name]


def by_pool(records: Iterable[NodeRecord]) -> dict[str, list[NodeRecord]]:
    """The cluster's node pools (else GPU product) of the GPU nodes; a node in neither is a
    pool of its own, which has nothing to drift from."""
    pools: dict[str, list[NodeRecord]] = {}
    for r in gpu_nodes(records):
        pools.setdefault(r.pool or r.product or r.name, []).append(r)
    return pools


def majority(values: Iterable[str]) -> tuple[str, int]:
    """The most common value and its count ("" when none)."""
    found = Counter(v for v in values if v).most_common(1)
    return found[0] if found else ("", 0)
