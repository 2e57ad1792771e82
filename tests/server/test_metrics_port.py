"""The plain-HTTP metrics port: /metrics, /healthz and /readyz for the kubelet and Prometheus,
readiness that speaks for every worker, and nothing of it on the admission port."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.server import harness
from tests.server.harness import Reply, Server


def _eventually(probe: Callable[[], Reply], want: Callable[[Reply], bool],
                timeout: float = 10) -> Reply:
    deadline = time.monotonic() + timeout
    while True:
        reply = probe()
        if want(reply) or time.monotonic() > deadline:
            return reply
        time.sleep(0.1)


def test_readyz_speaks_for_every_worker(server: Server) -> None:
    reply = _eventually(lambda: server.plain("GET", "/readyz"), lambda r: r.status == 200)
    assert reply.status == 200, reply.body
    detail = reply.json
    assert detail["ready"] is True and detail["expected_workers"] == 2
    assert len(detail["workers"]) == 2
    for worker in detail["workers"].values():
        assert worker["ready"] is True and worker["errors"] == {}
        assert sorted(worker["policies"]) == ["labs-warn", "sandbox-audit", "teams-enforce"]


def test_healthz_and_metrics(server: Server) -> None:
    assert server.plain("GET", "/healthz").json == {"ok": True}
    metrics = server.plain("GET", "/metrics")
    assert metrics.status == 200 and metrics.headers["content-type"].startswith("text/plain")
    assert b"gpupolicy_policies_loaded" in metrics.body
    head = server.plain("HEAD", "/metrics")
    assert head.status == 200 and head.body == b""


@pytest.mark.parametrize(("method", "path", "status", "error"), [
    ("GET", "/", 404, "404 Not Found: /"),
    ("GET", "/validate", 404, "404 Not Found: /validate"),
    ("POST", "/metrics", 405, "405 Method Not Allowed: POST /metrics"),
    ("DELETE", "/readyz", 405, "405 Method Not Allowed: DELETE /readyz"),
])
def test_other_requests_are_json_errors(server: Server, method: str, path: str, status: int,
                                        error: str) -> None:
    reply = server.plain(method, path)
    assert reply.status == status
    assert reply.headers["content-type"] == "application/json"
    assert reply.json == {"error": error}


def test_no_metrics_on_the_admission_port(server: Server) -> None:
    reply = server.request("GET", "/metrics")
    assert reply.status == 404 and "error" in reply.json


def test_a_dead_worker_is_not_ready_until_replaced(tls_dir: Path, tmp_path: Path) -> None:
    srv = harness.start(["--tls-cert", str(tls_dir / "tls.crt"),
                         "--tls-key", str(tls_dir / "tls.key")], tmp_path, ca=tls_dir / "ca.crt")
    try:
        first = _eventually(lambda: srv.plain("GET", "/readyz"), lambda r: r.status == 200)
        before = set(first.json["workers"])
        assert len(before) == 2
        os.kill(int(min(before)), signal.SIGKILL)
        # gunicorn forks a new worker, which publishes once its policies are loaded.
        again = _eventually(lambda: srv.plain("GET", "/readyz"),
                            lambda r: r.status == 200 and set(r.json["workers"]) != before)
        assert again.status == 200, again.body
        after = set(again.json["workers"])
        assert len(after) == 2 and min(before) not in after
    finally:
        srv.stop()
