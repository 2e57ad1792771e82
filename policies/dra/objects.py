"""ResourceSlice, DeviceClass, ResourceClaim and ResourceClaimTemplate (resource.k8s.io/v1) as
typed values. Anyone who can create a claim writes what is parsed here: a field of the wrong
shape becomes a Problem with its path and is left out, never an exception. Lists are cut at the
apiserver's own limits so the work stays bounded by them.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from policies.dra.problems import Problem
from policies.dra.values import AttributeValue, Version, parse_version
from policies.paths import FieldPath, to_display
from policies.quantity import Number, QuantityError, parse_quantity

# Limits the apiserver enforces (reference/dra.md §2.1); past them we read no further.
MAX_DEVICES = 128
MAX_ATTRIBUTES = 32
MAX_REQUESTS = 32
MAX_SELECTORS = 32
MAX_SUBREQUESTS = 8
MAX_TOLERATIONS = 16
MAX_TAINTS = 16
MAX_COUNTER_SETS = 32
MAX_COUNTERS = 32
MAX_CONSUMES = 8
MAX_EXPRESSION = 10 * 1024
MAX_STRING = 256

AllocationMode = Literal["ExactCount", "All"]


@dataclass(frozen=True, slots=True)
class DeviceTaint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str
    operator: str  # Equal | Exists
    value: str
    effect: str

    def tolerates(self, taint: DeviceTaint) -> bool:
        if self.effect and self.effect != taint.effect:
            return False
        if self.operator == "Exists":
            return not self.key or self.key == taint.key
        return self.key == taint.key and self.value == taint.value


@dataclass(frozen=True, slots=True)
class CapacityPolicy:
    """capacity.<name>.requestPolicy of a device that allows multiple allocations."""

    default: Number | None
    valid_values: tuple[Number, ...] = ()
    minimum: Number | None = None
    maximum: Number | None = None
    step: Number | None = None

    def consumed(self, requested: Number | None, total: Number) -> Number | None:
        """What one allocation consumes; None when the amount is not allowed."""
        if requested is None:
            return self.default if self.default is not None else total
        if self.valid_values:
            return next((v for v in self.valid_values if v >= requested), None)
        amount = requested
        if self.minimum is not None:
            amount = max(amount, self.minimum)
            if self.step:
                steps = -((self.minimum - amount) // self.step)  # round up
                amount = self.minimum + steps * self.step
        if self.maximum is not None and amount > self.maximum:
            return None
        return amount


@dataclass(frozen=True, slots=True)
class Device:
    name: str
    driver: str
    # Fully qualified names ("gpu.nvidia.com/productName"): bare names belong to the driver.
    attributes: Mapping[str, AttributeValue]
    capacity: Mapping[str, Number]  # keys as written (requests compare them literally)
    consumes: tuple[tuple[str, Mapping[str, Number]], ...]
    taints: tuple[DeviceTaint, ...]
    allow_multiple: bool
    # Per-device node selection (perDeviceNodeSelection slices); all None/False otherwise.
    node_name: str | None = None
    node_selector: Mapping[str, Any] | None = None
    all_nodes: bool = False
    # Everything CEL can see of the device, interned: equal ids evaluate equally.
    cel_id: int = 0
    request_policies: Mapping[str, CapacityPolicy] = field(default_factory=dict)
    # Everything allocation can see besides the name: equal shapes allocate alike.
    shape: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class ResourceSlice:
    name: str
    driver: str
    pool: str
    generation: int
    slice_count: int
    node_name: str | None
    node_selector: Mapping[str, Any] | None
    all_nodes: bool
    per_device: bool
    devices: tuple[Device, ...]
    counters: Mapping[str, Mapping[str, Number]]  # counter set -> counter -> value
    problems: tuple[Problem, ...] = ()


@dataclass(frozen=True, slots=True)
class Selector:
    expression: str
    path: FieldPath


@dataclass(frozen=True, slots=True)
class DeviceClass:
    name: str
    selectors: tuple[Selector, ...]
    extended_resource_name: str | None
    problems: tuple[Problem, ...] = ()
    created: str = ""  # metadata.creationTimestamp: the newest class wins a shared name


@dataclass(frozen=True, slots=True)
class Request:
    """An `exactly` request or one `firstAvailable` subrequest."""

    name: str  # "req" or "req/sub", as allocation results and constraints name it
    class_name: str
    selectors: tuple[Selector, ...]
    mode: AllocationMode
    count: int
    admin_access: bool
    tolerations: tuple[Toleration, ...]
    capacity: Mapping[str, Number]
    path: FieldPath


@dataclass(frozen=True, slots=True)
class RequestSlot:
    """One entry of spec.devices.requests: a single request, or alternatives tried in order."""

    name: str
    alternatives: tuple[Request, ...]
    path: FieldPath


@dataclass(frozen=True, slots=True)
class Constraint:
    requests: tuple[str, ...]  # empty: every request of the claim
    match_attribute: str | None
    distinct_attribute: str | None
    path: FieldPath


@dataclass(frozen=True, slots=True)
class Claim:
    kind: str  # ResourceClaim | ResourceClaimTemplate
    name: str
    namespace: str
    requests: tuple[RequestSlot, ...]
    constraints: tuple[Constraint, ...]
    problems: tuple[Problem, ...] = ()
    # Where spec.devices sits: ("spec",) for a claim, ("spec", "spec") for a template.
    base: FieldPath = ("spec",)


@dataclass
class _Reader:
    """Collects problems while reading one object."""

    problems: list[Problem] = field(default_factory=list)

    def bad(self, path: FieldPath, message: str) -> None:
        self.problems.append(Problem(path, message))

    def mapping(self, raw: Any, path: FieldPath) -> Mapping[str, Any]:
        if raw is None:
            return {}
        if not isinstance(raw, Mapping):
            self.bad(path, f"{to_display(path)} must be an object, not {_kind(raw)}")
            return {}
        return raw

    def items(self, raw: Any, path: FieldPath, limit: int) -> list[tuple[int, Mapping[str, Any]]]:
        """(index, entry) of a list of objects, entries of other shapes reported and skipped."""
        if raw is None:
            return []
        if not isinstance(raw, list):
            self.bad(path, f"{to_display(path)} must be a list, not {_kind(raw)}")
            return []
        if len(raw) > limit:
            self.bad(path, f"{to_display(path)} has {len(raw)} entries, at most {limit} allowed")
        out = []
        for i, entry in enumerate(raw[:limit]):
            if isinstance(entry, Mapping):
                out.append((i, entry))
            else:
                self.bad((*path, i), f"{to_display((*path, i))} must be an object")
        return out

    def string(self, raw: Any, path: FieldPath, required: bool = False,
               limit: int = MAX_STRING) -> str:
        if raw is None or raw == "":
            if required:
                self.bad(path, f"{to_display(path)} is required")
            return ""
        if not isinstance(raw, str):
            self.bad(path, f"{to_display(path)} must be a string, not {_kind(raw)}")
            return ""
        if len(raw) > limit:
            self.bad(path, f"{to_display(path)} is longer than {limit} characters")
            return ""
        return raw

    def integer(self, raw: Any, path: FieldPath, default: int) -> int:
        if raw is None:
            return default
        if isinstance(raw, bool) or not isinstance(raw, int):
            self.bad(path, f"{to_display(path)} must be an integer, not {_kind(raw)}")
            return default
        return raw

    def boolean(self, raw: Any, path: FieldPath) -> bool:
        if raw is None:
            return False
        if not isinstance(raw, bool):
            self.bad(path, f"{to_display(path)} must be true or false, not {_kind(raw)}")
            return False
        return raw

    def quantity(self, raw: Any, path: FieldPath) -> Number | None:
        try:
            return bounded_quantity(raw)
        except QuantityError:
            self.bad(path, f"{to_display(path)}: {raw!r} is not a quantity"[:300])
            return None

    def quantities(self, raw: Any, path: FieldPath, limit: int,
                   wrapped: bool) -> dict[str, Number]:
        """name -> quantity; `wrapped` for the slice form `{name: {value: q}}`."""
        out: dict[str, Number] = {}
        entries = self.mapping(raw, path)
        if len(entries) > limit:
            self.bad(path, f"{to_display(path)} has {len(entries)} entries, at most {limit}")
        for key, value in list(entries.items())[:limit]:
            if not isinstance(key, str) or len(key) > MAX_STRING:
                self.bad(path, f"{to_display(path)} has a key that is not a short string")
                continue
            here = (*path, key)
            if wrapped:
                value = self.mapping(value, here).get("value")
                here = (*here, "value")
            amount = self.quantity(value, here)
            if amount is not None:
                out[key] = amount
        return out


_BIG_EXPONENT = re.compile(r"[eE][+-]?0*[0-9]{3,}")


def bounded_quantity(raw: Any) -> Number:
    """parse_quantity, refusing what would cost unbounded time: huge exponents and texts
    longer than any real quantity (Kubernetes caps quantities near 2^63 anyway)."""
    if isinstance(raw, str) and (len(raw) > 64 or _BIG_EXPONENT.search(raw)):
        raise QuantityError(f"{raw[:64]!r} is not a quantity Kubernetes accepts")
    return parse_quantity(raw)


def _kind(raw: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            int: "an integer", float: "a number"}.get(type(raw), type(raw).__name__)


def _meta(raw: Mapping[str, Any], reader: _Reader) -> tuple[str, str]:
    meta = reader.mapping(raw.get("metadata"), ("metadata",))
    return (reader.string(meta.get("name"), ("metadata", "name")),
            reader.string(meta.get("namespace"), ("metadata", "namespace")))


def qualify(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


# ---------------------------------------------------------------- ResourceSlice


def parse_slice(raw: Any) -> ResourceSlice:
    reader = _Reader()
    obj = reader.mapping(raw, ())
    name, _ = _meta(obj, reader)
    spec = reader.mapping(obj.get("spec"), ("spec",))
    driver = reader.string(spec.get("driver"), ("spec", "driver"), required=True)
    pool = reader.mapping(spec.get("pool"), ("spec", "pool"))
    pool_name = reader.string(pool.get("name"), ("spec", "pool", "name"), required=True)
    generation = reader.integer(pool.get("generation"), ("spec", "pool", "generation"), 0)
    count = reader.integer(pool.get("resourceSliceCount"),
                           ("spec", "pool", "resourceSliceCount"), 1)
    node_name = reader.string(spec.get("nodeName"), ("spec", "nodeName")) or None
    selector = spec.get("nodeSelector")
    if selector is not None and not isinstance(selector, Mapping):
        reader.bad(("spec", "nodeSelector"), "spec.nodeSelector must be an object")
        selector = None
    all_nodes = reader.boolean(spec.get("allNodes"), ("spec", "allNodes"))
    per_device = reader.boolean(spec.get("perDeviceNodeSelection"),
                                ("spec", "perDeviceNodeSelection"))
    chosen = sum((node_name is not None, selector is not None, all_nodes, per_device))
    if chosen != 1:
        reader.bad(("spec",), "exactly one of `nodeName`, `nodeSelector`, `allNodes`, "
                   f"`perDeviceNodeSelection` is required, {chosen} are set")
    counters: dict[str, dict[str, Number]] = {}
    for i, entry in reader.items(spec.get("sharedCounters"), ("spec", "sharedCounters"),
                                 MAX_COUNTER_SETS):
        path: FieldPath = ("spec", "sharedCounters", i)
        set_name = reader.string(entry.get("name"), (*path, "name"), required=True)
        if set_name:
            counters[set_name] = reader.quantities(entry.get("counters"), (*path, "counters"),
                                                   MAX_COUNTERS, wrapped=True)
    devices = tuple(
        _device(entry, ("spec", "devices", i), driver, per_device, reader)
        for i, entry in reader.items(spec.get("devices"), ("spec", "devices"), MAX_DEVICES)
    )
    return ResourceSlice(
        name=name, driver=driver, pool=pool_name, generation=generation, slice_count=count,
        node_name=node_name, node_selector=selector, all_nodes=all_nodes,
        per_device=per_device, devices=tuple(d for d in devices if d.name),
        counters=counters, problems=tuple(reader.problems),
    )


def _attribute(raw: Any, path: FieldPath, reader: _Reader) -> AttributeValue | None:
    entry = reader.mapping(raw, path)
    present = [k for k in ("int", "bool", "string", "version") if entry.get(k) is not None]
    if len(present) != 1:
        # List-typed attributes (alpha) are not read yet; they cannot be compared with ==.
        if not any(k in entry for k in ("ints", "bools", "strings", "versions")):
            reader.bad(path, f"{to_display(path)} must have exactly one of int, bool, "
                       "string, version")
        return None
    key = present[0]
    value = entry[key]
    if key == "int":
        return reader.integer(value, (*path, key), 0) if not isinstance(value, bool) else None
    if key == "bool":
        return reader.boolean(value, (*path, key))
    text = reader.string(value, (*path, key), limit=64)
    if key == "string":
        return text
    version = parse_version(text)
    if version is None and text:
        reader.bad((*path, key), f"{to_display((*path, key))}: {text!r} is not a semver "
                   "2.0.0 version")
    return version


def _device(raw: Mapping[str, Any], path: FieldPath, driver: str, per_device: bool,
            reader: _Reader) -> Device:
    name = reader.string(raw.get("name"), (*path, "name"), required=True)
    attributes: dict[str, AttributeValue] = {}
    attrs = reader.mapping(raw.get("attributes"), (*path, "attributes"))
    for key, value in list(attrs.items())[:MAX_ATTRIBUTES]:
        if not isinstance(key, str) or len(key) > MAX_STRING:
            reader.bad((*path, "attributes"), "attribute names must be short strings")
            continue
        parsed = _attribute(value, (*path, "attributes", key), reader)
        if parsed is not None:
            attributes[qualify(key, driver)] = parsed
    capacity: dict[str, Number] = {}
    policies: dict[str, CapacityPolicy] = {}
    cap = reader.mapping(raw.get("capacity"), (*path, "capacity"))
    for key, value in list(cap.items())[:MAX_ATTRIBUTES]:
        if not isinstance(key, str) or len(key) > MAX_STRING:
            continue
        here: FieldPath = (*path, "capacity", key)
        entry = reader.mapping(value, here)
        amount = reader.quantity(entry.get("value"), (*here, "value"))
        if amount is not None:
            capacity[key] = amount
        if entry.get("requestPolicy") is not None:
            policy = _request_policy(entry["requestPolicy"], (*here, "requestPolicy"), reader)
            if policy is not None:
                policies[key] = policy
    consumes = []
    for i, entry in reader.items(raw.get("consumesCounters"), (*path, "consumesCounters"),
                                 MAX_CONSUMES):
        here = (*path, "consumesCounters", i)
        counter_set = reader.string(entry.get("counterSet"), (*here, "counterSet"), True)
        amounts = reader.quantities(entry.get("counters"), (*here, "counters"), MAX_COUNTERS,
                                    wrapped=True)
        if counter_set:
            consumes.append((counter_set, amounts))
    taints = []
    for i, entry in reader.items(raw.get("taints"), (*path, "taints"), MAX_TAINTS):
        here = (*path, "taints", i)
        taints.append(DeviceTaint(
            key=reader.string(entry.get("key"), (*here, "key"), required=True),
            value=reader.string(entry.get("value"), (*here, "value")),
            effect=reader.string(entry.get("effect"), (*here, "effect"), required=True),
        ))
    allow_multiple = reader.boolean(raw.get("allowMultipleAllocations"),
                                    (*path, "allowMultipleAllocations"))
    node_name = node_selector = None
    all_nodes = False
    if per_device:
        node_name = reader.string(raw.get("nodeName"), (*path, "nodeName")) or None
        selector = raw.get("nodeSelector")
        node_selector = selector if isinstance(selector, Mapping) else None
        all_nodes = reader.boolean(raw.get("allNodes"), (*path, "allNodes"))
    attr_key = tuple(sorted((k, _typed(v)) for k, v in attributes.items()))
    cap_key = tuple(sorted(capacity.items()))
    cel_key = (driver, attr_key, cap_key, allow_multiple)
    shape = (cel_key, tuple((s, tuple(sorted(c.items()))) for s, c in consumes),
             tuple(taints), tuple(sorted(policies.items())))
    return Device(
        name=name, driver=driver, attributes=attributes, capacity=capacity,
        consumes=tuple(consumes), taints=tuple(taints), allow_multiple=allow_multiple,
        node_name=node_name, node_selector=node_selector, all_nodes=all_nodes,
        cel_id=_intern(cel_key), shape=shape, request_policies=policies,
    )


def _request_policy(raw: Any, path: FieldPath, reader: _Reader) -> CapacityPolicy | None:
    entry = reader.mapping(raw, path)
    if not entry:
        return None

    def amount(value: Any, here: FieldPath) -> Number | None:
        return None if value is None else reader.quantity(value, here)

    values = []
    raw_values = entry.get("validValues")
    if isinstance(raw_values, list):
        for i, value in enumerate(raw_values[:10]):
            parsed = amount(value, (*path, "validValues", i))
            if parsed is not None:
                values.append(parsed)
    span = reader.mapping(entry.get("validRange"), (*path, "validRange"))
    step = amount(span.get("step"), (*path, "validRange", "step"))
    return CapacityPolicy(
        default=amount(entry.get("default"), (*path, "default")),
        valid_values=tuple(sorted(values)),
        minimum=amount(span.get("min"), (*path, "validRange", "min")),
        maximum=amount(span.get("max"), (*path, "validRange", "max")),
        step=step if step and step > 0 else None,
    )


_IDS: dict[tuple[Any, ...], int] = {}
_NEXT = itertools.count(1)


def _intern(key: tuple[Any, ...]) -> int:
    # Ids are never reused, so clearing the table only costs cache misses.
    found = _IDS.get(key)
    if found is None:
        if len(_IDS) >= 1 << 16:
            _IDS.clear()
        found = _IDS[key] = next(_NEXT)
    return found


def _typed(value: AttributeValue) -> tuple[str, Any]:
    """A value with its type: 1, True and "1" must not compare equal in constraints."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, Version):
        return ("version", value.key())
    return ("string", value)


