"""Which DRA devices each node sees, from ResourceSlices and DeviceClasses.

A pool is (driver, pool name); a node sees the highest generation among the pool's slices that
reach it (as the allocator gathers pools per node), usable only when all `resourceSliceCount`
slices of that generation are there (an incomplete pool's devices are unusable, and any
`allocationMode: All` request fails on the node). Nodes that see devices of identical shape
(attributes, capacity, counters, taints; names aside) form one NodeGroup and are checked once:
1,000 nodes of four GPU models are four checks.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple, TypeVar

from policies.dra.objects import Device, DeviceClass, ResourceSlice
from policies.dra.parse_slices import parse_device_class, parse_slice
from policies.dra.problems import Problem
from policies.dra.taint_rules import apply_rules, parse_rules, rule_problems
from policies.quantity import Number
from policies.selectors import term_matches

T = TypeVar("T")
# Entries a DraInventory keeps at most: some keys come from what pods and claims name (class
# names, selectors, amounts), so the memo is bounded; past it, it starts again.
MEMO_LIMIT = 4096
_MISSING = object()


class Pool(NamedTuple):
    driver: str
    name: str
    generation: int
    slices_seen: int
    slice_count: int
    devices: tuple[Device, ...]
    counters: Mapping[str, Mapping[str, Number]]
    invalid: str = ""  # why the whole pool is unusable, "" when it is fine

    @property
    def complete(self) -> bool:
        return self.slices_seen >= self.slice_count

    @property
    def usable(self) -> bool:
        return self.complete and not self.invalid

    def why_unusable(self) -> str:
        if not self.complete:
            return (f"pool {self.name} is incomplete ({self.slices_seen} of {self.slice_count}"
                    f" slices at generation {self.generation})")
        return f"pool {self.name} is invalid ({self.invalid})" if self.invalid else ""

    def shape(self) -> tuple[Any, ...]:
        return (self.driver, self.slices_seen, self.slice_count, self.invalid,
                tuple(d.shape for d in self.devices),
                tuple(sorted((k, tuple(sorted(v.items()))) for k, v in self.counters.items())))


class NodeGroup(NamedTuple):
    """Nodes that see the same devices; `pools` are those of the first node (`name`)."""

    name: str
    nodes: tuple[str, ...]
    pools: tuple[Pool, ...]

    def devices(self) -> Iterable[tuple[Pool, Device]]:
        for pool in self.pools:
            for device in pool.devices:
                yield pool, device


@dataclass(frozen=True)
class DraInventory:
    classes: Mapping[str, DeviceClass] = field(default_factory=dict)
    groups: tuple[NodeGroup, ...] = ()
    by_node: Mapping[str, NodeGroup] = field(default_factory=dict)
    # (kind/name, problem) for every malformed slice or class field.
    problems: tuple[tuple[str, Problem], ...] = ()
    # extended resource name -> the class that serves it (explicitly or through
    # deviceclass.resource.kubernetes.io/<class>).
    extended: Mapping[str, str] = field(default_factory=dict)
    # answers worked out from the inventory (a class's GPU kind...), kept for the next
    # admission: the inventory does not change under them. Read and written through
    # `remember` and `recall`/`keep`, which keep it bounded.
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    def remember(self, key: Any, compute: Callable[[], T]) -> T:
        """`compute()`, worked out once per key while the inventory lasts."""
        found = self.memo.get(key, _MISSING)
        if found is _MISSING:
            return self.keep(key, compute())
        value: T = found
        return value

    def recall(self, key: Any) -> Any:
        return self.memo.get(key)

    def keep(self, key: Any, value: T) -> T:
        if len(self.memo) >= MEMO_LIMIT:
            self.memo.clear()  # one dict call: safe beside other threads reading it
        self.memo[key] = value
        return value

    @classmethod
    def build(
        cls,
        slices: Iterable[Any] = (),
        classes: Iterable[Any] = (),
        nodes: Mapping[str, Mapping[str, str]] | None = None,
        taint_rules: Iterable[Any] = (),
    ) -> DraInventory:
        """`nodes`: node name -> labels, for slices that select nodes by label or allNodes.
        Nodes named only by a slice's nodeName are included with no labels. Slices and
        classes may come parsed already (a watch cache parses each object once, on arrival).
        `taint_rules`: DeviceTaintRules, whose taints the devices they pick carry."""
        problems: list[tuple[str, Problem]] = []
        parsed_classes: dict[str, DeviceClass] = {}
        for raw in classes:
            parsed = raw if isinstance(raw, DeviceClass) else parse_device_class(raw)
            problems.extend((f"DeviceClass/{parsed.name}", p) for p in parsed.problems)
            if parsed.name:
                parsed_classes[parsed.name] = parsed
        parsed_slices = []
        for raw in slices:
            one = raw if isinstance(raw, ResourceSlice) else parse_slice(raw)
            problems.extend((f"ResourceSlice/{one.name}", p) for p in one.problems)
            if one.driver and one.pool:
                parsed_slices.append(one)
        rules = parse_rules(taint_rules)
        problems.extend(rule_problems(rules))
        parsed_slices = apply_rules(parsed_slices, rules)
        labels = dict(nodes or {})
        scoped = _pools(parsed_slices)
        for _pool, pool_slices in (g for gens in scoped for g in gens):
            for one in pool_slices:
                if one.node_name and one.node_name not in labels:
                    labels[one.node_name] = {}
                for device in one.devices:
                    if device.node_name and device.node_name not in labels:
                        labels[device.node_name] = {}
        # Most slices name their node: index those, so each node looks only at its own
        # pools and at the few that select nodes by label, allNodes or per device.
        named: dict[str, list[int]] = {}
        wide: list[int] = []
        for index, generations in enumerate(scoped):
            names = {s.node_name for _pool, pool_slices in generations for s in pool_slices}
            if None in names:
                wide.append(index)
            for name in names - {None}:
                named.setdefault(str(name), []).append(index)
        groups: dict[tuple[Any, ...], list[tuple[str, tuple[Pool, ...]]]] = {}
        for node, node_labels in labels.items():
            mine = sorted({*named.get(node, ()), *wide})
            views = []
            for index in mine:
                # the newest generation among the slices this node sees, as the allocator
                # gathers pools per node (a pool moving between nodes keeps serving the old)
                for pool, pool_slices in scoped[index]:
                    view = _visible(pool, pool_slices, node, node_labels)
                    if view is not None:
                        views.append(view)
                        break
            seen = tuple(views)
            if not seen:
                continue
            key = tuple(p.shape() for p in seen)
            groups.setdefault(key, []).append((node, seen))
        built = tuple(
            NodeGroup(members[0][0], tuple(m[0] for m in members), members[0][1])
            for members in groups.values()
        )
        by_node = {node: group for group in built for node in group.nodes}
        return cls(parsed_classes, built, by_node, tuple(problems),
                   _extended(parsed_classes))

    def group_of(self, node: str) -> NodeGroup | None:
        return self.by_node.get(node)


def _extended(classes: Mapping[str, DeviceClass]) -> dict[str, str]:
    # Two classes naming one resource: the newest wins, then the lexically lowest name.
    out: dict[str, str] = {}
    ranked = sorted(classes, key=lambda n: (_neg(classes[n].created), n))
    for name in ranked:
        cls = classes[name]
        if cls.extended_resource_name and cls.extended_resource_name not in out:
            out[cls.extended_resource_name] = name
        out.setdefault(f"deviceclass.resource.kubernetes.io/{name}", name)
    return out


def _neg(stamp: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in stamp)


def _pools(slices: list[ResourceSlice]) -> list[list[tuple[Pool, list[ResourceSlice]]]]:
    """Per pool, each generation's Pool and slices, newest first."""
    by_pool: dict[tuple[str, str], list[ResourceSlice]] = {}
    for one in slices:
        by_pool.setdefault((one.driver, one.pool), []).append(one)
    scoped: list[list[tuple[Pool, list[ResourceSlice]]]] = []
    # First-fit order of the allocator: pools by driver then name, slices by name.
    for (driver, name), members in sorted(by_pool.items()):
        scoped.append([_generation(driver, name, generation, members) for generation in
                       sorted({s.generation for s in members}, reverse=True)])
    return scoped


