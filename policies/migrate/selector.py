"""kubectl's label selector strings (`-l`) as a LabelSelector: `a=b`, `a==b`, `a!=b`,
`a in (x,y)`, `a notin (x,y)`, `a`, `!a`, joined by commas."""

from __future__ import annotations

import re
from typing import Any

_SET = re.compile(r"^\s*([^\s!=(),]+)\s+(in|notin)\s+\(([^()]*)\)\s*$")
_EQ = re.compile(r"^\s*([^\s!=(),]+)\s*(==|=|!=)\s*([^\s!=(),]*)\s*$")
_KEY = re.compile(r"^\s*(!?)\s*([^\s!=(),]+)\s*$")


class SelectorError(ValueError):
    """A selector string kubectl would refuse; the message quotes the part at fault."""


def parse_label_selector(text: str) -> dict[str, Any]:
    """The LabelSelector (`matchExpressions` only) that `text` means; "" selects everything."""
    expressions: list[dict[str, Any]] = []
    for part in _split(text):
        if m := _SET.match(part):
            values = [v.strip() for v in m[3].split(",") if v.strip()]
            op = "In" if m[2] == "in" else "NotIn"
            expressions.append({"key": m[1], "operator": op, "values": values})
        elif m := _EQ.match(part):
            op = "NotIn" if m[2] == "!=" else "In"
            expressions.append({"key": m[1], "operator": op, "values": [m[3]]})
        elif m := _KEY.match(part):
            expressions.append({"key": m[2], "operator": "DoesNotExist" if m[1] else "Exists"})
        else:
            raise SelectorError(f"cannot read label selector part {part.strip()!r}")
    return {"matchExpressions": expressions}


def _split(text: str) -> list[str]:
    parts: list[str] = []
    current: list[str] = []
    depth = 0
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(ch)
    parts.append("".join(current))
    if depth != 0:
        raise SelectorError(f"unbalanced parentheses in label selector {text!r}")
    return [p for p in parts if p.strip()]
