"""Certificate reloads that must not happen: an expired pair, a pair not yet valid, a pair for
another name, a truncated file. The real server refuses each with a warning and a count, keeps
serving the last good pair, and a worker forked later (SIGHUP, kill -9) starts from that last
good pair, not from the pair the server started with nor from the broken files on disk."""

from __future__ import annotations

import datetime as dt
import itertools
import os
import re
import signal
import socket
import ssl
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from tests.server import harness
from tests.server.harness import wait_for
from webhook import certs

SERVICE = "gpupolicy.gpupolicy.svc"


def make_pair(ca: certs.CA, *, names: tuple[str, ...] = (SERVICE, "localhost"),
              start: float = -300, days: float = 30) -> tuple[bytes, bytes, int]:
    """A serving pair signed by `ca`: (cert PEM, key PEM, serial); `start` seconds from now."""
    key = ec.generate_private_key(ec.SECP256R1())
    begin = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=start)
    serial = x509.random_serial_number()
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca.cert.subject).public_key(key.public_key()).serial_number(serial)
        .not_valid_before(begin).not_valid_after(begin + dt.timedelta(days=days))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]),
                       critical=False)
        .sign(ca.key, hashes.SHA256())
    )
    key_pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption())
    return cert.public_bytes(serialization.Encoding.PEM), key_pem, serial


# Days of each good pair the refusal cases install: each later than every pair before it.
LATER = itertools.count(100, 10)


def install(tls: Path, cert_pem: bytes, key_pem: bytes) -> None:
    """As a Secret volume update would: the key first, each file replaced whole."""
    for name, data in (("tls.key", key_pem), ("tls.crt", cert_pem)):
        tmp = tls / f".{name}.tmp"
        tmp.write_bytes(data)
        os.replace(tmp, tls / name)