typed_value = _typed


# ---------------------------------------------------------------- DeviceClass


def parse_device_class(raw: Any) -> DeviceClass:
    reader = _Reader()
    obj = reader.mapping(raw, ())
    name, _ = _meta(obj, reader)
    spec = reader.mapping(obj.get("spec"), ("spec",))
    selectors = _selectors(spec.get("selectors"), ("spec", "selectors"), reader)
    extended = reader.string(spec.get("extendedResourceName"),
                             ("spec", "extendedResourceName")) or None
    meta = obj.get("metadata")
    created = meta.get("creationTimestamp") if isinstance(meta, Mapping) else None
    return DeviceClass(name, selectors, extended, tuple(reader.problems),
                       created if isinstance(created, str) else "")


def _selectors(raw: Any, path: FieldPath, reader: _Reader) -> tuple[Selector, ...]:
    out = []
    for i, entry in reader.items(raw, path, MAX_SELECTORS):
        cel = reader.mapping(entry.get("cel"), (*path, i, "cel"))
        here: FieldPath = (*path, i, "cel", "expression")
        if not cel:
            reader.bad((*path, i), f"{to_display((*path, i))}.cel is required")
            continue
        expression = reader.string(cel.get("expression"), here, required=True,
                                   limit=MAX_EXPRESSION)
        if expression:
            out.append(Selector(expression, here))
    return tuple(out)


