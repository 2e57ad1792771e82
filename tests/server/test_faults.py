"""The server under attack and under faults, over real gunicorn and real TLS: idle and slow
clients beside normal traffic, probes while every admission thread is taken, gunicorn's own
refusals, oversized bodies, SIGTERM with requests in flight. Every wait is bounded here, by
client-side timeouts, never by the server's goodwill."""

from __future__ import annotations

import http.client
import json
import signal
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.server import harness
from tests.server.harness import Server, envelope, make_request

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"containers": [{"name": "c", "image": "i",
                                "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}
REVIEW = json.dumps(envelope(make_request(POD, uid="fault"))).encode()
P99_LIMIT = 0.100  # seconds, the bar for normal traffic beside bad clients
# The machine is shared (the load average often passes 10 on 2 CPUs): a round may be slowed
# by others, so the best of a few rounds counts, as in bench/. The failure this guards against
# is not a slow round: before webhook/http/worker.py, each idle client held a thread for seconds.
ROUNDS = 3
FIGURES: dict[str, str] = {}  # what was measured, printed at the end of the module (-rA / -s)


def _start(tmp: Path, tls_dir: Path, *extra: str) -> Server:
    return harness.start(["--tls-cert", str(tls_dir / "tls.crt"),
                          "--tls-key", str(tls_dir / "tls.key"), *extra], tmp,
                         ca=tls_dir / "ca.crt")


@pytest.fixture(scope="module")
def victim(tls_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """A server of its own (the shared one must not see these clients): the defaults."""
    srv = _start(tmp_path_factory.mktemp("faults"), tls_dir)
    yield srv
    srv.stop()
    for name, text in FIGURES.items():
        print(f"\n{name}: {text}")


def _tcp(server: Server, port: int | None = None) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port or server.port), timeout=5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def _tls(server: Server) -> ssl.SSLSocket:
    return harness.client_context(server.ca).wrap_socket(_tcp(server),
                                                         server_hostname=harness.SNI)


def _answer(sock: socket.socket, timeout: float = 5) -> tuple[int, dict[str, str], bytes]:
    sock.settimeout(timeout)
    resp = http.client.HTTPResponse(sock)  # type: ignore[arg-type]
    resp.begin()
    body = resp.read()
    return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body


def _closed_by_server(sock: socket.socket, timeout: float) -> float | None:
    """Seconds until the server closed `sock` (EOF or reset), or None if it did not in time."""
    started = time.monotonic()
    sock.settimeout(timeout)
    try:
        while sock.recv(4096):
            pass
    except TimeoutError:
        return None
    except OSError:
        pass  # reset: closed too
    return time.monotonic() - started


def _load(server: Server, clients: int = 4, each: int = 60) -> list[float]:
    """Normal traffic: `clients` kept-alive connections, `each` admissions on each; latencies."""
    latencies: list[float] = []
    failures: list[str] = []

    def client() -> None:
        conn = harness.Connection(server.port, harness.client_context(server.ca), timeout=5)
        try:
            for _ in range(each):
                started = time.perf_counter()
                conn.request("POST", "/validate", REVIEW, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                resp.read()
                latencies.append(time.perf_counter() - started)
                if resp.status != 200:
                    failures.append(str(resp.status))
        except (OSError, http.client.HTTPException) as exc:
            failures.append(repr(exc))
        finally:
            conn.close()

    threads = [threading.Thread(target=client) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures, failures[:5]
    assert len(latencies) == clients * each
    return sorted(latencies)


def _best_of_rounds(server: Server, during: Callable[[], list[socket.socket]] | None = None
                    ) -> list[float]:
    """Normal traffic, up to ROUNDS times (each beside fresh `during()` connections if given),
    until a round's p99 is under the limit; the best round's latencies."""
    best: list[float] = []
    for _ in range(ROUNDS):
        opened = during() if during is not None else []
        try:
            latencies = _load(server)
        finally:
            for sock in opened:
                sock.close()
        if not best or _p99(latencies) < _p99(best):
            best = latencies
        if _p99(best) < P99_LIMIT:
            break
    return best


def _p99(latencies: list[float]) -> float:
    return latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))]


def _figure(name: str, latencies: list[float]) -> str:
    text = (f"p50 {latencies[len(latencies) // 2] * 1000:.1f} ms, "
            f"p99 {_p99(latencies) * 1000:.1f} ms, max {latencies[-1] * 1000:.1f} ms "
            f"over {len(latencies)} admissions")
    FIGURES[name] = text
    return text


def _kept_alive_idle(server: Server) -> socket.socket:
    sock = _tls(server)
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    status, headers, _ = _answer(sock)
    assert status == 200 and headers.get("connection") != "close"
    return sock


IDLE: dict[str, Callable[[Server], socket.socket]] = {
    "tcp-silent": _tcp,  # connects, never starts TLS
    "tls-silent": _tls,  # handshake done, never sends a request
    "kept-alive-idle": _kept_alive_idle,  # one request done, then quiet (keep-alive)
}


@pytest.mark.parametrize("kind", ["none", *sorted(IDLE)])
def test_p99_beside_64_idle_connections(victim: Server, kind: str) -> None:
    """"none" is the baseline, for the figures."""
    latencies = _best_of_rounds(
        victim, None if kind == "none" else lambda: [IDLE[kind](victim) for _ in range(64)])
    text = _figure(f"64 idle ({kind})", latencies)
    assert _p99(latencies) < P99_LIMIT, text


def _head_trickler(server: Server, stop: threading.Event) -> socket.socket:
    sock = _tls(server)
    sock.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\n")

    def trickle() -> None:
        try:
            while not stop.wait(0.3):
                sock.sendall(b"X")
        except OSError:
            pass  # closed by the server: what should happen

    threading.Thread(target=trickle, daemon=True).start()
    return sock


def _body_trickler(server: Server, stop: threading.Event) -> socket.socket:
    sock = _tls(server)
    sock.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                 b"Content-Length: 100000\r\n\r\n{")

    def trickle() -> None:
        try:
            while not stop.wait(0.3):
                sock.sendall(b" ")
        except OSError:
            pass

    threading.Thread(target=trickle, daemon=True).start()
    return sock


