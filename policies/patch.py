"""Recording RFC 6902 ops that apply to the object as sent, while keeping a patched copy.

Each op is written against the document as left by the ops before it, which is how the
apiserver applies them; a parent that is missing is added whole, never assumed. Every op
names the policy it is written for (`by`), so the decision can say who changed what.
"""

from __future__ import annotations

from typing import Any

from policies.decision import PatchOp
from policies.paths import FieldPath, to_pointer

_MISSING = object()


class PatchConflict(ValueError):
    """The object has a value of the wrong type where a change must go."""


class Patch:
    def __init__(self, original: Any) -> None:
        self.original = original
        self.ops: list[PatchOp] = []
        self.json_patch: list[dict[str, Any]] = []  # the same ops as the apiserver reads them
        self._doc: Any = _MISSING
        # Containers of the patched copy that are ours to change; everything else is shared
        # with the original, which is never changed (copy on write).
        self._own: set[int] = set()

    @property
    def doc(self) -> Any:
        """The object with every op applied (the original itself while there are none)."""
        return self.original if self._doc is _MISSING else self._doc

    def get(self, path: FieldPath) -> Any:
        node = self.doc
        for part in path:
            # maps first, without a call: almost every step of a pod spec path is one
            node = node.get(part) if node.__class__ is dict else _child(node, part)
            if node is None:
                return None
        return node

    def set(self, path: FieldPath, value: Any, *, by: str) -> None:
        """Set a map member, adding the missing maps above it as one nested value."""
        parent = self._root()
        for depth in range(len(path) - 1):
            part = path[depth]
            child = parent.get(part) if parent.__class__ is dict else _child(parent, part)
            if child is None and isinstance(parent, dict):
                # Absent or null: add it, with everything below it, in one op.
                self._emit(path[: depth + 1], _nest(path[depth + 1 :], value), parent, part, by)
                return
            if not isinstance(child, (dict, list)):
                raise PatchConflict(
                    f"cannot set {to_pointer(path)}: {to_pointer(path[: depth + 1])} is "
                    "not an object")
            parent = self._owned(parent, part, child)
        if not isinstance(parent, dict):
            raise PatchConflict(f"cannot set {to_pointer(path)}: its parent is not an object")
        self._emit(path, value, parent, path[-1], by)

    def append(self, path: FieldPath, item: Any, *, by: str) -> None:
        """Append to a list, adding the list (and missing maps above it) when absent."""
        if not isinstance(self.get(path), list):
            self.set(path, [item], by=by)
            return
        node = self._root()
        for part in path:
            node = self._owned(node, part, node[part])
        self._emit((*path, "-"), item, node, "-", by)


    def _root(self) -> Any:
        if self._doc is _MISSING:
            self._doc = _shallow(self.original)
            self._own.add(id(self._doc))
        return self._doc

    def _owned(self, parent: Any, part: str | int, child: Any) -> Any:
        if id(child) in self._own:
            return child
        child = _shallow(child)
        parent[part] = child
        self._own.add(id(child))
        return child

    def _emit(self, path: FieldPath, value: Any, parent: Any, key: str | int, by: str) -> None:
        # One copy, shared by the op and the document: callers may pass shared data (cached
        # policy dumps), and since it is not marked as ours, a later op that writes inside it
        # copies it first, so the op keeps what it said.
        fresh = value if value.__class__ is str else clone(value)  # a str: nothing to copy
        self.ops.append(PatchOp("add", path, fresh, by))
        self.json_patch.append({"op": "add", "path": to_pointer(path), "value": fresh})
        if key == "-":
            parent.append(fresh)
        else:
            parent[key] = fresh


def _shallow(value: Any) -> Any:
    return dict(value) if isinstance(value, dict) else list(value)


def clone(value: Any) -> Any:
    """A copy of JSON-shaped data; several times faster than copy.deepcopy on it. Leaves
    (str, numbers, and the dates a YAML loader may produce) are immutable and shared."""
    # (isinstance with a tuple: a `dict | list` union is checked slower, and this is per value)
    if isinstance(value, dict):
        return {k: clone(v) if isinstance(v, (dict, list)) else v for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) if isinstance(v, (dict, list)) else v for v in value]
    return value


def _child(node: Any, part: str | int) -> Any:
    if isinstance(node, dict):
        return node.get(part)
    if isinstance(node, list) and isinstance(part, int) and 0 <= part < len(node):
        return node[part]
    return None


def _nest(path: FieldPath, value: Any) -> Any:
    for part in reversed(path):
        value = {part: value}
    return value
