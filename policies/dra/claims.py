"""Facts about one claim that need no search: selectors that do not compile, classes that do
not exist, and whether the claim asks for GPUs (which makes its pod a GPU pod)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from policies.paths import FieldPath, to_display

if TYPE_CHECKING:  # the DRA object model loads once an input holds a claim or a class
    from policies.dra.objects import Claim, DeviceClass, Request, Selector
    from policies.dra.pools import DraInventory
    from policies.dra.problems import Problem

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
    from policies.dra.cel import compile_selector  # CEL loads only for inputs with claims
    from policies.dra.problems import Problem
    out = []
    for request in requests_of(claim):
        for selector in request.selectors:
            program = compile_selector(selector.expression)
            if program.admission_error:  # the claim is new: the apiserver compiles it so
                out.append(Problem(selector.path, f"{to_display(selector.path)}: Invalid "
                                   f"value: {_clip(selector.expression)}: "
                                   f"{program.admission_error}",
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
    from policies.dra.problems import Problem
    return [Problem(_class_path(r), f"{to_display(_class_path(r))}: device class "
                    f"{r.class_name} does not exist")
            for r in requests_of(claim) if r.class_name not in classes]


@dataclass(frozen=True, slots=True)
class Demand:
    """What a request asks for, as the GPU rules count it."""

    request: Request
    # What the class AND the request's own selectors can give: whole GPUs, MIG devices or
    # either (a broad class); empty when neither (NICs, FPGAs...).
    kinds: frozenset[GpuKind]
    count: int  # ExactCount's count; for All, the most devices any node group would give
    # Some device of the inventory passes the class's and the request's selectors (True
    # without an inventory, or when the class is missing: other rules say so). False: no
    # device the cluster has can ever be given to it, so its pod can never run.
    matched: bool = True
    # The inventory lists DeviceClasses and not this one: the pod waits for it.
    unknown_class: bool = False

    @property
    def kind(self) -> GpuKind | None:
        """The kind a message names: whole GPUs when the request may get either."""
        return "gpu" if "gpu" in self.kinds else "mig" if "mig" in self.kinds else None


def gpu_demand(claim: Claim, inventory: DraInventory | None = None) -> list[Demand]:
    """Each request with whether it asks for whole GPUs or MIG devices. With an inventory
    the devices its class and its own selectors match decide (their driver and `type`), or,
    when none matches, the drivers and type those selectors name; without one, the class
    name does."""
    out = []
    for request in requests_of(claim):
        kinds, matched = request_kinds(request, inventory)
        count = request.count
        if request.mode == "All" and inventory is not None:
            count = _most_matching(request, inventory)
        unknown = inventory is not None and bool(inventory.classes) \
            and request.class_name not in inventory.classes
        out.append(Demand(request, kinds, count, matched, unknown))
    return out


def gpu_kind(class_name: str, inventory: DraInventory | None = None) -> GpuKind | None:
    """The kind a bare request on the class would get (whole GPUs when it may get either)."""
    from policies.dra.objects import Request
    bare = Request(name="", class_name=class_name, selectors=(), mode="ExactCount", count=1,
                   admin_access=False, tolerations=(), capacity={}, path=())
    kinds, _ = request_kinds(bare, inventory)
    return "gpu" if "gpu" in kinds else "mig" if "mig" in kinds else None


def request_kinds(request: Request, inventory: DraInventory | None
                  ) -> tuple[frozenset[GpuKind], bool]:
    """(the kinds of device the request can be given, whether any device matches)."""
    cls = inventory.classes.get(request.class_name) if inventory is not None else None
    if cls is None or inventory is None:
        return _named_kinds(request.class_name), True
    # every device is looked at: once per inventory
    key = ("kinds", request.class_name, tuple(s.expression for s in request.selectors))
    return inventory.remember(key, lambda: _matched_kinds(cls, request, inventory))


def _matched_kinds(cls: DeviceClass, request: Request, inventory: DraInventory
                   ) -> tuple[frozenset[GpuKind], bool]:
    from policies.dra.cel import compile_selector, evaluate
    selectors = (*cls.selectors, *request.selectors)
    programs = [compile_selector(s.expression) for s in selectors]
    if any(p.error for p in programs):  # dra-selector-invalid says why
        return _hinted_kinds(selectors), True
    kinds: set[GpuKind] = set()
    matched = False
    seen: set[int] = set()
    for group in inventory.groups:
        for _pool, device in group.devices():
            if device.cel_id in seen:
                continue
            seen.add(device.cel_id)
            if all(evaluate(p, device).matches for p in programs):
                matched = True
                found = device_kind(device.driver, device.attributes)
                if found is not None:
                    kinds.add(found)
    if matched:
        return frozenset(kinds), True
    return _hinted_kinds(selectors), False


# Patterns over selector texts, compiled on first use (by `re`, which keeps them): a pod
# without claims never needs them.
_DRIVER = r"""device\s*\.\s*driver\s*==\s*(['"])([^'"]+)\1"""
_DOMAIN = r"""device\s*\.\s*(?:attributes|capacity)\s*\[\s*(['"])([^'"]+)\1"""
_TYPE = r"""\.\s*type\s*==\s*(['"])(mig|gpu)\1"""
_MIG_ONLY = r"""\.\s*(?:profile|parentUUID)\b"""


def _hinted_kinds(selectors: Iterable[Selector]) -> frozenset[GpuKind]:
    """What selectors that match no device of the cluster ask for, from the drivers and
    attribute domains they name (`device.driver == 'gpu.nvidia.com'`) and the device type
    (`type == 'mig'`, a `profile`): never from the class's name."""
    texts = [s.expression for s in selectors]
    named = {m.group(2) for t in texts
             for m in (*re.finditer(_DRIVER, t), *re.finditer(_DOMAIN, t))}
    if not named & GPU_DRIVERS:
        return frozenset()
    types = {m.group(2) for t in texts for m in re.finditer(_TYPE, t)}
    if "mig" in types or (not types and any(re.search(_MIG_ONLY, t) for t in texts)):
        return frozenset({"mig"})
    return frozenset({"gpu"})


def _named_kinds(class_name: str) -> frozenset[GpuKind]:
    """A class the inventory does not have (or no inventory): its name is all there is."""
    name = class_name.lower()
    if name.startswith("mig.") or ".mig." in name or "-mig" in name:
        return frozenset({"mig"})
    if "gpu" in name or name in GPU_DRIVERS:
        return frozenset({"gpu"})
    return frozenset()


def device_kind(driver: str, attributes: Mapping[str, object]) -> GpuKind | None:
    """A device's kind: a MIG device (NVIDIA `type: mig`, or one with a `profile`), a whole
    GPU (any other device of a GPU driver), or None."""
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
        from policies.dra.cel import compile_selector, evaluate
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


_ATTRIBUTE = (
    r"""device\s*\.\s*(attributes|capacity)\s*\[\s*(['"])([^'"]+)\2\s*\]\s*\.\s*([A-Za-z_]\w*)\b"""
    r"""(?!\s*\()""")  # a call (`.exists(k, v, ...)` on the domain's map) is not an attribute


def unknown_attributes(claim: Claim, inventory: DraInventory) -> list[Problem]:
    """Request selectors that name an attribute (or capacity) no device of the request's class
    has: they compile, and fail on every device at allocation ("no such key")."""
    from policies.dra.problems import Problem
    out = []
    for request in requests_of(claim):
        if request.class_name not in inventory.classes:
            continue
        for selector in request.selectors:
            tested = _presence_tested(selector.expression)
            for match in re.finditer(_ATTRIBUTE, selector.expression):
                field, domain, name = match.group(1), match.group(3), match.group(4)
                if (field, domain, name) in tested or \
                        _class_has(request.class_name, field, f"{domain}/{name}", inventory):
                    continue
                what = "attribute" if field == "attributes" else "capacity"
                out.append(Problem(selector.path, f"{to_display(selector.path)}: no device of "
                                   f"class {request.class_name} has the {what} {domain}/{name}"
                                   ": the selector fails at allocation", "advice"))
    return out


_HAS = r"has\(\s*$"
_IN = (r"""(['"])([A-Za-z_]\w*)\1\s+in\s+device\s*\.\s*(attributes|capacity)\s*"""
       r"""\[\s*(['"])([^'"]+)\4\s*\]""")


def _presence_tested(expression: str) -> set[tuple[str, str, str]]:
    """(field, domain, name) the selector tests with has() or `'name' in`: the safe presence
    tests, which never fail on a device without the attribute."""
    found = {(m.group(1), m.group(3), m.group(4)) for m in re.finditer(_ATTRIBUTE, expression)
             if re.search(_HAS, expression[max(0, m.start() - 16):m.start()])}
    found |= {(m.group(3), m.group(5), m.group(2)) for m in re.finditer(_IN, expression)}
    return found


def _class_has(class_name: str, field: str, qualified: str, inventory: DraInventory) -> bool:
    cls = inventory.classes[class_name]

    def look() -> bool:
        from policies.dra.cel import compile_selector, evaluate
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
        if kind in demand.kinds and (not request or slot == request
                                    or demand.request.name == request):
            most[slot] = max(most.get(slot, 0), demand.count)
    return sum(most.values())
