"""The pools of the inventory a pod can be placed on, worked out once per pod and shared by the
rules that judge what it would meet there (the driver, the architecture, the card)."""

from __future__ import annotations

from policies.context import Context
from policies.hardware import fitting, open_pools
from policies.inventory import Pool
from policies.view import PodView


def reachable(view: PodView, context: Context) -> list[Pool]:
    """Pools that fit the pod after injection (its resources, selectors, tolerations and the
    policies' allowed models); [] without an inventory."""
    inventory = context.inventory
    if inventory is None:
        return []
    key = ("reachable", id(inventory))
    found: list[Pool] | None = view.memo.get(key)
    if found is None:
        pools = open_pools(view, inventory.pools, inventory.cordoned)
        allowed = context.allowed_models(view.namespace)
        found = fitting(view, pools, allowed_models=allowed)
        view.memo[key] = found
    return found
