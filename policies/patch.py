"""Recording RFC 6902 ops that apply to the object as sent, while keeping a patched copy.

Each op is written against the document as left by the ops before it, which is how the
apiserver applies them; a parent that is missing is added whole, never assumed.
"""

from __future__ import annotations

import copy
from typing import Any

from policies.paths import FieldPath, to_pointer

_MISSING = object()


class PatchConflict(ValueError):
    """The object has a value of the wrong type where a change must go."""


class Patch:
    def __init__(self, original: Any) -> None:
        self.original = original
        self.ops: list[dict[str, Any]] = []
        self._doc: Any = _MISSING

    @property
    def doc(self) -> Any:
        """The object with every op applied (the original itself while there are none)."""
        return self.original if self._doc is _MISSING else self._doc

    def get(self, path: FieldPath) -> Any:
        node = self.doc
        for part in path:
            node = _child(node, part)
            if node is None:
                return None
        return node

    def set(self, path: FieldPath, value: Any) -> None:
        """Set a map member, adding the missing maps above it as one nested value."""
        node = self.doc
        for depth, part in enumerate(path[:-1]):
            child = _child(node, part)
            if child is None:  # absent or null: add it, with everything below, in one op
                if not isinstance(node, dict):
                    break
                self._add(path[: depth + 1], _nest(path[depth + 1 :], value))
                return
            node = child
        if not isinstance(node, dict):
            raise PatchConflict(f"cannot set {to_pointer(path)}: its parent is not an object")
        self._add(path, value)

    def append(self, path: FieldPath, item: Any) -> None:
        """Append to a list, adding the list (and missing maps above it) when absent."""
        current = self.get(path)
        if isinstance(current, list):
            self._write("add", (*path, "-"), item)
        else:
            self.set(path, [item])

    def _add(self, path: FieldPath, value: Any) -> None:
        self._write("add", path, value)

    def _write(self, op: str, path: FieldPath, value: Any) -> None:
        self.ops.append({"op": op, "path": to_pointer(path), "value": copy.deepcopy(value)})
        if self._doc is _MISSING:
            self._doc = copy.deepcopy(self.original)
        parent = self._doc
        for part in path[:-1]:
            parent = parent[part]
        last = path[-1]
        if last == "-":
            parent.append(copy.deepcopy(value))
        else:
            parent[last] = copy.deepcopy(value)


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
