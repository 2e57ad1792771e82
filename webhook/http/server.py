"""The Flask app: routes only, with a short WSGI path in front of it for the apiserver's own
requests (see `wsgi` below). Every admission decision is the engine's (policies.engine.review);
admission.py reads the request and shapes the Decision into the AdmissionReview answer."""

from __future__ import annotations

import threading
import time
from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from policies import jsonbudget
from policies.decision import Decision
from policies.engine import namespace_of, review
from webhook import logs
from webhook.http import admission, metrics
from webhook.inputs.state import State

# The apiserver drops a trailing slash; a hand-made `/mutate/` works too and never redirects.
_ROUTES = {"/mutate": "mutate", "/mutate/": "mutate",
           "/validate": "validate", "/validate/": "validate"}
_STATUS = {200: "200 OK", 400: "400 BAD REQUEST", 413: "413 REQUEST ENTITY TOO LARGE",
           429: "429 TOO MANY REQUESTS", 500: "500 INTERNAL SERVER ERROR",
           503: "503 SERVICE UNAVAILABLE"}
NOT_READY_LOG_EVERY = 5.0  # seconds between log lines about admissions refused while unready
# Bodies over jsonbudget.SMALL_BODY one worker reads and parses at a time, and how long another
# waits for its turn before a 429 (docs/hardening.md): together with the value budget, this is
# what bounds a worker's memory whatever its threads are sent.
LARGE_SLOTS = 1
LARGE_WAIT = 2.0


