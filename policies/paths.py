"""Field paths: tuples of keys and indexes, rendered only at the edge."""

from __future__ import annotations

import re
from functools import lru_cache

FieldPath = tuple[str | int, ...]

_PLAIN_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@lru_cache(maxsize=8192)
def to_pointer(path: FieldPath) -> str:
    """RFC 6901 JSON pointer; `~` is escaped before `/` (the order matters)."""
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def to_display(path: FieldPath) -> str:
    """`spec.containers[0].resources.limits['nvidia.com/gpu']`, the kubectl-explain style."""
    out: list[str] = []
    for part in path:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _PLAIN_KEY.match(part):
            out.append(("." if out else "") + part)
        else:
            out.append(f"['{part}']")
    return "".join(out)
