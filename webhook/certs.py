"""A private CA and a serving certificate for `<service>.<namespace>.svc`, built with
`cryptography`. The builders are pure (no files); `write_bundle` is the only I/O.

The apiserver verifies SAN DNS names only (the CN is ignored), rejects SHA-1 signatures and
speaks TLS 1.2+, so: ECDSA P-256 keys, SHA-256 signatures, SANs for the short and the
cluster-local service names (webhook-contract.md §3).
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CA_FILE = "ca.crt"
CERT_FILE = "tls.crt"
KEY_FILE = "tls.key"
CA_KEY_FILE = "ca.key"


@dataclass(frozen=True)
class CA:
    cert: x509.Certificate
    key: ec.EllipticCurvePrivateKey


@dataclass(frozen=True)
class Bundle:
    """PEM texts: what a Secret of type kubernetes.io/tls plus `ca.crt` holds."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes
    ca_key_pem: bytes = b""


def service_names(service: str, namespace: str) -> list[str]:
    return [f"{service}.{namespace}.svc", f"{service}.{namespace}.svc.cluster.local"]


def _now() -> dt.datetime:
    # Back-date a little: a node whose clock is slightly behind must not see "not yet valid".
    return dt.datetime.now(dt.UTC) - dt.timedelta(minutes=5)


def build_ca(common_name: str = "gpupolicy-ca", days: int = 3650) -> CA:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    start = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(name).issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(start + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, key_cert_sign=True, crl_sign=True,
                content_commitment=False, key_encipherment=False, data_encipherment=False,
                key_agreement=False, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return CA(cert, key)


def build_serving_cert(
    service: str, namespace: str, ca: CA, days: int = 365,
    extra_names: tuple[str, ...] = ("localhost",), ips: tuple[str, ...] = ("127.0.0.1",),
) -> Bundle:
    key = ec.generate_private_key(ec.SECP256R1())
    dns = service_names(service, namespace) + [n for n in extra_names if n]
    sans: list[x509.GeneralName] = [x509.DNSName(n) for n in dns]
    sans += [x509.IPAddress(ipaddress.ip_address(ip)) for ip in ips]
    start = _now()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, dns[0])]))
        .issuer_name(ca.cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(start).not_valid_after(start + dt.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), critical=False
        )
        .sign(ca.key, hashes.SHA256())
    )
    return Bundle(
        ca_pem=ca.cert.public_bytes(serialization.Encoding.PEM),
        cert_pem=cert.public_bytes(serialization.Encoding.PEM),
        key_pem=_key_pem(key),
        ca_key_pem=_key_pem(ca.key),
    )


def load_ca(directory: str | Path) -> CA | None:
    """The CA kept in `directory` (ca.crt and ca.key), or None when there is none. A pair that
    is there but unusable (unreadable, key not the certificate's, not a CA, not an EC key)
    raises ValueError saying which."""
    where = Path(directory)
    try:
        cert_pem, key_pem = (where / CA_FILE).read_bytes(), (where / CA_KEY_FILE).read_bytes()
    except FileNotFoundError:
        return None
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"{where}: not a PEM CA certificate and key: {exc}") from None
    der = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if not isinstance(key, ec.EllipticCurvePrivateKey) or \
            key.public_key().public_bytes(*der) != cert.public_key().public_bytes(*der):
        raise ValueError(f"{where}: {CA_KEY_FILE} is not the EC key of {CA_FILE}")
    try:
        is_ca = cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    except x509.ExtensionNotFound:
        is_ca = False
    if not is_ca:
        raise ValueError(f"{where}: {CA_FILE} is not a CA certificate")
    return CA(cert, key)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def _write(path: Path, data: bytes, mode: int) -> None:
    # Write beside, then rename: a server re-reading the file never sees half of it.
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, path)