# (kind, how it trickles, the server's deadline for it in seconds)
SLOW = [("head", _head_trickler, 5.0), ("body", _body_trickler, 10.0)]


@pytest.mark.parametrize(("kind", "trickler", "deadline"), SLOW, ids=[s[0] for s in SLOW])
def test_p99_beside_8_slow_loris(victim: Server, kind: str,
                                 trickler: Callable[[Server, threading.Event], socket.socket],
                                 deadline: float) -> None:
    """8 clients sending a byte every 0.3 s: normal traffic does not notice, and the server
    cuts them off at its deadline (they never finish)."""
    stop = threading.Event()
    started = time.monotonic()
    slow = [trickler(victim, stop) for _ in range(8)]
    try:
        time.sleep(0.5)  # they are trickling
        latencies = _best_of_rounds(victim)
        text = _figure(f"8 slow-loris ({kind})", latencies)
        assert _p99(latencies) < P99_LIMIT, text
        closed = [_closed_by_server(s, deadline + 3 - (time.monotonic() - started))
                  for s in slow]
        cut = [c for c in closed if c is not None]
        assert len(cut) == 8, f"{8 - len(cut)} slow clients still open after {deadline + 3}s"
        waited = time.monotonic() - started
        FIGURES[f"8 slow-loris ({kind}) cut off after"] = f"{waited:.1f} s"
        assert deadline - 1 <= waited <= deadline + 3
    finally:
        stop.set()
        for s in slow:
            s.close()


@pytest.mark.parametrize(("kind", "opener", "deadline"), [
    ("tcp-silent", _tcp, 5.0), ("tls-silent", _tls, 5.0)])
def test_silent_connections_are_closed_at_the_deadline(
        victim: Server, kind: str, opener: Callable[[Server], socket.socket],
        deadline: float) -> None:
    sock = opener(victim)
    try:
        after = _closed_by_server(sock, deadline + 3)
    finally:
        sock.close()
    assert after is not None, f"{kind}: still open after {deadline + 3}s"
    assert deadline - 1 <= after <= deadline + 2


