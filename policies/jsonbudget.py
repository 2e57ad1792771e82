"""How much work a JSON body may make before a single object is built from it.

orjson turns a body of empty objects (`[{},{},…]`) into ~36 times its size in Python objects,
and any value costs ~50-170 bytes however few bytes it was written in (tests/server/
test_memory.py measures both). A body's byte limit alone therefore does not bound memory: the
count of values does. Counting them exactly means skipping strings, which costs about as much
as parsing; an upper bound (every value but the first follows a `[`, `{`, `,` or `:`) costs a
few `bytes.count` calls in C, 2 ms per MiB. Bodies of ordinary size are not counted at all:
below SMALL_BODY the worst case is a few MiB, less than the count would save.
"""

from __future__ import annotations

import re

SMALL_BODY = 256 * 1024
# A string literal, escapes included, or an unterminated one to the end of the body. It always
# matches from a quote and never backtracks (possessive), so the scan is linear: a pattern
# that demands the closing quote retried from every escaped quote of an unterminated string
# (`"\",\",…`), quadratic in the body (8,000 of them took 10 s).
_STRING = re.compile(rb'"(?:[^"\\]++|\\.)*+(?:"|\\?\Z)', re.DOTALL)
_NOT_STRUCTURE = bytes(range(256)).translate(None, b"[{,:")


def values_at_most(body: bytes) -> int:
    """An upper bound of the JSON values (keys included) in `body`: punctuation inside strings
    counts too, so it may only overstate."""
    return 1 + body.count(b"[") + body.count(b"{") + body.count(b",") + body.count(b":")


def values(body: bytes) -> int:
    """The JSON values (keys included) in `body`, strings skipped: 2-40 ms per MiB, run only
    when the bound says a body may be over its budget."""
    return 1 + len(_STRING.sub(b"", body).translate(None, _NOT_STRUCTURE))


def over_budget(body: bytes, budget: int) -> int | None:
    """How many values `body` holds when that is more than `budget`, else None."""
    if len(body) <= SMALL_BODY or values_at_most(body) <= budget:
        return None
    found = values(body)
    return found if found > budget else None
