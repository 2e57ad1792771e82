"""The bench's baseline: a do-nothing Flask endpoint served exactly as `gpupolicy serve`
serves the webhook (same command-line path, TLS, gunicorn settings), only the app differs.

    python -m bench.noop_app --port 9443 --certs-dir /tmp/certs
"""

from __future__ import annotations

import json
import sys
from typing import Any

from flask import Flask, Response, request


def create_app() -> Flask:
    """Answers every review with allowed: true: the least any webhook does per request."""
    app = Flask("noop")

    @app.post("/mutate")
    @app.post("/validate")
    def answer() -> Response:
        uid = json.loads(request.get_data())["request"]["uid"]
        body = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                "response": {"uid": uid, "allowed": True}}
        return Response(json.dumps(body), 200, content_type="application/json")

    @app.get("/healthz")
    def healthz() -> Response:
        return Response("{}", 200, content_type="application/json")

    return app


def main(argv: list[str]) -> int:
    from webhook.cli import run
    from webhook.commands import serve

    def load(_args: Any, _tls: Any = None) -> Flask:  # in each worker, instead of the webhook's
        return create_app()

    serve._load_app = load
    return run(["serve", *argv], sys.stdout, sys.stderr)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