@pytest.fixture(scope="module")
def small(tls_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One worker with two admission threads: easy to take them all."""
    srv = _start(tmp_path_factory.mktemp("small"), tls_dir, "--workers", "1", "--threads", "2")
    yield srv
    srv.stop()


def _chunked_trickler(server: Server, stop: threading.Event) -> socket.socket:
    """A chunked body is read by an admission thread (under the 10 s request deadline)."""
    sock = _tls(server)
    sock.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")

    def trickle() -> None:
        try:
            while not stop.wait(0.3):
                sock.sendall(b"1\r\n \r\n")
        except OSError:
            pass

    threading.Thread(target=trickle, daemon=True).start()
    return sock


def test_probes_answer_while_every_admission_thread_is_taken(small: Server) -> None:
    stop = threading.Event()
    busy = [_chunked_trickler(small, stop) for _ in range(2)]
    try:
        time.sleep(0.5)
        # The premise: an admission now waits for a thread.
        conn = harness.Connection(small.port, harness.client_context(small.ca), timeout=1)
        with pytest.raises(TimeoutError):
            conn.request("POST", "/validate", REVIEW, {"Content-Type": "application/json"})
            conn.getresponse().read()
        conn.close()
        timings = []
        for _ in range(5):
            for path in ("/healthz", "/readyz"):
                started = time.perf_counter()
                sock = _tls(small)
                sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                status, _, _ = _answer(sock, timeout=2)
                sock.close()
                assert status == 200, path
                reply = small.plain("GET", path, timeout=2)
                assert reply.status == 200, path
                timings.append(time.perf_counter() - started)
        FIGURES["probes with every admission thread taken"] = (
            f"max {max(timings) * 1000:.1f} ms for a TLS probe and a metrics-port probe")
        assert max(timings) < 1.0
    finally:
        stop.set()
        for s in busy:
            s.close()


# (case, raw request, status, words in the JSON error)
REFUSED = [
    ("bad-request-line", b"GARBAGE\r\n\r\n", 400, "Invalid"),
    ("bad-version", b"GET /healthz HTTP/9.9\r\nHost: x\r\n\r\n", 400, "HTTP Version"),
    ("uri-too-long", b"GET /" + b"a" * 5000 + b" HTTP/1.1\r\nHost: x\r\n\r\n", 414,
     "too large"),
    ("header-too-large", b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 9000
     + b"\r\n\r\n", 431, "header"),
    ("too-many-headers", b"GET /healthz HTTP/1.1\r\n" + b"".join(
        b"X-%d: y\r\n" % i for i in range(120)) + b"\r\n", 431, "header"),
    ("bad-chunk-size", b"POST /validate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n"
     b"\r\nzz\r\n", 400, "body unreadable"),
    ("head-over-64k", b"GET /healthz HTTP/1.1\r\n"  # and no end in sight
     + b"".join(b"X-%d: %s\r\n" % (i, b"q" * 7000) for i in range(10)), 431, "head larger"),
]


@pytest.mark.parametrize(("case", "raw", "status", "words"), REFUSED, ids=[r[0] for r in REFUSED])
def test_server_level_refusals_are_json(victim: Server, case: str, raw: bytes, status: int,
                                        words: str) -> None:
    sock = _tls(victim)
    try:
        sock.sendall(raw)
        got, headers, body = _answer(sock)
    finally:
        sock.close()
    assert got == status, body
    assert headers["content-type"] == "application/json"
    text = body.decode()
    assert "\n" not in text and "<html" not in text.lower()
    assert words.lower() in json.loads(text)["error"].lower()


def test_oversized_content_length_is_refused_unread(victim: Server) -> None:
    """64 MiB announced, 1 KiB sent: the 413 comes at once, then the connection closes."""
    sock = _tls(victim)
    try:
        sock.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                     b"Content-Length: 67108864\r\n\r\n" + b"x" * 1024)
        started = time.monotonic()
        status, headers, body = _answer(sock, timeout=3)
        took = time.monotonic() - started
        assert status == 413 and "larger than" in json.loads(body)["error"]
        assert headers.get("connection") == "close"
        assert _closed_by_server(sock, 4) is not None
    finally:
        sock.close()
    FIGURES["64 MiB Content-Length refused after"] = f"{took * 1000:.1f} ms"
    assert took < 1.0


def test_sigterm_with_requests_in_flight(tls_dir: Path, tmp_path: Path) -> None:
    """Clients keep sending on kept-alive connections while SIGTERM comes: every request sent
    is answered (the last ones with Connection: close), none reset; idle kept-alive
    connections are closed cleanly; the server exits 0."""
    server = _start(tmp_path, tls_dir)
    stop = threading.Event()
    lock = threading.Lock()
    done: list[tuple[float, float]] = []  # (sent, answered) of every answered request
    reset: list[str] = []
    term_at = [float("inf")]

    def client() -> None:
        conn = harness.Connection(server.port, harness.client_context(server.ca), timeout=10)
        while not stop.is_set():
            if conn.sock is None:
                try:
                    conn.connect()
                except OSError:
                    return  # refused once stopping: never sent, nothing lost
            sent = time.monotonic()
            try:
                conn.request("POST", "/validate", REVIEW, {"Content-Type": "application/json"})
                resp = conn.getresponse()
                resp.read()
            except (OSError, http.client.HTTPException) as exc:
                with lock:
                    reset.append(f"{exc!r} {sent - term_at[0]:+.3f}s after SIGTERM")
                return
            with lock:
                done.append((sent, time.monotonic()))
            if resp.status != 200:
                with lock:
                    reset.append(f"status {resp.status}")
                return
            if resp.will_close:
                conn.close()

    idle = [_kept_alive_idle(server) for _ in range(8)]
    clients = [threading.Thread(target=client) for _ in range(8)]
    try:
        for t in clients:
            t.start()
        time.sleep(1.0)
        term_at[0] = time.monotonic()
        server.proc.send_signal(signal.SIGTERM)
        for sock in idle:
            sock.settimeout(5)
            try:
                assert sock.recv(4096) == b""  # EOF (close_notify), not a reset
            except ConnectionResetError:
                pytest.fail("an idle kept-alive connection was reset")
        code = server.proc.wait(15)
    finally:
        stop.set()
        for t in clients:
            t.join(20)
        for sock in idle:
            sock.close()
        server.stop()
    took = time.monotonic() - term_at[0]
    in_flight = sum(1 for sent, answered in done if sent < term_at[0] < answered)
    after = sum(1 for sent, _ in done if sent >= term_at[0])
    FIGURES["SIGTERM"] = (f"{len(done)} answered, {in_flight} in flight at SIGTERM, {after} sent "
                          f"after it, {len(reset)} reset; exit {code} after {took:.1f} s")
    assert not reset, reset
    assert code == 0
    assert in_flight >= 1  # the premise: requests were in flight


def test_a_crowd_of_silent_connections_cannot_lock_the_apiserver_out(
        tls_dir: Path, tmp_path: Path) -> None:
    """More silent connections than the worker has file descriptors: it closes the least
    useful waiting ones to make room, and a real request still gets through."""
    server = harness.start(["--tls-cert", str(tls_dir / "tls.crt"),
                            "--tls-key", str(tls_dir / "tls.key"), "--workers", "1"],
                           tmp_path, ca=tls_dir / "ca.crt", max_files=256)
    crowd: list[socket.socket] = []
    try:
        pid = server.plain("GET", "/readyz").json["workers"]
        for _ in range(400):
            crowd.append(_tcp(server))
        started = time.monotonic()
        conn = harness.Connection(server.port, harness.client_context(server.ca), timeout=5)
        conn.request("POST", "/validate", REVIEW, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        assert resp.status == 200 and json.loads(resp.read())["response"]["uid"] == "fault"
        conn.close()
        took = time.monotonic() - started
        assert server.plain("GET", "/readyz").json["workers"].keys() == pid.keys()  # no crash
        log = server.log.read_text()
        assert "connection limit reached" in log
        assert "Too many open files" not in log  # the app kept the descriptors it needs
    finally:
        for sock in crowd:
            sock.close()
        server.stop()
    FIGURES["admission beside 400 silent connections, 256 files"] = f"{took * 1000:.0f} ms"


def _review_bytes(uid: str) -> bytes:
    body = json.dumps(envelope(make_request(
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
         "spec": {"containers": [{"name": "c", "image": "i"}]}}, uid=uid))).encode()
    return (b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n" % len(body)) + body


@pytest.mark.parametrize("split", ["one-write", "blank-line-straddled", "head-then-body"])
def test_kept_alive_requests_however_they_arrive(victim: Server, split: str) -> None:
    """The loop stops reading once a head is in (one recv per request, not one more to find
    the socket dry): requests pipelined in one write, a head whose blank line straddles two
    writes, and a body sent after its head are each answered, in order, on one connection."""
    started = time.monotonic()
    first, second = _review_bytes("uid-1"), _review_bytes("uid-2")
    sock = _tls(victim)
    try:
        if split == "one-write":
            sock.sendall(first + second)
        else:
            for request in (first, second):
                end = request.index(b"\r\n\r\n") + (2 if split == "blank-line-straddled" else 4)
                sock.sendall(request[:end])
                time.sleep(0.05)  # two TLS records, most likely two reads
                sock.sendall(request[end:])
        sock.settimeout(5)
        stream = sock.makefile("rb")  # one buffer for both answers: the second may be in it
        uids = []
        for _ in range(2):
            status = stream.readline().split()[1]
            length = 0
            while (line := stream.readline()) not in (b"\r\n", b"\n", b""):
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = stream.read(length)
            assert status == b"200", body
            uids.append(json.loads(body)["response"]["uid"])
        assert uids == ["uid-1", "uid-2"]
    finally:
        sock.close()
    assert time.monotonic() - started < 10


def test_an_answer_comes_in_one_tls_record(victim: Server) -> None:
    """Head and body in one write (webhook/http/worker.py, _OneWriteResponse): one TLS record,
    so the client's first read holds the whole answer. gunicorn wrote the head on its own."""
    started = time.monotonic()
    sock = _tls(victim)
    try:
        sock.sendall(_review_bytes("uid-one-record"))
        sock.settimeout(5)
        first = sock.recv(65536)  # one TLS record at most
    finally:
        sock.close()
    head, _, body = first.partition(b"\r\n\r\n")
    length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                  if line.lower().startswith(b"content-length:"))
    assert len(body) == length and json.loads(body)["response"]["uid"] == "uid-one-record"
    assert time.monotonic() - started < 10
