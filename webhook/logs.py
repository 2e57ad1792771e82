"""Structured logs: one JSON object per line on stderr, so log shippers need no parsing rules.

Each line is built once, straight to UTF-8 bytes (orjson). The info lines of `event()` (one
per admission) are held and written together, by a thread of their own, at most FLUSH_SECONDS
later (klog, Kubernetes' own logger, holds lines too): a write system call per request, with
the GIL let go and taken back around it while the worker's other threads wait for it, is
replaced by one per FLUSH_SECONDS. Every other line (warnings, errors, tracebacks) is written
at once, after the held ones, so nothing that reports a fault waits, and the order of lines is
kept. A worker writes what it holds when it exits (a SIGKILL loses at most FLUSH_SECONDS)."""

from __future__ import annotations

import atexit
import collections
import json
import logging
import os
import sys
import threading
import time
from typing import Any

import orjson

LOGGER_NAME = "gpupolicy"
FLUSH_SECONDS = 0.1  # how long an admission line may wait to be written
HOLD_BYTES = 64 * 1024  # held lines written at once when they reach this much

# The process id in every line, read once per process: os.getpid() is a system call, and
# the admission line is written once per request. A forked child (a gunicorn worker)
# reads its own.
_pid = os.getpid()


def _reset_pid() -> None:
    global _pid
    _pid = os.getpid()


os.register_at_fork(after_in_child=_reset_pid)


class JSONFormatter(logging.Formatter):
    _second = -1
    _stamp = ""

    def _time(self, created: float) -> str:
        second = int(created)
        if second != self._second:  # strftime once a second, not once a line
            self._second = second
            self._stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
        return f"{self._stamp}.{int((created - second) * 1000):03d}Z"

    def format(self, record: logging.LogRecord) -> str:
        return self.line(record).decode("utf-8", "replace")

    def line(self, record: logging.LogRecord) -> bytes:
        """The JSON line without its newline."""
        fields = getattr(record, "fields", None)
        line = self.fields(record.created, record.levelname, record.process, record.getMessage(),
                           fields if isinstance(fields, dict) else {})
        if record.exc_info:
            # The trace stays in the log line (as a string), never in an HTTP answer.
            trace = self.formatException(record.exc_info)
            try:
                quoted = orjson.dumps(trace)
            except TypeError:  # a lone surrogate in some message
                quoted = json.dumps(trace).encode()
            line = line[:-1] + b',"exception":' + quoted + b"}"
        return line

    def fields(self, created: float, level: str, pid: int | None, msg: str,
               fields: dict[str, Any]) -> bytes:
        line: dict[str, Any] = {
            "ts": self._time(created),
            "level": level.lower(),
            "pid": pid,  # which gunicorn worker
            "msg": msg,
            **fields,
        }
        try:
            return orjson.dumps(line, default=str)
        except TypeError:  # a lone surrogate, a non-string key: the slow, lenient way
            return json.dumps(line, default=str, separators=(",", ":")).encode()


class LineHandler(logging.Handler):
    """Lines to a file descriptor, no handler lock on the admission path: every admission logs
    a line from one of several threads, and the lock plus buffered-stream flush of
    StreamHandler made them queue. `hold` queues a line (a deque: appending takes no lock);
    `write` writes the held lines and then its own. Writes go one at a time, so lines never
    interleave."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd
        self._held: collections.deque[bytes] = collections.deque()
        self._held_bytes = 0  # roughly: updated without a lock, it only decides when to write
        self._writing = threading.Lock()
        self._flusher = 0  # the pid whose flusher thread is running
        os.register_at_fork(after_in_child=self._forked)
        atexit.register(self.flush)

    def createLock(self) -> None:
        self.lock = None

    def handle(self, record: logging.LogRecord) -> bool:
        if self.filter(record):
            self.emit(record)
        return True

    def emit(self, record: logging.LogRecord) -> None:
        try:
            formatter = self.formatter
            if isinstance(formatter, JSONFormatter):
                data = formatter.line(record) + b"\n"
            else:
                data = (self.format(record) + "\n").encode("utf-8", "replace")
            self.write(data)
        except Exception:
            self.handleError(record)

    def write(self, data: bytes) -> None:
        """Write `data` now, after the lines held before it."""
        with self._writing:
            self._write(self._take() + data)

    def hold(self, data: bytes) -> None:
        """Write `data` within FLUSH_SECONDS (at once when HOLD_BYTES are held)."""
        self._held.append(data)
        self._held_bytes += len(data)
        if self._held_bytes >= HOLD_BYTES:
            self.flush()
        elif self._flusher != _pid:
            self._start_flusher()

    def flush(self) -> None:
        with self._writing:
            data = self._take()
            if data:
                self._write(data)

    def _take(self) -> bytes:
        lines = []
        held = self._held
        try:
            while True:  # popleft, not a swap of lists: a line appended meanwhile stays held
                lines.append(held.popleft())
        except IndexError:
            pass
        self._held_bytes = 0
        return b"".join(lines)

    def _write(self, data: bytes) -> None:
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError:  # stderr gone: nothing sensible left to do with a log line
            pass

    def _start_flusher(self) -> None:
        with self._writing:
            if self._flusher == _pid:
                return
            self._flusher = _pid

        def loop() -> None:
            while True:
                time.sleep(FLUSH_SECONDS)
                self.flush()

        threading.Thread(target=loop, name="gpupolicy-log-flush", daemon=True).start()

    def _forked(self) -> None:
        # The parent writes what it held; the child's flusher thread did not survive the fork.
        self._held.clear()
        self._held_bytes = 0
        self._writing = threading.Lock()


def setup(level: str = "info") -> logging.Logger:
    logger = logging.getLogger(LOGGER_NAME)
    if not any(getattr(h, "_gpupolicy", False) for h in logger.handlers):
        sys.stderr.flush()
        handler = LineHandler(sys.stderr.fileno())
        handler.setFormatter(JSONFormatter())
        handler._gpupolicy = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    logger.setLevel(level.upper())
    logger.propagate = False
    return logger


def flush() -> None:
    """Write the held lines now (a worker about to exit)."""
    for handler in logging.getLogger(LOGGER_NAME).handlers:
        if isinstance(handler, LineHandler):
            handler.flush()


def get() -> logging.Logger:
    return logging.getLogger(LOGGER_NAME)


def event(logger: logging.Logger, msg: str, level: int = logging.INFO, **fields: Any) -> None:
    """A line with `fields` as JSON keys. Built directly: Logger.log would look up the
    caller's file and line on every admission, which nobody reads here; and when the only
    handler is the JSON line writer of setup(), without filters, the line goes straight from
    the fields to one write, with no LogRecord on the way."""
    if not logger.isEnabledFor(level):
        return
    handlers = logger.handlers
    if len(handlers) == 1 and not logger.filters and not logger.propagate:
        handler = handlers[0]
        formatter = handler.formatter
        if (type(handler) is LineHandler and isinstance(formatter, JSONFormatter)
                and not handler.filters and level >= handler.level):
            line = formatter.fields(time.time(), logging.getLevelName(level), _pid, msg,
                                    fields) + b"\n"
            if level < logging.WARNING:
                handler.hold(line)  # written within FLUSH_SECONDS
            else:
                handler.write(line)
            return
    record = logging.LogRecord(logger.name, level, "", 0, msg, None, None)
    record.fields = fields
    logger.handle(record)
