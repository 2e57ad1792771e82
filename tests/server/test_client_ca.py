"""`serve --client-ca`: the API server authenticates to the webhook with a client certificate
(its AdmissionConfiguration kubeConfigFile, docs/security.md). Over real TLS, a client with a
certificate the CA signed is answered; one without a certificate, with one from another CA,
or with an expired one is refused in the handshake, before any HTTP is read."""

from __future__ import annotations

import datetime as dt
import http.client
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from tests.server import harness
from tests.server.conftest import NAMESPACES, POLICIES
from webhook import certs


def _client_cert(ca: certs.CA, out: Path, name: str, days: float = 1) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    start = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)]))
        .issuer_name(ca.cert.subject).public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start - dt.timedelta(days=2) if days < 0 else start)
        .not_valid_after(start + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    crt, pem = out / f"{name}.crt", out / f"{name}.key"
    crt.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    pem.write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                      serialization.PrivateFormat.PKCS8,
                                      serialization.NoEncryption()))
    return crt, pem


@pytest.fixture(scope="module")
def clients(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path] | None]:
    out = tmp_path_factory.mktemp("client-ca")
    client_ca, other_ca = certs.build_ca("apiserver-client-ca"), certs.build_ca("someone-else")
    (out / "client-ca.crt").write_bytes(client_ca.cert.public_bytes(serialization.Encoding.PEM))
    return {"signed by the CA": _client_cert(client_ca, out, "kube-apiserver"),
            "no certificate": None,
            "another CA's": _client_cert(other_ca, out, "intruder"),
            "expired": _client_cert(client_ca, out, "old-apiserver", days=-1)}


@pytest.fixture(scope="module")
def mtls_server(tls_dir: Path, clients: dict[str, tuple[Path, Path] | None],
                tmp_path_factory: pytest.TempPathFactory) -> Iterator[harness.Server]:
    client = clients["signed by the CA"]
    assert client is not None
    ca_file = client[0].parent / "client-ca.crt"
    srv = harness.start(
        ["--tls-cert", str(tls_dir / "tls.crt"), "--tls-key", str(tls_dir / "tls.key"),
         "--client-ca", str(ca_file), "--policies", str(POLICIES),
         "--namespaces", str(NAMESPACES), "--workers", "1"],
        tmp_path_factory.mktemp("mtls"), ca=tls_dir / "ca.crt", client=client)
    yield srv
    srv.stop()


def _get(server: harness.Server, client: tuple[Path, Path] | None) -> int:
    conn = harness.Connection(server.port, harness.client_context(server.ca, client))
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status
    finally:
        conn.close()


@pytest.mark.parametrize("who", ["signed by the CA", "no certificate", "another CA's",
                                 "expired"])
def test_only_clients_the_ca_signed_are_answered(mtls_server: harness.Server,
                                                  clients: dict[str, tuple[Path, Path] | None],
                                                  who: str) -> None:
    if who == "signed by the CA":
        assert _get(mtls_server, clients[who]) == 200
        reply = mtls_server.post("/validate", harness.envelope(harness.make_request(
            {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
             "spec": {"containers": [{"name": "c", "image": "x"}]}}, namespace="team-a")))
        assert reply.status == 200 and reply.json["response"]["allowed"] is True
        return
    # TLS 1.3: the server's refusal may arrive as an alert at the first read, not the handshake
    with pytest.raises((ssl.SSLError, ConnectionError, http.client.HTTPException)):
        _get(mtls_server, clients[who])


def test_metrics_port_stays_plain_for_the_kubelet(mtls_server: harness.Server) -> None:
    assert mtls_server.plain("GET", "/healthz").status == 200


def test_a_client_ca_with_no_certificate_stops_the_start(tls_dir: Path, tmp_path: Path) -> None:
    empty = tmp_path / "ca.crt"
    empty.write_text("not a certificate\n")
    with pytest.raises(RuntimeError, match="TLS certificate/key unusable"):
        harness.start(["--tls-cert", str(tls_dir / "tls.crt"), "--tls-key",
                       str(tls_dir / "tls.key"), "--client-ca", str(empty),
                       "--policies", str(POLICIES)], tmp_path, ca=tls_dir / "ca.crt",
                      timeout=15)


def test_a_replaced_client_ca_is_read_again(tls_dir: Path, tmp_path: Path) -> None:
    """The CA file changes (a rotated ConfigMap): new connections are checked against the new
    CA, with no restart."""
    first, second = certs.build_ca("first-ca"), certs.build_ca("second-ca")
    old_client = _client_cert(first, tmp_path, "old-client")
    new_client = _client_cert(second, tmp_path, "new-client")
    ca_file = tmp_path / "client-ca.crt"
    ca_file.write_bytes(first.cert.public_bytes(serialization.Encoding.PEM))
    srv = harness.start(
        ["--tls-cert", str(tls_dir / "tls.crt"), "--tls-key", str(tls_dir / "tls.key"),
         "--client-ca", str(ca_file), "--policies", str(POLICIES), "--workers", "1"],
        tmp_path, ca=tls_dir / "ca.crt", client=old_client)
    try:
        assert _get(srv, old_client) == 200
        replaced = tmp_path / "client-ca.new"
        replaced.write_bytes(second.cert.public_bytes(serialization.Encoding.PEM))
        replaced.replace(ca_file)  # as the kubelet swaps a ConfigMap's files: a new inode

        def answered(client: tuple[Path, Path]) -> bool:
            try:
                return _get(srv, client) == 200
            except (ssl.SSLError, ConnectionError, http.client.HTTPException):
                return False

        harness.wait_for(lambda: answered(new_client), 10, "the new CA in use")
        assert not answered(old_client)
    finally:
        srv.stop()