def write_bundle(bundle: Bundle, directory: str | Path) -> dict[str, Path]:
    """Write ca.crt, tls.crt, tls.key (and ca.key when known); keys are mode 0600."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"ca": out / CA_FILE, "cert": out / CERT_FILE, "key": out / KEY_FILE}
    # Key first: a watcher that sees the new cert must find the matching key already there.
    _write(paths["key"], bundle.key_pem, 0o600)
    _write(paths["cert"], bundle.cert_pem, 0o644)
    _write(paths["ca"], bundle.ca_pem, 0o644)
    if bundle.ca_key_pem:
        paths["ca_key"] = out / CA_KEY_FILE
        _write(paths["ca_key"], bundle.ca_key_pem, 0o600)
    return paths


def write_ca(ca: CA, directory: str | Path) -> dict[str, Path]:
    """Write the CA's ca.crt and ca.key (mode 0600) into `directory`."""
    out = Path(directory)
    out.mkdir(parents=True, exist_ok=True)
    paths = {"ca": out / CA_FILE, "ca_key": out / CA_KEY_FILE}
    _write(paths["ca_key"], _key_pem(ca.key), 0o600)
    _write(paths["ca"], ca.cert.public_bytes(serialization.Encoding.PEM), 0o644)
    return paths


def usable_bundle(directory: str | Path, service: str, namespace: str, min_days: int = 7) -> bool:
    """True when `directory` already holds a serving cert for the service, issued by its
    ca.crt, matching tls.key and valid for a while: `serve` then keeps it, so the caBundle
    given to the cluster stays right across restarts. Anything else is made anew."""
    out = Path(directory)
    try:
        cert = x509.load_pem_x509_certificate((out / CERT_FILE).read_bytes())
        ca = x509.load_pem_x509_certificate((out / CA_FILE).read_bytes())
        key = serialization.load_pem_private_key((out / KEY_FILE).read_bytes(), password=None)
        cert.verify_directly_issued_by(ca)
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except (OSError, ValueError, TypeError, x509.ExtensionNotFound, InvalidSignature):
        return False
    same_key = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    ) == cert.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    wanted = service_names(service, namespace)[0]
    left = cert.not_valid_after_utc - dt.datetime.now(dt.UTC)
    return (same_key and wanted in names.value.get_values_for_type(x509.DNSName)
            and left.days >= min_days)


class PairProblem(ValueError):
    """A serving pair that must not be served; `reason` is a short label for the metrics
    (unreadable, expired, not_yet_valid, wrong_name, key_mismatch)."""

    def __init__(self, reason: str, message: str, retry_at: dt.datetime | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.retry_at = retry_at  # when the same files may pass (a pair not yet valid)


def cert_names(cert: x509.Certificate) -> list[str]:
    """The DNS names and IP addresses a certificate is valid for (its SANs)."""
    try:
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return []
    return [*sans.get_values_for_type(x509.DNSName),
            *(str(ip) for ip in sans.get_values_for_type(x509.IPAddress))]


def names_match(pattern: str, name: str) -> bool:
    """A SAN covering a name as TLS clients check it: equal ignoring case, or a `*.` wildcard
    standing for exactly the leftmost label."""
    pattern, name = pattern.lower().rstrip("."), name.lower().rstrip(".")
    if pattern == name:
        return True
    if not pattern.startswith("*."):
        return False
    label, dot, rest = name.partition(".")
    return bool(label and dot) and rest == pattern[2:]


def check_pair(cert_pem: bytes, key_pem: bytes, names: tuple[str, ...] = (),
               now: dt.datetime | None = None) -> x509.Certificate:
    """The serving certificate of a PEM pair, once it is one worth serving: it parses, its
    key matches, it is valid now, and it covers every one of `names`. Else PairProblem."""
    try:
        cert = x509.load_pem_x509_certificate(cert_pem)
        key = serialization.load_pem_private_key(key_pem, password=None)
    except (ValueError, TypeError) as exc:
        raise PairProblem("unreadable", f"not a PEM certificate and key: {exc}") from exc
    der = serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    if key.public_key().public_bytes(*der) != cert.public_key().public_bytes(*der):
        raise PairProblem("key_mismatch", "the key does not belong to the certificate")
    now = now or dt.datetime.now(dt.UTC)
    if cert.not_valid_after_utc <= now:
        raise PairProblem("expired", f"the certificate expired at "
                          f"{cert.not_valid_after_utc.isoformat()}")
    if cert.not_valid_before_utc > now:
        raise PairProblem("not_yet_valid", f"the certificate is not valid before "
                          f"{cert.not_valid_before_utc.isoformat()}",
                          retry_at=cert.not_valid_before_utc)
    have = cert_names(cert)
    missing = [n for n in names if not any(names_match(h, n) for h in have)]
    if missing:
        raise PairProblem("wrong_name", f"the certificate does not name {', '.join(missing)} "
                          f"(it names {', '.join(have) or 'nothing'})")
    return cert
