"""Policy text -> GPUPolicy objects, with errors that name file, document, line, column and
field path; every problem of every document at once, so one run shows them all.

Text in, models out: reading files is the caller's job (webhook/inputs/sources.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from typing import Any, NamedTuple, get_args

from pydantic import BaseModel, ValidationError

from policies import yamlpos
from policies.model import API_VERSION, KIND, GPUPolicy
from policies.paths import FieldPath, to_display


class PolicyProblem(NamedTuple):
    source: str
    document: int  # 1-based
    line: int  # 1-based, 0 when unknown
    path: str  # as paths.to_display renders it
    message: str
    column: int = 0  # 1-based, 0 when unknown

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
        where += f":{self.column}" if self.line and self.column else ""
        document = f" document {self.document}:" if self.document else ""
        field = f" {self.path}:" if self.path else ""
        return f"{where}:{document}{field} {self.message}"


class PolicyLoadError(ValueError):
    def __init__(self, problems: Iterable[PolicyProblem]) -> None:
        self.problems = tuple(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


def parse_policies(text: str | bytes, source: str = "<policy>") -> list[GPUPolicy]:
    """Every GPUPolicy in a YAML/JSON stream (`kind: List` and `GPUPolicyList` too), read by
    the one hardened reader (policies/yamlpos.py); every problem at once."""
    stream = yamlpos.read_stream(text)
    problems = [PolicyProblem(source, p.document, p.line, "", p.message, p.column)
                for p in stream.problems]
    policies: list[GPUPolicy] = []
    for doc in stream.documents:
        if doc.data is None:
            continue
        items = list(doc.objects()) if isinstance(doc.data, dict) else [((), doc.data)]
        for prefix, item in items:
            try:
                policies.append(_validate(item))
            except _Problems as exc:
                found = [(*_position(doc, (*prefix, *loc)), loc, message)
                         for loc, message in exc.found]
                # pydantic reports in model order; a reader goes down the file.
                found.sort(key=lambda f: (f[0], f[1]))
                problems += [
                    PolicyProblem(source, doc.index, line, to_display((*prefix, *_field(loc))),
                                  message, column)
                    for line, column, loc, message in found
                ]
    if problems:
        raise PolicyLoadError(problems)
    return policies


def _position(doc: yamlpos.Document, loc: FieldPath) -> tuple[int, int]:
    """A bad map key at the key; any other problem at the value (or the mapping lacking it)."""
    if loc and loc[-1] == _KEY:
        return doc.position(loc[:-1])
    return doc.position(loc, value=True)


def check_unique(policies: Iterable[tuple[str, GPUPolicy]]) -> None:
    """Two policies with one name would make priority ties ambiguous: refuse them."""
    seen: dict[str, str] = {}
    problems = []
    for source, policy in policies:
        if policy.name in seen:
            problems.append(
                PolicyProblem(
                    source, 0, 0, "metadata.name",
                    f"policy {policy.name!r} is also defined in {seen[policy.name]}",
                )
            )
        seen.setdefault(policy.name, source)
    if problems:
        raise PolicyLoadError(problems)


class _Problems(Exception):
    def __init__(self, *found: tuple[FieldPath, str]) -> None:
        self.found = found


# pydantic's marker for "the key of this map entry", as the last part of an error's loc.
_KEY = "[key]"


def _validate(item: Any) -> GPUPolicy:
    if not isinstance(item, dict):
        raise _Problems(((), f"expected a {KIND} mapping, got {type(item).__name__}"))
    if item.get("kind") != KIND:
        raise _Problems((("kind",), f"expected kind {KIND!r}, got {item.get('kind')!r}"))
    if item.get("apiVersion") != API_VERSION:
        raise _Problems((
            ("apiVersion",), f"expected apiVersion {API_VERSION!r}, got {item.get('apiVersion')!r}"
        ))
    try:
        return GPUPolicy.model_validate(item)
    except ValidationError as exc:
        raise _Problems(*((_loc(e), validation_message(e)) for e in exc.errors())) from None


def _loc(error: Any) -> FieldPath:
    loc = tuple(error["loc"])
    # An unknown field is the key's fault: point at the key, not its value.
    return (*loc, _KEY) if error["type"] == "extra_forbidden" else loc


def _field(loc: FieldPath) -> FieldPath:
    """The field path a user reads: a bad map key is named by the key itself."""
    return loc[:-1] if loc and loc[-1] == _KEY else loc


def validation_message(error: Any, model: type[BaseModel] | None = None) -> str:
    """A pydantic error in the words of a Kubernetes validation message: what the field must
    be and what it holds, never pydantic's vocabulary ("valid tuple", "instance of Spec")."""
    kind, ctx = error["type"], error.get("ctx") or {}
    value = error.get("input")
    if kind == "extra_forbidden":
        return "unknown field" + _did_you_mean(tuple(error["loc"]), model or GPUPolicy)
    if kind == "missing":
        return "required field is missing"
    if kind == "too_short":
        return "must not be empty"
    if kind == "too_long":
        most = ctx.get("max_length")
        return f"must hold at most {most} item{'s' * (most != 1)}, not {_shown(value)}"
    if kind in _EXPECTED:
        return f"must be {_EXPECTED[kind]}, not {_shown(value)}"
    if kind == "literal_error":
        allowed = re.findall(r"'([^']*)'", str(ctx.get("expected", "")))
        shown = ", ".join(a or '""' for a in allowed)
        return f"must be one of {shown}; not {_shown(value)}"
    for bound, words in _BOUNDS.items():
        if bound in ctx:
            return f"must be {words} {ctx[bound]}, not {_shown(value)}"
    text: str = error["msg"]
    return text.removeprefix("Value error, ").replace("Input should be", "must be")


