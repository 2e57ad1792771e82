"""No verdict from a worker that has not listed the cluster, and a /readyz that follows the
least ready worker: a real `gpupolicy serve --kubeconfig` (gunicorn, TLS, 2 workers) against
the fake API server, down, stalled, or restarted under SIGHUP and kill -9.

The probe is a 4-GPU pod in a namespace whose GPUPolicy (a cluster resource, not a file) allows
2: the full state denies it; a worker judging with the policy files alone would admit it (a
wrong verdict). An answer without a verdict (503, or a connection refused) is right: the
apiserver then applies the webhook's failurePolicy. Better still, while one worker is ready the
others take no admission (the SIGHUP and kill -9 cases): then nothing is refused at all."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.cluster.conftest import gpupolicy, namespace, node
from tests.cluster.fakeapi import FakeAPIServer
from tests.server import harness
from tests.server.harness import wait_for
from webhook import certs

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"containers": [{"name": "c", "image": "cuda",
                                "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}}
BODY = json.dumps(harness.envelope(harness.make_request(POD, namespace="team-a"))).encode()


def verdict(reply: harness.Reply) -> str:
    """right (denied by the cluster's policy), wrong (admitted), other, or no_verdict."""
    if reply.status == 503:
        assert b"not ready" in reply.body, reply.body
        return "no_verdict"
    assert reply.status == 200, (reply.status, reply.body)
    response = reply.json["response"]
    if response["allowed"]:
        return "wrong"
    return "right" if "gpu-max-per-pod" in response["status"]["message"] else "other"


def post(server: harness.Server, path: str = "/validate") -> harness.Reply:
    return server.request("POST", path, BODY, {"Content-Type": "application/json"})


class Load:
    """Admissions (new connections every few requests) and /readyz probes until stopped. A
    /readyz 200 while a worker forked after `since` has not reported ready is a violation."""

    def __init__(self, server: harness.Server) -> None:
        self.server = server
        self.verdicts: Counter[str] = Counter()
        self.ready_violations: list[str] = []
        self.known: set[int] = _children(server.proc.pid)  # workers that were there already
        self._stop = threading.Event()
        self._threads = [threading.Thread(target=self._admit, daemon=True) for _ in range(2)]
        self._threads.append(threading.Thread(target=self._probe, daemon=True))

    def __enter__(self) -> Load:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(15)

    def _admit(self) -> None:
        while not self._stop.is_set():
            conn = harness.Connection(self.server.port, harness.client_context(self.server.ca),
                                      timeout=15)
            try:
                for _ in range(5):
                    conn.request("POST", "/validate", body=BODY,
                                 headers={"Content-Type": "application/json"})
                    resp = conn.getresponse()
                    reply = harness.Reply(resp.status, {}, resp.read())
                    self.verdicts[verdict(reply)] += 1
            except (OSError, http.client.HTTPException):
                self.verdicts["failed"] += 1  # no answer: failurePolicy too
                time.sleep(0.02)
            finally:
                conn.close()

    def _probe(self) -> None:
        while not self._stop.is_set():
            new = _children(self.server.proc.pid) - self.known  # listed before asking
            try:
                reply = self.server.plain("GET", "/readyz", timeout=5)
            except OSError:
                continue
            if reply.status == 200:
                workers = reply.json["workers"]
                for pid in new:
                    if not (workers.get(str(pid)) or {}).get("ready") and _alive(pid):
                        self.ready_violations.append(f"200 while worker {pid} not ready")
            time.sleep(0.02)


def _children(parent: int) -> set[int]:
    """Live (not zombie) processes whose parent is `parent`."""
    found = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[1]) == parent:
            found.add(int(entry))
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _cluster(api: FakeAPIServer) -> None:
    api.add(namespace("team-a"))
    api.add(node("gpu-1", gpus=8))
    api.add(gpupolicy("max-two", namespaces=["team-a"], rules={"maxGPUsPerPod": 2}))


def _start(tmp_path: Path, kubeconfig: str, workers: int = 2) -> harness.Server:
    tls = tmp_path / "tls"
    certs.write_bundle(certs.build_serving_cert("gpupolicy", "gpupolicy", certs.build_ca()), tls)
    return harness.start(["--kubeconfig", kubeconfig, "--workers", str(workers),
                          "--tls-cert", str(tls / "tls.crt"), "--tls-key", str(tls / "tls.key")],
                         tmp_path, ca=tls / "ca.crt")


def _ready(server: harness.Server) -> bool:
    return server.plain("GET", "/readyz").status == 200


@pytest.fixture
def api(tmp_path: Path) -> Iterator[FakeAPIServer]:
    server = FakeAPIServer(port=harness.free_port())
    _cluster(server)
    yield server
    server.stop()


