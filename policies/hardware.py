"""Could any node run this pod? Per pool, every reason it cannot (DESIGN.md §2.2).

Pools are groups of identical nodes (policies/inventory.py), so a cluster of thousands of nodes
costs a handful of checks. Without an inventory the catalog stands in: one pool per GPU model,
whose amounts are unknown and so not checked.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from fractions import Fraction
from functools import lru_cache
from types import MappingProxyType
from typing import Any, NamedTuple

from policies.catalog import GPUS_PER_NODE, Catalog, GPUModel
from policies.display import shown, type_name
from policies.inventory import PER_NODE_LABELS, Pool
from policies.mig import fits
from policies.quantity import Number
from policies.resources import (
    MEMORY_MB,
    SHARED_FAMILIES,
    FractionRequest,
    Resource,
    classify,
    mig_profile,
)
from policies.scheduling.fit import EMPTY, Shortfall, shortfalls
from policies.scheduling.request import NO_DEFAULTS, Defaults, pod_requests
from policies.scheduling.templates import OPEN_KEYS
from policies.selectors import (
    node_affinity_matches,
    node_selector_matches,
    tolerates,
    untolerated,
)
from policies.shape import REQUIRED
from policies.view import PodView

# Resources a node does not advertise: the device scheduler (HAMi, Volcano) accounts for them.
_UNADVERTISED_UNITS = frozenset({"MB", "percent", "priority"})
PRODUCT = "nvidia.com/gpu.product"
SHARING = "nvidia.com/gpu.sharing-strategy"
# kube-scheduler's Filter plugins that a pool's facts decide, in the order its default profile
# runs them (NodeUnschedulable, NodeName, TaintToleration, NodeAffinity, NodeResourcesFit,
# ..., DynamicResources), each with the words it says of a node that fails it. A node fails
# at the first; `kubectl describe pod` shows those words.
NODE_UNSCHEDULABLE = "node(s) were unschedulable"
NODE_NAME = "node(s) didn't match the requested node name"
# TaintToleration's words no longer name the taint (older releases said `node(s) had
# untolerated taint {key: value}`): the reason after them does.
TAINT_TOLERATION = "node(s) had untolerated taint(s)"
NODE_AFFINITY = "node(s) didn't match Pod's node affinity/selector"
DYNAMIC_RESOURCES = "cannot allocate all claims"


class PoolVerdict(NamedTuple):
    pool: str
    nodes: int
    model: str
    reasons: tuple[str, ...]
    # The pool advertises some accelerator resource the pod asks for: among pools failing as
    # many checks, these are the closer ones.
    relevant: bool = True
    # DRA, when it fits: what the first allocation found takes ("gpu: gpu-0, gpu-1";
    # "accel (accel/h100): gpu-0"), the firstAvailable alternative chosen included.
    allocation: str = ""
    # What kube-scheduler says of these nodes: the words of the first of its filters that
    # fails on them; "" when they all pass (what is left is not the scheduler's: allowedModels,
    # what a device plugin refuses at Allocate time...).
    scheduler: str = ""
    # A node template ("NodePool gpu-l4-spot"): capacity an autoscaler can start, not a node.
    template: str = ""
    # Where pods are known, what the nodes hold now (policies/scheduling/occupancy.py): "fits
    # now", "fits once ..." ; "" when not known or the pool never fits.
    now: str = ""

    @property
    def fits(self) -> bool:
        return not self.reasons

    def describe(self) -> str:
        return f"{self.label}: " + ("fits" if self.fits else "; ".join(self.reasons))

    @property
    def label(self) -> str:
        """`pool h100`; a template as `NodePool gpu-l4-spot (g6.xlarge)`, `MachineDeployment
        capi/gpu-md-0`."""
        return template_label(self) if self.template else f"pool {self.pool}"

    def pending(self) -> str:
        """Why a pod is Pending here, the scheduler's words first (the audit's, explain's)."""
        if self.fits or not self.scheduler:
            return self.describe()
        return f"pool {self.pool}: {self.scheduler} ({'; '.join(self.reasons)})"


