"""The plain-HTTP metrics port's answers (GET /metrics, /healthz, /readyz) and the readiness the
workers share to give them.

Any worker may take the kubelet's probe, so /readyz must not answer for that worker alone: each
worker publishes its own state (policies, namespaces, inventory loaded) in a small file beside
the Prometheus samples, the master removes the file of a worker that died, and /readyz is 200
only when as many workers as configured have published and every one of them is ready.

The master writes a worker's file first, "starting", the moment it forks it (expect_worker):
a worker still loading its app has not published anything, and without its file the workers
being replaced (SIGHUP, a worker killed) would make /readyz 200 while the new one cannot judge
yet. So /readyz follows the least ready worker, a worker that has not reported counting as
not ready. A worker stopping (SIGTERM, replaced by SIGHUP) says so: it takes no new connection
and no longer counts as one of the workers.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from webhook.http.shared import MULTIPROC_ENV, READY_PREFIX

ROUTES = (b"/metrics", b"/healthz", b"/readyz")

_published: dict[int, str] = {}  # pid -> the text last written, so unchanged states cost nothing


def answer(head: bytes, expected_workers: int) -> bytes:
    """The whole HTTP answer to a request head; the connection closes after it."""
    parts = head.split(b"\n", 1)[0].strip().split(b" ")
    method, target = (parts[0], parts[1]) if len(parts) == 3 else (b"", b"")
    path = target.split(b"?", 1)[0]
    shown = path.decode("latin-1")
    if path not in ROUTES:
        return error(404, "Not Found", f"404 Not Found: {shown}")
    if method not in (b"GET", b"HEAD"):
        return error(405, "Method Not Allowed",
                     f"405 Method Not Allowed: {method.decode('latin-1')} {shown}")
    if path == b"/metrics":
        content_type, body = _exposition()
        status = "200 OK"
    elif path == b"/healthz":
        status, content_type, body = "200 OK", "application/json", b'{"ok":true}'
    else:
        ready, detail = readiness(expected_workers)
        status = "200 OK" if ready else "503 Service Unavailable"
        content_type, body = "application/json", json.dumps(detail, separators=(",", ":")).encode()
    return _response(status, content_type, b"" if method == b"HEAD" else body, len(body))


def error(status: int, reason: str, message: str) -> bytes:
    """One line of JSON, like every other error of the webhook."""
    body = json.dumps({"error": message}).encode()
    return _response(f"{status} {reason}", "application/json", body, len(body))


def _response(status: str, content_type: str, body: bytes, length: int) -> bytes:
    return (f"HTTP/1.1 {status}\r\nConnection: close\r\nContent-Type: {content_type}\r\n"
            f"Content-Length: {length}\r\n\r\n").encode("latin-1") + body


def _exposition() -> tuple[str, bytes]:
    from webhook.http import metrics  # what every worker flushed to the shared directory

    text, content_type = metrics.exposition()
    return content_type, text


def _ready_file(pid: int) -> Path | None:
    where = os.environ.get(MULTIPROC_ENV)
    return Path(where) / f"{READY_PREFIX}{pid}.json" if where else None


def publish(pid: int, detail: dict[str, Any]) -> None:
    """A worker's state, written when it changes."""
    path = _ready_file(pid)
    text = json.dumps(detail, sort_keys=True, default=str)
    if path is None or _published.get(pid) == text:
        return
    tmp = path.with_suffix(".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)  # a reader sees the old or the new file, never half of one
    _published[pid] = text


STARTING = {"ready": False, "starting": True,
            "waiting_for": ["the worker to load its sources"]}


def expect_worker(pid: int) -> None:
    """The master, right after forking a worker: it counts, as not ready, until it publishes.
    Never over a state the worker already wrote."""
    path = _ready_file(pid)
    if path is None:
        return
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(json.dumps(STARTING, sort_keys=True))


def unpublish(pid: int) -> None:
    """A worker leaving (or, from the master's child_exit hook, gone): it no longer counts."""
    path = _ready_file(pid)
    if path is not None:
        path.unlink(missing_ok=True)
    _published.pop(pid, None)


def states() -> dict[str, Any]:
    """Every worker's last published state, by pid (as text)."""
    where = os.environ.get(MULTIPROC_ENV)
    workers: dict[str, Any] = {}
    if where:
        for path in sorted(Path(where).glob(f"{READY_PREFIX}*.json")):
            try:
                workers[path.stem[len(READY_PREFIX):]] = json.loads(path.read_text("utf-8"))
            except (OSError, ValueError):
                continue  # a worker gone between the glob and the read
    return workers


def serving(detail: Any) -> bool:
    """A worker ready to judge and taking new connections."""
    return isinstance(detail, dict) and detail.get("ready") is True and not detail.get("stopping")


def readiness(expected_workers: int) -> tuple[bool, dict[str, Any]]:
    workers = states()
    staying = {pid: d for pid, d in workers.items()
               if not (isinstance(d, dict) and d.get("stopping"))}
    not_ready = {pid: _why(detail) for pid, detail in staying.items() if not serving(detail)}
    if len(staying) < expected_workers:
        not_ready["workers"] = f"{len(staying)} of {expected_workers} workers running"
    ready = not not_ready
    return ready, {"ready": ready, "expected_workers": expected_workers, "workers": workers,
                   "not_ready": not_ready}


def _why(detail: Any) -> str:
    """One line: what a worker waits for, and the errors that hold it."""
    if not isinstance(detail, dict):
        return "unreadable state"
    if detail.get("starting"):
        return "starting: not yet reported"
    waiting = ", ".join(str(name) for name in detail.get("waiting_for") or [])
    errors = detail.get("errors")
    why = "; ".join(f"{name}: {text}" for name, text in sorted(errors.items())
                    if "/" not in str(name)) if isinstance(errors, dict) else ""
    text = f"waiting for {waiting}" if waiting else "not ready"
    return text + (f" ({why})" if why else "")
