"""Facts about one claim that need no search: selectors that do not compile, classes that do
not exist, and whether the claim asks for GPUs (which makes its pod a GPU pod)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from policies.dra.cel import compile_selector, evaluate
from policies.dra.objects import Claim, DeviceClass, Request
from policies.dra.pools import DraInventory
from policies.dra.problems import Problem
from policies.paths import FieldPath, to_display

GpuKind = Literal["gpu", "mig"]
# Drivers whose devices are accelerators (reference/dra.md §5.1, §5.6).
GPU_DRIVERS = frozenset({"gpu.nvidia.com", "gpu.amd.com", "gpu.intel.com", "gaudi.intel.com",
                         "gpu.example.com"})


def requests_of(claim: Claim) -> Iterator[Request]:
    """Every request and subrequest of the claim, in order."""
    for slot in claim.requests:
        yield from slot.alternatives


def selector_problems(claim: Claim, classes: Mapping[str, DeviceClass] | None = None
                      ) -> list[Problem]:
    """Request selectors (and, given `classes`, those of the classes used) that do not compile,
    with the compiler's message: the apiserver refuses the claim for its own, the scheduler
    stops every pod on a class's."""
    out = []
    for request in requests_of(claim):
        for selector in request.selectors:
            program = compile_selector(selector.expression)
            if program.error:
                out.append(Problem(selector.path, f"{to_display(selector.path)}: Invalid "
                                   f"value: {_clip(selector.expression)}: {program.error}",
                                   "advice" if program.unsupported else "selector-invalid"))
        cls = (classes or {}).get(request.class_name)
        for selector in cls.selectors if cls else ():
            program = compile_selector(selector.expression)
            if program.error:
                out.append(Problem(_class_path(request), f"device class {cls.name if cls else ''}"
                                   f": selector {_clip(selector.expression)}: {program.error}",
                                   "advice" if program.unsupported else "selector-invalid"))
    return out


def unknown_classes(claim: Claim, classes: Mapping[str, DeviceClass]) -> list[Problem]:
    """Requests naming a DeviceClass the cluster does not have: the pod waits for it."""
    return [Problem(_class_path(r), f"{to_display(_class_path(r))}: device class "
                    f"{r.class_name} does not exist")
            for r in requests_of(claim) if r.class_name not in classes]


@dataclass(frozen=True, slots=True)
class Demand:
    """What a request asks for, as the GPU rules count it."""

    request: Request
    kind: GpuKind | None  # None: not a GPU class (NICs, FPGAs...)
    count: int  # ExactCount's count; for All, the most devices any node group would give


def gpu_demand(claim: Claim, inventory: DraInventory | None = None) -> list[Demand]:
    """Each request with whether it asks for whole GPUs or MIG devices. With an inventory the
    class's selectors decide on the devices they pick; without one, the class name does."""
    out = []
    for request in requests_of(claim):
        kind = gpu_kind(request.class_name, inventory)
        count = request.count
        if request.mode == "All" and inventory is not None:
            count = _most_matching(request, inventory)
        out.append(Demand(request, kind, count))
    return out


def gpu_kind(class_name: str, inventory: DraInventory | None = None) -> GpuKind | None:
    if inventory is None:
        return _gpu_kind(class_name, None)
    # every device of the class is looked at: once per inventory
    return inventory.remember(("gpu_kind", class_name), lambda: _gpu_kind(class_name, inventory))


def _gpu_kind(class_name: str, inventory: DraInventory | None) -> GpuKind | None:
    cls = inventory.classes.get(class_name) if inventory is not None else None
    if cls is not None and inventory is not None:
        kinds = set()
        programs = [compile_selector(s.expression) for s in cls.selectors]
        for group in inventory.groups:
            for _pool, device in group.devices():
                if all(evaluate(p, device).matches for p in programs):
                    kinds.add(_device_kind(device.driver, device.attributes))
        if "mig" in kinds:
            return "mig"
        if "gpu" in kinds:
            return "gpu"
        if kinds:
            return None
    name = class_name.lower()
    if name.startswith("mig.") or ".mig." in name or "-mig" in name:
        return "mig"
    if "gpu" in name or name in GPU_DRIVERS:
        return "gpu"
    return None