def template_label(found: Pool | PoolVerdict) -> str:
    """A template as people name it: `NodePool gpu-l4-spot (g6.xlarge)` (one pool per instance
    type), `MachineDeployment capi/gpu-md-0`."""
    name = found.name if isinstance(found, Pool) else found.pool
    if found.template.startswith("NodePool "):
        return f"{found.template} ({name.partition('/')[2]})"
    return found.template


def verdicts(
    view: PodView, pools: Iterable[Pool], *, allowed_models: Sequence[Sequence[str]] = (),
    amounts_known: bool = True, defaults: Defaults = NO_DEFAULTS,
) -> list[PoolVerdict]:
    """Each pool with the reasons it cannot take the pod; `allowed_models` lists every policy's
    `allowedModels` that applies (a model must be in all of them); `defaults`: the LimitRange
    defaults of the pod's namespace."""
    return [v for _, v in pool_verdicts(view, pools, allowed_models=allowed_models,
                                        amounts_known=amounts_known, defaults=defaults)]


def pool_verdicts(
    view: PodView, pools: Iterable[Pool], *, allowed_models: Sequence[Sequence[str]] = (),
    amounts_known: bool = True, defaults: Defaults = NO_DEFAULTS,
) -> list[tuple[Pool | None, PoolVerdict]]:
    """`verdicts`, each beside its pool (None for a bound node the inventory lacks); a pod
    bound to a node (spec.nodeName) gets that node's pool alone, narrowed to the node."""
    need = _Need.of(view, allowed_models, defaults)
    pools = tuple(pools)
    if need.node_name:  # a bound pod: only its node's pool has anything to say
        bound = [p for p in pools if need.node_name in p.node_names]
        if not bound:
            return [(None, PoolVerdict(f"of node {need.node_name}", 0, "", (
                f"spec.nodeName {need.node_name} is not a schedulable node of the inventory",
            )))]
        # the scheduler is bypassed: the kubelet refuses what does not fit, in its own words
        return [(pool._replace(node_names=(need.node_name,)),
                 _verdict(f"{pool.name} (node {need.node_name})", 1, pool,
                          (("", r) for _, r in _checks(need, pool, amounts_known))))
                for pool in bound]
    return [
        (pool, _verdict(pool.name, len(pool.node_names), pool,
                        _checks(need, pool, amounts_known), _relevant(need, pool)))
        for pool in pools
    ]


def _verdict(name: str, nodes: int, pool: Pool, checks: Iterable[tuple[str, str]],
             relevant: bool = True) -> PoolVerdict:
    found = list(checks)
    return PoolVerdict(name, nodes, describe_hardware(pool), tuple(r for _, r in found),
                       relevant, scheduler=next((w for w, _ in found if w), ""),
                       template=pool.template)


def _relevant(need: _Need, pool: Pool) -> bool:
    asked = [n for n, v in need.totals.items() if v > 0 and need.resource(n) is not None]
    return not asked or any(pool.allocatable.get(n, 0) > 0 for n in asked)


def any_fits(
    view: PodView, pools: Iterable[Pool], *, allowed_models: Sequence[Sequence[str]] = (),
    defaults: Defaults = NO_DEFAULTS,
) -> bool:
    """The admission question, answered at the first pool that fits."""
    return first_fit(view, pools, allowed_models=allowed_models, defaults=defaults) is not None


def first_fit(
    view: PodView, pools: Iterable[Pool], *, allowed_models: Sequence[Sequence[str]] = (),
    defaults: Defaults = NO_DEFAULTS,
) -> Pool | None:
    """The first pool whose nodes (empty) can run the pod."""
    need = _Need.of(view, allowed_models, defaults)
    return next((pool for pool in pools if next(_pool_reasons(need, pool, True), None) is None),
                None)


def fitting(
    view: PodView, pools: Iterable[Pool], *, allowed_models: Sequence[Sequence[str]] = (),
) -> list[Pool]:
    """The pools whose nodes (empty) can run the pod, each left at its first failed check
    (pool_verdicts gathers every reason); a pod bound to a node: that node's pool, narrowed
    to it, when it fits."""
    need = _Need.of(view, allowed_models, NO_DEFAULTS)
    if need.node_name:
        return [p for p, v in pool_verdicts(view, pools, allowed_models=allowed_models)
                if p is not None and v.fits]
    return [pool for pool in pools if next(_pool_reasons(need, pool, True), None) is None]