def test_a_worker_that_cannot_list_the_cluster_gives_no_verdict(tmp_path, api):
    started = time.monotonic()
    server = _start(tmp_path, api.kubeconfig(str(tmp_path / "kubeconfig")))  # API down
    try:
        for path in ("/validate", "/mutate"):
            reply = post(server, path)
            assert reply.status == 503
            message = reply.json["error"]
            assert "not ready" in message and "namespaces" in message, message
            assert "failurePolicy" in message
        ready = server.plain("GET", "/readyz")
        assert ready.status == 503
        reasons = ready.json["not_ready"]
        assert reasons and all("namespaces" in why or "starting" in why
                               for why in reasons.values()), reasons
        metrics = server.plain("GET", "/metrics").body.decode()
        assert 'decision="not_ready",operation="",webhook="validate"}' in metrics

        api.start()
        wait_for(lambda: _ready(server), 40, "ready once the API server answers")
        assert verdict(post(server)) == "right"
    finally:
        server.stop()
    assert time.monotonic() - started < 90


def test_a_stalled_api_server_gets_no_verdict_either(tmp_path):
    """An API server that takes the connection and never answers: still no verdict."""
    started = time.monotonic()
    stall = socket.socket()
    stall.bind(("127.0.0.1", 0))
    stall.listen(64)  # never accepted: the client's requests wait for an answer
    api = FakeAPIServer(port=stall.getsockname()[1])
    server = _start(tmp_path, api.kubeconfig(str(tmp_path / "kubeconfig")))
    try:
        with Load(server) as load:
            time.sleep(3)
        print("API server stalled:", dict(load.verdicts))
        assert load.verdicts["wrong"] == 0 and load.verdicts["right"] == 0, load.verdicts
        assert load.verdicts["no_verdict"] > 0, load.verdicts
        ready = server.plain("GET", "/readyz")
        assert ready.status == 503 and ready.json["not_ready"], ready.json
    finally:
        server.stop()
        stall.close()
    assert time.monotonic() - started < 60


def test_sighup_and_kill9_never_give_a_file_policies_verdict(tmp_path, api):
    started = time.monotonic()
    api.start()
    server = _start(tmp_path, api.kubeconfig(str(tmp_path / "kubeconfig")))
    try:
        wait_for(lambda: _ready(server), 40, "ready")
        assert verdict(post(server)) == "right"

        # SIGHUP with the API server up: the old workers serve until the new ones have
        # listed; then /readyz is 200 again. Nothing refused, nothing misjudged.
        with Load(server) as load:
            time.sleep(0.5)
            old = _children(server.proc.pid)
            server.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: (p := _children(server.proc.pid)) and not p & old, 20,
                     "old workers gone")
            wait_for(lambda: _ready(server), 40, "ready after SIGHUP")
            time.sleep(0.5)
        print("SIGHUP, API up:", dict(load.verdicts))
        assert load.verdicts["wrong"] == 0 and load.verdicts["other"] == 0, load.verdicts
        assert load.verdicts["no_verdict"] == 0, load.verdicts
        assert load.verdicts["right"] > 0
        assert not load.ready_violations, load.ready_violations[:5]

        # SIGHUP with the API server down: the new workers cannot list; the old ones keep
        # judging with their last state (up to serve's ROLL_TIMEOUT) and /readyz says 503.
        api.stop()
        with Load(server) as load:
            old = _children(server.proc.pid)
            server.proc.send_signal(signal.SIGHUP)
            wait_for(lambda: len(_children(server.proc.pid) - old) == 2, 20, "new workers")
            time.sleep(2)
            ready = server.plain("GET", "/readyz")
            assert ready.status == 503
            assert len(ready.json["not_ready"]) == 2, ready.json  # the new ones, waiting
            assert all(str(pid) not in ready.json["not_ready"] for pid in old)
            api.start()
            wait_for(lambda: (p := _children(server.proc.pid)) and not p & old, 40,
                     "old workers stopped once the new ones listed")
            wait_for(lambda: _ready(server), 40, "ready once the API server is back")
            time.sleep(0.5)
        print("SIGHUP, API down:", dict(load.verdicts))
        assert load.verdicts["wrong"] == 0 and load.verdicts["other"] == 0, load.verdicts
        assert load.verdicts["no_verdict"] == 0 and load.verdicts["right"] > 0, load.verdicts
        assert not load.ready_violations, load.ready_violations[:5]

        # kill -9 of one worker while the API server is down: the survivor judges with its
        # last good state, the replacement takes nothing until it has listed.
        time.sleep(1)
        api.stop()
        with Load(server) as load:
            victim = min(_children(server.proc.pid))
            os.kill(victim, signal.SIGKILL)
            wait_for(lambda: len(_children(server.proc.pid) - {victim}) == 2, 20, "replaced")
            time.sleep(2)
            ready = server.plain("GET", "/readyz")
            assert ready.status == 503, ready.json
            assert len(ready.json["not_ready"]) == 1, ready.json
            api.start()
            wait_for(lambda: _ready(server), 40, "ready once the API server is back")
            time.sleep(0.5)
        print("kill -9, API down:", dict(load.verdicts))
        assert load.verdicts["wrong"] == 0 and load.verdicts["other"] == 0, load.verdicts
        assert load.verdicts["no_verdict"] == 0 and load.verdicts["right"] > 0, load.verdicts
        assert not load.ready_violations, load.ready_violations[:5]
    finally:
        server.stop()
    assert time.monotonic() - started < 180
