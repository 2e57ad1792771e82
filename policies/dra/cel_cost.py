"""The worst-case cost of a DRA selector, estimated as the apiserver does before it stores one:
over CEL_SELECTOR_MAX_COST the claim or class is refused ("too complex, exceeds cost limit"),
and the scheduler would stop the evaluation at the same limit. We refuse it before evaluating,
so a hostile selector (nested loops over literal lists) costs its size, not its loops.

The model follows cel-go's estimator in its large terms: one unit per identifier, field,
index and call; a conditional costs its test and the dearer of its branches; 10 per list
literal and 30 per map literal; a comprehension costs its range, its init, its result and,
per element, its condition and step. Element counts: a literal's length; a device's
attribute or capacity maps the apiserver's limits (objects.py); anything else
`UNKNOWN_SIZE` (or the caller's bound: policies/native holds admission policies to one).
Exact cost units are not claimed, only which side of the limit an expression falls
(tests/dra/upstream/cel.yaml holds the apiserver's own figures).

The checked AST comes from cel-cpp's serialized CheckedExpr (protobuf wire format, read
here field by field: the proto classes are not shipped with cel-expr-python).
"""

from __future__ import annotations

from dataclasses import dataclass, field

CEL_SELECTOR_MAX_COST = 1_000_000
MAX_DOMAINS = 32  # attribute/capacity entries per device bound the maps' sizes
UNKNOWN_SIZE = 64
STRING_SIZE = 64  # the estimator's assumption for strings it cannot see


@dataclass
class Node:
    """The parts of cel.expr.Expr the estimate reads."""

    kind: str = ""  # const, ident, select, call, list, struct, comprehension
    name: str = ""  # identifier, field or function name
    text: str | None = None  # string constant
    children: list[Node] = field(default_factory=list)  # call: target first; select: operand
    # comprehension: range, init, condition, step, result
    loop: dict[str, Node] = field(default_factory=dict)
    test_only: bool = False