def closest(results: Sequence[PoolVerdict], limit: int = 3) -> tuple[list[PoolVerdict], int]:
    """The failing pools that failed the fewest checks, closest first (at most `limit`; among
    equals those with a resource the pod asks for, then inventory order), and how many other
    pools fail too: what an admission message can carry."""
    failing = [v for v in results if not v.fits]
    ranked = sorted(range(len(failing)), key=lambda i: (
        len(failing[i].reasons), not failing[i].relevant, i))[:limit]
    return [failing[i] for i in ranked], len(failing) - len(ranked)


def describe_hardware(pool: Pool) -> str:
    """What a pool's nodes carry, as explain shows it: the GPU model (and its MIG slices under
    the single strategy), else the accelerator resources they advertise."""
    if pool.model is not None:
        name = pool.model.name
        if pool.mig_strategy == "single" and (slice_ := _single_slice(pool)):
            return f"{name}, MIG {slice_} slices as nvidia.com/gpu"
        return name
    if pool.product:
        return pool.product
    devices = [f"{count}× {name}" for name, count in sorted(pool.allocatable.items())
               if count > 0 and (r := classify(name)) is not None and r.unit == "devices"]
    return ", ".join(devices)


def _single_slice(pool: Pool) -> str:
    """The MIG profile a `single`-strategy pool's nvidia.com/gpu stands for (from the product
    label GFD writes there, `NVIDIA-A100-SXM4-40GB-MIG-1g.5gb`)."""
    _, sep, profile = pool.product.partition("-MIG-")
    return profile if sep else ""


def _pool_reasons(need: _Need, pool: Pool, amounts_known: bool) -> Iterator[str]:
    return (reason for _, reason in _checks(need, pool, amounts_known))


# Where gpu-no-matching-hardware leaves, in the view's memo, the note of a pod that only a node
# template can run; the engine adds it to the decision's notes.
SCALE_UP = "scale-up"
# What the API server's DefaultTolerationSeconds admission plugin gives every pod that has
# none of its own for these taints (300 s each): no pod is refused a node for them.
DEFAULT_TOLERATIONS: tuple[Mapping[str, Any], ...] = (
    {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300},
    {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
     "tolerationSeconds": 300},
)
_DEFAULT_TOLERATED = frozenset(str(t["key"]) for t in DEFAULT_TOLERATIONS)
# What the scheduler reads a cordoned node as: a pod tolerating it passes NodeUnschedulable.
CORDONED = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def open_pools(view: PodView, pools: Sequence[Pool], cordoned: Sequence[Pool]
               ) -> tuple[Pool, ...]:
    """The pools the scheduler may place the pod on: cordoned nodes too when the pod
    tolerates the cordon (NodeUnschedulable lets it through, as it does DaemonSets)."""
    listed = view.spec.get("tolerations")
    tolerations = [t for t in listed if isinstance(t, dict)] if isinstance(listed, list) else []
    if cordoned and any(tolerates(t, CORDONED) for t in tolerations):
        return (*pools, *cordoned)
    return tuple(pools)


def _checks(need: _Need, pool: Pool, amounts_known: bool) -> Iterator[tuple[str, str]]:
    """(the scheduler's words, the reason) for every check the pool fails: the scheduler's
    filters in its order, then what is not the scheduler's (words "")."""
    if need.node_name:
        if need.node_name not in pool.node_names:
            yield (NODE_NAME,
                   f"the pod is bound to node {need.node_name} (spec.nodeName), not one of these")
            return
        pool = pool._replace(node_names=(need.node_name,))
    elif pool.cordoned and not any(tolerates(t, CORDONED) for t in need.tolerations):
        yield NODE_UNSCHEDULABLE, "the node is cordoned (spec.unschedulable)"
    if pool.template:
        if pool.blocked:
            yield "", pool.blocked
        if pool.template.startswith("NodePool "):
            pool = _opened(need.spec, pool)
    yield from _scheduled(need, pool, amounts_known)
    yield from (("", reason) for reason in _reasons(need, pool))


