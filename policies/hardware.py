"""Could any node run this pod? Per pool, every reason it cannot (DESIGN.md §2.2).

Pools are groups of identical nodes (policies/inventory.py), so a cluster of thousands of nodes
costs a handful of checks. Without an inventory the catalog stands in: one pool per GPU model,
whose amounts are unknown and so not checked.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from policies.catalog import Catalog, GPUModel, models_equal
from policies.inventory import Pool
from policies.mig import fits
from policies.resources import classify, mig_profile
from policies.selectors import node_affinity_matches, node_selector_matches, untolerated
from policies.view import PodView

# Resources a node does not advertise: the device scheduler (HAMi, Volcano) accounts for them.
_UNADVERTISED_UNITS = frozenset({"MB", "percent", "priority"})
PRODUCT = "nvidia.com/gpu.product"


@dataclass(frozen=True, slots=True)
class PoolVerdict:
    pool: str
    nodes: int
    model: str
    reasons: tuple[str, ...]

    @property
    def fits(self) -> bool:
        return not self.reasons

    def describe(self) -> str:
        return f"pool {self.pool}: " + ("fits" if self.fits else "; ".join(self.reasons))


def verdicts(
    view: PodView, pools: Iterable[Pool], *, allowed_models: Sequence[Sequence[str]] = (),
    amounts_known: bool = True,
) -> list[PoolVerdict]:
    """Each pool with the reasons it cannot take the pod; `allowed_models` lists every policy's
    `allowedModels` that applies (a model must be in all of them)."""
    return [
        PoolVerdict(
            pool.name, len(pool.node_names), pool.model.name if pool.model else pool.product,
            tuple(_reasons(view, pool, allowed_models, amounts_known)),
        )
        for pool in pools
    ]


def catalog_pools(catalog: Catalog) -> tuple[Pool, ...]:
    """One stand-in pool per catalog model, labelled as GPU Feature Discovery would."""
    return tuple(
        Pool(name=model.name, node_names=(model.name,),
             labels={PRODUCT: model.name, "nvidia.com/gpu.memory": str(model.memory_mib)},
             taints=(), allocatable={}, model=model, product=model.name, gpu_count=8,
             mig_strategy="mixed" if model.mig_capable else "")
        for model in catalog.models
    )


def _reasons(
    view: PodView, pool: Pool, allowed_lists: Sequence[Sequence[str]], amounts_known: bool
) -> Iterator[str]:
    spec = view.spec
    product = pool.model.name if pool.model else pool.product
    for allowed in allowed_lists:
        if not any(product and models_equal(product, a) for a in allowed):
            yield (f"GPU model {product or '(none)'} is not allowed "
                   f"({', '.join(allowed) or 'none'})")
            break
    yield from _selection(spec, pool)
    for taint in untolerated(_list(spec.get("tolerations")), pool.taints):
        value = f"={taint.value}" if taint.value else ""
        yield f"taint {taint.key}{value}:{taint.effect} is not tolerated"
    totals = view.demand.totals
    if amounts_known:
        yield from _amounts(totals, pool.allocatable)
    yield from _mig(totals, pool)
    yield from _shared_memory(view, pool)


def _list(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _selection(spec: Mapping[str, Any], pool: Pool) -> Iterator[str]:
    selector = spec.get("nodeSelector") if isinstance(spec.get("nodeSelector"), dict) else None
    affinity = spec.get("affinity") if isinstance(spec.get("affinity"), dict) else None
    keys = set(selector or ())
    if affinity and "nodeAffinity" in affinity:
        keys.add("kubernetes.io/hostname")  # may name nodes: check them one by one
    selected = affinity_ok = False
    for name, labels in pool.label_sets(keys):
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
            if have != want:
                yield (f"nodeSelector {key}={want} does not match "
                       + (f"{key}={have}" if have is not None else f"(no {key} label)"))
    if not affinity_ok:
        yield "required node affinity selects none of its nodes"


def _amounts(totals: Mapping[str, Fraction], allocatable: Mapping[str, int]) -> Iterator[str]:
    for name, need in sorted(totals.items()):
        resource = classify(name)
        if need <= 0 or resource is None or resource.unit in _UNADVERTISED_UNITS:
            continue
        have = allocatable.get(name, 0)
        if have < need:
            yield f"not enough {name}: the pod needs {need}, a node has {have or 'none'}"


def _mig(totals: Mapping[str, Fraction], pool: Pool) -> Iterator[str]:
    counts = {p: int(v) for n, v in totals.items()
              if (p := mig_profile(n)) is not None and v > 0 and v.denominator == 1}
    if not counts:
        return
    model = pool.model
    if model is None:
        return
    missing = [p for p in counts if model.profile(p) is None]
    for profile in missing:
        valid = ", ".join(model.profile_names) or "none (no MIG support)"
        yield f"MIG profile {profile} does not exist on {model.name}; valid: {valid}"
    if not missing and not fits(model, counts, max(pool.gpu_count, 1)):
        wanted = ", ".join(f"{n}×{p}" for p, n in counts.items())
        yield f"{wanted} cannot be placed on the {max(pool.gpu_count, 1)} GPU(s) of a node"


def _shared_memory(view: PodView, pool: Pool) -> Iterator[str]:
    gib = sum((c.amount("aliyun.com/gpu-mem") for c in view.demand.containers
               if c.role == "app"), Fraction(0))
    if gib > 0:
        device = _device_gib(pool)
        if device is not None and gib > device:
            yield (f"aliyun.com/gpu-mem {gib} GiB does not fit on one GPU "
                   f"({float(device):.1f} GiB)")
    model = pool.model
    if model is not None:
        for container in view.demand.containers:
            mb = container.amount("nvidia.com/gpumem")
            if mb > model.memory_mib:
                yield (f"nvidia.com/gpumem {mb} MB of container {container.name!r} is more "
                       f"than one {model.name} has ({model.memory_mib} MiB)")


def _device_gib(pool: Pool) -> Fraction | None:
    total = pool.allocatable.get("aliyun.com/gpu-mem")
    count = pool.allocatable.get("aliyun.com/gpu-count") or pool.gpu_count
    if total and count:
        return Fraction(total, count)
    model: GPUModel | None = pool.model
    return Fraction(model.memory_mib, 1024) if model else None
