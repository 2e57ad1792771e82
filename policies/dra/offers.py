"""What a request can be given: the values one attribute takes over the devices its class and
selectors match (GPU models for `allowedModels`, MIG profiles for `mig.allowedProfiles`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the DRA object model loads once an input holds a claim or a class
    from policies.dra.objects import Request
    from policies.dra.pools import DraInventory


def attribute_values(request: Request, inventory: DraInventory, attribute: str
                     ) -> frozenset[str]:
    """The string values of `<driver>/<attribute>` over every usable device the request's
    class and selectors match, in any node group. Empty when the class is unknown, a selector
    does not compile or nothing matches: other rules say so."""
    key = ("values", request.class_name, tuple(s.expression for s in request.selectors),
           attribute)  # every device is looked at: once per inventory
    return inventory.remember(key, lambda: _values(request, inventory, attribute))


def _values(request: Request, inventory: DraInventory, attribute: str) -> frozenset[str]:
    from policies.dra.cel import compile_selector, evaluate  # only when a class is in play
    cls = inventory.classes.get(request.class_name)
    if cls is None:
        return frozenset()
    programs = [compile_selector(s.expression) for s in (*cls.selectors, *request.selectors)]
    if any(p.error for p in programs):
        return frozenset()
    seen: set[int] = set()
    values: set[str] = set()
    for group in inventory.groups:
        for pool, device in group.devices():
            if not pool.usable or device.cel_id in seen:
                continue
            seen.add(device.cel_id)
            value = device.attributes.get(f"{device.driver}/{attribute}")
            if isinstance(value, str) and all(evaluate(p, device).matches for p in programs):
                values.add(value)
    return frozenset(values)