class _Need(NamedTuple):
    """What the pod asks of a node, worked out once for all pools."""

    spec: Mapping[str, Any]
    allowed: tuple[tuple[frozenset[str], str], ...]  # normalised names, and as written
    totals: Mapping[str, Number]
    mig: Mapping[str, int]
    gpushare_gib: Number
    memory_mb: tuple[tuple[str, str, Number], ...]  # (container, resource, MB of one GPU)
    tolerations: tuple[Mapping[str, Any], ...]
    most_gpus_in_a_container: Number
    # The resources the containers ask for, as read (names a DeviceClass serves included).
    resources: Mapping[str, Resource]
    node_name: str = ""
    # False when the pod spec's kind has no tolerations or selectors of its own (Kubeflow
    # Trainer: the runtime's template has them): taints and labels cannot be judged here.
    scheduling_known: bool = True
    gpushare_cards: int = 1
    fraction: FractionRequest | None = None
    # The pod's effective request as NodeResourcesFit adds it up (policies/scheduling),
    # the accelerator totals above in it, less what another scheduler accounts for.
    request: Mapping[str, Number] = MappingProxyType({})

    def resource(self, name: str) -> Resource | None:
        return self.resources.get(name) or classify(name)

    def unadvertised(self, name: str) -> bool:
        """A resource no node advertises: another scheduler (HAMi, Volcano) accounts for it."""
        resource = self.resource(name)
        return resource is not None and resource.unit in _UNADVERTISED_UNITS

    @classmethod
    def of(cls, view: PodView, allowed_models: Sequence[Sequence[str]],
           defaults: Defaults = NO_DEFAULTS) -> _Need:
        demand = view.demand
        totals = demand.totals
        if demand.fraction is not None:  # KAI shares whole devices the node advertises
            devices = demand.fraction.devices
            totals = {**totals, "nvidia.com/gpu": max(totals.get("nvidia.com/gpu", 0), devices)}
        request = pod_requests(view.spec, defaults)
        for name, value in totals.items():
            resource = classify(name)
            if resource is not None and resource.unit in _UNADVERTISED_UNITS:
                request.pop(name, None)
            else:
                request[name] = value
        # One pass over the containers' amounts; what only some families need is read
        # only when they are there (this runs on every GPU admission with an inventory).
        most: Number = 0
        resources: dict[str, Resource] = {}
        for c in demand.containers:
            for name, amount in c.amounts.items():
                resources[name] = amount.resource
                if name == "nvidia.com/gpu" and amount.value > most:
                    most = amount.value
        present = demand.present
        return cls(
            spec=view.spec,
            allowed=tuple(_normalized(tuple(a)) for a in allowed_models),
            totals=totals,
            mig={p: int(v) for n, v in totals.items()
                 if (p := mig_profile(n)) is not None and v > 0 and v.denominator == 1}
            if "mig" in present else {},
            gpushare_gib=sum(c.amount("aliyun.com/gpu-mem") for c in demand.containers
                             if c.role == "app")
            if "gpushare" in present else 0,
            memory_mb=tuple((c.name, name, c.amount(name)) for c in demand.containers
                            for name in MEMORY_MB if name in c.amounts)
            if not present.isdisjoint(SHARED_FAMILIES) else (),
            tolerations=tuple(_list(view.spec.get("tolerations"))),
            most_gpus_in_a_container=most,
            node_name=node_name if isinstance(node_name := view.spec.get("nodeName"), str)
            else "",
            scheduling_known="tolerations" in view.pod_fields,
            gpushare_cards=demand.gpushare_cards,
            fraction=demand.fraction,
            resources=resources,
            request=request,
        )


@lru_cache(maxsize=256)
def _normalized(allowed: tuple[str, ...]) -> tuple[frozenset[str], str]:
    return frozenset(map(Catalog.normalize, allowed)), ", ".join(allowed) or "none"


def catalog_pools(catalog: Catalog) -> tuple[Pool, ...]:
    """One stand-in pool per catalog model, labelled as GPU Feature Discovery would."""
    return tuple(
        Pool(name=model.name, node_names=(model.name,),
             labels={PRODUCT: model.name, "nvidia.com/gpu.memory": str(model.memory_mib)},
             taints=(), allocatable={}, model=model, product=model.name, gpu_count=GPUS_PER_NODE,
             mig_strategy="mixed" if model.mig_capable else "")
        for model in catalog.models
    )


