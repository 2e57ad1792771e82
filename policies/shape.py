"""The types the engine relies on in a pod spec, and every place a spec breaks them.

The apiserver decodes a Pod before any webhook sees it, so there a wrong type cannot arrive;
but pod templates inside custom resources (Kubeflow, Ray, KServe...) and manifests given to
`lint` can hold anything. What the engine reads is listed here once: the rule
`pod-field-invalid` reports what breaks it, and mutation stays out of those parts.
`null` stands for an absent optional field, as in the apiserver's JSON.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from functools import lru_cache
from typing import Any

from policies.display import path_key, shown, type_name
from policies.paths import FieldPath

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"

# A schema is a type name ("string", "integer", "boolean", "label", "quantity"), or
# ("object", {field: schema}), ("list", schema), ("map", schema).
Schema = Any

_REQUIREMENT = ("object", {"key": "string", "operator": "string", "values": ("list", "label")})
TERM = ("object", {"matchExpressions": ("list", _REQUIREMENT),
                   "matchFields": ("list", _REQUIREMENT)})
NODE_AFFINITY = ("object", {
    REQUIRED: ("object", {"nodeSelectorTerms": ("list", TERM)}),
    PREFERRED: ("list", ("object", {"weight": "integer", "preference": TERM})),
})
_RESOURCES = ("object", {"requests": ("map", "quantity"), "limits": ("map", "quantity")})
_CONTAINER = ("object", {
    "name": "string",
    "resources": _RESOURCES,
    "env": ("list", ("object", {"name": "string", "value": "string"})),
    "securityContext": ("object", {"privileged": "boolean"}),
    "restartPolicy": "string",
})
TOLERATION = ("object", {"key": "string", "operator": "string", "value": "string",
                         "effect": "string", "tolerationSeconds": "integer"})
POD_SPEC = ("object", {
    "containers": ("list", _CONTAINER),
    "initContainers": ("list", _CONTAINER),
    "ephemeralContainers": ("list", _CONTAINER),
    "nodeSelector": ("map", "label"),
    "affinity": ("object", {"nodeAffinity": NODE_AFFINITY}),
    "tolerations": ("list", TOLERATION),
    "runtimeClassName": "string",
    "priorityClassName": "string",
    "schedulerName": "string",
    "nodeName": "string",
})

_SCALARS = {"string": str, "label": str, "integer": int, "boolean": bool}
_TEXT = frozenset({"string", "label"})


def problems(value: Any, schema: Schema, path: FieldPath) -> list[tuple[FieldPath, str]]:
    """Every (path, message) where `value` breaks `schema`. Quantities are the quantity rule's.
    The work is one visit of each value the schema names; a path is spelled out only for a
    problem (this runs on every admission, and almost every spec has none)."""
    out: list[tuple[Any, str]] = []
    _check_for(schema)(value, (path, ()), out)
    return [(_spelled(link), message) for link, message in out]


# A path under construction: (parent link, key), the root being (prefix, ()).
_Link = tuple[Any, Any]
# A schema node made into a function: checks one value, adding (link, message) to the list.
_Check = Callable[[Any, _Link, list[tuple[Any, str]]], None]
_CHECKS: dict[int, tuple[Schema, _Check]] = {}


def _spelled(link: _Link) -> FieldPath:
    keys: list[Any] = []
    while link[1] != ():
        link, key = link
        keys.append(key)
    return (*link[0], *reversed(keys))


def _check_for(schema: Schema) -> _Check:
    """The check `schema` compiles to, made on first use: each admission then runs the
    checks without reading the schema again (what kind of node, which fields are leaves).
    Keyed by identity, with the schema kept beside it so the key stays its own."""
    found = _CHECKS.get(id(schema))
    if found is None or found[0] is not schema:
        if len(_CHECKS) >= 64:  # schemas are this module's constants: a few at most
            _CHECKS.clear()
        found = _CHECKS[id(schema)] = (schema, _compile(schema))
    return found[1]


def _compile(schema: Schema) -> _Check:
    if isinstance(schema, str):
        return _leaf_check(schema)
    kind, inner = schema
    if kind == "object":
        return _object_check(inner)
    if kind == "list":
        return _list_check(inner)
    return _map_check(inner)


def _leaf_check(kind: str) -> _Check:
    def check(value: Any, link: _Link, out: list[tuple[Any, str]]) -> None:
        if kind != "quantity" and not _fits(value, kind):
            out.append((link, _scalar_message(value, kind)))
    return check


def _object_check(fields: Mapping[str, Schema]) -> _Check:
    # (field, its scalar type or "", whether it is text, the check of a nested schema);
    # quantities are left out: they are the quantity rule's
    plan = tuple(
        (name, sub, sub in _TEXT, None) if isinstance(sub, str) else (name, "", False,
                                                                     _compile(sub))
        for name, sub in fields.items() if sub != "quantity")

    def check(value: Any, link: _Link, out: list[tuple[Any, str]]) -> None:
        if not isinstance(value, dict):
            out.append((link, f"must be an object, got {type_name(value)}"))
            return
        for name, leaf, text, nested in plan:
            child = value.get(name)
            if child is None:
                continue
            if nested is not None:
                nested(child, (link, name), out)
            elif not (text and child.__class__ is str) and not _fits(child, leaf):
                out.append(((link, name), _scalar_message(child, leaf)))
    return check


def _list_check(inner: Schema) -> _Check:
    item_check = _compile(inner)
    text = isinstance(inner, str) and inner in _TEXT

    def check(value: Any, link: _Link, out: list[tuple[Any, str]]) -> None:
        if not isinstance(value, list):
            out.append((link, f"must be a list, got {type_name(value)}"))
            return
        for index, item in enumerate(value):
            if not (text and item.__class__ is str):  # a label value: decided here
                item_check(item, (link, index), out)
    return check


def _map_check(inner: str) -> _Check:
    def check(value: Any, link: _Link, out: list[tuple[Any, str]]) -> None:
        if not isinstance(value, dict):
            out.append((link, f"must be an object, got {type_name(value)}"))
            return
        for key, item in value.items():
            if not isinstance(key, str):
                written = "" if key is None else f" {shown(key)}"
                out.append(((link, path_key(key)),
                            f"keys must be strings, got {type_name(key)}{written}"))
            elif inner != "quantity" and not (item.__class__ is str and inner in _TEXT) \
                    and not _fits(item, inner):
                out.append(((link, key), _scalar_message(item, inner)))
    return check


def _fits(value: Any, kind: str) -> bool:
    return isinstance(value, _SCALARS[kind]) and (kind != "integer"
                                                  or not isinstance(value, bool))


def _scalar_message(value: Any, kind: str) -> str:
    if kind == "label" and isinstance(value, bool | int | float):
        return (f"must be a string, got {type_name(value)} {shown(value)}: label values "
                f"are strings, quote it (\"{shown(value)}\")")
    if value is None or isinstance(value, dict | list):
        return f"must be {_ARTICLE[kind]}, got {type_name(value)}"
    return f"must be {_ARTICLE[kind]}, got {type_name(value)} {shown(value)}"


_ARTICLE = {"string": "a string", "label": "a string", "integer": "an integer",
            "boolean": "a boolean"}


def well_formed(value: Any, schema: Schema) -> bool:
    """Whether `value` (present, not null) has the type `schema` names at its top level;
    mutation writes only into parts that do."""
    if isinstance(schema, str):
        return isinstance(value, _SCALARS.get(schema, object))
    return isinstance(value, list if schema[0] == "list" else dict)


def absent_or(value: Any, schema: Schema) -> bool:
    return value is None or well_formed(value, schema)


def spec_problems(spec: Mapping[str, Any], prefix: FieldPath) -> list[tuple[FieldPath, str]]:
    return problems(spec, POD_SPEC, prefix)


def container_problems(container: Mapping[str, Any], path: FieldPath,
                       resources_field: str = "resources") -> list[tuple[FieldPath, str]]:
    """A container-like object a kind keeps outside the pod spec's lists (KServe `model`, an
    Argo `container`, a TrainJob's trainer with `resourcesPerNode`)."""
    return problems(container, _container(resources_field), path)


@lru_cache(maxsize=8)
def _container(resources_field: str) -> Schema:
    fields = dict(_CONTAINER[1])
    fields[resources_field] = fields.pop("resources")
    return ("object", fields)
