"""`gpupolicy serve` and `gpupolicy certs` from the outside: start-up, TLS, refusals."""

from __future__ import annotations

import datetime as dt
import io
import json
import os
import socket
import ssl
import stat
import subprocess
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from tests.server import harness
from tests.server.harness import SNI, Server, envelope, make_request
from webhook.cli import run as cli_run
from webhook.commands.serve import TLSFiles

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"containers": [{"name": "c", "image": "i",
                                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}


def test_serve_without_tls_files_creates_and_keeps_a_ca(tmp_path: Path) -> None:
    """`make serve` on a fresh machine: self-signed CA + cert under ./certs, CA path printed,
    bundled policies; a second start keeps the same CA (the caBundle stays right)."""
    server = harness.start([], tmp_path)
    try:
        out = server.stdout.read_text()
        ca = tmp_path / "certs" / "ca.crt"
        assert f"CA certificate (caBundle): {ca}" in out
        reply = server.post("/validate?timeout=10s", envelope(make_request(POD, uid="fresh")))
        assert reply.status == 200 and reply.json["response"]["uid"] == "fresh"
        assert server.request("GET", "/readyz").status == 200
    finally:
        server.stop()
    first = ca.read_bytes()
    again = harness.start([], tmp_path)
    try:
        assert "using the existing certificate" in again.stdout.read_text()
        assert ca.read_bytes() == first
    finally:
        again.stop()


def _serve_fails(args: list[str], cwd: Path) -> str:
    env = {**os.environ, "PYTHONPATH": str(harness.ROOT)}
    proc = subprocess.run([*harness.GPUPOLICY, "serve", "--port", str(harness.free_port()),
                           "--metrics-port", str(harness.free_port()), *args],
                          cwd=cwd, capture_output=True, text=True, timeout=60, env=env)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert "gpupolicy: serving https" not in proc.stdout  # said only once the ports are bound
    return proc.stderr


def test_refusals_at_start(tmp_path: Path) -> None:
    assert "give both --tls-cert and --tls-key" in _serve_fails(["--tls-cert", "x.crt"], tmp_path)
    (tmp_path / "bad.crt").write_text("not a certificate")
    err = _serve_fails(["--tls-cert", "bad.crt", "--tls-key", "bad.crt"], tmp_path)
    assert "TLS certificate/key unusable" in err
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "p.yaml").write_text(
        "apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: x}\n"
        "spec:\n  mode: Sometimes\n"
    )
    err = _serve_fails(["--policies", str(policies)], tmp_path)
    assert "p.yaml:5" in err and "spec.mode" in err


# (case, arguments, words of the one line on stderr)
BAD_PORTS = [
    ("port-zero", ["--port", "0"], "--port must be 1-65535, not 0"),
    ("port-too-big", ["--port", "99999"], "--port must be 1-65535, not 99999"),
    ("port-negative", ["--port", "-1"], "--port must be 1-65535, not -1"),
    ("metrics-port-too-big", ["--metrics-port", "70000"],
     "--metrics-port must be 0 (none) or 1-65535, not 70000"),
    ("same-ports", ["--port", "9443", "--metrics-port", "9443"],
     "--metrics-port must differ from --port (9443)"),
    ("keepalive-zero", ["--keepalive", "0"], "--keepalive must be at least 1"),
    ("address-not-here", ["--host", "203.0.113.7"], "cannot listen on 203.0.113.7:"),
]


@pytest.mark.parametrize(("case", "args", "words"), BAD_PORTS, ids=[b[0] for b in BAD_PORTS])
def test_bad_ports_and_addresses(tmp_path: Path, case: str, args: list[str], words: str) -> None:
    err = _serve_fails(args, tmp_path)
    assert words in err
    assert len(err.strip().splitlines()) == 1, err


@pytest.mark.parametrize("which", ["--port", "--metrics-port"])
def test_port_in_use(tmp_path: Path, which: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        err = _serve_fails(["--host", "127.0.0.1", which, str(port)], tmp_path)
    assert err.strip() == (f"gpupolicy serve: cannot listen on 127.0.0.1:{port}: "
                           "Address already in use")


def test_metrics_port_off(tmp_path: Path, tls_dir: Path) -> None:
    server = harness.start(["--tls-cert", str(tls_dir / "tls.crt"),
                            "--tls-key", str(tls_dir / "tls.key"), "--metrics-port", "0"],
                           tmp_path, ca=tls_dir / "ca.crt")
    try:
        out = server.stdout.read_text()
        assert f"serving https://127.0.0.1:{server.port} " in out and "metrics on" not in out
    finally:
        server.stop()


def _handshake(server: Server, version: ssl.TLSVersion, sni: str = SNI) -> ssl.SSLSocket:
    context = harness.client_context(server.ca)
    context.minimum_version = context.maximum_version = version
    context.set_alpn_protocols(["h2", "http/1.1"])
    raw = socket.create_connection(("127.0.0.1", server.port), 5)
    return context.wrap_socket(raw, server_hostname=sni)


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3],
                         ids=["tls1.2", "tls1.3"])
def test_tls_versions_accepted(server: Server, version: ssl.TLSVersion) -> None:
    with _handshake(server, version) as tls:
        assert tls.version() == version.name.replace("_", ".")
        assert tls.selected_alpn_protocol() == "http/1.1"


@pytest.mark.filterwarnings("ignore:ssl.TLSVersion:DeprecationWarning")
@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1, ssl.TLSVersion.TLSv1_1],
                         ids=["tls1.0", "tls1.1"])
def test_old_tls_refused(server: Server, version: ssl.TLSVersion) -> None:
    with pytest.raises(ssl.SSLError):
        _handshake(server, version).close()


