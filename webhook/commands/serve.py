"""`gpupolicy serve`: the admission webhook under gunicorn, over TLS.

gthread workers keep connections alive: the apiserver reuses its connections, and a sync worker
would pay a TLS handshake per request (DESIGN.md §3.1). The worker class (webhook/http/worker.py)
keeps idle and slow clients out of its threads. The certificate is re-read for new handshakes
when its files change (rotation without restart); policy, namespace and inventory files are
polled by each worker (webhook/inputs/state.py). /metrics is served on its own plain-HTTP port, with
/healthz and /readyz, so scraping needs no TLS and the admission port exposes nothing more.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import os
import shutil
import signal
import socket
import ssl
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from gunicorn.app.base import BaseApplication
from gunicorn.arbiter import Arbiter
from gunicorn.glogging import Logger as GunicornLogger

from webhook.cluster.config import wanted
from webhook.http import admission, metrics_port, shared, spread, worker
from webhook.inputs import reading, sources

if TYPE_CHECKING:
    from webhook.cluster.watch import ClusterSources

DEFAULT_SERVICE = "gpupolicy"
DEFAULT_NAMESPACE = "gpupolicy"
# client-go's transports drop a connection idle for 90 s (IdleConnTimeout). Whoever closes an
# idle connection first races a request the other side may be sending on it; a POST lost that
# way is not retried by Go, and the apiserver then applies failurePolicy. Outliving the client's
# timeout leaves the closing to the client, which cannot race itself.
DEFAULT_KEEPALIVE = 120
LISTEN_BACKLOG = 2048
# On SIGHUP the old workers keep serving until the new ones have loaded every source (listed
# the cluster), for at most this long; gunicorn's own reload then waits graceful_timeout for
# them to stop. A signal to stop cuts the wait short.
ROLL_TIMEOUT = 30.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    reading.add_source_arguments(parser)
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="watch Namespaces, Nodes and GPUPolicies of this cluster "
                             "(in a pod the in-cluster config is used without it)")
    parser.add_argument("--host", default="0.0.0.0", help="address to bind (default: 0.0.0.0)")
    parser.add_argument("--port", type=int, default=8443, help="port (default: 8443)")
    parser.add_argument("--metrics-port", type=int, default=9090,
                        help="plain-HTTP port for /metrics, /healthz and /readyz "
                             "(default: 9090; 0: none)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default: 2)")
    parser.add_argument("--threads", type=int, default=4, help="threads per worker (default: 4)")
    parser.add_argument("--keepalive", type=int, default=DEFAULT_KEEPALIVE,
                        help="seconds an idle connection stays open (default: "
                             f"{DEFAULT_KEEPALIVE}, longer than client-go's 90)")
    parser.add_argument("--tls-cert", metavar="FILE", help="serving certificate (PEM)")
    parser.add_argument("--tls-key", metavar="FILE", help="its private key (PEM)")
    parser.add_argument("--client-ca", metavar="FILE",
                        help="CA bundle (PEM) the admission port's clients must present a "
                             "certificate from (the API server's, set in its "
                             "AdmissionConfiguration kubeConfigFile): a connection without "
                             "one is refused in the TLS handshake; re-read when it changes")
    parser.add_argument("--certs-dir", default="certs",
                        help="where a self-signed pair is kept when no --tls-* is given "
                             "(default: ./certs)")
    parser.add_argument("--service", default=DEFAULT_SERVICE,
                        help="the webhook's Service name, for the generated cert")
    # `lint --namespace` is the namespace of documents; here it is where the webhook itself
    # runs: one name for two meanings misled people, so the plain one stays only as an alias.
    parser.add_argument("--service-namespace", "--namespace", dest="service_namespace",
                        default=os.environ.get("POD_NAMESPACE") or DEFAULT_NAMESPACE,
                        help="the namespace of the webhook's own Service, for the generated "
                             "cert; never governed (default: $POD_NAMESPACE or gpupolicy)")
    parser.add_argument("--max-body-bytes", type=int, default=admission.MAX_BODY,
                        help="largest AdmissionReview accepted, in bytes (default: 6.25 MiB, the "
                             "largest the apiserver sends; docs/hardening.md)")
    parser.add_argument("--reload-interval", type=float, default=1.0,
                        help="seconds between checks of the policy/namespace/inventory files")
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warning", "error"],
                        help="least severe log line written, JSON on stderr (default: info)")


class TLSFiles:
    """An SSLContext for gunicorn's `ssl_context` hook (asked for at every new connection),
    rebuilt when the certificate or key file changes, and only from a pair worth serving:
    readable, key matching, valid now (notBefore/notAfter), covering `names` (see
    TLSFiles.required_names). Any other pair (expired, not yet valid, for another name,
    truncated, cert replaced but not yet its key) is refused with a warning and counted, the
    last good pair keeps serving; a refused pair is tried again when the files change (a pair
    not yet valid, also once its notBefore has passed).

    The master refreshes too (webhook/commands/serve.py's _Arbiter, every loop turn and before
    each fork), so a worker forked later (SIGHUP, a worker killed) starts from the last good
    pair the master holds, not the pair the server started with nor what is on disk now."""

    def __init__(self, cert: str, key: str, names: tuple[str, ...] = (),
                 client_ca: str | None = None) -> None:
        self.cert, self.key, self.client_ca = cert, key, client_ca
        self._lock = threading.Lock()
        self._mark = self._stat()
        self._failed: Any = None  # the file state that last failed to load
        self._retry_at: float | None = None  # when the failed files may pass (not yet valid)
        self.errors: dict[str, int] = {}  # refusals by reason, for the metrics
        cert_pem, key_pem = self._read()
        first = _check(cert_pem, key_pem, ())  # raises at start-up: a bad pair must not start
        self.names = required_names(first, names)
        self._context, self.not_after = self._build(cert_pem, key_pem), _not_after(first)

    def _stat(self) -> Any:
        try:
            return tuple((s.st_mtime_ns, s.st_size, s.st_ino) for s in (
                os.stat(path) for path in (self.cert, self.key, self.client_ca) if path))
        except OSError:
            return None

    def _read(self) -> tuple[bytes, bytes]:
        return Path(self.cert).read_bytes(), Path(self.key).read_bytes()

    def _build(self, cert_pem: bytes, key_pem: bytes) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        if self.client_ca:
            # Every client must show a certificate this CA signed, or the handshake fails
            # before a byte of HTTP is read. load_verify_locations raises on a file with no
            # certificate, so a bad CA never means "no check".
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(cadata=Path(self.client_ca).read_text("ascii"))
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.options |= ssl.OP_NO_COMPRESSION
        # TLS 1.2: forward-secret AEAD suites only (no CBC, whose padding and MAC-then-encrypt
        # keep producing oracles). TLS 1.3 suites are all AEAD and set apart by OpenSSL.
        context.set_ciphers("ECDHE+AESGCM:ECDHE+CHACHA20:!aNULL")
        context.set_alpn_protocols(["http/1.1"])  # the apiserver forces HTTP/1.1
        _load_chain(context, cert_pem, key_pem)  # the bytes checked, not the files again
        return context

    def context(self, *_: Any) -> ssl.SSLContext:
        self.refresh()
        return self._context

    def refresh(self) -> None:
        mark = self._stat()
        if mark == self._mark or mark is None:
            return
        if mark == self._failed and (self._retry_at is None or time.time() < self._retry_at):
            return
        with self._lock:
            if mark == self._mark or (mark == self._failed and (
                    self._retry_at is None or time.time() < self._retry_at)):
                return
            try:
                cert_pem, key_pem = self._read()
                cert = _check(cert_pem, key_pem, self.names)
                context = self._build(cert_pem, key_pem)
            except (OSError, ssl.SSLError, ValueError) as exc:
                from webhook import certs

                problem = exc if isinstance(exc, certs.PairProblem) else None
                reason = problem.reason if problem else "unreadable"
                retry = problem.retry_at if problem else None
                self._failed, self._retry_at = mark, retry.timestamp() if retry else None
                self.errors[reason] = self.errors.get(reason, 0) + 1
                _log_event("tls certificate refused; keeping the last good one", level=30,
                           cert=self.cert, reason=reason, error=str(exc),
                           serving_until=_iso(self.not_after))
                return
            self._context, self.not_after = context, _not_after(cert)
            self._mark, self._failed, self._retry_at = mark, None, None
            _log_event("tls certificate reloaded", cert=self.cert,
                       not_after=_iso(self.not_after))

    def register(self, meters: Any) -> None:
        """The certificate's families, on a worker's Metrics."""
        meters.gauge("gpupolicy_tls_certificate_expiry_seconds",
                     "Seconds until the serving certificate's notAfter (negative: expired); "
                     "the least over the workers.", mode="livemin",
                     read=lambda: {(): self.not_after - time.time()})
        meters.counter("gpupolicy_tls_reload_errors",
                       "Certificate/key pairs refused on reload (expired, not_yet_valid, "
                       "wrong_name, key_mismatch, unreadable), counted by each worker that "
                       "read them; the last good pair keeps serving.", ["reason"],
                       read=lambda: {(r,): float(n) for r, n in {
                           **dict.fromkeys(TLS_REFUSALS, 0), **self.errors}.items()})


TLS_REFUSALS = ("expired", "not_yet_valid", "wrong_name", "key_mismatch", "unreadable")


def required_names(first: Any, service_names: tuple[str, ...]) -> tuple[str, ...]:
    """The names a new pair must cover: the Service's (`<service>.<namespace>.svc`, what the
    apiserver calls) when the starting certificate names it; else (a webhook reached by URL, a
    local run) every name of the starting certificate."""
    from webhook import certs

    have = certs.cert_names(first)
    if service_names and all(any(certs.names_match(h, n) for h in have) for n in service_names):
        return service_names
    return tuple(have)


def _check(cert_pem: bytes, key_pem: bytes, names: tuple[str, ...]) -> Any:
    from webhook import certs

    return certs.check_pair(cert_pem, key_pem, names)


def _not_after(cert: Any) -> float:
    return float(cert.not_valid_after_utc.timestamp())


def _iso(stamp: float) -> str:
    return dt.datetime.fromtimestamp(stamp, dt.UTC).isoformat(timespec="seconds")


def _load_chain(context: ssl.SSLContext, cert_pem: bytes, key_pem: bytes) -> None:
    """load_cert_chain reads files only: hand it the checked bytes through an anonymous
    in-memory file (a private temporary file where memfd_create does not exist)."""
    blob = cert_pem.rstrip(b"\n") + b"\n" + key_pem
    if hasattr(os, "memfd_create") and os.path.isdir("/proc/self/fd"):
        fd = os.memfd_create("gpupolicy-tls", os.MFD_CLOEXEC)
        try:
            os.write(fd, blob)
            context.load_cert_chain(f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)
        return
    with tempfile.NamedTemporaryFile(prefix="gpupolicy-tls-") as tmp:  # mode 0600
        tmp.write(blob)
        tmp.flush()
        context.load_cert_chain(tmp.name)


def _log_event(msg: str, level: int = 20, **fields: Any) -> None:
    from webhook import logs

    logs.event(logs.get(), msg, level=level, **fields)


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    for name in ("workers", "threads", "max_body_bytes", "keepalive"):
        if getattr(args, name) < 1:
            stderr.write(f"gpupolicy serve: --{name.replace('_', '-')} must be at least 1\n")
            return 2
    for name, lowest in (("port", 1), ("metrics_port", 0)):
        if not lowest <= getattr(args, name) <= 65535:
            stderr.write(f"gpupolicy serve: --{name.replace('_', '-')} must be "
                         f"{'0 (none) or ' if lowest == 0 else ''}1-65535, "
                         f"not {getattr(args, name)}\n")
            return 2
    if args.metrics_port == args.port:
        stderr.write(f"gpupolicy serve: --metrics-port must differ from --port ({args.port})\n")
        return 2
    if bool(args.tls_cert) != bool(args.tls_key):
        stderr.write("gpupolicy serve: give both --tls-cert and --tls-key, or neither\n")
        return 2
    _multiproc_dir()  # before anything imports prometheus_client
    _return_large_buffers()  # before the workers fork: they inherit it
    from webhook import logs

    logs.setup(args.log_level)
    try:
        cert, key = _tls_files(args, stdout)
        from webhook import certs

        service = certs.service_names(args.service, args.service_namespace)[0]
        tls = TLSFiles(cert, key, (service,), args.client_ca)
    except (OSError, ssl.SSLError, ValueError) as exc:
        stderr.write(f"gpupolicy serve: TLS certificate/key unusable: {exc}\n")
        return 2
    if tls.names != (service,):
        _log_event("the serving certificate does not name the Service: an apiserver calling "
                   "the webhook through it will refuse the handshake; a new pair must name "
                   "what this one names", level=30, cert=cert, service=service,
                   names=list(tls.names))
    # Check the inputs once before forking; the workers load (and count) for themselves.
    try:
        problems = _build(args, record=False)[1].load_all() + _check_cluster(args)
    except reading.SourceError as exc:  # --workload-kinds
        problems = [str(exc)]
    if problems:
        for line in problems:
            stderr.write(f"gpupolicy serve: {line}\n")
        return 2
    # Bind here, before saying "serving": a port in use or an address this host does not have
    # is one line and exit 2, and gunicorn is handed the bound sockets (fd://).
    listeners = []
    try:
        for port in (args.port, args.metrics_port):
            if port:
                listeners.append(_listen(args.host, port))
    except (OSError, ValueError) as exc:  # socket.gaierror is an OSError; a bad IDNA name not
        for listener in listeners:
            listener.close()
        reason = getattr(exc, "strerror", None) or str(exc)
        stderr.write(f"gpupolicy serve: cannot listen on {_hostport(args.host, port)}: "
                     f"{reason}\n")
        return 2
    stdout.write(f"gpupolicy: serving https://{_hostport(args.host, args.port)} "
                 f"(/mutate, /validate, /healthz, /readyz)\n")
    if args.metrics_port:
        stdout.write(f"gpupolicy: metrics on http://{_hostport(args.host, args.metrics_port)} "
                     f"(/metrics, /healthz, /readyz)\n")
    stdout.flush()
    server = _Gunicorn(args, tls, [listener.detach() for listener in listeners])
    try:
        server.run()
    except SystemExit as exit_:
        return int(exit_.code or 0) if isinstance(exit_.code, int | None) else 1
    return 0


# glibc's mallopt parameter: requests at least this large are mmap'd, and unmapped when freed.
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 128 * 1024


def _return_large_buffers() -> None:
    """Give request bodies (and their copies) back to the system when they are freed. glibc
    starts by mmap'ing blocks of 128 KiB and more, but raises that threshold to the largest
    block freed so far: after a few 6 MiB bodies they are carved from the heap, whose top
    cannot shrink past any small object allocated since, and each worker's peak memory under
    8 hostile bodies grew by ~40 MiB (bench/bench_memory.py: 408 -> 316 MiB in all). Setting
    the threshold keeps it fixed. Nothing to do on another C library."""
    import ctypes
    import platform

    if platform.libc_ver()[0] != "glibc":
        return
    try:
        ctypes.CDLL(None).mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)
    except (OSError, AttributeError):
        return


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _listen(host: str, port: int) -> socket.socket:
    family, kind, proto, _, address = socket.getaddrinfo(
        host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(address)
        sock.listen(LISTEN_BACKLOG)
    except BaseException:
        sock.close()
        raise
    return sock


def _multiproc_dir() -> None:
    given = os.environ.get(shared.MULTIPROC_ENV)
    if given:
        Path(given).mkdir(parents=True, exist_ok=True)
        for pattern in ("*.db", f"{shared.READY_PREFIX}*"):  # an earlier run's would count
            for old in Path(given).glob(pattern):
                old.unlink()
        return
    path = tempfile.mkdtemp(prefix="gpupolicy-metrics-")
    os.environ[shared.MULTIPROC_ENV] = path
    import atexit

    master = os.getpid()
    # Workers leave through sys.exit too (and run atexit): only the master removes the dir.
    def cleanup() -> None:
        if os.getpid() == master:
            shutil.rmtree(path, ignore_errors=True)

    atexit.register(cleanup)


def _tls_files(args: argparse.Namespace, stdout: TextIO) -> tuple[str, str]:
    if args.tls_cert:
        return args.tls_cert, args.tls_key
    from webhook import certs

    out = Path(args.certs_dir).resolve()
    if certs.usable_bundle(out, args.service, args.service_namespace):
        stdout.write(f"gpupolicy: using the existing certificate in {out}\n")
    else:
        bundle = certs.build_serving_cert(args.service, args.service_namespace, certs.build_ca())
        certs.write_bundle(bundle, out)
        stdout.write(f"gpupolicy: created a self-signed CA and serving certificate in {out}\n")
    names = ", ".join(certs.service_names(args.service, args.service_namespace))
    stdout.write(f"gpupolicy: CA certificate (caBundle): {out / certs.CA_FILE}\n"
                 f"gpupolicy: serving certificate for {names}, localhost, 127.0.0.1\n")
    return str(out / certs.CERT_FILE), str(out / certs.KEY_FILE)


def _check_cluster(args: argparse.Namespace) -> list[str]:
    """Unusable cluster credentials, as problem lines. Without a cluster the Kubernetes
    client is never imported (nor in the workers: _load_app)."""
    if not wanted(args):
        return []
    from webhook.cluster import watch as cluster_sources

    return cluster_sources.check(args)


def _attach_cluster(args: argparse.Namespace, state: Any) -> ClusterSources | None:
    if not wanted(args):
        return None
    from webhook.cluster import watch as cluster_sources

    return cluster_sources.attach(args, state)


def _build(args: argparse.Namespace, record: bool = True) -> tuple[Any, Any]:
    from webhook.inputs.state import FileSources, State

    cluster = wanted(args)
    excluded = sources.excluded_namespaces(args.exclude_namespace, args.service_namespace)
    expect = ["policies"] + (["namespaces"] if args.namespaces and not cluster else []) + (
        ["inventory"] if args.inventory and not cluster else [])
    state = State(sources.load_catalog(), excluded_namespaces=excluded, expect=expect,
                  workload_kinds=sources.load_workload_kinds(args.workload_kinds))
    files = FileSources(state, policies=args.policies, namespaces=args.namespaces,
                        inventory=args.inventory, record=record, cluster=cluster,
                        node_templates=getattr(args, "node_templates", None))
    return state, files


def _load_app(args: argparse.Namespace, tls: TLSFiles | None = None) -> Any:
    """Runs in each worker (no preload): its own State and file watcher thread."""
    from webhook.http.server import create_app

    state, files = _build(args)
    worker.publish_readiness(state.detail)
    cluster = _attach_cluster(args, state)  # None outside a cluster
    files.load_all()
    files.start(args.reload_interval)
    app = create_app(state, max_body=args.max_body_bytes)
    if tls is not None:
        tls.register(app.extensions["gpupolicy.metrics"])
    if cluster is not None:
        cluster.register(app.extensions["gpupolicy.metrics"])
    return app


class _JSONLogger(GunicornLogger):  # type: ignore[misc]
    """gunicorn's own lines (start, workers, signals) as JSON too, like every other line."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        from webhook.logs import JSONFormatter

        for handler in self.error_log.handlers:
            handler.setFormatter(JSONFormatter())


