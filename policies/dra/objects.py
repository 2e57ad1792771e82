"""DRA objects (resource.k8s.io/v1) as typed values: what the parsers in parse_slices.py and
parse_claims.py produce and the allocator reads."""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

from policies.dra.problems import Problem
from policies.dra.values import AttributeValue, Version
from policies.paths import FieldPath
from policies.quantity import Number

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


class DeviceTaint(NamedTuple):
    key: str
    value: str
    effect: str


class Toleration(NamedTuple):
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


class CapacityPolicy(NamedTuple):
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


class Selector(NamedTuple):
    expression: str
    path: FieldPath


class DeviceClass(NamedTuple):
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


class RequestSlot(NamedTuple):
    """One entry of spec.devices.requests: a single request, or alternatives tried in order."""

    name: str
    alternatives: tuple[Request, ...]
    path: FieldPath


class Constraint(NamedTuple):
    requests: tuple[str, ...]  # empty: every request of the claim
    match_attribute: str | None
    distinct_attribute: str | None
    path: FieldPath


class Claim(NamedTuple):
    kind: str  # ResourceClaim | ResourceClaimTemplate
    name: str
    namespace: str
    requests: tuple[RequestSlot, ...]
    constraints: tuple[Constraint, ...]
    problems: tuple[Problem, ...] = ()
    # Where spec.devices sits: ("spec",) for a claim, ("spec", "spec") for a template.
    base: FieldPath = ("spec",)



def qualify(name: str, driver: str) -> str:
    return name if "/" in name else f"{driver}/{name}"


_IDS: dict[tuple[Any, ...], int] = {}
_NEXT = itertools.count(1)


def intern(key: tuple[Any, ...]) -> int:
    # Ids are never reused, so clearing the table only costs cache misses.
    found = _IDS.get(key)
    if found is None:
        if len(_IDS) >= 1 << 16:
            _IDS.clear()
        found = _IDS[key] = next(_NEXT)
    return found


def typed_value(value: AttributeValue) -> tuple[str, Any]:
    """A value with its type: 1, True and "1" must not compare equal in constraints."""
    if isinstance(value, bool):
        return ("bool", value)
    if isinstance(value, int):
        return ("int", value)
    if isinstance(value, Version):
        return ("version", value.key())
    return ("string", value)