def _scheduled(need: _Need, pool: Pool, amounts_known: bool) -> Iterator[tuple[str, str]]:
    """The scheduler's filters a pool's facts decide, in its order: TaintToleration (in the
    node's taint order), NodeAffinity (nodeSelector and required affinity), NodeResourcesFit.
    (Cordoned nodes join no pool; DynamicResources is policies/claimfit.py's.)"""
    if need.scheduling_known:
        for taint in untolerated(need.tolerations, pool.taints):
            if taint.effect == "NoExecute" and taint.key in _DEFAULT_TOLERATED:
                continue  # the API server gave the pod its toleration
            if need.node_name and taint.effect == "NoSchedule":
                continue  # a pod bound by nodeName skips the scheduler; NoExecute still evicts
            value = f"={taint.value}" if taint.value else ""
            yield TAINT_TOLERATION, f"taint {taint.key}{value}:{taint.effect} is not tolerated"
        yield from ((NODE_AFFINITY, r) for r in _selection(need.spec, pool))
    if amounts_known:
        yield from _fit(need, pool)


def _opened(spec: Mapping[str, Any], pool: Pool) -> Pool:
    """A NodePool that does not constrain the zone or region starts its node where the pod
    asks: those labels take the pod's values."""
    wanted: dict[str, str] = {}
    selector = spec.get("nodeSelector")
    for key in OPEN_KEYS:
        if key in pool.labels:
            continue
        value = selector.get(key) if isinstance(selector, dict) else None
        if value is None:
            value = next((v for e in _required(spec) if e.get("key") == key
                          and e.get("operator") == "In" and isinstance(e.get("values"), list)
                          for v in e["values"][:1]), None)
        if isinstance(value, str):
            wanted[key] = value
    return pool._replace(labels={**pool.labels, **wanted}) if wanted else pool


def _required(spec: Mapping[str, Any]) -> Iterator[Mapping[str, Any]]:
    affinity = spec.get("affinity")
    node = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = node.get(REQUIRED) if isinstance(node, dict) else None
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    for term in _list(terms):
        yield from _list(term.get("matchExpressions"))


def _reasons(need: _Need, pool: Pool) -> Iterator[str]:
    """What is not the scheduler's to say: the policies' allowedModels, and what the device
    plugin or the runtime refuse once the pod is placed (MIG geometry, MPS, shares)."""
    product = pool.model.name if pool.model else pool.product
    for names, written in need.allowed:
        if not product or Catalog.normalize(product) not in names:
            yield f"GPU model {product or '(none)'} is not allowed ({written})"
            break
    # MIG devices DRA serves are allocated as devices (claimfit), not placed by geometry.
    # (Each check below is entered only when the pod asks for what it looks at: this runs
    # for every pool on every GPU admission.)
    if need.mig:
        yield from _mig({p: n for p, n in need.mig.items()
                         if f"nvidia.com/mig-{p.replace('+me', '.me')}" not in pool.dra_served},
                        pool)
    if need.most_gpus_in_a_container > 1 and pool.labels.get(SHARING) == "mps":
        # MPS refuses a request for more than one of its shares at Allocate time.
        yield (f"GPUs are shared with MPS here: a container may ask for 1 nvidia.com/gpu, "
               f"not {need.most_gpus_in_a_container}")
    if need.most_gpus_in_a_container > 1 and pool.mig_strategy == "single":
        # Under the single strategy each nvidia.com/gpu is one MIG slice, and CUDA shows a
        # process one MIG device only: a multi-GPU container gets one small slice.
        slice_ = _single_slice(pool) or "MIG"
        yield (f"nvidia.com/gpu here is one {slice_} MIG slice and a container sees only one "
               f"MIG device, not the {need.most_gpus_in_a_container} GPUs it asks for")
    if need.gpushare_gib > 0 or need.memory_mb:
        yield from _shared_memory(need, pool)
    if need.fraction is not None:
        yield from _fraction(need, pool)