def _child_exit(server: Any, dead: Any) -> None:
    from webhook.http import metrics

    metrics.worker_exited(dead.pid)
    metrics_port.unpublish(dead.pid)
    slot = getattr(server, "slots", {}).pop(dead.pid, None)
    if slot is not None and worker.GPUWorker.board is not None:
        worker.GPUWorker.board.clear(slot)  # a dead worker's word is not waited on


class _Arbiter(Arbiter):  # type: ignore[misc]
    """gunicorn's master, which also keeps the last good certificate pair for the workers it
    forks, marks each new worker "starting" (not ready) until that worker reports, and on
    SIGHUP stops the old workers only once their replacements are ready (or after
    ROLL_TIMEOUT): meanwhile the old ones judge with the whole state and the new ones take no
    admission (webhook/http/worker.py), so a reload refuses nothing."""

    def __init__(self, app: _Gunicorn) -> None:
        super().__init__(app)
        self.tls = app.tls
        self.stopping = False
        self.slots: dict[int, int] = {}  # worker pid -> its entry on GPUWorker.board

    def signal(self, sig: int, frame: Any) -> None:
        if sig in (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT):
            self.stopping = True  # cut a reload's wait short: shutting down comes first
        super().signal(sig, frame)

    def manage_workers(self) -> None:  # every turn of the master's loop (≤ 1 s), and on HUP
        self.tls.refresh()
        if len(self.WORKERS) > self.num_workers:
            self._await_replacements()
        super().manage_workers()  # stops the oldest workers beyond num_workers

    def _await_replacements(self) -> None:
        deadline = time.monotonic() + ROLL_TIMEOUT
        while not self.stopping and len(self.WORKERS) > self.num_workers:
            newest = sorted(self.WORKERS.values(), key=lambda w: w.age)[-self.num_workers:]
            states = metrics_port.states()
            if all(metrics_port.serving(states.get(str(w.pid))) for w in newest):
                return
            if time.monotonic() >= deadline:
                _log_event("new workers not ready; stopping the old ones anyway", level=30,
                           waited_seconds=ROLL_TIMEOUT,
                           not_ready=[w.pid for w in newest
                                      if not metrics_port.serving(states.get(str(w.pid)))])
                return
            self.reap_workers()
            time.sleep(0.1)

    def spawn_worker(self) -> int:
        self.tls.refresh()  # the child inherits the master's last good pair
        board = worker.GPUWorker.board
        slot = 0
        if board is not None:  # the lowest entry no live worker has; the child inherits it
            used = {self.slots[pid] for pid in self.WORKERS if pid in self.slots}
            slot = min(set(range(board.slots)) - used, default=len(self.slots) % board.slots)
            board.clear(slot)
            worker.GPUWorker.slot = slot
        pid: int = super().spawn_worker()  # the child never returns from it
        self.slots[pid] = slot
        metrics_port.expect_worker(pid)
        return pid


