"""A real `gpupolicy serve` in a subprocess, and a TLS client that talks to it the way the
apiserver does: connect to an address, SNI and verification for `<svc>.<ns>.svc`, keep-alive."""

from __future__ import annotations

import http.client
import json
import os
import resource
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
SNI = "gpupolicy.gpupolicy.svc"
# The console script when the package is installed, else the same entry point through python.
_SCRIPT = Path(sys.executable).with_name("gpupolicy")
GPUPOLICY = (
    [str(_SCRIPT)] if _SCRIPT.exists()
    else [sys.executable, "-c", "import sys; from webhook.cli import main; main()"]
)


def wait_for(check: Callable[[], Any], timeout: float, what: str) -> Any:
    """Poll `check` until it is truthy; fail naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            assert value, f"{what}: not within {timeout}s"
            return value
        time.sleep(0.1)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def client_context(ca: Path, client: tuple[Path, Path] | None = None) -> ssl.SSLContext:
    """Verifying the server with `ca`; presenting `client` (certificate, key) when given."""
    context = ssl.create_default_context(cafile=str(ca))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    if client is not None:
        context.load_cert_chain(str(client[0]), str(client[1]))
    return context


class Connection(http.client.HTTPSConnection):
    """HTTPS to 127.0.0.1 with SNI and hostname check for the Service name."""

    def __init__(self, port: int, context: ssl.SSLContext, sni: str = SNI, timeout: float = 10):
        super().__init__(sni, port, context=context, timeout=timeout)

    def connect(self) -> None:
        raw = socket.create_connection(("127.0.0.1", self.port), self.timeout)
        # http.client sends headers and body in two writes; like Go's client (the apiserver),
        # turn Nagle off so the body is not held back waiting for a delayed ACK (40 ms).
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = self._context.wrap_socket(raw, server_hostname=self.host)  # type: ignore[attr-defined]


@dataclass
class Reply:
    status: int
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Server:
    port: int
    ca: Path
    proc: subprocess.Popen[bytes]
    log: Path
    stdout: Path
    metrics_port: int = 0
    client: tuple[Path, Path] | None = None  # the certificate and key this client presents
    _conn: Connection | None = field(default=None, repr=False)

    def connection(self) -> Connection:
        return Connection(self.port, client_context(self.ca, self.client))

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict[str, str] | None = None) -> Reply:
        """On one kept-alive connection, reopened if the server closed it."""
        for attempt in (1, 2):
            if self._conn is None:
                self._conn = self.connection()
            try:
                self._conn.request(method, path, body=body, headers=headers or {})
                resp = self._conn.getresponse()
                data = resp.read()
                return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
            except (ConnectionError, http.client.HTTPException):
                self._conn.close()
                self._conn = None
                if attempt == 2:
                    raise
        raise AssertionError("unreachable")

    def plain(self, method: str, path: str, timeout: float = 10) -> Reply:
        """One request to the plain-HTTP metrics port (/metrics, /healthz, /readyz)."""
        conn = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=timeout)
        try:
            conn.request(method, path)
            resp = conn.getresponse()
            data = resp.read()
            return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, data)
        finally:
            conn.close()

    def post(self, path: str, review: Any) -> Reply:
        body = review if isinstance(review, bytes) else json.dumps(review).encode()
        return self.request("POST", path, body, {"Content-Type": "application/json"})

    def logs(self) -> list[dict[str, Any]]:
        out = []
        # JSON lines end at "\n" only: U+2028 or NEL inside a value is not a line break.
        for line in self.log.read_text(encoding="utf-8", errors="replace").split("\n"):
            if line.startswith("{"):
                out.append(json.loads(line))
        return out

    def stop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)


def start(args: list[str], workdir: Path, ca: Path | None = None, timeout: float = 30,
          max_files: int | None = None, client: tuple[Path, Path] | None = None) -> Server:
    """Start `gpupolicy serve ARGS` on a free loopback port; wait until /healthz answers.
    `max_files` caps the server's open files (RLIMIT_NOFILE); `client` is the certificate and
    key the test client presents (a server started with --client-ca wants one)."""
    port, metrics_port = free_port(), free_port()
    log, out = workdir / "server.log", workdir / "server.out"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    proc = subprocess.Popen(
        [*GPUPOLICY, "serve", "--host", "127.0.0.1", "--port", str(port),
         "--metrics-port", str(metrics_port), *args],
        cwd=workdir, stdout=out.open("wb"), stderr=log.open("wb"), env=env,
        preexec_fn=None if max_files is None else partial(
            resource.setrlimit, resource.RLIMIT_NOFILE, (max_files, max_files)),
    )
    server = Server(port, ca or workdir / "certs" / "ca.crt", proc, log, out, metrics_port,
                    client)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited {proc.returncode}:\n{log.read_text()}")
        try:
            if server.request("GET", "/healthz").status == 200:
                return server
        except (OSError, http.client.HTTPException):
            server._conn = None
        time.sleep(0.1)
    server.stop()
    raise RuntimeError(f"server did not answer within {timeout}s:\n{log.read_text()}")


def envelope(request: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}


def _text(obj: Any, key: str) -> str:
    value = obj.get(key) if isinstance(obj, dict) else None
    return value if isinstance(value, str) else ""


def make_request(obj: Any, *, namespace: str | None = "default", operation: str = "CREATE",
                 uid: str = "0000-test", subresource: str = "", dry_run: bool = False,
                 old: Any = None, kind: str | None = None) -> dict[str, Any]:
    # The request's kind and version are the route's, strings whatever the body holds.
    kind = kind or _text(obj, "kind") or "Pod"
    if namespace and isinstance(obj, dict) and isinstance(obj.get("metadata"), dict):
        # The apiserver fills the object's namespace from the request path.
        obj = {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
    api_version = _text(obj, "apiVersion") or "v1"
    group, _, version = api_version.rpartition("/")
    req: dict[str, Any] = {
        "uid": uid,
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": {"group": group, "version": version, "resource": kind.lower() + "s"},
        "operation": operation,
        "userInfo": {"username": "tester"},
        "object": obj,
        "oldObject": old,
        "dryRun": dry_run,
        "options": None,
    }
    if namespace:
        req["namespace"] = namespace
    if subresource:
        req["subResource"] = subresource
        req["requestSubResource"] = subresource
    return req
