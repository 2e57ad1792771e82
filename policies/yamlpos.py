"""The one YAML reader, for every input of every door (manifests, policies, inventories, test
suites): plain dicts and lists plus the line and column of every field. Pure: text in, data
out; reading files is the edges' job.

libyaml (PyYAML's CSafeLoader) composes the node tree in C; we build the objects from the nodes
ourselves, in one pass that also catches what PyYAML lets through but Kubernetes refuses
(duplicate keys) and what would hang or crash a consumer (recursive or exploding aliases).
Positions are looked up in the node tree only when a finding needs one, so a clean file pays
nothing for them. Problems are data (`SyntaxProblem`), never exceptions: any input gives a result.
"""

from __future__ import annotations

import itertools
import operator
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, NamedTuple

import yaml

from policies import jsonbudget
from policies.paths import FieldPath

_Base: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_PROBE = _Base("")


@lru_cache(maxsize=8192)
def _resolve(kind: type, value: str, implicit: tuple[bool, bool]) -> str:
    return str(_Base.resolve(_PROBE, kind, value, implicit))


class _Loader(_Base):  # type: ignore[misc]
    """libyaml composes in C but calls back into Python for every node: to resolve its tag,
    and to descend into and ascend from it for path resolvers. Those callbacks are most of
    the Python time of composing, so they are made as cheap as they can be: manifests repeat
    the same short scalars (keys, kinds, small numbers) endlessly, so the answers are
    remembered; and with no path resolver registered (SafeLoader has none) descending and
    ascending track nothing, so C callables that do nothing stand in for the methods."""

    if not _Base.yaml_path_resolvers:
        descend_resolver = staticmethod(operator.is_)  # (node, index) -> ignored
        ascend_resolver = staticmethod(tuple)  # () -> ignored

    def resolve(self, kind: type, value: Any, implicit: Any) -> Any:
        if kind is _SCALAR_NODE:
            # quoted, or plain with a first character no implicit type starts with
            if not implicit[0] or (value and _BY_START and value[0] not in _IMPLICIT_STARTS):
                return _STR
            if len(value) <= 64:
                return _resolve(kind, value, implicit)
        elif kind is _MAPPING_NODE:
            return _MAP
        elif kind is _SEQUENCE_NODE:
            return _SEQ
        return _Base.resolve(self, kind, value, implicit)


# The first characters of the plain scalars PyYAML may read as something other than a
# string (numbers, booleans, null, timestamps, merge keys...). A resolver under None would
# try every scalar.
_IMPLICIT_STARTS = frozenset(k for k in _Base.yaml_implicit_resolvers if k)
_BY_START = None not in _Base.yaml_implicit_resolvers
_SCALAR_NODE, _SEQUENCE_NODE, _MAPPING_NODE = yaml.ScalarNode, yaml.SequenceNode, yaml.MappingNode

_STR = "tag:yaml.org,2002:str"
_SEQ = "tag:yaml.org,2002:seq"
_INT = "tag:yaml.org,2002:int"
_MAP = "tag:yaml.org,2002:map"
_MERGE = "tag:yaml.org,2002:merge"
# An alias re-uses a node; a consumer walking the built object sees each use. Past this many
# expanded nodes per document the input is an alias bomb, refused like the API server does.
MAX_EXPANDED_NODES = 1_000_000
# Real objects nest a few dozen levels (CRD schemas the most); deeper is refused before Python's
# recursion limit could decide it.
MAX_DEPTH = 200

Position = tuple[int, int]  # 1-based line and column

SYNTAX = "yaml-syntax"
DUPLICATE_KEY = "yaml-duplicate-key"
TAB = "yaml-tab"
ENCODING = "yaml-encoding"
ALIAS = "yaml-alias"
RULE_HELP = {
    SYNTAX: "The file is not valid YAML; Kubernetes tooling cannot read it.",
    DUPLICATE_KEY: "A mapping repeats a key. PyYAML keeps the last value silently, while "
                   "kubectl and the API server refuse the object.",
    TAB: "A tab character is used for indentation; YAML allows only spaces there.",
    ENCODING: "The file is not UTF-8 text.",
    ALIAS: "An alias refers to itself or expands to an enormous document.",
}