def _generation(driver: str, name: str, newest: int, members: list[ResourceSlice]
                ) -> tuple[Pool, list[ResourceSlice]]:
    """Generation `newest` of a pool: its devices, counters, and whether it is valid."""
    current = sorted((s for s in members if s.generation == newest), key=lambda s: s.name)
    counters: dict[str, Mapping[str, Number]] = {}
    twice = ""  # a counter set defined by two slices makes the pool invalid
    for one in current:
        twice = twice or next((c for c in one.counters if c in counters), "")
        counters.update(one.counters)
    devices = [d for one in current for d in one.devices]
    invalid = f"counter set {twice} is defined twice" if twice else \
        _invalid(devices, counters)
    pool = Pool(driver, name, newest, len(current), max(s.slice_count for s in current),
                tuple(devices), counters, invalid)
    return pool, current


def _invalid(devices: list[Device], counters: Mapping[str, Mapping[str, Number]]) -> str:
    names: set[str] = set()
    for device in devices:
        if device.name in names:
            return f"device {device.name} is listed twice"
        names.add(device.name)
        for counter_set, amounts in device.consumes:
            have = counters.get(counter_set)
            if have is None:
                return f"device {device.name} consumes counter set {counter_set}, which no " \
                       "slice of the pool defines"
            missing = next((c for c in amounts if c not in have), None)
            if missing is not None:
                return f"device {device.name} consumes counter {missing}, which counter set " \
                       f"{counter_set} does not have"
    return ""


def _visible(pool: Pool, slices: list[ResourceSlice], node: str,
             labels: Mapping[str, str]) -> Pool | None:
    """The pool as `node` sees it (only the devices it can reach), or None."""
    devices: list[Device] = []
    reached = False
    for one in slices:
        if one.per_device:
            mine = [d for d in one.devices if _reaches(d.node_name, d.node_selector,
                                                       d.all_nodes, node, labels)]
            reached = reached or bool(mine)
            devices.extend(mine)
        elif _reaches(one.node_name, one.node_selector, one.all_nodes, node, labels):
            reached = True
            devices.extend(one.devices)
    if not reached:
        return None
    if len(devices) == len(pool.devices):
        return pool
    return Pool(pool.driver, pool.name, pool.generation, pool.slices_seen, pool.slice_count,
                tuple(devices), pool.counters, pool.invalid)


def _reaches(node_name: str | None, selector: Mapping[str, Any] | None, all_nodes: bool,
             node: str, labels: Mapping[str, str]) -> bool:
    if all_nodes:
        return True
    if node_name is not None:
        return node_name == node
    if selector is not None:
        return _selector_matches(selector, node, labels)
    return False


def _selector_matches(selector: Mapping[str, Any], node: str, labels: Mapping[str, str]) -> bool:
    terms = selector.get("nodeSelectorTerms")
    if not isinstance(terms, list):
        return False
    for term in terms[:32]:
        if not isinstance(term, Mapping):
            continue
        try:
            if term_matches(term, labels, node_name=node):
                return True
        except (AttributeError, TypeError, ValueError):
            continue  # a malformed term selects nothing
    return False