# ---------------------------------------------------------------- claims


def parse_claim(raw: Any) -> Claim:
    """A ResourceClaim or a ResourceClaimTemplate (whose claim spec sits at spec.spec)."""
    reader = _Reader()
    obj = reader.mapping(raw, ())
    kind = "ResourceClaimTemplate" if obj.get("kind") == "ResourceClaimTemplate" else \
        "ResourceClaim"
    name, namespace = _meta(obj, reader)
    base: FieldPath = ("spec", "spec") if kind == "ResourceClaimTemplate" else ("spec",)
    spec = reader.mapping(obj.get("spec"), ("spec",))
    if kind == "ResourceClaimTemplate":
        spec = reader.mapping(spec.get("spec"), base)
    devices = reader.mapping(spec.get("devices"), (*base, "devices"))
    requests = []
    for i, entry in reader.items(devices.get("requests"), (*base, "devices", "requests"),
                                 MAX_REQUESTS):
        slot = _slot(entry, (*base, "devices", "requests", i), reader)
        if slot is not None:
            requests.append(slot)
    names = {s.name for s in requests} | {a.name for s in requests for a in s.alternatives}
    constraints = []
    for i, entry in reader.items(devices.get("constraints"),
                                 (*base, "devices", "constraints"), MAX_REQUESTS):
        constraint = _constraint(entry, (*base, "devices", "constraints", i), names, reader)
        if constraint is not None:
            constraints.append(constraint)
    return Claim(kind, name, namespace, tuple(requests), tuple(constraints),
                 tuple(reader.problems), base)