class SyntaxProblem(NamedTuple):
    rule: str
    message: str
    line: int
    column: int
    document: int  # 1-based index in the stream, 0 for the file as a whole


@dataclass(slots=True)
class Document:
    """One document of a stream: its data and the node tree its positions come from."""

    index: int  # 1-based within the stream
    data: Any
    _node: yaml.Node | None = field(repr=False)
    # mapping node id -> its keys: looked up once per mapping, so placing every finding of a
    # document costs what the document's size does (lint places one per violation)
    _keys: dict[int, dict[str, tuple[Position, yaml.Node]]] = field(
        default_factory=dict, repr=False, compare=False)
    _line: int = field(default=0, repr=False, compare=False)
    _nodes: Nodes | None = field(default=None, repr=False, compare=False)

    @classmethod
    def read_ahead(cls, index: int, line: int, data: Any, nodes: Nodes) -> Document:
        """A document whose data was built elsewhere (the same text, read by read_ahead()):
        its node tree is composed again from `nodes` the first time a position is asked."""
        return cls(index, data, None, _line=line, _nodes=nodes)

    @property
    def node(self) -> yaml.Node:
        if self._node is None:
            assert self._nodes is not None  # read_ahead() gives every such document its text
            self._node = self._nodes.node(self.index)
        return self._node

    @property
    def line(self) -> int:
        if self._node is None and self._line:
            return self._line
        return int(self.node.start_mark.line) + 1

    def position(self, path: FieldPath, *, value: bool = False) -> Position:
        """Where `path` is written, or its deepest prefix that is: a mapping entry is reported
        at its key, a sequence item at its first character. With `value`, the value itself
        (and, for a missing field, the mapping that lacks it) rather than its key."""
        node = self.node
        where = _mark(node)
        for part in path:
            found = self._child(node, part)
            if found is None:
                break
            where, node = found
        return _mark(node) if value and path else where

    def _child(self, node: yaml.Node, part: str | int) -> tuple[Position, yaml.Node] | None:
        if isinstance(node, yaml.MappingNode):
            keys = self._keys.get(id(node))
            if keys is None:  # the last of a repeated key wins, as in the built dict
                keys = self._keys[id(node)] = {
                    key.value: (_mark(key), value) for key, value in node.value
                    if isinstance(key, yaml.ScalarNode)}
            return keys.get(str(part))
        if isinstance(node, yaml.SequenceNode) and isinstance(part, int) and (
            0 <= part < len(node.value)
        ):
            item = node.value[part]
            return _mark(item), item
        return None

    def positions(self) -> dict[FieldPath, Position]:
        """The whole index, FieldPath -> position (each node once, even when aliased)."""
        index: dict[FieldPath, Position] = {(): _mark(self.node)}
        seen: set[int] = set()
        stack: list[tuple[FieldPath, yaml.Node]] = [((), self.node)]
        while stack:
            path, node = stack.pop()
            if id(node) in seen:
                continue
            seen.add(id(node))
            if isinstance(node, yaml.MappingNode):
                for key, value in node.value:
                    sub = (*path, _key_of(key))
                    index.setdefault(sub, _mark(key))
                    stack.append((sub, value))
            elif isinstance(node, yaml.SequenceNode):
                for i, item in enumerate(node.value):
                    index.setdefault((*path, i), _mark(item))
                    stack.append(((*path, i), item))
        return index

    def objects(self) -> Iterator[tuple[FieldPath, dict[str, Any]]]:
        """The Kubernetes objects in this document with their path in it: `kind: List` (and
        `PodList` …) items come out one by one under ("items", i)."""
        yield from _flatten((), self.data)