def _list(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _selection(spec: Mapping[str, Any], pool: Pool) -> Iterator[str]:
    selector = spec.get("nodeSelector")
    selector = selector if isinstance(selector, dict) else None
    affinity = spec.get("affinity")
    affinity = affinity if isinstance(affinity, dict) else None
    keys, by_name = _selector_keys(selector, affinity)
    selected = affinity_ok = False
    for name, labels in pool.label_sets(keys, by_name):
        sel = node_selector_matches(selector, labels)
        aff = node_affinity_matches(affinity, labels, name)
        selected |= sel
        affinity_ok |= aff
        if sel and aff:
            return
    if not selected and selector:
        labels = pool.labels
        for key, want in selector.items():
            have = labels.get(key)
            if not isinstance(want, str):
                yield (f"nodeSelector {key}: {shown(want)} is {type_name(want)}, and label "
                       "values are strings, so it matches no node (quote it)")
            elif key in PER_NODE_LABELS:
                if not any(pool.labels_of(n).get(key) == want for n in pool.node_names):
                    yield f"nodeSelector {key}={want} matches none of its nodes"
            elif have != want:
                yield (f"nodeSelector {key}={_value(want)} does not match "
                       + (f"{key}={_value(have)}" if have is not None else f"(no {key} label)"))
    if not affinity_ok:
        yield "required node affinity selects none of its nodes"


def _value(text: str) -> str:
    """A label value as a message shows it: a legal one (63 characters at most) as it is, a
    longer one (hostile input) cut short."""
    return text if len(text) <= 63 else shown(text)


def _selector_keys(
    selector: Mapping[str, Any] | None, affinity: Mapping[str, Any] | None
) -> tuple[set[str], bool]:
    """Label keys the pod selects on, and whether it names nodes (matchFields)."""
    keys = set(selector or ())
    by_name = False
    node_affinity = (affinity or {}).get("nodeAffinity")
    node_affinity = node_affinity if isinstance(node_affinity, dict) else {}
    required = node_affinity.get(REQUIRED)
    required = required if isinstance(required, dict) else {}
    for term in _list(required.get("nodeSelectorTerms")):
        keys.update(str(e.get("key")) for e in _list(term.get("matchExpressions")))
        by_name |= bool(term.get("matchFields"))
    return keys, by_name


def _fit(need: _Need, pool: Pool) -> Iterator[tuple[str, str]]:
    """NodeResourcesFit on the pool's nodes as they are when empty: those of its nodes whose
    allocatable differs (pool.variants) are judged too, the closest one speaking."""
    found = list(_amounts(need, pool.allocatable))
    for allocatable in pool.variants if found else ():
        other = list(_amounts(need, allocatable))
        if len(other) < len(found):
            found = other
        if not found:
            break
    yield from found


def _amounts(need: _Need, allocatable: Mapping[str, Number],
             used: Mapping[str, Number] = EMPTY) -> Iterator[tuple[str, str]]:
    for short in shortfalls(need.request, allocatable, used, skip=need.unadvertised):
        yield short.words, shortage(short)


def shortage(short: Shortfall) -> str:
    """A NodeResourcesFit shortfall in plain words, with the amounts."""
    _, name, asked, used, have = short
    if name == "pods":
        return (f"a node runs at most {have} pods" if not used
                else f"the node already runs {used} of its {have} pods")
    held = f" ({amount(name, used)} held by its pods)" if used else ""
    return (f"not enough {name}: the pod needs {amount(name, asked)}, a node has "
            f"{amount(name, have) if have else 'none'}{held}")


_BINARY = (("Ti", 2**40), ("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10))


def amount(name: str, value: Number) -> str:
    """A quantity as kubectl users write it: cpu in cores or millicores, bytes in the largest
    binary unit that divides them."""
    if name == "cpu":
        return str(value) if value == int(value) else f"{math.ceil(value * 1000)}m"
    if name in ("memory", "ephemeral-storage") or name.startswith("hugepages-"):
        for suffix, size in _BINARY:
            if value and value % size == 0:
                return f"{value // size}{suffix}"
        for suffix, size in _BINARY:  # not a round number: one decimal is enough to compare
            if value >= size:
                return f"{float(value) / size:.1f}{suffix}"
        return str(math.ceil(value))
    return str(value)


def _mig(counts: Mapping[str, int], pool: Pool) -> Iterator[str]:
    model = pool.model
    if not counts or model is None:
        return
    missing = [p for p in counts if model.profile(p) is None]
    for profile in missing:
        valid = ", ".join(model.profile_names) or "none (no MIG support)"
        yield f"MIG profile {profile} does not exist on {model.name}; valid: {valid}"
    gpus = max(pool.gpu_count, 1)
    if not missing and not fits(model, counts, gpus):
        wanted = ", ".join(f"{n}×{p}" for p, n in counts.items())
        yield f"{wanted} cannot be placed on the {gpus} GPU(s) of a node"


def _shared_memory(need: _Need, pool: Pool) -> Iterator[str]:
    if need.gpushare_gib > 0:
        device = _device_gib(pool)
        cards = need.gpushare_cards
        if cards > 1 and cards > pool.gpu_count:
            yield (f"the pod spreads aliyun.com/gpu-mem over {cards} GPUs (label "
                   f"aliyun.com/gpu-count) and a node has {pool.gpu_count or 'none'}")
        elif device is not None and Fraction(need.gpushare_gib) / cards > device:
            each = (f"{need.gpushare_gib} GiB" if cards == 1 else
                    f"{need.gpushare_gib} GiB over {cards} GPUs "
                    f"({float(Fraction(need.gpushare_gib) / cards):g} GiB each)")
            where = "one GPU" if cards == 1 else "their GPUs"
            yield f"aliyun.com/gpu-mem {each} does not fit on {where} ({float(device):.1f} GiB)"
    model = pool.model
    if model is not None:
        for container, name, mb in need.memory_mb:
            if mb > model.memory_mib:
                yield (f"{name} {mb} MB of container {shown(container)} is more "
                       f"than one {model.name} has ({model.memory_mib} MiB)")


def _fraction(need: _Need, pool: Pool) -> Iterator[str]:
    request = need.fraction
    model = pool.model
    if request is not None and request.memory_mib is not None and model is not None \
            and request.memory_mib > model.memory_mib:
        yield (f"gpu-memory {request.memory_mib} MiB is more than one {model.name} has "
               f"({model.memory_mib} MiB)")


def _device_gib(pool: Pool) -> Fraction | None:
    total = pool.allocatable.get("aliyun.com/gpu-mem")
    count = pool.allocatable.get("aliyun.com/gpu-count") or pool.gpu_count
    if total and count:
        return Fraction(total, count)
    model: GPUModel | None = pool.model
    return Fraction(model.memory_mib, 1024) if model else None


def pod_request(view: PodView, defaults: Defaults = NO_DEFAULTS) -> Mapping[str, Number]:
    """The pod's request as the fit reads it (policies/scheduling/request.py, with the
    accelerator amounts this module counts, less what another scheduler accounts for)."""
    return _Need.of(view, (), defaults).request


def now(view: PodView, found: Sequence[tuple[Pool | None, PoolVerdict]], inventory: Any,
        defaults: Defaults = NO_DEFAULTS) -> list[PoolVerdict]:
    """The verdicts with what the nodes hold now (inventory.occupancy): "fits now (N of M
    nodes)", "fits once ... are free on NODE (held by ...)", for a template "fits on
    scale-up", and "never fits" for a pool that cannot take the pod even when empty."""
    from policies.scheduling.occupancy import first_free, once_free
    occupancy = inventory.occupancy
    need = _Need.of(view, (), defaults)
    out = []
    for pool, verdict in found:
        if not verdict.fits or pool is None:
            # not even when empty: what the pods hold changes nothing
            out.append(verdict._replace(now="never fits") if not verdict.fits else verdict)
            continue
        if pool.template:
            out.append(verdict._replace(now="fits on scale-up; no node now"))
            continue
        nodes = [(n, node.allocatable if (node := inventory.node(n)) is not None
                  else pool.allocatable) for n in pool.node_names]
        free, closest_node, short = first_free(need.request, nodes, occupancy, need.unadvertised)
        text = (f"fits now ({free} of {len(nodes)} node{'s' * (len(nodes) != 1)} free)" if free
                else once_free(closest_node, short, occupancy))
        out.append(verdict._replace(now=text))
    return out