def _slot(raw: Mapping[str, Any], path: FieldPath, reader: _Reader) -> RequestSlot | None:
    name = reader.string(raw.get("name"), (*path, "name"), required=True)
    exactly, first = raw.get("exactly"), raw.get("firstAvailable")
    if exactly is not None and first is not None:
        reader.bad(path, f"{to_display(path)}: exactly one of `exactly` or `firstAvailable` "
                   "is required, but multiple fields are set")
        return None
    if first is not None:
        subs = tuple(
            sub for i, entry in reader.items(first, (*path, "firstAvailable"), MAX_SUBREQUESTS)
            if (sub := _request(entry, (*path, "firstAvailable", i), name, reader, True))
        )
        if not subs:
            reader.bad((*path, "firstAvailable"), f"{to_display(path)}.firstAvailable needs "
                       "at least one subrequest")
            return None
        return RequestSlot(name, subs, path)
    if exactly is None and "deviceClassName" in raw:
        request = _request(raw, path, name, reader)  # v1beta1: the request itself
    elif exactly is None:
        reader.bad(path, f"{to_display(path)}: exactly one of `exactly` or `firstAvailable` "
                   "is required")
        return None
    else:
        request = _request(reader.mapping(exactly, (*path, "exactly")), (*path, "exactly"),
                           name, reader)
    return RequestSlot(name, (request,), path) if request is not None and name else None


