"""Nodes of a cluster, grouped into pools of identical hardware and scheduling facts.

Hardware matching runs per pool, not per node: nodes whose labels (minus per-node labels such as
`kubernetes.io/hostname`), taints and allocatable GPU resources are identical share one Pool.
Selectors that mention a per-node label key, or matchFields on `metadata.name`, must be matched
per node: `Pool.label_sets(keys)` yields (node name, full labels) pairs in that case and one
(first node name, shared labels) pair otherwise.

Cordoned nodes (spec.unschedulable) are listed in `Inventory.nodes` and join no pool: they are
grouped apart (`Inventory.cordoned`), for `explain` to say what the scheduler says of them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple

from policies.catalog import Catalog, GPUModel
from policies.quantity import Number, QuantityError, parse_quantity
from policies.selectors import Taint

if TYPE_CHECKING:  # the DRA object model loads only for an inventory that has DRA objects
    from policies.dra.pools import DraInventory

__all__ = ["PER_NODE_LABELS", "POOL_LABELS", "Inventory", "Node", "Pool", "Taint"]

# Labels whose value differs from node to node inside one pool.
PER_NODE_LABELS = frozenset({
    "kubernetes.io/hostname",
    "nvidia.com/gfd.timestamp",
    "node.kubernetes.io/instance-id",
    "alpha.eksctl.io/instance-id",
})
POOL_LABELS = (
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "kubernetes.azure.com/agentpool",
    "karpenter.sh/nodepool",
    "node.kubernetes.io/instance-type",
)
PRODUCT_LABELS = ("nvidia.com/gpu.product", "aliyun.accelerator/nvidia_name")
MIG_STRATEGY_LABEL = "nvidia.com/mig.strategy"

def _amount(raw: Any) -> int | None:
    """An allocatable quantity as an integer (rounded down); None when unparsable."""
    try:
        return math.floor(parse_quantity(raw))
    except QuantityError:
        return None


def _exact(raw: Any) -> Number | None:
    """A native allocatable quantity (cpu cores, memory bytes) exactly; None when unparsable."""
    try:
        return parse_quantity(raw)
    except QuantityError:
        return None


def _is_native(name: str) -> bool:
    """What NodeResourcesFit compares besides extended resources (policies/scheduling/fit.py)."""
    return name in _NATIVE or name.startswith("hugepages-")


_NATIVE = frozenset({"cpu", "memory", "ephemeral-storage", "pods"})


def _is_extended(name: str) -> bool:
    """Extended resources have a domain; `kubernetes.io` names are native."""
    domain, slash, _ = name.partition("/")
    return bool(slash) and domain != "kubernetes.io" and not domain.endswith(".kubernetes.io")


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _int_label(labels: Mapping[str, str], key: str) -> int | None:
    value = labels.get(key, "")
    return int(value) if value.isdigit() else None


class Node(NamedTuple):
    name: str
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    # extended resources (whole numbers) and the natives NodeResourcesFit compares (cpu in
    # cores, memory in bytes, pods...), exact
    allocatable: Mapping[str, Number]
    model: GPUModel | None
    product: str  # the raw product label, "" when absent
    gpu_count: int
    mig_strategy: str  # "single" | "mixed" | "" (none)
    unschedulable: bool = False
    # extended resources in allocatable that the node's DRA devices serve (not a device plugin)
    dra_served: frozenset[str] = frozenset()

    @classmethod
    def from_object(cls, obj: Mapping[str, Any], catalog: Catalog) -> Node:
        # A node file is input like any other: parts of the wrong type read as empty.
        metadata, spec, status = (_mapping(obj.get(k)) for k in ("metadata", "spec", "status"))
        labels = {str(k): str(v) for k, v in _mapping(metadata.get("labels")).items()}
        listed = spec.get("taints")
        taints = tuple(Taint.from_dict(t) for t in listed if isinstance(t, dict)) \
            if isinstance(listed, list) else ()
        allocatable: dict[str, Number] = {}
        for key, raw in _mapping(status.get("allocatable")).items():
            if not isinstance(key, str):
                continue
            if _is_extended(key):
                if (amount := _amount(raw)) is not None:
                    allocatable[key] = amount
            elif _is_native(key) and (exact := _exact(raw)) is not None:
                allocatable[key] = exact
        product = next((labels[k] for k in PRODUCT_LABELS if labels.get(k)), "")
        count = _int_label(labels, "nvidia.com/gpu.count")
        for key in ("nvidia.com/gpu", "aliyun.com/gpu-count"):  # extended: whole numbers
            if count is None and key in allocatable:
                count = int(allocatable[key])
        if count is None:
            count = _int_label(labels, "aliyun.accelerator/nvidia_count") or 0
        return cls(
            name=str(metadata.get("name") or ""),
            labels=labels,
            taints=taints,
            allocatable=allocatable,
            model=catalog.lookup(product) if product else None,
            product=product,
            gpu_count=count,
            mig_strategy=labels.get(MIG_STRATEGY_LABEL, ""),
            unschedulable=bool(spec.get("unschedulable")),
        )


class Pool(NamedTuple):
    name: str
    node_names: tuple[str, ...]
    labels: Mapping[str, str]  # labels every node shares (per-node keys removed)
    taints: tuple[Taint, ...]
    allocatable: Mapping[str, Number]  # per node, as Node.allocatable
    model: GPUModel | None
    product: str
    gpu_count: int  # per node
    mig_strategy: str
    # node name -> its per-node labels (kubernetes.io/hostname, ...); the default, shared by
    # the pools that have none, is read-only
    node_labels: Mapping[str, Mapping[str, str]] = MappingProxyType({})
    dra_served: frozenset[str] = frozenset()  # as Node.dra_served
    cordoned: bool = False  # spec.unschedulable: the scheduler's NodeUnschedulable filter
    # The other allocatables of its nodes, where cpu, memory, pods... differ from the first
    # node's (`allocatable`); most pools have none.
    variants: tuple[Mapping[str, Number], ...] = ()
    # A node template (policies/scheduling/templates.py): capacity an autoscaler can start,
    # not a node ("NodePool gpu-l4-spot"); its node_names are its label sets.
    template: str = ""
    # Why the autoscaler cannot start such a node now (a NodePool's limits, a node group at
    # its max size); "" when it can.
    blocked: str = ""

    def labels_of(self, node_name: str) -> dict[str, str]:
        """The full labels of one node of this pool."""
        return {**self.labels, **self.node_labels.get(node_name, {})}

    def label_sets(
        self, keys: Collection[str] = (), by_name: bool = False
    ) -> Iterator[tuple[str, Mapping[str, str]]]:
        """(node name, labels) to match selectors against.

        `keys` are the label keys the selectors mention; when one of them is per-node, or
        `by_name` (matchFields on metadata.name), every node is yielded with its full labels;
        otherwise one representative pair (first node, shared labels) stands for the pool.
        """
        if by_name or not PER_NODE_LABELS.isdisjoint(keys) or (
                self.template and len(self.node_names) > 1):
            for name in self.node_names:
                yield name, self.labels_of(name)
        else:
            yield self.node_names[0], self.labels


@dataclass(frozen=True, slots=True)
class Inventory:
    """The cluster's nodes, grouped into pools, and its DRA devices when it has any."""

    nodes: tuple[Node, ...] = ()
    pools: tuple[Pool, ...] = ()
    dra: DraInventory | None = None  # the DRA drivers' devices and classes, when any
    # Cordoned nodes, grouped as pools are: only explain looks at them (no admission can land
    # a pod there, so they are not pools a pod may fit).
    cordoned: tuple[Pool, ...] = ()
    # Capacity that can appear (policies/scheduling/templates.py): pools of node templates,
    # and what could not be read of them (TemplateProblem).
    templates: tuple[Pool, ...] = ()
    template_problems: tuple[Any, ...] = ()
    # namespace -> its LimitRange defaults for containers (policies/scheduling/request.py)
    limits: Mapping[str, Any] = field(default_factory=dict)
    # what the pods bound to each node hold (policies/scheduling/occupancy.py), where known
    occupancy: Any = None
    # name -> node (the first of a name), so that `node()` is not a scan of every node for
    # every pod the audit reads (2,000 nodes x 100,000 pods)
    _by_name: dict[str, Node] = field(init=False, repr=False, compare=False)
    # the extended resources some node serves from DRA devices (Node.dra_served), asked of
    # every GPU pod: not a scan of every node each time
    dra_served: frozenset[str] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_name: dict[str, Node] = {}
        for node in self.nodes:
            by_name.setdefault(node.name, node)
        object.__setattr__(self, "_by_name", by_name)
        object.__setattr__(self, "dra_served",
                           frozenset().union(*(node.dra_served for node in self.nodes)))

    @classmethod
    def empty(cls) -> Inventory:
        return cls()

    @classmethod
    def from_nodes(cls, nodes: Iterable[Mapping[str, Any]], catalog: Catalog,
                   dra: DraInventory | None = None) -> Inventory:
        """`dra`: the cluster's ResourceSlices and DeviceClasses; a class with an
        `extendedResourceName` lets a node serve that resource from its DRA devices, with
        nothing in allocatable (so `nvidia.com/gpu: 1` fits a node that runs only the NVIDIA
        DRA driver)."""
        parsed = tuple(Node.from_object(n, catalog) for n in nodes if isinstance(n, Mapping))
        if dra is not None and dra.extended:
            parsed = tuple(_served_by_dra(n, dra, catalog) for n in parsed)
        groups: dict[tuple[Any, ...], list[Node]] = {}
        for node in parsed:
            shared = frozenset(
                (k, v) for k, v in node.labels.items() if k not in PER_NODE_LABELS
            )
            # cpu and memory allocatable differ by a few KiB between nodes of one instance
            # type: they do not split a pool (Pool.variants keeps them)
            key = (node.unschedulable, shared, node.taints,
                   frozenset(i for i in node.allocatable.items() if _is_extended(i[0])),
                   node.dra_served, node.product)
            groups.setdefault(key, []).append(node)
        used: set[str] = set()
        pools = tuple(_pool(members, used) for members in groups.values()
                      if not members[0].unschedulable)
        cordoned = tuple(_pool(members, used) for members in groups.values()
                         if members[0].unschedulable)
        return cls(parsed, pools, dra, cordoned)

    def node(self, name: str) -> Node | None:
        return self._by_name.get(name)


