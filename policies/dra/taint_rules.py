"""DeviceTaintRule (resource.k8s.io v1alpha3, v1beta2, v1): an admin's taint on devices the
rule's selector picks, which the scheduler merges into the devices as if their slice carried
it (reference/dra.md §2.4, §3.2): an untolerated NoSchedule/NoExecute taint keeps the device
from every claim. The selector's fields (driver, pool, device) must all match; an empty
selector picks every device, an absent one none.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any, NamedTuple

from policies.dra.objects import Device, DeviceTaint, ResourceSlice
from policies.dra.problems import Problem
from policies.dra.reader import Reader, read_meta

# The effects the API server accepts; a consumer treats any other like None (no effect).
EFFECTS = ("None", "NoSchedule", "NoExecute")


class TaintRule(NamedTuple):
    name: str
    driver: str  # "" matches any
    pool: str
    device: str
    taint: DeviceTaint | None  # None: no selector or no usable taint, the rule picks nothing
    problems: tuple[Problem, ...] = ()

    def picks(self, driver: str, pool: str, device: str) -> bool:
        return self.taint is not None and all(
            not want or want == have
            for want, have in ((self.driver, driver), (self.pool, pool), (self.device, device)))


def parse_taint_rule(raw: Any) -> TaintRule:
    reader = Reader()
    obj = reader.mapping(raw, ())
    name, _ = read_meta(obj, reader)
    spec = reader.mapping(obj.get("spec"), ("spec",))
    raw_selector = spec.get("deviceSelector")
    selector = reader.mapping(raw_selector, ("spec", "deviceSelector"))
    fields = {key: reader.string(selector.get(key), ("spec", "deviceSelector", key))
              for key in ("driver", "pool", "device")}
    for removed in ("deviceClassName", "selectors"):
        if selector.get(removed) is not None:  # dropped in 1.35: the rule is not applied
            reader.bad(("spec", "deviceSelector", removed), f"spec.deviceSelector.{removed} "
                       "is no longer supported (removed in Kubernetes 1.35)")
    taint_raw = reader.mapping(spec.get("taint"), ("spec", "taint"))
    key = reader.string(taint_raw.get("key"), ("spec", "taint", "key"), required=True)
    effect = reader.string(taint_raw.get("effect"), ("spec", "taint", "effect"), required=True)
    if effect and effect not in EFFECTS:
        reader.bad(("spec", "taint", "effect"), f"spec.taint.effect: Unsupported value: "
                   f"{effect!r}: supported values: {', '.join(map(repr, EFFECTS))}")
    value = reader.string(taint_raw.get("value"), ("spec", "taint", "value"))
    usable = raw_selector is not None and bool(key) and bool(effect) and not reader.problems
    return TaintRule(name, fields["driver"], fields["pool"], fields["device"],
                     DeviceTaint(key, value, effect) if usable else None,
                     tuple(reader.problems))


def apply_rules(slices: Iterable[ResourceSlice], rules: Iterable[TaintRule]
                ) -> list[ResourceSlice]:
    """The slices with every rule's taint added to the devices it picks."""
    active = [r for r in rules if r.taint is not None]
    if not active:
        return list(slices)
    return [_tainted(one, active) for one in slices]


def _tainted(one: ResourceSlice, rules: list[TaintRule]) -> ResourceSlice:
    devices = tuple(_device(d, [r.taint for r in rules if r.taint is not None
                                and r.picks(one.driver, one.pool, d.name)])
                    for d in one.devices)
    if all(a is b for a, b in zip(devices, one.devices, strict=True)):
        return one
    return replace(one, devices=devices)


def _device(device: Device, taints: list[DeviceTaint]) -> Device:
    if not taints:
        return device
    merged = (*device.taints, *(t for t in taints if t not in device.taints))
    shape = device.shape
    # The taints are part of what allocation sees (objects.Device.shape, parse_slices).
    shape = (*shape[:2], merged, *shape[3:]) if len(shape) >= 3 else (*shape, merged)
    return replace(device, taints=merged, shape=shape)


def rule_problems(rules: Iterable[TaintRule]) -> list[tuple[str, Problem]]:
    return [(f"DeviceTaintRule/{r.name}", p) for r in rules for p in r.problems]


def parse_rules(raw: Iterable[Any]) -> list[TaintRule]:
    return [r if isinstance(r, TaintRule) else parse_taint_rule(r) for r in raw
            if isinstance(r, (TaintRule, Mapping))]
