"""`gpupolicy serve`: the admission webhook under gunicorn, over TLS.

gthread workers keep connections alive: the apiserver reuses its connections, and a sync worker
would pay a TLS handshake per request (DESIGN.md §3.1). The certificate is re-read for new
handshakes when its files change (rotation without restart); policy, namespace and inventory
files are polled by each worker (webhook/state.py).
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import ssl
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any, TextIO

from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger as GunicornLogger

from webhook import sources

DEFAULT_SERVICE = "gpupolicy"
DEFAULT_NAMESPACE = "gpupolicy"
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"  # read by prometheus_client when first imported


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sources.add_source_arguments(parser)
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="watch Namespaces, Nodes and GPUPolicies of this cluster "
                             "(in a pod the in-cluster config is used without it)")
    parser.add_argument("--host", default="0.0.0.0", help="address to bind (default: 0.0.0.0)")
    parser.add_argument("--port", type=int, default=8443, help="port (default: 8443)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default: 2)")
    parser.add_argument("--threads", type=int, default=4, help="threads per worker (default: 4)")
    parser.add_argument("--keepalive", type=int, default=75,
                        help="seconds an idle connection stays open (default: 75)")
    parser.add_argument("--tls-cert", metavar="FILE", help="serving certificate (PEM)")
    parser.add_argument("--tls-key", metavar="FILE", help="its private key (PEM)")
    parser.add_argument("--certs-dir", default="certs",
                        help="where a self-signed pair is kept when no --tls-* is given "
                             "(default: ./certs)")
    parser.add_argument("--service", default=DEFAULT_SERVICE,
                        help="the webhook's Service name, for the generated cert")
    parser.add_argument("--namespace", default=os.environ.get("POD_NAMESPACE") or DEFAULT_NAMESPACE,
                        help="the webhook's own namespace (never governed; default: "
                             "$POD_NAMESPACE or gpupolicy)")
    parser.add_argument("--max-body-bytes", type=int, default=8 * 1024 * 1024,
                        help="largest AdmissionReview accepted (default: 8 MiB)")
    parser.add_argument("--reload-interval", type=float, default=1.0,
                        help="seconds between checks of the policy/namespace/inventory files")
    parser.add_argument("--log-level", default="info",
                        choices=["debug", "info", "warning", "error"])


class TLSFiles:
    """An SSLContext for gunicorn's `ssl_context` hook (asked for at every new connection),
    rebuilt when the certificate or key file changes. A pair that does not load (say, the
    cert was replaced but not yet its key) leaves the previous context in use until the files
    change again; then the next handshake tries anew."""

    def __init__(self, cert: str, key: str) -> None:
        self.cert, self.key = cert, key
        self._lock = threading.Lock()
        self._mark = self._stat()
        self._failed: Any = None  # the file state that last failed to load
        self._context = self._build()  # raises at start-up: a bad pair must not start

    def _stat(self) -> Any:
        try:
            return tuple((s.st_mtime_ns, s.st_size, s.st_ino)
                         for s in (os.stat(self.cert), os.stat(self.key)))
        except OSError:
            return None

    def _build(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.minimum_version = ssl.TLSVersion.TLSv1_2
        context.options |= ssl.OP_NO_COMPRESSION
        context.set_alpn_protocols(["http/1.1"])  # the apiserver forces HTTP/1.1
        context.load_cert_chain(self.cert, self.key)
        return context

    def context(self, *_: Any) -> ssl.SSLContext:
        mark = self._stat()
        if mark == self._mark or mark is None or mark == self._failed:
            return self._context
        with self._lock:
            if mark != self._mark and mark != self._failed:
                try:
                    self._context = self._build()
                    self._mark = mark
                    _log_event("tls certificate reloaded", cert=self.cert)
                except (OSError, ssl.SSLError, ValueError) as exc:
                    self._failed = mark
                    _log_event("tls certificate reload failed; keeping the previous one",
                               level=30, cert=self.cert, error=str(exc))
        return self._context


def _log_event(msg: str, level: int = 20, **fields: Any) -> None:
    from webhook import logs

    logs.event(logs.get(), msg, level=level, **fields)


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    for name in ("workers", "threads", "max_body_bytes", "port"):
        if getattr(args, name) < 1:
            stderr.write(f"gpupolicy serve: --{name.replace('_', '-')} must be at least 1\n")
            return 2
    if bool(args.tls_cert) != bool(args.tls_key):
        stderr.write("gpupolicy serve: give both --tls-cert and --tls-key, or neither\n")
        return 2
    _multiproc_dir()  # before anything imports prometheus_client
    from webhook import logs

    logs.setup(args.log_level)
    try:
        cert, key = _tls_files(args, stdout)
        tls = TLSFiles(cert, key)
    except (OSError, ssl.SSLError, ValueError) as exc:
        stderr.write(f"gpupolicy serve: TLS certificate/key unusable: {exc}\n")
        return 2
    # Check the inputs once before forking; the workers load (and count) for themselves.
    from webhook import cluster_sources  # after _multiproc_dir: it makes metrics

    try:
        problems = _build(args, record=False)[1].load_all() + cluster_sources.check(args)
    except sources.SourceError as exc:  # --workload-kinds
        problems = [str(exc)]
    if problems:
        for line in problems:
            stderr.write(f"gpupolicy serve: {line}\n")
        return 2
    stdout.write(f"gpupolicy: serving https://{args.host}:{args.port} "
                 f"(/mutate, /validate, /healthz, /readyz, /metrics)\n")
    stdout.flush()
    server = _Gunicorn(args, tls)
    try:
        server.run()
    except SystemExit as exit_:
        return int(exit_.code or 0) if isinstance(exit_.code, int | None) else 1
    return 0


def _multiproc_dir() -> None:
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        Path(given).mkdir(parents=True, exist_ok=True)
        for old in Path(given).glob("*.db"):  # samples of an earlier run would add up
            old.unlink()
        return
    path = tempfile.mkdtemp(prefix="gpupolicy-metrics-")
    os.environ[MULTIPROC_ENV] = path
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
    if certs.usable_bundle(out, args.service, args.namespace):
        stdout.write(f"gpupolicy: using the existing certificate in {out}\n")
    else:
        bundle = certs.build_serving_cert(args.service, args.namespace, certs.build_ca())
        certs.write_bundle(bundle, out)
        stdout.write(f"gpupolicy: created a self-signed CA and serving certificate in {out}\n")
    names = ", ".join(certs.service_names(args.service, args.namespace))
    stdout.write(f"gpupolicy: CA certificate (caBundle): {out / certs.CA_FILE}\n"
                 f"gpupolicy: serving certificate for {names}, localhost, 127.0.0.1\n")
    return str(out / certs.CERT_FILE), str(out / certs.KEY_FILE)


def _build(args: argparse.Namespace, record: bool = True) -> tuple[Any, Any]:
    from webhook.cluster_sources import wanted
    from webhook.state import FileSources, State

    cluster = wanted(args)
    excluded = sources.excluded_namespaces(args.exclude_namespace, args.namespace)
    expect = ["policies"] + (["namespaces"] if args.namespaces and not cluster else []) + (
        ["inventory"] if args.inventory and not cluster else [])
    state = State(sources.load_catalog(), excluded_namespaces=excluded, expect=expect,
                  workload_kinds=sources.load_workload_kinds(args.workload_kinds))
    files = FileSources(state, policies=args.policies, namespaces=args.namespaces,
                        inventory=args.inventory, record=record, cluster=cluster)
    return state, files


def _load_app(args: argparse.Namespace) -> Any:
    """Runs in each worker (no preload): its own State and file watcher thread."""
    from webhook.server import create_app

    state, files = _build(args)
    from webhook import cluster_sources

    cluster = cluster_sources.attach(args, state)  # None outside a cluster
    files.load_all()
    files.start(args.reload_interval)
    app = create_app(state, max_body=args.max_body_bytes)
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


def _child_exit(_server: Any, worker: Any) -> None:
    from webhook import metrics

    metrics.worker_exited(worker.pid)


class _Gunicorn(BaseApplication):  # type: ignore[misc]
    def __init__(self, args: argparse.Namespace, tls: TLSFiles) -> None:
        self.args, self.tls = args, tls
        super().__init__()

    def load_config(self) -> None:
        a = self.args
        settings = {
            "bind": [f"[{a.host}]:{a.port}" if ":" in a.host else f"{a.host}:{a.port}"],
            "workers": a.workers,
            "worker_class": "gthread",
            "threads": a.threads,
            "keepalive": a.keepalive,
            "timeout": 30,
            "graceful_timeout": 10,
            "certfile": self.tls.cert,
            "keyfile": self.tls.key,
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

    def load(self) -> Any:
        app = _load_app(self.args)
        # Everything loaded so far (Flask, pydantic models, policies, the catalog) lives as
        # long as the worker: keep it out of the collector's way, so the short-lived objects
        # of each admission do not pay for walking it in every full collection.
        gc.freeze()
        return app


if __name__ == "__main__":  # pragma: no cover - `python -m webhook.serve` for debugging
    from webhook.cli import run as cli_run

    sys.exit(cli_run(["serve", *sys.argv[1:]], sys.stdout, sys.stderr))
