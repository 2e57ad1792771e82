"""The request parser's socket stand-in (webhook/http/worker.py, _DeadlineReader): every read
bounded by the request's deadline and by the timeout the parser set, without setting the
socket's timeout when no read comes."""

from __future__ import annotations

import time
from typing import Any

from webhook.http.worker import _DeadlineReader


class _Socket:
    def __init__(self) -> None:
        self.timeout: float | None = None
        self.set: list[float | None] = []
        self.read_with: list[float | None] = []

    def gettimeout(self) -> float | None:
        return self.timeout

    def settimeout(self, value: float | None) -> None:
        self.set.append(value)
        self.timeout = value

    def recv(self, size: int) -> Any:
        self.read_with.append(self.timeout)
        return b"x"


def test_a_drain_with_nothing_to_read_sets_no_timeout() -> None:
    sock = _Socket()
    reader = _DeadlineReader(sock)
    prior = reader.gettimeout()  # what gunicorn's finish_body does around its reads
    reader.settimeout(3.0)
    reader.settimeout(prior)
    assert sock.set == []


def test_reads_are_bounded_by_the_parser_timeout_and_the_deadline() -> None:
    sock = _Socket()
    reader = _DeadlineReader(sock)
    reader.deadline = time.monotonic() + 100
    reader.settimeout(3.0)
    assert reader.gettimeout() == 3.0
    reader.recv(10)
    assert sock.read_with == [3.0] and sock.timeout is None  # applied, then put back
    reader.settimeout(None)  # the socket's own again
    reader.recv(10)
    assert 99 < sock.read_with[-1] <= 100  # the deadline bounds a blocking socket
    reader.deadline = time.monotonic() + 1
    reader.settimeout(3.0)
    reader.recv(10)
    assert sock.read_with[-1] <= 1
