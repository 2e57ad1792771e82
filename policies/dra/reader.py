"""Reading untrusted dicts: every field of the wrong shape becomes a Problem with its path and
is left out, never an exception. Lists are cut at the apiserver's own limits (objects.py), so
the work stays bounded by them."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policies.dra.objects import MAX_EXPRESSION, MAX_SELECTORS, MAX_STRING, Selector
from policies.dra.problems import Problem
from policies.paths import FieldPath, to_display
from policies.quantity import Number, QuantityError, parse_quantity


@dataclass
class Reader:
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


V1 = "resource.k8s.io/v1"
V1BETA2 = "resource.k8s.io/v1beta2"
V1BETA1 = "resource.k8s.io/v1beta1"
SERVED = (V1, V1BETA2, V1BETA1)


def served_version(obj: Mapping[str, Any], kind: str, reader: Reader) -> str | None:
    """The object's apiVersion if the apiserver serves `kind` in it, else None with a problem.
    An object with no apiVersion (built by hand, as tests and caches do) reads as v1."""
    api = obj.get("apiVersion")
    if api is None:
        return V1
    if api in SERVED:
        return str(api)
    shown = repr(api)[:80] if isinstance(api, str) else f"a {type(api).__name__}"
    reader.bad(("apiVersion",), f"apiVersion: {shown}: {kind} is read in "
               f"{', '.join(SERVED)}; convert it (kubectl get -o yaml returns the served "
               "version)")
    return None


def unserved_dra_version(obj: Mapping[str, Any]) -> str:
    """Why a ResourceSlice or DeviceClass cannot be read ("" when it can): its apiVersion is
    not one the apiserver serves it in."""
    if obj.get("kind") not in ("ResourceSlice", "DeviceClass"):
        return ""
    reader = Reader()
    served_version(obj, str(obj.get("kind")), reader)
    return f"{obj.get('kind')}: {reader.problems[0].message}" if reader.problems else ""


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


def read_meta(raw: Mapping[str, Any], reader: Reader) -> tuple[str, str]:
    meta = reader.mapping(raw.get("metadata"), ("metadata",))
    return (reader.string(meta.get("name"), ("metadata", "name")),
            reader.string(meta.get("namespace"), ("metadata", "namespace")))


def read_selectors(raw: Any, path: FieldPath, reader: Reader) -> tuple[Selector, ...]:
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