def _device_kind(driver: str, attributes: Mapping[str, object]) -> GpuKind | None:
    kind = attributes.get(f"{driver}/type")
    if kind == "mig" or attributes.get(f"{driver}/profile") is not None:
        return "mig"
    if driver in GPU_DRIVERS:
        return "gpu"
    return None


def _most_matching(request: Request, inventory: DraInventory) -> int:
    """What `allocationMode: All` takes on the node that has most: the usable devices its
    class and its own selectors match, counted once per inventory."""
    def count() -> int:
        cls = inventory.classes.get(request.class_name)
        if cls is None:
            return 0
        programs = [compile_selector(s.expression) for s in (*cls.selectors, *request.selectors)]
        if any(p.error for p in programs):
            return 0
        return max((sum(1 for pool, device in group.devices()
                        if pool.usable and all(evaluate(p, device).matches for p in programs))
                    for group in inventory.groups), default=0)

    key = ("most", request.class_name, tuple(s.expression for s in request.selectors))
    return inventory.remember(key, count)


def _class_path(request: Request) -> FieldPath:
    return (*request.path, "deviceClassName")


def _clip(expression: str) -> str:
    return repr(expression if len(expression) <= 120 else expression[:117] + "...")


_ATTRIBUTE = re.compile(
    r"""device\s*\.\s*(attributes|capacity)\s*\[\s*(['"])([^'"]+)\2\s*\]\s*\.\s*([A-Za-z_]\w*)\b"""
    r"""(?!\s*\()""")  # a call (`.exists(k, v, ...)` on the domain's map) is not an attribute


def unknown_attributes(claim: Claim, inventory: DraInventory) -> list[Problem]:
    """Request selectors that name an attribute (or capacity) no device of the request's class
    has: they compile, and fail on every device at allocation ("no such key")."""
    out = []
    for request in requests_of(claim):
        if request.class_name not in inventory.classes:
            continue
        for selector in request.selectors:
            tested = _presence_tested(selector.expression)
            for match in _ATTRIBUTE.finditer(selector.expression):
                field, domain, name = match.group(1), match.group(3), match.group(4)
                if (field, domain, name) in tested or \
                        _class_has(request.class_name, field, f"{domain}/{name}", inventory):
                    continue
                what = "attribute" if field == "attributes" else "capacity"
                out.append(Problem(selector.path, f"{to_display(selector.path)}: no device of "
                                   f"class {request.class_name} has the {what} {domain}/{name}"
                                   ": the selector fails at allocation", "advice"))
    return out


_HAS = re.compile(r"has\(\s*$")
_IN = re.compile(r"""(['"])([A-Za-z_]\w*)\1\s+in\s+device\s*\.\s*(attributes|capacity)\s*"""
                 r"""\[\s*(['"])([^'"]+)\4\s*\]""")


def _presence_tested(expression: str) -> set[tuple[str, str, str]]:
    """(field, domain, name) the selector tests with has() or `'name' in`: the safe presence
    tests, which never fail on a device without the attribute."""
    found = {(m.group(1), m.group(3), m.group(4)) for m in _ATTRIBUTE.finditer(expression)
             if _HAS.search(expression[max(0, m.start() - 16):m.start()])}
    found |= {(m.group(3), m.group(5), m.group(2)) for m in _IN.finditer(expression)}
    return found


def _class_has(class_name: str, field: str, qualified: str, inventory: DraInventory) -> bool:
    cls = inventory.classes[class_name]

    def look() -> bool:
        programs = [compile_selector(s.expression) for s in cls.selectors]
        return any(
            (qualified in (device.attributes if field == "attributes" else device.capacity)
             or (field == "capacity" and qualified.rpartition("/")[2] in device.capacity))
            and all(evaluate(p, device).matches for p in programs)
            for group in inventory.groups for _pool, device in group.devices())

    return inventory.remember(("has", class_name, field, qualified), look)


def devices_of(demands: Iterable[Demand], kind: GpuKind, request: str = "") -> int:
    """Devices of `kind` the requests may be given (only request `request`'s, when named):
    one `firstAvailable` alternative is allocated per request, so a request counts as its
    largest alternative of that kind."""
    most: dict[str, int] = {}
    for demand in demands:
        slot = demand.request.name.partition("/")[0]
        if demand.kind == kind and (not request or slot == request
                                    or demand.request.name == request):
            most[slot] = max(most.get(slot, 0), demand.count)
    return sum(most.values())
