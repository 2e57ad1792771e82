"""Recording RFC 6902 ops that apply to the object as sent, while keeping a patched copy.

Each op is written against the document as left by the ops before it, which is how the
apiserver applies them; a parent that is missing is added whole, never assumed.
"""

from __future__ import annotations

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
        self._own: set[int] = set()

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
        fresh = clone(value)  # callers may pass shared data (cached policy dumps)
        self.ops.append({"op": op, "path": to_pointer(path), "value": fresh})
        # Copy on write: only the containers on the path are copied, the rest is shared
        # with the original, which is never changed.
        if self._doc is _MISSING:
            self._doc = _shallow(self.original)
            self._own = {id(self._doc)}
        parent = self._doc
        for part in path[:-1]:
            child = parent[part]
            if id(child) not in self._own:
                child = _shallow(child)
                parent[part] = child
                self._own.add(id(child))
            parent = child
        # The op and the document share the value: it is not marked as ours, so a later op
        # that writes inside it copies it first and the op keeps what it said.
        if path[-1] == "-":
            parent.append(fresh)
        else:
            parent[path[-1]] = fresh


def _shallow(value: Any) -> Any:
    return dict(value) if isinstance(value, dict) else list(value)


def clone(value: Any) -> Any:
    """A copy of JSON-shaped data; several times faster than copy.deepcopy on it. Leaves
    (str, numbers, and the dates a YAML loader may produce) are immutable and shared."""
    if isinstance(value, dict):
        return {k: clone(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clone(v) for v in value]
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