def _request(raw: Mapping[str, Any], path: FieldPath, parent: str, reader: _Reader,
             sub: bool = False) -> Request | None:
    name = parent
    if sub:
        sub_name = reader.string(raw.get("name"), (*path, "name"), required=True)
        name = f"{parent}/{sub_name}"
    class_name = reader.string(raw.get("deviceClassName"), (*path, "deviceClassName"),
                               required=True)
    raw_mode = raw.get("allocationMode") or "ExactCount"
    mode: AllocationMode = "All" if raw_mode == "All" else "ExactCount"
    if raw_mode not in ("ExactCount", "All"):
        reader.bad((*path, "allocationMode"), f"{to_display((*path, 'allocationMode'))}: "
                   f"Unsupported value: {str(raw_mode)[:64]!r}: supported values: \"All\", "
                   "\"ExactCount\"")
        return None
    count = reader.integer(raw.get("count"), (*path, "count"), 0)
    if mode == "All" and count:
        reader.bad((*path, "count"), f"{to_display((*path, 'count'))} must not be specified "
                   "when allocationMode is 'All'")
    if mode == "ExactCount" and count < 0:
        reader.bad((*path, "count"), f"{to_display((*path, 'count'))}: Invalid value: "
                   f"{count}: must be greater than zero")
        return None
    if mode == "ExactCount" and count > 32:
        reader.bad((*path, "count"), f"{to_display((*path, 'count'))}: {count} devices; a "
                   "claim may allocate at most 32")
    admin = False if sub else reader.boolean(raw.get("adminAccess"), (*path, "adminAccess"))
    tolerations = []
    for i, entry in reader.items(raw.get("tolerations"), (*path, "tolerations"),
                                 MAX_TOLERATIONS):
        here: FieldPath = (*path, "tolerations", i)
        operator = entry.get("operator") or "Equal"
        if operator not in ("Equal", "Exists"):
            reader.bad((*here, "operator"), f"{to_display((*here, 'operator'))}: "
                       f"Unsupported value: {str(operator)[:64]!r}")
            continue
        tolerations.append(Toleration(
            key=reader.string(entry.get("key"), (*here, "key")),
            operator=operator,
            value=reader.string(entry.get("value"), (*here, "value")),
            effect=reader.string(entry.get("effect"), (*here, "effect")),
        ))
    capacity = reader.mapping(raw.get("capacity"), (*path, "capacity"))
    requested = reader.quantities(capacity.get("requests"), (*path, "capacity", "requests"),
                                  MAX_ATTRIBUTES, wrapped=False)
    if not class_name or not name:
        return None
    return Request(
        name=name, class_name=class_name,
        selectors=_selectors(raw.get("selectors"), (*path, "selectors"), reader),
        mode=mode, count=max(count, 1) if mode == "ExactCount" else 0, admin_access=admin,
        tolerations=tuple(tolerations), capacity=requested, path=path,
    )