class Nodes:
    """The node trees of a stream's documents, read again from its text once one is asked
    for (positions are needed only where there is a finding; most documents have none).
    Read as iter_stream() reads, since building a document rewrites its merge keys' nodes."""

    def __init__(self, data: bytes | str) -> None:
        self._data: bytes | str | None = data
        self._nodes: dict[int, yaml.Node] = {}

    def node(self, index: int) -> yaml.Node:
        if self._data is not None:
            data, self._data = self._data, None
            self._nodes = {d.index: d.node for d in iter_stream(data)
                           if isinstance(d, Document)}
        return self._nodes[index]


AheadItem = tuple[int, int, Any] | SyntaxProblem  # a document's (index, line, data), or a problem


def read_ahead(data: bytes | str) -> list[AheadItem]:
    """What iter_stream() gives for `data`, without the node trees: plain values that can be
    sent to another process (pickled), which rebuilds the documents with documents_of()."""
    return [(item.index, item.line, item.data) if isinstance(item, Document) else item
            for item in iter_stream(data)]


def documents_of(items: list[AheadItem], data: bytes | str
                 ) -> Iterator[Document | SyntaxProblem]:
    """read_ahead()'s items as iter_stream() gave them; `data` is the text they were read
    from, composed again for the positions of those documents that need any."""
    nodes = Nodes(data)
    for item in items:
        if isinstance(item, SyntaxProblem):
            yield item
        else:
            yield Document.read_ahead(*item, nodes)


@dataclass(slots=True)
class Stream:
    """A whole stream read at once: its documents and its problems."""

    documents: list[Document]
    problems: list[SyntaxProblem]
    text: str = ""


def read_stream(data: bytes | str) -> Stream:
    """Every document of a YAML/JSON stream and every problem found; never raises."""
    text = _text(data)
    stream = Stream([], [], text if isinstance(text, str) else "")
    for item in iter_stream(data):
        if isinstance(item, Document):
            stream.documents.append(item)
        else:
            stream.problems.append(item)
    return stream


def iter_stream(data: bytes | str) -> Iterator[Document | SyntaxProblem]:
    """The documents and problems of a stream one at a time, in order, so a large stream is
    read in constant memory (a consumer drops each document when done with it)."""
    text = _text(data)
    if isinstance(text, SyntaxProblem):
        yield text
        return
    # JSON's values are counted exactly and cheaply; other YAML only when it could be over
    too_many = (_json_over_budget(data, text) if _JSON_START.match(text)
                else _yaml_over_budget(text))
    if too_many is not None:
        yield too_many
        return
    loader = _Loader(text)
    index = 0
    # A merge (`<<: *a`) copies the merged pairs into the mapping as it is built, so a chain
    # of merges must be sized before it is built; other aliases only share what is built
    # once, and are sized after, when one was used.
    anchors = "&" in text
    merges = anchors and "<<" in text
    problems: list[SyntaxProblem] = []
    try:
        while loader.check_node():
            index += 1
            node = loader.get_node()
            if node is None:
                continue
            builder = _Builder(loader, index, problems, anchors)
            try:
                if merges:
                    builder.check_size(node)
                value = builder.root(node)
                if builder.shared and not merges:
                    builder.check_size(node)
            except _Refused:
                continue
            except RecursionError:
                where = _mark(node)
                problems.append(SyntaxProblem(
                    SYNTAX, "nesting too deep", where[0], where[1], index))
                continue
            finally:
                yield from problems
                problems.clear()
            yield Document(index, value, node)
    except yaml.YAMLError as exc:
        yield _problem_of(exc, text, max(index, 1))
    except RecursionError:  # a pathological stream; libyaml itself limits flow nesting
        yield SyntaxProblem(SYNTAX, "nesting too deep", 1, 1, max(index, 1))
    finally:
        loader.dispose()


_JSON_START = re.compile(r"\s*[\[{]")


