"""review(obj, context) -> Decision: the one function that decides. (stub: being written)"""

from __future__ import annotations

from typing import Any

from policies.context import Context
from policies.decision import Decision


def review(
    obj: Any,
    context: Context,
    *,
    namespace: str | None = None,
    operation: str = "CREATE",
    subresource: str = "",
) -> Decision:
    return Decision(allowed=True, mutated=obj)