CBC_SUITES = ("ECDHE-ECDSA-AES128-SHA:ECDHE-ECDSA-AES256-SHA:ECDHE-ECDSA-AES128-SHA256:"
              "ECDHE-ECDSA-AES256-SHA384:ECDHE-RSA-AES128-SHA:ECDHE-RSA-AES256-SHA:AES128-SHA:"
              "AES256-SHA:AES128-SHA256:AES256-SHA256")


def test_tls12_cbc_only_client_refused(server: Server) -> None:
    context = harness.client_context(server.ca)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(CBC_SUITES)
    raw = socket.create_connection(("127.0.0.1", server.port), 5)
    with pytest.raises(ssl.SSLError):
        context.wrap_socket(raw, server_hostname=SNI).close()
    raw.close()


@pytest.mark.parametrize("suite", ["ECDHE-ECDSA-AES128-GCM-SHA256",
                                   "ECDHE-ECDSA-AES256-GCM-SHA384",
                                   "ECDHE-ECDSA-CHACHA20-POLY1305"])
def test_tls12_aead_suites_accepted(server: Server, suite: str) -> None:
    context = harness.client_context(server.ca)
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    context.set_ciphers(suite)
    raw = socket.create_connection(("127.0.0.1", server.port), 5)
    with context.wrap_socket(raw, server_hostname=SNI) as tls:
        cipher = tls.cipher()
        assert cipher is not None and cipher[0] == suite


def test_server_context_floor(tls_dir: Path) -> None:
    """The floor is the server's own (the client above may refuse old TLS by itself too)."""
    context = TLSFiles(str(tls_dir / "tls.crt"), str(tls_dir / "tls.key")).context()
    assert context.minimum_version == ssl.TLSVersion.TLSv1_2
    assert context.verify_mode == ssl.CERT_NONE  # the apiserver sends no client cert


def test_certificate_names(server: Server) -> None:
    with pytest.raises(ssl.SSLCertVerificationError):
        _handshake(server, ssl.TLSVersion.TLSv1_3, sni="other.gpupolicy.svc").close()


def test_certs_generate(tmp_path: Path) -> None:
    out, err = io.StringIO(), io.StringIO()
    code = cli_run(["certs", "generate", "--service", "hook", "--namespace", "gpu-system",
                    "--out", str(tmp_path), "--days", "30"], out, err)
    assert code == 0, err.getvalue()
    assert "hook.gpu-system.svc" in out.getvalue()
    ca = x509.load_pem_x509_certificate((tmp_path / "ca.crt").read_bytes())
    cert = x509.load_pem_x509_certificate((tmp_path / "tls.crt").read_bytes())
    cert.verify_directly_issued_by(ca)
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert {"hook.gpu-system.svc", "hook.gpu-system.svc.cluster.local"} <= set(
        names.get_values_for_type(x509.DNSName))
    assert isinstance(cert.signature_hash_algorithm, hashes.SHA256)
    assert isinstance(cert.public_key(), ec.EllipticCurvePublicKey)
    life = cert.not_valid_after_utc - dt.datetime.now(dt.UTC)
    assert 29 <= life.days <= 30
    assert stat.S_IMODE((tmp_path / "tls.key").stat().st_mode) == 0o600
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca


def test_certs_generate_refuses_bad_days(tmp_path: Path) -> None:
    err = io.StringIO()
    assert cli_run(["certs", "generate", "--out", str(tmp_path), "--days", "0"],
                   io.StringIO(), err) == 2
    assert "--days" in err.getvalue()


def test_keep_alive(server: Server) -> None:
    """Many admissions over one TLS connection (the apiserver reuses its connections)."""
    conn = server.connection()
    conn.connect()
    sock = conn.sock
    for i in range(30):
        req = make_request(POD, uid=f"ka-{i}")
        conn.request("POST", "/validate", body=json.dumps(envelope(req)),
                     headers={"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200 and resp.getheader("connection", "").lower() != "close"
        assert json.loads(resp.read())["response"]["uid"] == f"ka-{i}"
        assert conn.sock is sock  # never reconnected
    conn.close()


def _bundle_in(path: Path, service: str = "gpupolicy") -> None:
    from webhook import certs

    certs.write_bundle(certs.build_serving_cert(service, "gpupolicy", certs.build_ca()), path)


def _swap_key(path: Path) -> None:
    from webhook import certs

    other = certs.build_serving_cert("gpupolicy", "gpupolicy", certs.build_ca())
    (path / "tls.key").write_bytes(other.key_pem)


def _swap_ca(path: Path) -> None:
    from webhook import certs

    (path / "ca.crt").write_bytes(certs.build_serving_cert(
        "gpupolicy", "gpupolicy", certs.build_ca()).ca_pem)


@pytest.mark.parametrize(("spoil", "usable"), [
    (None, True),
    (lambda p: (p / "tls.key").unlink(), False),
    (lambda p: (p / "tls.crt").write_text("junk"), False),
    (_swap_key, False),  # key of another pair
    (_swap_ca, False),  # ca.crt did not sign tls.crt
    (lambda p: _bundle_in(p, service="other"), False),  # another Service name
], ids=["whole", "no-key", "junk-cert", "other-key", "other-ca", "other-service"])
def test_generated_certs_kept_only_when_whole(tmp_path: Path, spoil: object,
                                              usable: bool) -> None:
    from webhook import certs

    _bundle_in(tmp_path)
    if callable(spoil):
        spoil(tmp_path)
    assert certs.usable_bundle(tmp_path, "gpupolicy", "gpupolicy") is usable
