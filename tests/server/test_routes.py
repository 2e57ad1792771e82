"""The admission port serves the admission paths and the probes, nothing else (issue 27): no
Flask static files, no automatic OPTIONS answers, over the real server and in the app."""

from __future__ import annotations

import pytest

from tests.server.harness import Server
from webhook.http.server import create_app
from webhook.inputs import sources
from webhook.inputs.state import State

RULES = {("/mutate", frozenset({"POST"})), ("/mutate/", frozenset({"POST"})),
         ("/validate", frozenset({"POST"})), ("/validate/", frozenset({"POST"})),
         ("/healthz", frozenset({"GET", "HEAD"})), ("/readyz", frozenset({"GET", "HEAD"}))}


def test_the_app_has_only_the_intended_rules() -> None:
    app = create_app(State(sources.load_catalog()))
    assert {(r.rule, frozenset(r.methods or ())) for r in app.url_map.iter_rules()} == RULES
    assert app.static_folder is None


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/static/app.js", 404),
        ("GET", "/static/../server.py", 404),
        ("HEAD", "/static/x", 404),
        ("GET", "/", 404),
        ("GET", "/favicon.ico", 404),
        ("OPTIONS", "/validate", 405),
        ("GET", "/validate", 405),
        ("GET", "/healthz", 200),
    ],
)
def test_nothing_but_the_admission_paths_over_tls(server: Server, method: str, path: str,
                                                  status: int) -> None:
    reply = server.request(method, path)
    assert reply.status == status, reply
    if status != 200 and method != "HEAD":
        assert reply.headers["content-type"] == "application/json"