def _served_by_dra(node: Node, dra: DraInventory, catalog: Catalog) -> Node:
    """The node with the extended resources its DRA devices serve added to allocatable; a
    name the device plugin already lists stays the plugin's (one name is never served both
    ways on a node). A node without a product label takes its GPU model from the serving
    devices' `productName` (MIG devices carry their parent's), as GFD would label it."""
    from policies.dra.extended import offered, products
    group = dra.group_of(node.name)
    if group is None:
        return node
    added = {}
    for resource in dra.extended:
        if node.allocatable.get(resource, 0) <= 0:
            # nodes of one group offer alike
            count = dra.remember(("offered", resource, group.name),
                                 functools.partial(offered, dra, resource, group))
            if count > 0:
                added[resource] = count
    if not added:
        return node
    product = node.product
    if not product:
        names = sorted({name for resource in added for name in dra.remember(
            ("products", resource, group.name), functools.partial(products, dra, resource,
                                                                  group))})
        product = names[0] if len(names) == 1 else ""
    return node._replace(allocatable={**node.allocatable, **added},
                         gpu_count=node.gpu_count or added.get("nvidia.com/gpu", 0),
                         dra_served=frozenset(added), product=product,
                         model=node.model or (catalog.lookup(product) if product else None))


def _pool(members: list[Node], used: set[str]) -> Pool:
    first = members[0]
    labels = {k: v for k, v in first.labels.items() if k not in PER_NODE_LABELS}
    # As the cluster labels them: the node pool label, else the GPU product label; when
    # neither, or when nodes of one node pool differ (a tainted node), the first node's own
    # name: never an invented suffix, nor a DRA device's productName (not a label).
    # (a value longer than a label value may be, hostile input, names nothing)
    name = next((labels[k] for k in (*POOL_LABELS, *PRODUCT_LABELS)
                 if labels.get(k) and len(labels[k]) <= 63), "")
    if not name or name in used:
        name = first.name
    used.add(name)
    per_node = {
        m.name: {k: v for k, v in m.labels.items() if k in PER_NODE_LABELS} for m in members
    }
    seen = {frozenset(first.allocatable.items())}
    variants = []
    for member in members:
        items = frozenset(member.allocatable.items())
        if items not in seen:
            seen.add(items)
            variants.append(member.allocatable)
    return Pool(
        variants=tuple(variants),
        name=name,
        node_names=tuple(m.name for m in members),
        labels=labels,
        taints=first.taints,
        allocatable=dict(first.allocatable),
        model=first.model,
        product=first.product,
        gpu_count=first.gpu_count,
        mig_strategy=first.mig_strategy,
        node_labels=per_node,
        dra_served=first.dra_served,
        cordoned=first.unschedulable,
    )
