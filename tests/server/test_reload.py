"""Certificate rotation and policy reload while requests flow: no request fails, new
connections see the new certificate, a broken policy directory keeps the last good policies."""

from __future__ import annotations

import json
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509

from tests.server import harness
from tests.server.conftest import POLICIES
from tests.server.harness import Server, envelope, make_request
from tests.server.test_observability import samples, value
from webhook import certs

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "load"},
       "spec": {"containers": [{"name": "c", "image": "i",
                                "resources": {"limits": {"nvidia.com/gpu": "3"}}}]}}
BODY = json.dumps(envelope(make_request(POD, namespace="team-a", uid="load"))).encode()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Server, Path, Path]]:
    """A server of its own: cert files and a policy directory the tests may change."""
    work = tmp_path_factory.mktemp("reload")
    tls, policies = work / "tls", work / "policies"
    ca = certs.build_ca()
    certs.write_bundle(certs.build_serving_cert("gpupolicy", "gpupolicy", ca), tls)
    (tls / "ca.key").unlink()
    shutil.copytree(POLICIES, policies)
    server = harness.start(
        ["--tls-cert", str(tls / "tls.crt"), "--tls-key", str(tls / "tls.key"),
         "--policies", str(policies), "--reload-interval", "0.2", "--workers", "2"],
        work, ca=tls / "ca.crt",
    )
    server.ca_obj = ca  # type: ignore[attr-defined]
    yield server, tls, policies
    server.stop()