def _varint(data: bytes, i: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, i
        shift += 7


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    out: list[tuple[int, int | bytes]] = []
    i = 0
    while i < len(data):
        key, i = _varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = _varint(data, i)
            out.append((number, value))
        elif wire == 2:
            size, i = _varint(data, i)
            out.append((number, data[i:i + size]))
            i += size
        elif wire == 1:
            i += 8
        elif wire == 5:
            i += 4
        else:
            raise ValueError("unexpected wire type")
    return out


def _bytes(fields: list[tuple[int, int | bytes]], number: int) -> list[bytes]:
    return [v for n, v in fields if n == number and isinstance(v, bytes)]


def _text(fields: list[tuple[int, int | bytes]], number: int) -> str:
    found = _bytes(fields, number)
    return found[0].decode("utf-8", "replace") if found else ""


_LOOP = {2: "range", 4: "init", 5: "condition", 6: "step", 7: "result"}


def _expr(data: bytes, depth: int = 0) -> Node:
    if depth > 200:
        raise ValueError("expression nested too deep")
    fields = _fields(data)
    for number, value in fields:
        if not isinstance(value, bytes):
            continue
        inner = _fields(value)
        if number == 3:
            node = Node("const")
            strings = _bytes(inner, 6)
            node.text = strings[0].decode("utf-8", "replace") if strings else None
            return node
        if number == 4:
            return Node("ident", _text(inner, 1))
        if number == 5:
            node = Node("select", _text(inner, 2),
                        children=[_expr(b, depth + 1) for b in _bytes(inner, 1)])
            node.test_only = any(n == 3 and v == 1 for n, v in inner)
            return node
        if number == 6:
            return Node("call", _text(inner, 2), children=[
                *(_expr(b, depth + 1) for b in _bytes(inner, 1)),
                *(_expr(b, depth + 1) for b in _bytes(inner, 3))])
        if number == 7:
            return Node("list", children=[_expr(b, depth + 1) for b in _bytes(inner, 1)])
        if number == 8:
            entries = [Node("entry", children=[_expr(b, depth + 1) for n in (3, 4)
                                               for b in _bytes(_fields(e), n)])
                       for e in _bytes(inner, 2)]
            return Node("struct", children=entries)
        if number == 9:
            return Node("comprehension", loop={
                name: _expr(b, depth + 1) for n, name in _LOOP.items()
                for b in _bytes(inner, n)})
    return Node("const")


def checked_ast(serialized: bytes) -> Node:
    """The expression of a cel-cpp serialized CheckedExpr (wrapped in a protobuf Any)."""
    payload = _bytes(_fields(serialized), 2)
    checked = _fields(payload[0]) if payload else _fields(serialized)
    exprs = _bytes(checked, 4)
    return _expr(exprs[0]) if exprs else Node("const")


# Calls whose work grows with a string's length (cel-go charges ~0.1 per character).
_STRING_CALLS = frozenset({"contains", "startsWith", "endsWith", "lowerAscii", "upperAscii",
                           "split", "replace", "trim", "substring", "find", "findAll",
                           "join", "format", "charAt", "indexOf", "lastIndexOf", "reverse"})
_FREE = frozenset({"_&&_", "_||_", "_?_:_"})


def _size(node: Node, unknown: int = UNKNOWN_SIZE) -> int:
    """How many elements a comprehension over `node` may see (`unknown`: a list or map whose
    size nothing here bounds)."""
    if node.kind == "list":
        return len(node.children)
    if node.kind == "struct":
        return len(node.children)
    if node.kind == "ident" and node.name == "device":
        return 4
    if node.kind == "select" and node.name in ("attributes", "capacity"):
        return MAX_DOMAINS
    if node.kind == "call" and node.name == "_[_]":
        return MAX_DOMAINS
    if node.kind == "select" and node.children and node.children[0].kind == "call" \
            and node.children[0].name == "_[_]":
        return unknown  # a list-typed attribute
    return unknown


def _is_map(node: Node) -> bool:
    """device.attributes, device.capacity, one domain of them, or a map literal."""
    if node.kind == "struct":
        return True
    if node.kind == "select" and node.name in ("attributes", "capacity"):
        return True
    return node.kind == "call" and node.name == "_[_]" and bool(node.children) \
        and node.children[0].kind == "select" and node.children[0].name in (
            "attributes", "capacity")


def _string_size(node: Node) -> int:
    if node.kind == "const" and node.text is not None:
        return len(node.text)
    return STRING_SIZE


def estimate(node: Node, unknown: int = UNKNOWN_SIZE) -> int:
    """The worst-case cost of `node`, in cel-go's units (see the module docstring); a list or
    map nothing bounds is taken to hold `unknown` elements."""
    if node.kind == "const":
        return 0
    if node.kind == "ident":
        return 1
    if node.kind == "select":
        below = sum(estimate(c, unknown) for c in node.children)
        return below if node.test_only else below + 1
    if node.kind == "list":
        return 10 + sum(estimate(c, unknown) for c in node.children)
    if node.kind == "struct":
        return 30 + sum(estimate(c, unknown) for e in node.children for c in e.children)
    if node.kind == "comprehension":
        loop = node.loop
        per = sum(estimate(loop[k], unknown) for k in ("condition", "step") if k in loop)
        fixed = sum(estimate(loop[k], unknown) for k in ("range", "init", "result") if k in loop)
        return fixed + _size(loop["range"], unknown) * per if "range" in loop else fixed
    if node.kind == "call":
        if node.name == "_?_:_" and len(node.children) == 3:
            # one branch runs: the worst of the two (cel-go's conditional estimate)
            test, *branches = (estimate(c, unknown) for c in node.children)
            return test + max(branches)
        below = sum(estimate(c, unknown) for c in node.children)
        if node.name in _FREE:
            return below
        if node.name == "matches" and len(node.children) == 2:
            # linear in the text (RE2), scaled by the pattern's length
            text, pattern = _string_size(node.children[0]), _string_size(node.children[1])
            return below + 1 + -(-text // 10) * max(1, -(-pattern // 8))
        if node.name in _STRING_CALLS and node.children:
            return below + 1 + _string_size(node.children[0]) // 10
        if node.name == "@in" and len(node.children) == 2 and _is_map(node.children[1]):
            return below + 1  # a map lookup
        if node.name in ("@in", "includes", "sort", "distinct", "flatten", "isSorted", "sum",
                         "min", "max", "sets.contains", "sets.intersects", "sets.equivalent"):
            return below + 1 + max((_size(c, unknown) for c in node.children), default=0)
        return below + 1
    return 0


def cost(serialized: bytes, unknown: int = UNKNOWN_SIZE) -> int:
    return estimate(checked_ast(serialized), unknown)


def _attribute_value(node: Node) -> bool:
    """`device.attributes["domain"].name` or `device.attributes["domain"]["name"]`: one
    attribute's value (not a domain's map, which is iterable)."""
    if not node.children or not (node.kind == "select" or (node.kind == "call"
                                                            and node.name == "_[_]")):
        return False
    inner = node.children[0]
    return inner.kind == "call" and inner.name == "_[_]" and bool(inner.children) \
        and inner.children[0].kind == "select" and inner.children[0].name == "attributes"


def list_typed_use(node: Node) -> str:
    """Where a selector uses an attribute's value as a list: what the apiserver's compiler
    refuses in a new claim or class at 1.37's default gates (its NewExpressions environment).
    There an attribute's value is declared `any` (a scalar of four kinds); only with the
    alpha DRAListTypeAttributes gate is it `dyn`, which can be a list (and `includes()` is
    declared). "" when there is none."""
    stack = [node]
    while stack:
        current = stack.pop()
        if current.kind == "comprehension":
            over = current.loop.get("range")
            if over is not None and _attribute_value(over):
                return ("compilation failed: ERROR: expression of type 'any' cannot be the "
                        "range of a comprehension (must be list, map, or dynamic): list-typed "
                        "attributes need the alpha DRAListTypeAttributes feature gate")
            stack += current.loop.values()
            continue
        if current.kind == "call" and (
                (current.name == "size" and any(map(_attribute_value, current.children)))
                or (current.name == "@in" and len(current.children) == 2
                    and _attribute_value(current.children[1]))
                or (current.name == "_[_]" and current.children
                    and _attribute_value(current.children[0]))):
            return (f"compilation failed: ERROR: found no matching overload for "
                    f"'{current.name.lstrip('@')}' applied to an attribute of type 'any': "
                    "list-typed attributes need the alpha DRAListTypeAttributes feature gate")
        stack += current.children
    return ""
