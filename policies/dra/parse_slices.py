"""ResourceSlice and DeviceClass from untrusted dicts, in every version the apiserver serves
(resource.k8s.io/v1, v1beta2, v1beta1), read into the one form the engine uses (v1's).

v1beta2 has v1's shape. v1beta1 wraps each device's fields in `basic`
(`devices[i].basic.attributes`); they are read from there, with their problems' paths where
they are written. Any other apiVersion is an input error: its devices are not read."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.dra.objects import (
    MAX_ATTRIBUTES,
    MAX_CONSUMES,
    MAX_COUNTER_SETS,
    MAX_COUNTERS,
    MAX_DEVICES,
    MAX_STRING,
    MAX_TAINTS,
    CapacityPolicy,
    Device,
    DeviceClass,
    DeviceTaint,
    ResourceSlice,
    intern,
    qualify,
    typed_value,
)
from policies.dra.reader import V1BETA1, Reader, read_meta, read_selectors, served_version
from policies.dra.values import AttributeValue, parse_version
from policies.paths import FieldPath, to_display
from policies.quantity import Number


def parse_slice(raw: Any) -> ResourceSlice:
    reader = Reader()
    obj = reader.mapping(raw, ())
    name, _ = read_meta(obj, reader)
    version = served_version(obj, "ResourceSlice", reader)
    if version is None:
        return ResourceSlice(name=name, driver="", pool="", generation=0, slice_count=0,
                             node_name=None, node_selector=None, all_nodes=False,
                             per_device=False, devices=(), counters={},
                             problems=tuple(reader.problems))
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
        _device(*_body(entry, ("spec", "devices", i), version, reader), driver, per_device,
                reader)
        for i, entry in reader.items(spec.get("devices"), ("spec", "devices"), MAX_DEVICES)
    )
    return ResourceSlice(
        name=name, driver=driver, pool=pool_name, generation=generation, slice_count=count,
        node_name=node_name, node_selector=selector, all_nodes=all_nodes,
        per_device=per_device, devices=tuple(d for d in devices if d.name),
        counters=counters, problems=tuple(reader.problems),
    )


def _attribute(raw: Any, path: FieldPath, reader: Reader) -> AttributeValue | None:
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


_BASIC_FIELDS = ("attributes", "capacity", "consumesCounters", "taints", "nodeName",
                 "nodeSelector", "allNodes", "allowMultipleAllocations")


def _body(raw: Mapping[str, Any], path: FieldPath, version: str | None, reader: Reader
          ) -> tuple[str, Mapping[str, Any], FieldPath]:
    """(name, the mapping holding the device's fields, its path) in the slice's version."""
    name = reader.string(raw.get("name"), (*path, "name"), required=True)
    if version != V1BETA1:
        return name, raw, path
    flat = [k for k in _BASIC_FIELDS if k in raw]
    if flat:
        reader.bad((*path, flat[0]), f"{to_display((*path, flat[0]))}: unknown field in "
                   f"{V1BETA1}: its devices keep their fields under `basic`")
    return name, reader.mapping(raw.get("basic"), (*path, "basic")), (*path, "basic")


def _device(name: str, raw: Mapping[str, Any], path: FieldPath, driver: str, per_device: bool,
            reader: Reader) -> Device:
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
    attr_key = tuple(sorted((k, typed_value(v)) for k, v in attributes.items()))
    cap_key = tuple(sorted(capacity.items()))
    cel_key = (driver, attr_key, cap_key, allow_multiple)
    shape = (cel_key, tuple((s, tuple(sorted(c.items()))) for s, c in consumes),
             tuple(taints), tuple(sorted(policies.items())))
    return Device(
        name=name, driver=driver, attributes=attributes, capacity=capacity,
        consumes=tuple(consumes), taints=tuple(taints), allow_multiple=allow_multiple,
        node_name=node_name, node_selector=node_selector, all_nodes=all_nodes,
        cel_id=intern(cel_key), shape=shape, request_policies=policies,
    )


def _request_policy(raw: Any, path: FieldPath, reader: Reader) -> CapacityPolicy | None:
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


def parse_device_class(raw: Any) -> DeviceClass:
    reader = Reader()
    obj = reader.mapping(raw, ())
    name, _ = read_meta(obj, reader)
    # The three served versions give a DeviceClass the same shape.
    version = served_version(obj, "DeviceClass", reader)
    spec = reader.mapping(obj.get("spec"), ("spec",)) if version else {}
    selectors = read_selectors(spec.get("selectors"), ("spec", "selectors"), reader)
    extended = reader.string(spec.get("extendedResourceName"),
                             ("spec", "extendedResourceName")) or None
    meta = obj.get("metadata")
    created = meta.get("creationTimestamp") if isinstance(meta, Mapping) else None
    return DeviceClass(name, selectors, extended, tuple(reader.problems),
                       created if isinstance(created, str) else "")
