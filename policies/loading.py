"""Policy text -> GPUPolicy objects, with errors that name file, document, line, column and
field path; every problem of every document at once, so one run shows them all.

Text in, models out: reading files is the caller's job (webhook/inputs/sources.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError

from policies.model import API_VERSION, KIND, GPUPolicy
from policies.paths import FieldPath, to_display

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


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


def parse_policies(text: str, source: str = "<policy>") -> list[GPUPolicy]:
    """Every GPUPolicy in a YAML/JSON stream (`kind: List` too); all problems at once."""
    policies: list[GPUPolicy] = []
    problems: list[PolicyProblem] = []
    for index, node, data in _documents(text, source, problems):
        for item, item_node, prefix in _items(data, node):
            try:
                policies.append(_validate(item))
            except _Problems as exc:
                where = _Positions(item_node)
                found = [(*where(loc), loc, message) for loc, message in exc.found]
                # pydantic reports in model order; a reader goes down the file.
                found.sort(key=lambda f: (f[0], f[1]))
                problems += [
                    PolicyProblem(source, index, line, to_display((*prefix, *_field(loc))),
                                  message, column)
                    for line, column, loc, message in found
                ]
    if problems:
        raise PolicyLoadError(problems)
    return policies


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


def _documents(
    text: str, source: str, problems: list[PolicyProblem]
) -> Iterator[tuple[int, yaml.Node, Any]]:
    loader = _Loader(text)
    index = 1  # the document being read
    try:
        while loader.check_node():
            node = loader.get_node()
            if node is not None:
                yield index, node, loader.construct_document(node)
            index += 1
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line, column = (mark.line + 1, mark.column + 1) if mark is not None else (0, 0)
        reason = getattr(exc, "problem", None) or str(exc)
        problems.append(
            PolicyProblem(source, index, line, "", f"invalid YAML: {reason}", column))
    finally:
        loader.dispose()


def _items(
    data: Any, node: yaml.Node | None
) -> Iterator[tuple[Any, yaml.Node | None, tuple[str | int, ...]]]:
    if data is None:
        return
    if isinstance(data, dict) and data.get("kind") == "List":
        items = data.get("items") or []
        items_node = _child(node, "items")
        for i, item in enumerate(items):
            yield item, _child(items_node, i), ("items", i)
        return
    yield data, node, ()


def _child(node: yaml.Node | None, key: str | int) -> yaml.Node | None:
    if isinstance(node, yaml.MappingNode):
        for k, v in node.value:
            if k.value == key:
                return v  # type: ignore[no-any-return]
    elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
        return node.value[key]  # type: ignore[no-any-return]
    return None


class _Positions:
    """Line and column of a field path in one document. Each mapping is indexed once, so a
    policy with many bad keys costs one pass over each mapping, not one per problem."""

    def __init__(self, node: yaml.Node | None) -> None:
        self.node = node
        self._keys: dict[int, dict[Any, tuple[yaml.Node, yaml.Node]]] = {}

    def __call__(self, loc: FieldPath) -> tuple[int, int]:
        """The deepest part of `loc` the document has: a bad map key points at the key, a
        missing field at the mapping that lacks it."""
        found = self.node
        for depth, part in enumerate(loc):
            if part == _KEY:
                break
            pair = self._entry(found, part)
            if pair is None:
                break
            found = pair[0] if loc[depth + 1:] == (_KEY,) else pair[1]
        if found is None:
            return 0, 0
        return found.start_mark.line + 1, found.start_mark.column + 1

    def _entry(self, node: yaml.Node | None, part: str | int) -> tuple[yaml.Node, yaml.Node] | None:
        if isinstance(node, yaml.SequenceNode):
            if isinstance(part, int) and 0 <= part < len(node.value):
                return node.value[part], node.value[part]
            return None
        if not isinstance(node, yaml.MappingNode):
            return None
        keys = self._keys.get(id(node))
        if keys is None:
            keys = {}
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode):
                    keys[k.value] = (k, v)  # the last one wins, as when the YAML is loaded
            self._keys[id(node)] = keys
        return keys.get(part)