def create_app(state: State, *, max_body: int = admission.MAX_BODY,
               meters: metrics.Metrics | None = None) -> Flask:
    """The webhook app; `meters` (default: a new Metrics, flushed to PROMETHEUS_MULTIPROC_DIR
    when that is set) is where it counts, with the families of `state` added to it. The value
    budget follows `max_body` (admission.MAX_VALUES for admission.MAX_BODY)."""
    # Only the admission paths and the probes: no static folder (Flask would serve
    # /static/<path> from the package), no automatic OPTIONS answers.
    app = Flask("gpupolicy", static_folder=None)
    max_values = max(1, admission.MAX_VALUES * max_body // admission.MAX_BODY)
    large = threading.BoundedSemaphore(LARGE_SLOTS)
    log = logs.get()
    if meters is None:
        meters = metrics.Metrics(metrics.multiproc_dir())
    add_state_metrics(meters, state)
    meters.start()
    app.extensions["gpupolicy.metrics"] = meters
    requests, latency = meters.requests, meters.latency
    violations, engine_errors = meters.violations, meters.engine_errors

    next_unready_log = [0.0]

    def not_ready(webhook: str) -> tuple[int, bytes]:
        """No verdict from a worker that has not loaded every source it expects (a cluster
        not yet listed: its policies, namespaces and nodes unknown). Judging with the policy
        files alone would admit what the cluster's policies refuse; a 503 makes the apiserver
        apply the webhook's failurePolicy instead (Fail refuses, Ignore admits unjudged)."""
        requests.inc(webhook, "", "not_ready")
        message = unready_message(state)
        now = time.monotonic()
        if now >= next_unready_log[0]:  # one line now and then, not one per request
            next_unready_log[0] = now + NOT_READY_LOG_EVERY
            logs.event(log, "admission refused: not ready", level=30, webhook=webhook,
                       error=message)
        return 503, admission.encode({"error": message})

    def bad(webhook: str, message: str, status: int = 400) -> tuple[int, bytes]:
        outcome = {413: "too_large", 429: "busy"}.get(status, "bad_request")
        requests.inc(webhook, "", outcome)
        logs.event(log, "bad request", level=30, webhook=webhook, error=message, status=status)
        return status, admission.encode({"error": message})

    def refused(webhook: str, exc: _Unreadable) -> tuple[int, bytes]:
        return bad(webhook, str(exc), exc.status)

    def admit(webhook: str) -> Response:
        """The Flask route: bodies without a Content-Length (chunked) or over the limit."""
        try:
            with _Turn(large) as turn:
                body = _read_body(request.environ["wsgi.input"], request.content_length,
                                  max_body, turn)
                status, data = answer(webhook, body)
        except _Unreadable as exc:
            status, data = refused(webhook, exc)
            return Response(data, status, content_type="application/json", headers=_CLOSE)
        return Response(data, status, content_type="application/json")

    def answer(webhook: str, body: bytes) -> tuple[int, bytes]:
        """HTTP status and body for one AdmissionReview: 200 and the answer, 400, or 503
        while the worker is not ready."""
        if not state.ready:
            return not_ready(webhook)
        started = time.perf_counter()
        try:
            req = admission.read_review(body, max_values)
        except admission.TooLarge as exc:
            return bad(webhook, str(exc), 413)
        except admission.BadReview as exc:
            return bad(webhook, str(exc))
        uid, operation = req["uid"], req["operation"]
        obj = req.get("object")
        # The engine decides whose namespace counts (the object's own, else the request's);
        # the log line says the one it used.
        namespace = namespace_of(obj, req.get("namespace")) if isinstance(obj, dict) \
            else req.get("namespace") or None
        subresource = req.get("subResource") or ""
        decision: Decision | None = None
        try:
            decision = review(obj, state.context, namespace=namespace, operation=operation,
                              subresource=subresource, judge=webhook == "validate")
            answer = admission.build_response(req, decision, webhook)
            outcome = _outcome(answer["response"])
            data = admission.encode(answer)
        except Exception:
            # Never a 500 page, never a patch from a failing engine.
            log.exception("engine failed", extra={"fields": {"uid": admission.clean(uid)}})
            engine_errors.inc(webhook)
            outcome = "error"
            data = admission.encode(admission.error_response(req, webhook))
        elapsed = time.perf_counter() - started
        requests.inc(webhook, operation, outcome)
        latency.observe(elapsed, webhook)
        dry_run = bool(req.get("dryRun"))
        rules: list[str] = []
        if decision is not None and decision.violations:
            rules = sorted({v.rule for v in decision.violations})
            if webhook == "validate" and not dry_run:
                for v in decision.violations:
                    violations.inc(v.policy, v.rule, v.mode)
        logs.event(
            # what the client wrote, one short line each: a log line is not as big as a body
            log, "admission", webhook=webhook, uid=admission.clean(uid),
            kind=admission.clean(req["kind"]["kind"]),
            namespace=admission.clean(namespace) if namespace else namespace,
            name=admission.clean(admission.request_name(req)), operation=operation,
            subresource=subresource, dry_run=dry_run, decision=outcome, rules=rules,
            latency_ms=round(elapsed * 1000, 3),
        )
        return 200, data

    flask_wsgi = app.wsgi_app

    def wsgi(environ: dict[str, Any], start_response: Any) -> Any:
        """What the apiserver sends (POST /mutate or /validate with a Content-Length within
        the limit) skips Flask's request cycle: about 55 of the 120 µs an admission costs
        in-process here, more than the engine's own time. Everything else (chunked bodies,
        other routes and methods, 404/405) goes through Flask as before."""
        webhook = _ROUTES.get(environ.get("PATH_INFO", ""))
        length = environ.get("CONTENT_LENGTH") or ""
        if (webhook is None or environ.get("REQUEST_METHOD") != "POST"
                or not (length.isascii() and length.isdigit()) or int(length) > max_body):
            return flask_wsgi(environ, start_response)
        headers = [("Content-Type", "application/json")]
        try:
            with _Turn(large) as turn:
                body = _read_body(environ["wsgi.input"], int(length), max_body, turn)
                status, data = answer(webhook, body)
        except _Unreadable as exc:  # a client too slow or gone, or a turn not come: as on the
            status, data = refused(webhook, exc)  # Flask path
            headers += _CLOSE.items()
        except Exception:
            log.exception("unexpected error", extra={"fields": {"path": environ["PATH_INFO"]}})
            status, data = 500, admission.encode({"error": "internal error; see the webhook logs"})
        start_response(_STATUS[status], [*headers, ("Content-Length", str(len(data)))])
        return [data]

    app.wsgi_app = wsgi  # type: ignore[method-assign]

    # The apiserver drops a trailing slash; a hand-made `/mutate/` works too and never redirects.
    @app.post("/mutate", provide_automatic_options=False)
    @app.post("/mutate/", provide_automatic_options=False)
    def mutate() -> Response:
        return admit("mutate")

    @app.post("/validate", provide_automatic_options=False)
    @app.post("/validate/", provide_automatic_options=False)
    def validate() -> Response:
        return admit("validate")

    @app.get("/healthz", provide_automatic_options=False)
    def healthz() -> Response:
        return _json({"ok": True})

    @app.get("/readyz", provide_automatic_options=False)
    def readyz() -> Response:
        return _json(state.detail(), 200 if state.ready else 503)

    @app.errorhandler(HTTPException)
    def http_error(exc: HTTPException) -> Response:
        # 404/405/…: the same one-line JSON as every other error, not an HTML page.
        return _json({"error": f"{exc.code} {exc.name}: {request.method} {request.path}"},
                     exc.code or 400)

    @app.errorhandler(Exception)
    def unexpected(exc: Exception) -> Response:
        log.exception("unexpected error", extra={"fields": {"path": request.path}})
        return _json({"error": "internal error; see the webhook logs"}, 500)

    return app


# The rest of an unread body stays on the wire: the connection closes after the answer
# (webhook/http/worker.py honours the header).
_CLOSE = {"Connection": "close"}


class _Unreadable(Exception):
    """The body could not be read (a malformed chunk, a client gone): 400; or is over the
    limit (413), or is large while the worker's large-body turn did not come (429)."""

    status = 400


class _TooLarge(_Unreadable):
    status = 413


class _Busy(_Unreadable):
    status = 429


class _Turn:
    """The worker's one large-body turn, taken once a body is known to be over
    jsonbudget.SMALL_BODY (from its Content-Length, or as a chunked one grows past it) and held
    until the answer is built. Not come within LARGE_WAIT: a 429 (no Retry-After: the
    apiserver would resend at once, contract §1.1), and the webhook's failurePolicy applies."""

    def __init__(self, slots: threading.BoundedSemaphore) -> None:
        self.slots, self.held = slots, False

    def take(self) -> None:
        if self.held:
            return
        if not self.slots.acquire(timeout=LARGE_WAIT):
            raise _Busy(f"busy with another body over {jsonbudget.SMALL_BODY} bytes for "
                        f"{LARGE_WAIT:g} s; send it again")
        self.held = True

    def __enter__(self) -> _Turn:
        return self

    def __exit__(self, *_: Any) -> None:
        if self.held:
            self.held = False
            self.slots.release()


def _read_body(stream: Any, length: int | None, limit: int, turn: _Turn | None = None
               ) -> bytes:
    """The body, at most `limit` bytes: a Content-Length over it is refused before reading
    anything, a chunked body (`length` None) is read no further than the limit; a body over
    jsonbudget.SMALL_BODY only in the worker's large-body `turn`. Read in chunks: asking a stream
    for `limit` bytes at once would allocate that much per request."""
    if length is not None and length > limit:
        raise _TooLarge(f"body larger than {limit} bytes (Content-Length: {length})")
    if turn is not None and length is not None and length > jsonbudget.SMALL_BODY:
        turn.take()
    need = limit + 1 if length is None else length  # chunked: a byte past the limit tells
    chunks: list[bytes] = []
    size = 0
    try:  # gunicorn bounds the stream by Content-Length / chunking
        while size < need:
            chunk = stream.read(min(65536, need - size))
            if not chunk:
                break
            size += len(chunk)
            chunks.append(chunk)
            if turn is not None and size > jsonbudget.SMALL_BODY:
                turn.take()
    except _Busy:
        raise
    except Exception as exc:  # whatever the server's body reader raises: the body is unusable
        raise _Unreadable(f"body unreadable: {exc}") from exc
    if size > limit:
        raise _TooLarge(f"body larger than {limit} bytes")
    return b"".join(chunks)


def add_state_metrics(meters: metrics.Metrics, state: State) -> None:
    """What the State already knows, read at flush and scrape time."""
    meters.counter(
        "gpupolicy_policy_reloads",
        "Reloads of an input source (policies, namespaces, inventory), by result.",
        ["source", "result"],
        read=lambda: {key: float(n) for key, n in state.reloads.copy().items()})
    meters.gauge("gpupolicy_policies_loaded", "Policies in effect.",
                 read=lambda: {(): len(state.context.policies)}, mode="livemostrecent")
    meters.gauge(
        "gpupolicy_source_error",
        "1 while the last load of a source failed (the last good version stays in effect).",
        ["source"], mode="livemax",
        read=lambda: _source_errors(state))


def unready_message(state: State) -> str:
    """Why a worker gives no verdict yet, in one line a user sees in the apiserver's error."""
    detail = state.detail()
    waiting = ", ".join(str(name) for name in detail.get("waiting_for") or []) or "its sources"
    errors = detail.get("errors") or {}
    why = "; ".join(f"{name}: {text}" for name, text in sorted(errors.items())
                    if "/" not in str(name))  # a skipped GPUPolicy does not hold readiness
    text = (f"gpupolicy is not ready to judge: waiting for {waiting} to load"
            + (f" ({why})" if why else "")
            + "; no verdict given, the webhook's failurePolicy applies")
    return admission.clean(text)


def _source_errors(state: State) -> dict[tuple[str, ...], float]:
    # Sources, not single GPUPolicy resources (`gpupolicy/<name>`: counted by the cluster cache).
    errors = set(state.errors)
    names = state.expected | state.loaded | {name for name in errors if "/" not in name}
    return {(name,): float(name in errors) for name in names}


def _outcome(response: admission.AdmissionResponse) -> str:
    if not response["allowed"]:
        return "denied"
    return "patched" if "patch" in response else "allowed"


def _json(data: Any, status: int = 200) -> Response:
    return Response(admission.encode(data), status, content_type="application/json")
