"""Policy text -> GPUPolicy objects, with errors that name file, document, line, column and
field path; every problem of every document at once, so one run shows them all.

Text in, models out: reading files is the caller's job (webhook/inputs/sources.py).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from policies import yamlpos
from policies.model import API_VERSION, KIND, GPUPolicy
from policies.paths import FieldPath, to_display


@dataclass(frozen=True)
class PolicyProblem:
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


def validation_message(error: Any) -> str:
    """A pydantic error in the words of a Kubernetes validation message."""
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"] == "missing":
        return "required field is missing"
    if error["type"] == "too_short":
        return "must not be empty"
    text: str = error["msg"]
    return text.removeprefix("Value error, ")