# pydantic's error type -> what the field must be, in the schema's (and kubectl's) terms
_EXPECTED = {
    "int_type": "an integer", "int_parsing": "an integer", "int_from_float": "an integer",
    "float_type": "a number", "float_parsing": "a number",
    "bool_type": "a boolean (true or false)", "bool_parsing": "a boolean (true or false)",
    "string_type": "a string",
    "tuple_type": "a list", "list_type": "a list", "iterable_type": "a list",
    "dict_type": "a mapping", "model_type": "a mapping", "model_attributes_type": "a mapping",
}
_BOUNDS = {"ge": "at least", "gt": "greater than", "le": "at most", "lt": "less than"}


def _shown(value: Any) -> str:
    """A value as kubectl's messages show it: its JSON type, then (when short) the value."""
    if isinstance(value, bool):
        return f"boolean {str(value).lower()}"
    if isinstance(value, int | float):
        return f"{'integer' if isinstance(value, int) else 'number'} {value}"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"string {json.dumps(shown, ensure_ascii=False)}"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return "a mapping"
    return "a list" if isinstance(value, list | tuple) else "a value"


def _did_you_mean(loc: FieldPath, root: type[BaseModel]) -> str:
    """`; did you mean maxGPUsPerPod?` for an unknown field, from the fields the model has at
    that place; the known fields when none is close."""
    known = _fields_at(loc[:-1], root)
    typed = str(loc[-1]) if loc else ""
    if not known:
        return ""
    import difflib  # here: only a misspelt field needs it (1 ms of import on every run)

    by_case = {name.lower(): name for name in known}
    close = ([by_case[typed.lower()]] if typed.lower() in by_case
             else difflib.get_close_matches(typed, known, n=1, cutoff=0.6))
    if close:
        return f"; did you mean {close[0]}?"
    return f"; known fields: {', '.join(known)}"


def _fields_at(loc: FieldPath, root: type[BaseModel]) -> list[str]:
    model: type[BaseModel] | None = root
    for part in loc:
        if isinstance(part, int) or model is None:
            continue
        field = next((f for name, f in model.model_fields.items()
                      if (f.alias or name) == part), None)
        model = _model_of(field.annotation) if field is not None else None
    if model is None or model.model_config.get("extra") != "forbid":
        return []
    return [f.alias or name for name, f in model.model_fields.items()]


def _model_of(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, through Optional, tuple[...] and Annotated."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_of(arg)
        if found is not None:
            return found
    return None
