"""The admission line is held and written with others (webhook/logs.py): at most
FLUSH_SECONDS late, never out of order with the lines that are written at once."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator

import orjson
import pytest

from webhook import logs


@pytest.fixture
def pipe_logger(request: pytest.FixtureRequest) -> Iterator[tuple[logging.Logger, int]]:
    """A logger set up as `logs.setup` does, writing to a pipe the test reads."""
    read, write = os.pipe()
    os.set_blocking(read, False)
    logger = logging.getLogger(f"gpupolicy-test-{request.node.name}")
    handler = logs.LineHandler(write)
    handler.setFormatter(logs.JSONFormatter())
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    logger.propagate = False
    yield logger, read
    handler.flush()
    logger.removeHandler(handler)
    os.close(read)
    os.close(write)


def _alone(logger: logging.Logger) -> logging.Logger:
    """pytest hangs its capture handlers on the logger too; `serve` has only its own."""
    logger.handlers[:] = [h for h in logger.handlers if isinstance(h, logs.LineHandler)]
    return logger


def _lines(fd: int) -> list[str]:
    try:
        data = os.read(fd, 1 << 20)
    except BlockingIOError:
        return []
    return [orjson.loads(line)["msg"] for line in data.splitlines()]


def test_info_lines_are_held_then_written_in_order(pipe_logger, monkeypatch) -> None:
    logger, read = pipe_logger
    _alone(logger)
    monkeypatch.setattr(logs, "FLUSH_SECONDS", 60.0)  # the flusher stays asleep here
    logs.event(logger, "admission 1", uid="a")
    logs.event(logger, "admission 2", uid="b")
    assert _lines(read) == []  # no write per request
    logs.event(logger, "bad request", level=logging.WARNING, error="x")
    assert _lines(read) == ["admission 1", "admission 2", "bad request"]  # at once, in order
    logs.event(logger, "admission 3")
    logger.error("through logging")  # a record, not event(): written at once too
    assert _lines(read) == ["admission 3", "through logging"]


def test_held_lines_are_written_within_flush_seconds(pipe_logger, monkeypatch) -> None:
    logger, read = pipe_logger
    _alone(logger)
    monkeypatch.setattr(logs, "FLUSH_SECONDS", 0.05)
    logs.event(logger, "admission")
    deadline = time.monotonic() + 5
    got: list[str] = []
    while not got and time.monotonic() < deadline:
        time.sleep(0.02)
        got = _lines(read)
    assert got == ["admission"]


def test_many_held_lines_are_written_at_once(pipe_logger, monkeypatch) -> None:
    logger, read = pipe_logger
    _alone(logger)
    monkeypatch.setattr(logs, "FLUSH_SECONDS", 60.0)
    monkeypatch.setattr(logs, "HOLD_BYTES", 4096)  # well within what the pipe holds
    got: list[str] = []
    for sent in range(1, 100):  # each line over 100 bytes: 41 of them pass 4096
        logs.event(logger, "admission", uid=f"{sent:060d}")
        got = _lines(read)
        if got:
            break
    assert sent <= 41 and got == ["admission"] * sent  # all of them, at once
