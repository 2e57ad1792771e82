"""Could any node run this pod with its ResourceClaims? Per pool of nodes, the pod's own
scheduling facts (taints, selectors, extended resources: policies/hardware.py) and then, on the
DRA node groups of the pool's nodes, whether every request of every claim of the pod can be
allocated at once (policies/dra/allocate.py). A claim reviewed alone asks only the second.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from policies.hardware import DYNAMIC_RESOURCES, PoolVerdict, pool_verdicts
from policies.inventory import Inventory, Pool
from policies.view import PodView

if TYPE_CHECKING:  # the allocator (and CEL) load only when a claim is to be allocated
    from policies.dra.allocate import GroupVerdict
    from policies.dra.objects import Claim
    from policies.dra.pools import DraInventory, NodeGroup
    from policies.dra.search import Budget

NO_DEVICES = "no ResourceSlice publishes devices for these nodes"


def judged(inventory: Inventory | None) -> DraInventory | None:
    """The DRA inventory when there is one to judge claims by: DeviceClasses known (an
    inventory listed without `resourceslices,deviceclasses` says nothing about DRA)."""
    dra = inventory.dra if inventory is not None else None
    return dra if dra is not None and dra.classes else None


def pod_verdicts(view: PodView, inventory: Inventory, dra: DraInventory,
                 allowed_models: Sequence[Sequence[str]] = ()) -> list[PoolVerdict]:
    """Each pool with every reason it cannot take the pod and all its claims together. The
    models `allowedModels` permits are judged on the pool's product label only when the pod
    also asks for extended GPU resources (a claim's models: gpu-model-not-allowed).
    Extended resources a pool's DRA devices serve are allocated with the claims, as the
    scheduler does (one claim for them, reference/dra.md §3.5): the devices are shared."""
    extended = any(c.gpu for c in view.demand.containers) or view.demand.fraction is not None
    allowed = tuple(map(tuple, allowed_models)) if extended else ()
    key = ("pod_verdicts", id(inventory), allowed)
    if key not in view.memo:  # every policy with requireHardwareMatch asks the same
        view.memo[key] = _pod_verdicts(view, inventory, dra, allowed)
    found: list[PoolVerdict] = view.memo[key]
    return found


def _pod_verdicts(view: PodView, inventory: Inventory, dra: DraInventory,
                  allowed: Sequence[Sequence[str]]) -> list[PoolVerdict]:
    from policies.dra.search import Budget
    claims = tuple(u.claim for u in view.demand.claims)
    budget = Budget()
    out = []
    for pool, verdict in pool_verdicts(view, inventory.pools, allowed_models=allowed):
        if pool is None:
            out.append(verdict)
            continue
        served = tuple(sorted((r, int(v)) for r, v in view.demand.totals.items()
                              if r in pool.dra_served and v > 0 and v == int(v)))
        made = _served_claim(dra, served)
        with_served = claims if made is None else (*claims, made)
        if not with_served:  # nothing for DRA to allocate on these nodes
            out.append(verdict)
            continue
        found = [_checked(with_served, g, dra, budget) for g in _groups(pool, dra)]
        if not found:
            reasons: tuple[str, ...] = (NO_DEVICES,)
        elif any(g.fits for g in found):
            reasons = ()
        else:
            reasons = min((g.reasons for g in found), key=len)
        # the scheduler runs DynamicResources after the pool's other filters
        words = verdict.scheduler or (DYNAMIC_RESOURCES if reasons else "")
        out.append(verdict._replace(reasons=verdict.reasons + reasons, relevant=bool(found),
                                    scheduler=words))
    return out


def asks_dra_served(view: PodView, dra: DraInventory) -> bool:
    """The pod asks for an extended resource some DeviceClass serves (nvidia.com/gpu on the
    NVIDIA driver's gpu.nvidia.com): on the nodes DRA serves it, the devices are allocated
    as a claim is, counters and all."""
    return any(v > 0 and name in dra.extended for name, v in view.demand.totals.items())


def allocation_text(verdict: GroupVerdict, claim: Claim) -> str:
    """What a fitting group's first allocation takes, per request in the claim's order:
    "gpu: gpu-0, gpu-1", with the firstAvailable alternative chosen ("accel (accel/h100):
    gpu-0")."""
    order = {s.name: i for i, s in enumerate(claim.requests)}
    parts = []
    for slot, taken in sorted(verdict.allocated.items(),
                              key=lambda item: order.get(item[0].rpartition("/")[2], 0)):
        chosen = verdict.chosen.get(slot, "")
        label = slot.rpartition("/")[2] if "/" in slot else slot
        alt = f" ({chosen})" if chosen and chosen != label else ""
        names = ", ".join(d.name for d in taken[:8]) + (" ..." if len(taken) > 8 else "")
        parts.append(f"{label}{alt}: {names}")
    return "; ".join(parts)


def claim_verdicts(claim: Claim, dra: DraInventory) -> list[GroupVerdict]:
    """A claim on its own: each node group and why it cannot allocate the claim."""
    from policies.dra.allocate import check_group
    from policies.dra.search import Budget
    budget = Budget()
    return [check_group((claim,), g, dra, budget) for g in dra.groups]


def _served_claim(dra: DraInventory, served: tuple[tuple[str, int], ...]) -> Claim | None:
    """The claim the scheduler makes for DRA-served extended resources, one object per
    amount asked (so that _checked's verdicts on it are kept too)."""
    if not served:
        return None
    from policies.dra.extended import extended_claim
    return dra.remember(("served_claim", served), lambda: extended_claim(dra, dict(served)))


def _groups(pool: Pool, dra: DraInventory) -> tuple[NodeGroup, ...]:
    """The DRA node groups of a pool's nodes, looked up once per pool object."""
    key = ("groups", id(pool))
    entry = dra.recall(key)
    if entry is None or entry[0] is not pool:
        groups = {g.name: g for n in pool.node_names if (g := dra.group_of(n)) is not None}
        entry = dra.keep(key, (pool, tuple(groups.values())))
    found: tuple[NodeGroup, ...] = entry[1]
    return found


def _checked(claims: tuple[Claim, ...], group: NodeGroup, dra: DraInventory,
             budget: Budget) -> GroupVerdict:
    """A group's verdict on these claims, kept while the inventory lasts: the webhook's
    claims are parsed once, so the same objects come back pod after pod."""
    from policies.dra.allocate import check_group
    key = ("checked", group.name, tuple(map(id, claims)))
    entry = dra.recall(key)
    if entry is not None and all(a is b for a, b in zip(entry[0], claims, strict=True)):
        found: GroupVerdict = entry[1]
        return found
    found = check_group(claims, group, dra, budget)
    if not found.undecided:  # a verdict cut short by the budget is not worth keeping
        dra.keep(key, (claims, found))
    return found
