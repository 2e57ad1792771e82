"""`audit --shard I/N`: which shard owns a namespace. Apart from the report writer, since an
offline audit shards too and must not load the `kubernetes` package."""

from __future__ import annotations

import hashlib


def shard_of(namespace: str, shards: int) -> int:
    """The shard (0..shards-1) owning a namespace: sha256 of its name, the same in every pod
    and every run (Python's hash() is salted per process). Cluster-scoped (""): shard 0."""
    if not namespace or shards <= 1:
        return 0
    return int.from_bytes(hashlib.sha256(namespace.encode()).digest()[:8], "big") % shards


def parse_shard(text: str) -> tuple[int, int]:
    """`I/N` with 0 <= I < N."""
    index, slash, count = text.partition("/")
    if not slash or not index.isdigit() or not count.isdigit() or not \
            0 <= int(index) < int(count):
        raise ValueError(f"--shard {text!r}: expected I/N with 0 <= I < N, e.g. 0/4")
    return int(index), int(count)
