"""Structured logs: one JSON object per line on stderr, so log shippers need no parsing rules.

Each line is built once, straight to UTF-8 bytes (orjson), and written with one os.write."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from typing import Any

import orjson

LOGGER_NAME = "gpupolicy"

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
    """One os.write per line, no handler lock: every admission logs a line from one of several
    threads, and the lock plus buffered-stream flush of StreamHandler made them queue. A
    single write() of one line does not interleave with another thread's."""

    def __init__(self, fd: int) -> None:
        super().__init__()
        self.fd = fd

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
        try:
            while data:
                data = data[os.write(self.fd, data):]
        except OSError:  # stderr gone: nothing sensible left to do with a log line
            pass


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
            handler.write(formatter.fields(time.time(), logging.getLevelName(level),
                                           _pid, msg, fields) + b"\n")
            return
    record = logging.LogRecord(logger.name, level, "", 0, msg, None, None)
    record.fields = fields
    logger.handle(record)