def _constraint(raw: Mapping[str, Any], path: FieldPath, names: set[str],
                reader: _Reader) -> Constraint | None:
    requests = []
    refs = raw.get("requests")
    if refs is not None and not isinstance(refs, list):
        reader.bad((*path, "requests"), f"{to_display((*path, 'requests'))} must be a list")
        refs = []
    for i, ref in enumerate((refs or [])[:MAX_REQUESTS]):
        if not isinstance(ref, str) or ref not in names:
            reader.bad((*path, "requests", i), f"{to_display((*path, 'requests', i))}: must "
                       "be the name of a request in the claim or the name of a request and "
                       "a subrequest separated by '/'")
            continue
        requests.append(ref)
    match = reader.string(raw.get("matchAttribute"), (*path, "matchAttribute")) or None
    distinct = reader.string(raw.get("distinctAttribute"), (*path, "distinctAttribute")) or None
    if (match is None) == (distinct is None):
        reader.bad(path, f"{to_display(path)}: exactly one of `matchAttribute` or "
                   "`distinctAttribute` is required")
        return None
    attribute = match or distinct or ""
    if "/" not in attribute:
        field_name = "matchAttribute" if match else "distinctAttribute"
        reader.bad((*path, field_name), f"{to_display((*path, field_name))}: a fully "
                   "qualified name must be a domain and a name separated by a slash")
        return None
    return Constraint(tuple(requests), match, distinct, path)
