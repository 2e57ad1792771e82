"""Extended resources served by DRA: a DeviceClass with `spec.extendedResourceName` (say
`nvidia.com/gpu` on class gpu.nvidia.com) lets a plain `nvidia.com/gpu: 2` be served on a node
whose allocatable lists no such resource, from devices of that class (reference/dra.md §3.5).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from policies.dra.objects import Claim, Device, Request, RequestSlot
from policies.dra.pools import DraInventory, NodeGroup


def serving_class(inventory: DraInventory, resource: str) -> str | None:
    """The DeviceClass that serves `resource` (explicitly or as
    deviceclass.resource.kubernetes.io/<class>), or None."""
    return inventory.extended.get(resource)


def served_by(inventory: DraInventory, resource: str,
              allocatable: Mapping[str, int]) -> Literal["device-plugin", "dra"] | None:
    """Who serves `resource` on a node with this allocatable: the device plugin when it lists
    more than zero, else DRA when a class maps the name, else nobody ("cannot fit resource").
    One name is never served both ways on one node (KEP-5004)."""
    if allocatable.get(resource, 0) > 0:
        return "device-plugin"
    return "dra" if serving_class(inventory, resource) is not None else None


def offered(inventory: DraInventory, resource: str, group: NodeGroup) -> int:
    """How many devices of the serving class a node of `group` has, all free: usable pools,
    class selectors true (a CEL error counts as no match), no NoSchedule/NoExecute taint."""
    return len(_serving(inventory, resource, group))


def products(inventory: DraInventory, resource: str, group: NodeGroup) -> frozenset[str]:
    """The `productName`s of those devices: the GPU model a node serving `resource` through
    DRA has (a MIG device carries its parent GPU's), as GPU Feature Discovery's label would
    say it for a device plugin's node."""
    return frozenset(value for device in _serving(inventory, resource, group)
                     if isinstance(value := device.attributes.get(
                         f"{device.driver}/productName"), str) and value)


def _serving(inventory: DraInventory, resource: str, group: NodeGroup) -> list[Device]:
    name = serving_class(inventory, resource)
    cls = inventory.classes.get(name or "")
    if cls is None:
        return []
    from policies.dra.cel import compile_selector, evaluate  # CEL loads once a class serves
    programs = [compile_selector(s.expression) for s in cls.selectors]
    if any(p.error for p in programs):
        return []
    found = []
    for pool, device in group.devices():
        if not pool.usable or any(t.effect in ("NoSchedule", "NoExecute")
                                  for t in device.taints):
            continue
        if all(evaluate(p, device).matches for p in programs):
            found.append(device)
    return found


def extended_claim(inventory: DraInventory, amounts: Mapping[str, int]) -> Claim | None:
    """The claim the scheduler would build for a pod's DRA-served extended resources (one
    ExactCount request per resource; names are informational). None when none is served."""
    slots = []
    for i, (resource, amount) in enumerate(sorted(amounts.items())):
        cls = serving_class(inventory, resource)
        if cls is None or amount <= 0:
            continue
        name = f"request-{i}"
        request = Request(name=name, class_name=cls, selectors=(), mode="ExactCount",
                          count=amount, admin_access=False, tolerations=(), capacity={},
                          path=("spec", "containers"))
        slots.append(RequestSlot(name, (request,), ("spec", "containers")))
    if not slots:
        return None
    return Claim("ResourceClaim", "extended-resources", "", tuple(slots), ())


def fits_extended(inventory: DraInventory, amounts: Mapping[str, int],
                  group: NodeGroup) -> tuple[str, ...]:
    """Reasons a node of `group` cannot serve `amounts` through DRA; () when it can."""
    from policies.dra.allocate import check_group
    claim = extended_claim(inventory, amounts)
    if claim is None:
        return tuple(f"no DeviceClass serves {r}" for r in sorted(amounts))
    missing = [r for r in sorted(amounts) if serving_class(inventory, r) is None]
    reasons = tuple(f"no DeviceClass serves {r}" for r in missing)
    return reasons + check_group((claim,), group, inventory).reasons