def _json_over_budget(data: bytes | str, text: str) -> SyntaxProblem | None:
    """A JSON text (one document) of more values than a document may expand to, refused
    before libyaml composes a node for each: composing them costs ~150 bytes a value, so a
    6 MiB file of `[{},{},…]` took 920 MiB and 24 s. The count is the webhook's
    (policies/jsonbudget.py); YAML's block style has no such cheap bound and is counted as
    it is built."""
    if _JSON_START.match(text) is None:
        return None
    raw = data if isinstance(data, bytes) else data.encode("utf-8", "replace")
    found = jsonbudget.over_budget(raw, MAX_EXPANDED_NODES)
    if found is None:
        return None
    return SyntaxProblem(SYNTAX, f"the document holds {found} JSON values, more than the "
                         f"{MAX_EXPANDED_NODES} one document may", 1, 1, 1)


# What a YAML value needs at least one of (a line, a separator, an opening bracket, an entry
# indicator; a mapping entry makes two values): a text with fewer of them than the budget
# cannot hold a document over it, and is not counted value by value.
_VALUE_MARKS = ("\n", ",", "[", "{", "-", "?")
_DOCUMENT_MARKER = re.compile(r"^(?:---|\.\.\.)(?=[ \t\r\n]|$)", re.MULTILINE)
_NODE_EVENTS = (yaml.ScalarEvent, yaml.MappingStartEvent, yaml.SequenceStartEvent,
                yaml.AliasEvent)


def _most_values(text: str) -> int:
    """At least as many as the values of the text's largest document (a cheap bound)."""
    if 2 * len(text) < MAX_EXPANDED_NODES:  # a value takes a character, or an entry's two
        return 2 * len(text)

    def bound(part: str) -> int:
        return 1 + 2 * part.count(":") + sum(part.count(m) for m in _VALUE_MARKS)
    if bound(text) <= MAX_EXPANDED_NODES:
        return bound(text)
    starts = [0, *(m.start() for m in _DOCUMENT_MARKER.finditer(text)), len(text)]
    return max(bound(text[a:b]) for a, b in itertools.pairwise(starts))


def _yaml_over_budget(text: str) -> SyntaxProblem | None:
    """A document of more values than any may hold (MAX_EXPANDED_NODES), refused before
    libyaml composes it: it builds a document's whole node tree first, some 450 bytes a
    value (a 5 MB file of `- {}` lines took 475 MB), and no Kubernetes object comes near
    that many (etcd keeps at most 1.5 MiB). Counted event by event, in constant memory,
    only when the text could hold such a document."""
    if _most_values(text) <= MAX_EXPANDED_NODES:
        return None
    loader = _Base(text)
    index = values = 0
    start: Position = (1, 1)
    try:
        while loader.check_event():
            event = loader.get_event()
            if isinstance(event, yaml.DocumentStartEvent):
                index, values = index + 1, 0
                mark = event.start_mark
                start = (int(mark.line) + 1, int(mark.column) + 1) if mark else (1, 1)
            elif isinstance(event, _NODE_EVENTS):
                values += 1
                if values > MAX_EXPANDED_NODES:
                    return SyntaxProblem(
                        SYNTAX, f"the document holds more than {MAX_EXPANDED_NODES} values; "
                        "no Kubernetes object is that large", *start, index)
    except yaml.YAMLError:
        return None  # said where it is when the text is read
    finally:
        loader.dispose()
    return None


def _text(data: bytes | str) -> str | SyntaxProblem:
    if isinstance(data, str):
        return data.removeprefix("\ufeff")
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line, column = _line_col(data[: exc.start].decode("utf-8", "replace"), None)
        byte = data[exc.start : exc.start + 1].hex()
        return SyntaxProblem(ENCODING, f"not UTF-8: byte 0x{byte} cannot be decoded",
                             line, column, 0)


_BUILDING = object()  # a container whose children are being built: met again, a cycle


class _Refused(Exception):
    """The document cannot be used; its problem is already recorded."""


class _Remember(Exception):
    """A merge key in a text without anchors: the document is built remembering its nodes."""


