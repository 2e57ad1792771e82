"""ResourceClaim and ResourceClaimTemplate from untrusted dicts, in every served version:
v1 and v1beta2 put a request's fields under `exactly`, v1beta1 puts them on the request itself
(`requests[i].deviceClassName`); both read into one Request. Other versions are input errors."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from policies.dra.objects import (
    MAX_ATTRIBUTES,
    MAX_REQUESTS,
    MAX_SUBREQUESTS,
    MAX_TOLERATIONS,
    AllocationMode,
    Claim,
    Constraint,
    Request,
    RequestSlot,
    Toleration,
)
from policies.dra.reader import V1BETA1, Reader, read_meta, read_selectors, served_version
from policies.paths import FieldPath, to_display

_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
MAX_CONFIG = 32
MAX_PARAMETERS = 10 * 1024  # bytes of a config entry's opaque parameters, as JSON


def _label(name: str, path: FieldPath, reader: Reader) -> None:
    if name and (len(name) > 63 or not _LABEL.match(name)):
        reader.bad(path, f"{to_display(path)}: Invalid value: {name[:64]!r}: a lowercase RFC "
                   "1123 label must consist of lower case alphanumeric characters or '-', and "
                   "must start and end with an alphanumeric character")


def _subdomain(name: str, path: FieldPath, reader: Reader) -> None:
    if name and (len(name) > 253 or not _SUBDOMAIN.match(name)):
        reader.bad(path, f"{to_display(path)}: Invalid value: {name[:64]!r}: a lowercase RFC "
                   "1123 subdomain must consist of lower case alphanumeric characters, '-' or "
                   "'.', and must start and end with an alphanumeric character")


def parse_claim(raw: Any) -> Claim:
    """A ResourceClaim or a ResourceClaimTemplate (whose claim spec sits at spec.spec)."""
    reader = Reader()
    obj = reader.mapping(raw, ())
    kind = "ResourceClaimTemplate" if obj.get("kind") == "ResourceClaimTemplate" else \
        "ResourceClaim"
    name, namespace = read_meta(obj, reader)
    version = served_version(obj, kind, reader)
    # Hand-built claims (no apiVersion) may use either request shape.
    flat = version == V1BETA1 or obj.get("apiVersion") is None
    base: FieldPath = ("spec", "spec") if kind == "ResourceClaimTemplate" else ("spec",)
    spec = reader.mapping(obj.get("spec"), ("spec",))
    if kind == "ResourceClaimTemplate":
        spec = reader.mapping(spec.get("spec"), base)
    devices = reader.mapping(spec.get("devices"), (*base, "devices")) if version else {}
    requests = []
    seen: set[str] = set()
    for i, entry in reader.items(devices.get("requests"), (*base, "devices", "requests"),
                                 MAX_REQUESTS):
        here: FieldPath = (*base, "devices", "requests", i)
        given = entry.get("name")
        if isinstance(given, str) and given in seen:
            reader.bad((*here, "name"), f"{to_display((*here, 'name'))}: Duplicate value: "
                       f"{given[:64]!r}")
        seen.add(given if isinstance(given, str) else "")
        slot = _slot(entry, here, flat, reader)
        if slot is not None:
            requests.append(slot)
    names = {s.name for s in requests} | {a.name for s in requests for a in s.alternatives}
    _config(devices.get("config"), (*base, "devices", "config"), names, reader)
    constraints = []
    for i, entry in reader.items(devices.get("constraints"),
                                 (*base, "devices", "constraints"), MAX_REQUESTS):
        constraint = _constraint(entry, (*base, "devices", "constraints", i), names, reader)
        if constraint is not None:
            constraints.append(constraint)
    return Claim(kind, name, namespace, tuple(requests), tuple(constraints),
                 tuple(reader.problems), base)


def _slot(raw: Mapping[str, Any], path: FieldPath, flat: bool,
          reader: Reader) -> RequestSlot | None:
    name = reader.string(raw.get("name"), (*path, "name"), required=True)
    _label(name, (*path, "name"), reader)
    exactly, first = raw.get("exactly"), raw.get("firstAvailable")
    if exactly is not None and first is not None:
        reader.bad(path, f"{to_display(path)}: exactly one of `exactly` or `firstAvailable` "
                   "is required, but multiple fields are set")
        return None
    if first is not None:
        subs_seen: set[str] = set()
        found: list[Request] = []
        for i, entry in reader.items(first, (*path, "firstAvailable"), MAX_SUBREQUESTS):
            given = entry.get("name")
            if isinstance(given, str) and given in subs_seen:
                here = (*path, "firstAvailable", i, "name")
                reader.bad(here, f"{to_display(here)}: Duplicate value: {given[:64]!r}")
            subs_seen.add(given if isinstance(given, str) else "")
            sub = _request(entry, (*path, "firstAvailable", i), name, reader, True)
            if sub is not None:
                found.append(sub)
        subs = tuple(found)
        if not subs:
            reader.bad((*path, "firstAvailable"), f"{to_display(path)}.firstAvailable needs "
                       "at least one subrequest")
            return None
        return RequestSlot(name, subs, path)
    if exactly is None and flat and "deviceClassName" in raw:
        request = _request(raw, path, name, reader)  # v1beta1: the request itself
    elif exactly is None and "deviceClassName" in raw:
        reader.bad((*path, "deviceClassName"), f"{to_display((*path, 'deviceClassName'))}: "
                   "unknown field: only resource.k8s.io/v1beta1 puts it on the request; "
                   "v1 and v1beta2 want it under `exactly`")
        return None
    elif exactly is None:
        reader.bad(path, f"{to_display(path)}: exactly one of `exactly` or `firstAvailable` "
                   "is required")
        return None
    else:
        request = _request(reader.mapping(exactly, (*path, "exactly")), (*path, "exactly"),
                           name, reader)
    return RequestSlot(name, (request,), path) if request is not None and name else None


def _request(raw: Mapping[str, Any], path: FieldPath, parent: str, reader: Reader,
             sub: bool = False) -> Request | None:
    name = parent
    if sub:
        sub_name = reader.string(raw.get("name"), (*path, "name"), required=True)
        _label(sub_name, (*path, "name"), reader)
        name = f"{parent}/{sub_name}"
    class_name = reader.string(raw.get("deviceClassName"), (*path, "deviceClassName"),
                               required=True)
    _subdomain(class_name, (*path, "deviceClassName"), reader)
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
        selectors=read_selectors(raw.get("selectors"), (*path, "selectors"), reader),
        mode=mode, count=max(count, 1) if mode == "ExactCount" else 0, admin_access=admin,
        tolerations=tuple(tolerations), capacity=requested, path=path,
    )


def _constraint(raw: Mapping[str, Any], path: FieldPath, names: set[str],
                reader: Reader) -> Constraint | None:
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
    if match is None and distinct is None:
        here = (*path, "matchAttribute")
        reader.bad(here, f"{to_display(here)}: Required value: one of `matchAttribute` or "
                   "`distinctAttribute` is required")
        return None
    if match is not None and distinct is not None:
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


def _config(raw: Any, path: FieldPath, names: set[str], reader: Reader) -> None:
    """spec.devices.config: only checked (the engine hands out no configuration): the requests
    it names exist, and its opaque parameters are a JSON object of at most 10 KiB."""
    for i, entry in reader.items(raw, path, MAX_CONFIG):
        here: FieldPath = (*path, i)
        refs = entry.get("requests")
        for j, ref in enumerate(refs[:MAX_REQUESTS] if isinstance(refs, list) else []):
            if not isinstance(ref, str) or ref not in names:
                reader.bad((*here, "requests", j), f"{to_display((*here, 'requests', j))}: "
                           "must be the name of a request in the claim or the name of a "
                           "request and a subrequest separated by '/'")
        opaque = reader.mapping(entry.get("opaque"), (*here, "opaque"))
        if not opaque:
            continue
        at: FieldPath = (*here, "opaque", "parameters")
        parameters = opaque.get("parameters")
        if not isinstance(parameters, Mapping):
            reader.bad(at, f"{to_display(at)}: parameters must be a valid JSON object")
        elif len(json.dumps(parameters, separators=(",", ":"), default=str)) > MAX_PARAMETERS:
            reader.bad(at, f"{to_display(at)}: Too long: may not be more than "
                       f"{MAX_PARAMETERS} bytes")