class Load:
    """Two clients posting reviews until stopped: one on a kept-alive connection, one opening
    a connection per request (each new handshake notes the certificate serial it saw)."""

    def __init__(self, server: Server) -> None:
        self.server = server
        self.stop = threading.Event()
        self.errors: list[str] = []
        self.count = 0
        self.serials: list[int] = []
        self.threads = [threading.Thread(target=self._run, args=(keep,)) for keep in (True, False)]

    def __enter__(self) -> Load:
        for t in self.threads:
            t.start()
        return self

    def __exit__(self, *_: Any) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def _run(self, keep_alive: bool) -> None:
        conn = self.server.connection()
        while not self.stop.is_set():
            try:
                if not keep_alive:
                    conn = self.server.connection()
                    conn.connect()
                    der = conn.sock.getpeercert(binary_form=True)  # type: ignore[union-attr]
                    self.serials.append(x509.load_der_x509_certificate(der).serial_number)
                conn.request("POST", "/validate", body=BODY,
                             headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                data = resp.read()
                if resp.status != 200 or json.loads(data)["response"]["uid"] != "load":
                    self.errors.append(f"{resp.status} {data[:200]!r}")
                self.count += 1
            except Exception as exc:  # every failure is a finding
                self.errors.append(f"{type(exc).__name__}: {exc}")
                conn = self.server.connection()
            finally:
                if not keep_alive:
                    conn.close()


def wait_for(check: Callable[[], bool], timeout: float = 10) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return False


def _write_in_place(bundle: certs.Bundle, tls: Path) -> None:
    # The worst case: files rewritten in place (cp), cert first, so for a moment the server
    # can see a truncated file or a cert that does not match its key.
    (tls / "tls.crt").write_bytes(bundle.cert_pem)
    (tls / "tls.key").write_bytes(bundle.key_pem)


def _write_renamed(bundle: certs.Bundle, tls: Path) -> None:
    certs.write_bundle(certs.Bundle(bundle.ca_pem, bundle.cert_pem, bundle.key_pem), tls)


@pytest.mark.parametrize("write", [_write_renamed, _write_in_place], ids=["rename", "in-place"])
def test_certificate_rotation_under_load(live: tuple[Server, Path, Path],
                                         write: Callable[[certs.Bundle, Path], None]) -> None:
    server, tls, _ = live
    bundle = certs.build_serving_cert("gpupolicy", "gpupolicy", server.ca_obj)  # type: ignore[attr-defined]
    new_serial = x509.load_pem_x509_certificate(bundle.cert_pem).serial_number
    with Load(server) as load:
        assert wait_for(lambda: load.count > 20)
        assert new_serial not in load.serials
        write(bundle, tls)
        seen = wait_for(lambda: new_serial in load.serials[-3:])
        settled = load.count
        assert wait_for(lambda: load.count > settled + 20)
    assert seen, f"new connections never saw the new certificate ({len(load.serials)} tried)"
    assert load.errors == []
    # After the switch every new handshake gets the new certificate.
    switch = load.serials.index(new_serial)
    assert set(load.serials[switch:]) == {new_serial}


def _ready_everywhere(server: Server, check: Callable[[dict[str, Any]], bool]) -> bool:
    """True when several fresh connections in a row (so, both workers) agree."""
    for _ in range(8):
        conn = server.connection()
        conn.request("GET", "/readyz")
        detail = json.loads(conn.getresponse().read())
        conn.close()
        if not check(detail):
            return False
    return True


EXTRA = """apiVersion: gpupolicy.io/v1alpha1
kind: GPUPolicy
metadata:
  name: late-arrival
spec:
  namespaces: ["late-*"]
  rules:
    maxGPUsPerPod: 1
"""


def test_policy_reload_under_load(live: tuple[Server, Path, Path]) -> None:
    server, _, policies = live
    with Load(server) as load:
        assert wait_for(lambda: load.count > 10)
        (policies / "late.yaml").write_text(EXTRA)
        assert wait_for(lambda: _ready_everywhere(
            server, lambda d: "late-arrival" in d["policies"] and d["errors"] == {}))
        assert value(samples(server), "gpupolicy_policies_loaded") == 4

        # A broken file: the last good policies stay, the error shows in /readyz and metrics.
        (policies / "broken.yaml").write_text("apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicy\n"
                                              "metadata: {name: b}\nspec: {mode: Never}\n")
        assert wait_for(lambda: _ready_everywhere(
            server, lambda d: "broken.yaml" in d["errors"].get("policies", "")
            and "late-arrival" in d["policies"] and d["ready"]))
        found = samples(server)
        assert value(found, "gpupolicy_source_error", source="policies") == 1
        assert value(found, "gpupolicy_policy_reloads_total", source="policies",
                     result="failure") >= 2  # each worker
        assert value(found, "gpupolicy_policies_loaded") == 4

        (policies / "broken.yaml").unlink()
        (policies / "late.yaml").unlink()
        assert wait_for(lambda: _ready_everywhere(
            server, lambda d: d["errors"] == {} and "late-arrival" not in d["policies"]))
        assert value(samples(server), "gpupolicy_source_error", source="policies") == 0
        settled = load.count
        assert wait_for(lambda: load.count > settled + 10)
    assert load.errors == []
    failures = [e for e in server.logs() if e.get("msg", "").startswith("source load failed")]
    assert failures and "broken.yaml" in failures[0]["error"]


def test_tls_files_keep_the_last_good_pair(tmp_path: Path) -> None:
    """A half-rotated pair (new cert, old key) or a broken file is not loaded; the previous
    context stays; the next change that makes the pair whole is picked up at once."""
    from webhook.commands.serve import TLSFiles

    ca = certs.build_ca()
    certs.write_bundle(certs.build_serving_cert("gpupolicy", "gpupolicy", ca), tmp_path)
    files = TLSFiles(str(tmp_path / "tls.crt"), str(tmp_path / "tls.key"))
    first = files.context()
    assert files.context() is first  # unchanged files: the same context
    new = certs.build_serving_cert("gpupolicy", "gpupolicy", ca)
    (tmp_path / "tls.crt").write_bytes(new.cert_pem)  # key not yet replaced
    assert files.context() is first
    (tmp_path / "tls.key").write_bytes(b"-----BEGIN PRIVATE KEY-----\ngarbage\n")
    assert files.context() is first
    (tmp_path / "tls.key").write_bytes(new.key_pem)
    second = files.context()
    assert second is not first
    (tmp_path / "tls.crt").unlink()  # a file gone for a moment: keep serving
    assert files.context() is second