def served_serial(port: int) -> int:
    """The serial of the certificate a new connection is given (no verification: a wrong
    pair must be seen, not just fail)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    with socket.create_connection(("127.0.0.1", port), 5) as raw, \
            context.wrap_socket(raw, server_hostname=SERVICE) as conn:
        der = conn.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der).serial_number


def metric(server: harness.Server, sample: str) -> float | None:
    text = server.plain("GET", "/metrics").body.decode()
    match = re.search(rf"^{re.escape(sample)} (\S+)$", text, re.M)
    return float(match.group(1)) if match else None


def worker_pids(server: harness.Server) -> set[int]:
    return {int(pid) for pid in server.plain("GET", "/readyz").json["workers"]}


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[harness.Server, Path,
                                                                     certs.CA, int]]:
    work = tmp_path_factory.mktemp("tls-refusal")
    tls = work / "tls"
    tls.mkdir()
    ca = certs.build_ca()
    (tls / "ca.crt").write_bytes(ca.cert.public_bytes(serialization.Encoding.PEM))
    cert_pem, key_pem, serial = make_pair(ca)
    install(tls, cert_pem, key_pem)
    server = harness.start(
        ["--tls-cert", str(tls / "tls.crt"), "--tls-key", str(tls / "tls.key"),
         "--workers", "2"], work, ca=tls / "ca.crt")
    wait_for(lambda: server.plain("GET", "/readyz").status == 200, 20, "ready")
    yield server, tls, ca, serial
    server.stop()


def _warnings(server: harness.Server, reason: str) -> list[dict[str, Any]]:
    return [line for line in server.logs()
            if line.get("msg") ==
            "tls certificate refused; keeping the last good one"
            and line.get("reason") == reason]


@pytest.mark.parametrize("reason", ["expired", "not_yet_valid", "wrong_name", "unreadable",
                                    "key_mismatch"])
def test_a_bad_pair_is_refused_and_the_last_good_one_keeps_serving(live, reason):
    server, tls, ca, _ = live
    started = time.monotonic()
    # The last good pair now, lasting longer than any pair installed before it: the expiry
    # gauge is the least over the workers, so it reaches this pair's only once every worker
    # serves it (a few connections may all land on one worker).
    days = next(LATER)
    good_pem, good_key, good = make_pair(ca, days=days)
    install(tls, good_pem, good_key)
    wait_for(lambda: all(served_serial(server.port) == good for _ in range(6)), 10,
             "the good pair served")
    expiry = "gpupolicy_tls_certificate_expiry_seconds"
    wait_for(lambda: abs((metric(server, expiry) or 0) - days * 86400 + 300) < 60,
             10, "the expiry metric follows the good pair, on every worker")
    counter = f'gpupolicy_tls_reload_errors_total{{reason="{reason}"}}'
    before = metric(server, counter)
    assert before is not None  # the series is there from the start, at 0 if nothing failed

    if reason == "expired":
        bad_pem, bad_key, _ = make_pair(ca, start=-40 * 86400, days=10)
    elif reason == "not_yet_valid":
        bad_pem, bad_key, _ = make_pair(ca, start=86400)
    elif reason == "wrong_name":
        bad_pem, bad_key, _ = make_pair(ca, names=("other.elsewhere.svc",))
    elif reason == "unreadable":  # a write cut short
        bad_pem, bad_key, _ = make_pair(ca)
        bad_pem = bad_pem[: len(bad_pem) // 2]
    else:
        bad_pem, _, _ = make_pair(ca)
        bad_key = good_key
    install(tls, bad_pem, bad_key)

    wait_for(lambda: (metric(server, counter) or 0) >= before + 2, 10,  # both workers refused
             f"{counter} counts")
    # the log line is written after the count: under load it lands a moment later
    wait_for(lambda: _warnings(server, reason), 10, "a warning says the pair was refused and why")
    assert all(served_serial(server.port) == good for _ in range(10))
    assert abs((metric(server, expiry) or 0) - days * 86400 + 300) < 60
    # The files stay broken: no new warning per handshake.
    count = len(_warnings(server, reason))
    for _ in range(5):
        served_serial(server.port)
    time.sleep(1.2)
    assert len(_warnings(server, reason)) <= count + 3  # at most the master's own check
    assert time.monotonic() - started < 30


def test_new_workers_start_from_the_last_good_pair(live):
    """SIGHUP and kill -9 with a truncated file on disk: the workers forked then serve the last
    good pair (not the start pair, and not nothing)."""
    server, tls, ca, first = live
    started = time.monotonic()
    good_pem, good_key, good = make_pair(ca, days=50)
    seen = _master_reloads(server)
    install(tls, good_pem, good_key)
    wait_for(lambda: all(served_serial(server.port) == good for _ in range(6)), 10, "rotated")
    # The master checks the files once a second (and before each fork).
    wait_for(lambda: _master_reloads(server) > seen, 10, "the master holds the new pair")
    (tls / "tls.crt").write_bytes(good_pem[:100])  # truncated in place
    time.sleep(1.5)  # the master and the workers have seen it (and refused it)

    before = worker_pids(server)
    server.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: (p := worker_pids(server)) and not p & before and len(p) == 2, 20,
             "new workers after SIGHUP")
    serials = {served_serial(server.port) for _ in range(20)}
    assert serials == {good}, (serials, good, first)

    before = worker_pids(server)
    for pid in before:
        os.kill(pid, signal.SIGKILL)
    wait_for(lambda: (p := worker_pids(server)) and not p & before and len(p) == 2, 20,
             "workers replaced after kill -9")
    serials = {served_serial(server.port) for _ in range(20)}
    assert serials == {good}, (serials, good, first)
    assert time.monotonic() - started < 60


@pytest.mark.parametrize("kind", ["expired", "wrong_name_is_allowed_at_start"])
def test_serve_checks_the_starting_pair(tmp_path, kind):
    """An expired starting pair is refused at start (exit 2, saying why); a pair that does not
    name the Service starts (a webhook reached by URL) and says so."""
    ca = certs.build_ca()
    if kind == "expired":
        cert_pem, key_pem, _ = make_pair(ca, start=-40 * 86400, days=10)
    else:
        cert_pem, key_pem, _ = make_pair(ca, names=("webhook.example.com",))
    install(tmp_path, cert_pem, key_pem)
    args = ["--tls-cert", str(tmp_path / "tls.crt"), "--tls-key", str(tmp_path / "tls.key")]
    if kind == "expired":
        env = {**os.environ, "PYTHONPATH": str(harness.ROOT)}
        env.pop("PROMETHEUS_MULTIPROC_DIR", None)
        done = subprocess.run(
            [*harness.GPUPOLICY, "serve", "--host", "127.0.0.1", "--port",
             str(harness.free_port()), "--metrics-port", "0", *args],
            capture_output=True, text=True, timeout=60, env=env, cwd=tmp_path)
        assert done.returncode == 2
        assert "expired" in done.stderr
        return
    proc_args = [*args, "--workers", "1"]
    port = harness.free_port()
    env = {**os.environ, "PYTHONPATH": str(harness.ROOT)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    log = tmp_path / "server.log"
    proc = subprocess.Popen(
        [*harness.GPUPOLICY, "serve", "--host", "127.0.0.1", "--port", str(port),
         "--metrics-port", "0", *proc_args],
        stdout=subprocess.DEVNULL, stderr=log.open("wb"), env=env, cwd=tmp_path)
    try:
        wait_for(lambda: _try_serial(port), 30, "serving")
        text = log.read_text()
        assert "does not name the Service" in text
        assert "webhook.example.com" in text
    finally:
        proc.terminate()
        proc.wait(15)


def _master_reloads(server: harness.Server) -> int:
    return sum(1 for line in server.logs() if line.get("pid") == server.proc.pid
               and line.get("msg") == "tls certificate reloaded")


def _try_serial(port: int) -> int | None:
    try:
        return served_serial(port)
    except OSError:
        return None


def test_a_pair_not_yet_valid_is_taken_once_its_time_comes(live):
    """Refused while early, then served from its notBefore on without any file change."""
    server, tls, ca, _ = live
    started = time.monotonic()
    good_pem, good_key, good = make_pair(ca, days=60)
    install(tls, good_pem, good_key)
    wait_for(lambda: all(served_serial(server.port) == good for _ in range(6)), 10, "rotated")
    early_pem, early_key, early = make_pair(ca, start=4)
    install(tls, early_pem, early_key)
    time.sleep(1.5)
    assert all(served_serial(server.port) == good for _ in range(6))
    wait_for(lambda: all(served_serial(server.port) == early for _ in range(6)), 15,
             "the pair served once valid")
    assert time.monotonic() - started < 30


@pytest.mark.parametrize(("san", "name", "covers"), [
    ("gpupolicy.gpupolicy.svc", "gpupolicy.gpupolicy.svc", True),
    ("GPUPolicy.gpupolicy.svc.", "gpupolicy.gpupolicy.svc", True),
    ("*.gpupolicy.svc", "gpupolicy.gpupolicy.svc", True),
    ("*.svc", "gpupolicy.gpupolicy.svc", False),  # a wildcard stands for one label only
    ("*.gpupolicy.svc", "gpupolicy.svc", False),
    ("gpupolicy.gpupolicy.svc.cluster.local", "gpupolicy.gpupolicy.svc", False),
    ("other.gpupolicy.svc", "gpupolicy.gpupolicy.svc", False),
])
def test_which_names_a_certificate_covers(san, name, covers):
    assert certs.names_match(san, name) is covers


def test_check_pair_says_what_is_wrong():
    ca = certs.build_ca()
    cert_pem, key_pem, _ = make_pair(ca)
    assert certs.check_pair(cert_pem, key_pem, (SERVICE,)).subject
    other_key = make_pair(ca)[1]
    cases = {
        "unreadable": (cert_pem[:50], key_pem, ()),
        "key_mismatch": (cert_pem, other_key, ()),
        "wrong_name": (cert_pem, key_pem, ("gpupolicy.elsewhere.svc",)),
        "expired": (*make_pair(ca, start=-20 * 86400, days=1)[:2], ()),
        "not_yet_valid": (*make_pair(ca, start=3600)[:2], ()),
    }
    for reason, (cert, key, names) in cases.items():
        with pytest.raises(certs.PairProblem) as problem:
            certs.check_pair(cert, key, names)
        assert problem.value.reason == reason
        assert (problem.value.retry_at is not None) is (reason == "not_yet_valid")
