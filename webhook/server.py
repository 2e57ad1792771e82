"""The Flask app: routes only. Every admission decision is the engine's (policies.engine.review);
admission.py shapes it into the AdmissionReview answer."""

from __future__ import annotations

import json
import time
from typing import Any

from flask import Flask, Response, request
from werkzeug.exceptions import HTTPException

from policies.decision import Decision
from policies.engine import review
from webhook import admission, logs, metrics
from webhook.state import State

DEFAULT_MAX_BODY = 8 * 1024 * 1024  # well above the apiserver's 3 MiB request cap


def create_app(state: State, *, max_body: int = DEFAULT_MAX_BODY) -> Flask:
    app = Flask("gpupolicy")
    log = logs.get()

    def admit(webhook: str) -> Response:
        started = time.perf_counter()
        body = _read_body(max_body)
        if body is None:
            return _bad(webhook, f"body larger than {max_body} bytes")
        try:
            req = admission.read_review(body)
        except admission.BadReview as exc:
            return _bad(webhook, str(exc))
        namespace = admission.request_namespace(req)
        decision: Decision | None = None
        try:
            decision = review(
                req.get("object"), state.context, namespace=namespace,
                operation=req["operation"], subresource=req.get("subResource") or "",
            )
            answer = admission.build_response(req, decision, webhook)
            outcome = _outcome(answer["response"])
        except Exception:
            # Never a 500 page, never a patch from a failing engine.
            log.exception("engine failed", extra={"fields": {"uid": req["uid"]}})
            metrics.ENGINE_ERRORS.labels(webhook).inc()
            answer, outcome = admission.error_response(req, webhook), "error"
        elapsed = time.perf_counter() - started
        metrics.REQUESTS.labels(webhook, req["operation"], outcome).inc()
        metrics.LATENCY.labels(webhook).observe(elapsed)
        dry_run = bool(req.get("dryRun"))
        if decision is not None and webhook == "validate" and not dry_run:
            for v in decision.violations:
                metrics.VIOLATIONS.labels(v.policy, v.rule, v.mode).inc()
        logs.event(
            log, "admission", webhook=webhook, uid=req["uid"], kind=req["kind"].get("kind"),
            namespace=namespace, name=admission.request_name(req), operation=req["operation"],
            subresource=req.get("subResource") or "", dry_run=dry_run, decision=outcome,
            rules=sorted({v.rule for v in decision.violations}) if decision else [],
            latency_ms=round(elapsed * 1000, 3),
        )
        return _json(answer)

    # The apiserver drops a trailing slash; a hand-made `/mutate/` works too and never redirects.
    @app.post("/mutate")
    @app.post("/mutate/")
    def mutate() -> Response:
        return admit("mutate")

    @app.post("/validate")
    @app.post("/validate/")
    def validate() -> Response:
        return admit("validate")

    @app.get("/healthz")
    def healthz() -> Response:
        return _json({"ok": True})

    @app.get("/readyz")
    def readyz() -> Response:
        return _json(state.detail(), 200 if state.ready else 503)

    @app.get("/metrics")
    def metrics_page() -> Response:
        text, content_type = metrics.exposition()
        return Response(text, 200, content_type=content_type)

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


def _read_body(limit: int) -> bytes | None:
    """The body, or None when it is over `limit`. Read from the WSGI input in chunks: asking a
    stream for `limit` bytes at once would allocate that much per request. An oversized body
    is still read (and thrown away, up to a bound) so the client, still sending, gets its 400."""
    length = request.content_length
    stream = request.environ["wsgi.input"]  # gunicorn bounds it by Content-Length / chunking
    if length is not None and length <= limit:
        return bytes(stream.read(length))
    chunks: list[bytes] = []
    size = 0
    while size <= 8 * limit:
        chunk = stream.read(65536)
        if not chunk:
            break
        size += len(chunk)
        if size <= limit:
            chunks.append(chunk)
    return b"".join(chunks) if size <= limit else None


def _outcome(response: dict[str, Any]) -> str:
    if not response["allowed"]:
        return "denied"
    return "patched" if "patch" in response else "allowed"


def _bad(webhook: str, message: str) -> Response:
    metrics.REQUESTS.labels(webhook, "", "bad_request").inc()
    logs.event(logs.get(), "bad request", level=30, webhook=webhook, error=message)
    return _json({"error": message}, 400)


def _json(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data, separators=(",", ":")), status,
                    content_type="application/json")
