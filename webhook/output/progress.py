"""A one-line progress bar on a terminal (stderr), redrawn at most ten times a second."""

from __future__ import annotations

import time
from typing import TextIO

WIDTH = 24


class Progress:
    def __init__(self, stream: TextIO, *, enabled: bool) -> None:
        self.stream = stream
        self.enabled = enabled
        self.kind = ""
        self.total: int | None = None
        self.count = 0
        self.all = 0
        self.started = time.monotonic()
        self._drawn = float("-inf")

    def expect(self, kind: str, total: int | None) -> None:
        """A new kind begins; `total` is the server's estimate (None when unknown)."""
        self.kind, self.total, self.count = kind, total, 0

    def advance(self, kind: str, n: int) -> None:
        fresh = kind != self.kind or not self.count
        if kind != self.kind:
            self.expect(kind, None)
        self.count += n
        self.all += n
        now = time.monotonic()
        if self.enabled and (fresh or now - self._drawn >= 0.1):
            self._drawn = now
            self._draw(now)

    def _draw(self, now: float) -> None:
        rate = self.all / max(now - self.started, 1e-6)
        if self.total:
            done = min(self.count / self.total, 1.0)
            bar = "#" * int(done * WIDTH)
            where = f"[{bar:<{WIDTH}}] {self.count:,}/{self.total:,}"
        else:
            where = f"{self.count:,}"
        self.stream.write(f"\r\033[Kaudit: {self.kind} {where}  ({self.all:,} objects, "
                          f"{rate:,.0f}/s)")
        self.stream.flush()

    def done(self) -> None:
        if self.enabled:
            self.stream.write("\r\033[K")
            self.stream.flush()