class _Builder:
    """Nodes -> plain Python values, as yaml.safe_load would make them, plus checks.

    With `anchors` False (the text holds no `&`, so no alias can refer to anything) every
    node is met once: the tree is built without remembering what was built, and plain
    string scalars, most of any manifest, are taken where they are met. A merge key, which
    builds values twice, sends the document back to the remembering way (as with anchors)."""

    def __init__(self, loader: Any, document: int, problems: list[SyntaxProblem],
                 anchors: bool = True) -> None:
        self.loader = loader
        self.document = document
        self.problems = problems
        self.anchors = anchors
        self.start = len(problems)
        self.done: dict[int, Any] = {}
        self.shared = False  # a node was used twice: an alias

    def refuse(self, rule: str, message: str, node: yaml.Node) -> _Refused:
        line, column = _mark(node)
        self.problems.append(SyntaxProblem(rule, message, line, column, self.document))
        return _Refused()

    def check_size(self, root: yaml.Node) -> None:
        """Count the nodes a consumer would walk; refuse cycles and alias bombs first."""
        sizes: dict[int, int] = {}
        state: dict[int, int] = {}  # 1 = on the stack, 2 = done
        stack: list[tuple[yaml.Node, bool]] = [(root, False)]
        while stack:
            node, leaving = stack.pop()
            key = id(node)
            children = _children(node)
            if leaving:
                sizes[key] = 1 + sum(sizes[id(c)] for c in children)
                state[key] = 2
                if sizes[key] > MAX_EXPANDED_NODES:
                    raise self.refuse(ALIAS, "aliases expand this document to more than "
                                      f"{MAX_EXPANDED_NODES} values", root)
                continue
            if state.get(key) == 2:
                continue
            if state.get(key) == 1:
                raise self.refuse(ALIAS, "an alias refers to a node that contains it", node)
            state[key] = 1
            stack.append((node, True))
            stack.extend((c, False) for c in children if state.get(id(c)) != 2)

    def root(self, root: yaml.Node) -> Any:
        if not self.anchors:
            try:
                return self._build(root, 0)
            except _Remember:  # built again from the start, its problems said once
                del self.problems[self.start:]
                self.anchors = True
        return self.build(root)

    def build(self, node: yaml.Node, depth: int = 0) -> Any:
        key = id(node)
        if key in self.done:
            value = self.done[key]
            if value is _BUILDING:
                raise self.refuse(ALIAS, "an alias refers to a node that contains it", node)
            self.shared = True
            return value
        if type(node) is not _SCALAR_NODE:
            self.done[key] = _BUILDING
        value = self.done[key] = self._build(node, depth)
        return value

    def _build(self, node: yaml.Node, depth: int) -> Any:
        if depth > MAX_DEPTH:  # decided here, not by whatever recursion limit is in force
            raise self.refuse(SYNTAX, f"nesting too deep (more than {MAX_DEPTH} levels)", node)
        kind = type(node)
        if kind is _SCALAR_NODE:
            return node.value if node.tag == _STR else self.scalar(node)
        if kind is _SEQUENCE_NODE:
            depth += 1
            if not self.anchors and depth <= MAX_DEPTH:  # plain strings taken as they are
                return [item.value if type(item) is _SCALAR_NODE and item.tag == _STR
                        else self._build(item, depth) for item in node.value]
            build = self.build if self.anchors else self._build
            return [build(item, depth) for item in node.value]
        return self.mapping(node, depth)

    def scalar(self, node: yaml.Node) -> Any:
        tag, value = node.tag, node.value
        if tag == _STR:
            return value
        construct = self.loader.yaml_constructors.get(tag)
        if construct is None:
            raise self.refuse(SYNTAX, f"unknown tag {tag!r}", node)
        try:
            if tag == _INT and value.isdigit() and value.isascii() and value[0] != "0":
                return int(value)  # a plain decimal (ports, replicas): as PyYAML reads it
            return construct(self.loader, node)
        except (yaml.YAMLError, ValueError, OverflowError) as exc:
            raise self.refuse(SYNTAX, f"bad {node.tag.rsplit(':', 1)[-1]} value: {exc}",
                              node) from None

    def mapping(self, node: yaml.Node, depth: int) -> dict[Any, Any]:
        if not isinstance(node, yaml.MappingNode):
            raise self.refuse(SYNTAX, f"unexpected node {type(node).__name__}", node)
        out: dict[Any, Any] = {}
        merge = False
        depth += 1
        build = self.build if self.anchors else self._build
        inline = not self.anchors and depth <= MAX_DEPTH  # plain strings taken as they are
        for key_node, value_node in node.value:
            if type(key_node) is _SCALAR_NODE and key_node.tag == _STR:
                key = key_node.value
            elif key_node.tag == _MERGE:
                if not self.anchors:  # merging builds values twice: remember them after all
                    raise _Remember
                merge = True
                continue
            else:
                key = self.key(key_node)
            if key in out:
                first = next(k for k, _ in node.value if k.tag != _MERGE and self.key(k) == key)
                line, column = _mark(key_node)
                self.problems.append(SyntaxProblem(
                    DUPLICATE_KEY, f"duplicate key {key!r} (first on line {_mark(first)[0]}); "
                    "Kubernetes refuses the object", line, column, self.document))
            if inline and type(value_node) is _SCALAR_NODE and value_node.tag == _STR:
                out[key] = value_node.value
            else:
                out[key] = build(value_node, depth)
        if not merge:
            return out
        try:  # `<<: *defaults` as yaml.safe_load does it (the node is rewritten in place)
            self.loader.flatten_mapping(node)
        except yaml.YAMLError as exc:
            raise self.refuse(SYNTAX, str(getattr(exc, "problem", exc)), node) from None
        # the merged pairs first, the mapping's own after them: its own keys win
        return {self.key(k): build(v, depth) for k, v in node.value}

    def key(self, node: yaml.Node) -> Any:
        """A mapping key: a scalar (built each time it is met, so a key is never taken
        for an alias)."""
        if isinstance(node, yaml.ScalarNode):
            return self.scalar(node)
        raise self.refuse(SYNTAX, "a mapping key must be a scalar", node)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    return []