class _Gunicorn(BaseApplication):  # type: ignore[misc]
    def __init__(self, args: argparse.Namespace, tls: TLSFiles, fds: list[int]) -> None:
        self.args, self.tls, self.fds = args, tls, fds
        super().__init__()

    def load_config(self) -> None:
        a = self.args
        # The class is imported here, in the master, and the workers are forked from it.
        worker.GPUWorker.plain_ports = frozenset({a.metrics_port} - {0})
        worker.GPUWorker.expected_workers = a.workers
        worker.GPUWorker.body_limit = a.max_body_bytes
        worker.GPUWorker.refresh_tls = self.tls.refresh
        worker.GPUWorker.board = spread.Board(spread.slots_for(a.workers))
        settings = {
            "bind": [f"fd://{fd}" for fd in self.fds],
            "workers": a.workers,
            "worker_class": worker.GPUWorker,
            "threads": a.threads,
            "keepalive": a.keepalive,
            "timeout": 30,
            "graceful_timeout": 10,
            "certfile": self.tls.cert,
            "keyfile": self.tls.key,
            # (the SSLContext below is what serves; these say the same to gunicorn)
            **({"cert_reqs": ssl.CERT_REQUIRED, "ca_certs": self.tls.client_ca}
               if self.tls.client_ca else {}),
            "ssl_context": lambda _conf, _factory: self.tls.context(),
            "child_exit": _child_exit,
            "logger_class": _JSONLogger,
            "accesslog": None,  # one JSON line per admission instead (webhook/logs.py)
            "errorlog": "-",
            "loglevel": a.log_level,
            "proc_name": "gpupolicy",
            "preload_app": False,
            # gunicorn's runtime control socket lives at one fixed path per user: several
            # servers (tests, bench, replicas on one node) would fight over it.
            "control_socket_disable": True,
        }
        for name, value in settings.items():
            self.cfg.set(name, value)

    def run(self) -> None:
        try:
            _Arbiter(self).run()
        except RuntimeError as exc:  # as BaseApplication.run does
            sys.stderr.write(f"\nError: {exc}\n")
            sys.stderr.flush()
            sys.exit(1)

    def load(self) -> Any:
        # Everything loaded here (Flask, pydantic models, policies, the catalog) lives as long
        # as the worker: no collection while it loads (they found nothing, and walked all the
        # master's objects too: ~25 ms of a worker's start), then keep it out of the
        # collector's way, so the short-lived objects of each admission do not pay for
        # walking it in every full collection.
        gc.disable()
        try:
            app = _load_app(self.args, self.tls)
        finally:
            gc.enable()
        gc.freeze()
        return app


if __name__ == "__main__":  # pragma: no cover - `python -m webhook.commands.serve` for debugging
    from webhook.cli import run as cli_run

    sys.exit(cli_run(["serve", *sys.argv[1:]], sys.stdout, sys.stderr))
