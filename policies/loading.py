"""Policy text -> GPUPolicy objects, with errors that name file, document, line and field path.

Text in, models out: reading files is the caller's job (webhook/sources.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

import yaml
from pydantic import ValidationError

from policies.model import API_VERSION, KIND, GPUPolicy

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@dataclass(frozen=True)
class PolicyProblem:
    source: str
    document: int  # 1-based
    line: int  # 1-based, 0 when unknown
    path: str
    message: str

    def __str__(self) -> str:
        where = f"{self.source}:{self.line}" if self.line else self.source
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
            except _Problem as exc:
                line = _line_of(item_node, exc.loc)
                path = _render((*prefix, *exc.loc))
                problems.append(PolicyProblem(source, index, line, path, exc.message))
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


class _Problem(Exception):
    def __init__(self, loc: tuple[str | int, ...], message: str) -> None:
        self.loc = loc
        self.message = message


def _validate(item: Any) -> GPUPolicy:
    if not isinstance(item, dict):
        raise _Problem((), f"expected a {KIND} mapping, got {type(item).__name__}")
    if item.get("kind") != KIND:
        raise _Problem(("kind",), f"expected kind {KIND!r}, got {item.get('kind')!r}")
    if item.get("apiVersion") != API_VERSION:
        raise _Problem(
            ("apiVersion",), f"expected apiVersion {API_VERSION!r}, got {item.get('apiVersion')!r}"
        )
    try:
        return GPUPolicy.model_validate(item)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise _Problem(tuple(first["loc"]), _message(first)) from None


def _message(error: Any) -> str:
    if error["type"] == "extra_forbidden":
        return "unknown field"
    if error["type"] == "missing":
        return "required field is missing"
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
        line = mark.line + 1 if mark is not None else 0
        reason = getattr(exc, "problem", None) or str(exc)
        problems.append(PolicyProblem(source, index, line, "", f"invalid YAML: {reason}"))
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


def _line_of(node: yaml.Node | None, loc: tuple[str | int, ...]) -> int:
    line = node.start_mark.line + 1 if node is not None else 0
    for key in loc:
        node = _child(node, key)
        if node is None:
            break
        line = node.start_mark.line + 1
    return line


def _render(loc: tuple[str | int, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out