def _mark(node: yaml.Node) -> Position:
    return int(node.start_mark.line) + 1, int(node.start_mark.column) + 1


def _key_of(node: yaml.Node) -> str | int:
    return node.value if isinstance(node.value, str) else str(node.value)


def _flatten(prefix: FieldPath, data: Any) -> Iterator[tuple[FieldPath, dict[str, Any]]]:
    if not isinstance(data, dict):
        return
    kind = data.get("kind")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(data.get("items"), list):
        for i, item in enumerate(data["items"]):
            yield from _flatten((*prefix, "items", i), item)
    else:
        yield prefix, data


def _line_col(text: str, offset: int | None) -> Position:
    before = text if offset is None else text[:offset]
    line = before.count("\n") + 1
    return line, len(before) - (before.rfind("\n") + 1) + 1


def _problem_of(exc: yaml.YAMLError, text: str, document: int) -> SyntaxProblem:
    if isinstance(exc, yaml.reader.ReaderError):
        line, column = _line_col(text, exc.position)
        char = exc.character
        shown = f"{char:#x}" if isinstance(char, int) else repr(char)
        return SyntaxProblem(SYNTAX, f"{exc.reason} (character {shown})", line, column, document)
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    line, column = (int(mark.line) + 1, int(mark.column) + 1) if mark is not None else (1, 1)
    problem = getattr(exc, "problem", None) or str(exc)
    context = getattr(exc, "context", None)
    message = f"{problem} ({context})" if context else str(problem)
    lines = text.split("\n")
    source_line = lines[line - 1] if 0 < line <= len(lines) else ""
    indent = source_line[: len(source_line) - len(source_line.lstrip(" \t"))]
    if "\t" in indent or "tab" in str(problem):
        return SyntaxProblem(TAB, "tab character in indentation; YAML indents with spaces only",
                             line, column, document)
    return SyntaxProblem(SYNTAX, message, line, column, document)
