"""Bad input never gets a 500 or a trace: HTTP 400 (or 404/405) and a one-line JSON error."""

from __future__ import annotations

import io
import json
import logging
from typing import Any

import pytest
from werkzeug.test import EnvironBuilder

from tests.server.harness import Server, envelope, make_request
from webhook import logs
from webhook.http import admission
from webhook.http import server as server_module
from webhook.http.server import create_app
from webhook.inputs import sources
from webhook.inputs.state import State

POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
       "spec": {"containers": [{"name": "c", "image": "i"}]}}
GOOD = make_request(POD, uid="good")


def _with(**changes: Any) -> bytes:
    req = {**GOOD, **changes}
    return json.dumps(envelope({k: v for k, v in req.items() if v is not _DROP})).encode()


_DROP: Any = object()
MAX = admission.MAX_BODY

# (case, body, status, words the error must contain)
MALFORMED: list[tuple[str, bytes, int, str]] = [
    ("empty-body", b"", 400, "not valid JSON"),
    ("invalid-json", b'{"apiVersion": ', 400, "not valid JSON"),
    ("not-utf8", b"\xff\xfe\x00{", 400, "not valid JSON"),
    ("nested-too-deep", b"[" * 200_000, 400, "not valid JSON"),
    ("json-array", b"[]", 400, "not a JSON object"),
    ("json-string", b'"AdmissionReview"', 400, "not a JSON object"),
    ("v1beta1", json.dumps({**envelope(GOOD), "apiVersion": "admission.k8s.io/v1beta1"}).encode(),
     400, "admission.k8s.io/v1beta1"),
    ("wrong-kind", json.dumps({**envelope(GOOD), "kind": "ConfigMap"}).encode(), 400,
     "ConfigMap"),
    ("no-apiversion", json.dumps({"kind": "AdmissionReview", "request": GOOD}).encode(), 400,
     "expected apiVersion"),
    ("no-request", json.dumps({"apiVersion": "admission.k8s.io/v1",
                               "kind": "AdmissionReview"}).encode(), 400, "request: missing"),
    ("request-is-list", json.dumps({**envelope(GOOD), "request": []}).encode(), 400,
     "request: missing or not an object"),
    ("missing-uid", _with(uid=_DROP), 400, "request.uid"),
    ("empty-uid", _with(uid=""), 400, "request.uid"),
    ("numeric-uid", _with(uid=7), 400, "request.uid"),
    ("missing-kind", _with(kind=_DROP), 400, "request.kind"),
    ("kind-is-string", _with(kind="Pod"), 400, "request.kind"),
    ("kind-without-kind", _with(kind={"group": "", "version": "v1"}), 400, "request.kind"),
    ("unknown-operation", _with(operation="PATCH"), 400, "request.operation"),
    ("missing-operation", _with(operation=_DROP), 400, "request.operation"),
    ("create-null-object", _with(object=None), 400, "request.object"),
    ("create-no-object", _with(object=_DROP), 400, "request.object"),
    ("update-null-object", _with(operation="UPDATE", object=None), 400, "request.object"),
    ("object-is-list", _with(object=[POD]), 400, "request.object"),
    ("namespace-not-string", _with(namespace=5), 400, "request.namespace"),
    ("subresource-not-string", _with(subResource=["exec"]), 400, "request.subResource"),
    ("dryrun-not-bool", _with(dryRun="yes"), 400, "request.dryRun"),
    ("operation-is-list", _with(operation=["CREATE"]), 400, "request.operation"),
    ("operation-is-dict", _with(operation={"op": "CREATE"}), 400, "request.operation"),
    ("uid-is-dict", _with(uid={"a": 1}), 400, "request.uid"),
    ("userinfo-groups-not-strings", _with(userInfo={"username": "u", "groups": [1]}), 400,
     "request.userInfo.groups[0]"),
    ("oversized", b'{"pad": "' + b"x" * MAX + b'"}', 413, "larger than"),
    # ~36x its size once parsed: counted, and refused, before anything is built
    ("empty-objects", b'{"pad": [' + b"{}," * (MAX // 3 - 10) + b'{}]}', 413, "JSON values"),
]

# Every field the webhook reads or echoes, given a value of the wrong type: (field, value,
# the field path the error names). Checked in-process (fast), both webhooks.
WRONG_TYPES: list[tuple[str, Any, str]] = [
    ("operation", ["CREATE"], "request.operation"),
    ("operation", {"CREATE": True}, "request.operation"),
    ("operation", 1, "request.operation"),
    ("operation", "create", "request.operation"),
    ("uid", ["u"], "request.uid"),
    ("uid", True, "request.uid"),
    ("kind", ["Pod"], "request.kind"),
    ("kind", {"kind": 5}, "request.kind"),
    ("kind", {"kind": "Pod", "group": 1}, "request.kind.group"),
    ("kind", {"kind": "Pod", "version": []}, "request.kind.version"),
    ("requestKind", "Pod", "request.requestKind"),
    ("requestKind", {"kind": ["Pod"]}, "request.requestKind.kind"),
    ("resource", "pods", "request.resource"),
    ("resource", {"resource": {"x": 1}}, "request.resource.resource"),
    ("requestResource", [1], "request.requestResource"),
    ("requestResource", {"group": 0}, "request.requestResource.group"),
    ("namespace", {"name": "x"}, "request.namespace"),
    ("namespace", ["a"], "request.namespace"),
    ("name", 5, "request.name"),
    ("name", {"n": 1}, "request.name"),
    ("subResource", 1, "request.subResource"),
    ("requestSubResource", ["status"], "request.requestSubResource"),
    ("object", "pod", "request.object"),
    ("object", 5, "request.object"),
    ("oldObject", [POD], "request.oldObject"),
    ("oldObject", "old", "request.oldObject"),
    ("dryRun", "false", "request.dryRun"),
    ("dryRun", 0, "request.dryRun"),
    ("options", "CreateOptions", "request.options"),
    ("options", [1], "request.options"),
    ("userInfo", "admin", "request.userInfo"),
    ("userInfo", {"username": 5}, "request.userInfo.username"),
    ("userInfo", {"uid": []}, "request.userInfo.uid"),
    ("userInfo", {"groups": "system:masters"}, "request.userInfo.groups"),
    ("userInfo", {"groups": ["a", None]}, "request.userInfo.groups[1]"),
    ("userInfo", {"extra": []}, "request.userInfo.extra"),
    ("userInfo", {"extra": {"k": "v"}}, 'request.userInfo.extra["k"]'),
    ("userInfo", {"extra": {"k": ["v", 2]}}, 'request.userInfo.extra["k"][1]'),
]


@pytest.mark.parametrize("webhook", ["mutate", "validate"])
@pytest.mark.parametrize(("field", "bad", "path"), WRONG_TYPES,
                         ids=[f"{f}={json.dumps(v)}" for f, v, _ in WRONG_TYPES])
def test_wrong_type_names_the_field(webhook: str, field: str, bad: Any, path: str) -> None:
    state = State(sources.load_catalog())
    state.update(policies=[])
    reply = create_app(state).test_client().post(f"/{webhook}", data=_with(**{field: bad}))
    _check_error(reply.status_code, reply.content_type, reply.data, 400, path + ":")


# Fields the apiserver always sends but the webhook does not need may be missing or null.
@pytest.mark.parametrize("webhook", ["mutate", "validate"])
@pytest.mark.parametrize(("field", "value"), [
    ("resource", _DROP), ("requestKind", _DROP), ("requestResource", _DROP),
    ("userInfo", _DROP), ("options", _DROP), ("options", None), ("oldObject", _DROP),
    ("dryRun", _DROP), ("dryRun", None), ("userInfo", {"extra": {"k": None}}),
])
def test_absent_optional_fields_are_fine(webhook: str, field: str, value: Any) -> None:
    state = State(sources.load_catalog())
    state.update(policies=[])
    reply = create_app(state).test_client().post(f"/{webhook}", data=_with(**{field: value}))
    assert reply.status_code == 200, reply.data
    assert reply.get_json()["response"] == {"uid": "good", "allowed": True}


def _check_error(status: int, content_type: str, body: bytes, want_status: int, words: str) -> None:
    assert status == want_status, body[:300]
    assert content_type.startswith("application/json")
    text = body.decode()
    assert "\n" not in text.strip() and "Traceback" not in text
    error = json.loads(text)["error"]
    assert words in error, error


@pytest.mark.parametrize("webhook", ["mutate", "validate"])
@pytest.mark.parametrize(("case", "body", "status", "words"), MALFORMED,
                         ids=[c[0] for c in MALFORMED])
def test_malformed_review(server: Server, webhook: str, case: str, body: bytes, status: int,
                          words: str) -> None:
    reply = server.request("POST", f"/{webhook}", body, {"Content-Type": "application/json"})
    _check_error(reply.status, reply.headers.get("content-type", ""), reply.body, status, words)


ROUTES = [
    ("GET", "/mutate", 405, "405 Method Not Allowed"),
    ("PUT", "/validate", 405, "405 Method Not Allowed"),
    ("POST", "/", 404, "404 Not Found"),
    ("POST", "/validating", 404, "404 Not Found"),
    ("POST", "/healthz", 405, "405 Method Not Allowed"),
]


@pytest.mark.parametrize(("method", "path", "status", "words"), ROUTES)
def test_wrong_route(server: Server, method: str, path: str, status: int, words: str) -> None:
    reply = server.request(method, path, b"{}")
    _check_error(reply.status, reply.headers.get("content-type", ""), reply.body, status, words)


@pytest.mark.parametrize("path", ["/mutate", "/mutate/", "/validate?timeout=3s",
                                  "/validate/?timeout=10s", "/mutate?timeout=1s&x=y"])
def test_paths_and_query(server: Server, path: str) -> None:
    reply = server.post(path, envelope(GOOD))
    assert reply.status == 200  # never a redirect
    assert reply.json["response"]["uid"] == "good"


def test_large_review_within_the_limit(server: Server) -> None:
    """The apiserver sends up to 3 MiB objects; they are answered, not refused."""
    pod = json.loads(json.dumps(POD))
    pod["metadata"]["annotations"] = {"big": "x" * (3 * 1024 * 1024 + 512 * 1024)}
    reply = server.post("/validate", envelope(make_request(pod, uid="big")))
    assert reply.status == 200
    assert reply.json["response"]["uid"] == "big"


def test_server_survived_the_bad_input(server: Server) -> None:
    assert server.request("GET", "/healthz").status == 200
    assert not any("Traceback" in line for line in server.log.read_text().splitlines()
                   if '"bad request"' in line)


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []
        self.setFormatter(logs.JSONFormatter())

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


@pytest.mark.parametrize(("webhook", "allowed", "code"), [("mutate", True, None),
                                                          ("validate", False, 500)])
def test_engine_exception(monkeypatch: pytest.MonkeyPatch, webhook: str, allowed: bool,
                          code: int | None) -> None:
    """A failing engine: logged with the uid; /validate refuses with 500, /mutate lets the
    object through unchanged (a bug must never corrupt an object)."""

    def broken(*_: Any, **__: Any) -> Any:
        raise RuntimeError("engine bug")

    monkeypatch.setattr(server_module, "review", broken)
    state = State(sources.load_catalog())
    state.update(policies=[])
    records = _Records()
    logs.get().addHandler(records)
    try:
        reply = create_app(state).test_client().post(f"/{webhook}", data=_with(uid="boom-1"))
    finally:
        logs.get().removeHandler(records)
    assert reply.status_code == 200
    response = reply.get_json()["response"]
    assert response["uid"] == "boom-1"
    assert response["allowed"] is allowed
    assert "patch" not in response and "patchType" not in response
    if code:
        assert response["status"]["code"] == code
        assert "boom-1" in response["status"]["message"]
    failed = [json.loads(line) for line in records.lines if '"engine failed"' in line]
    assert failed and failed[0]["uid"] == "boom-1" and "engine bug" in failed[0]["exception"]


@pytest.mark.parametrize(("size", "status"), [(0, 200), (MAX + 1, 413)], ids=["fits", "oversized"])
def test_chunked_body(server: Server, size: int, status: int) -> None:
    """Without Content-Length (chunked) the limit holds just the same."""
    body = json.dumps(envelope(make_request(POD, uid="chunked"))).encode()
    if size:
        body = b'{"pad": "' + b"x" * size + b'"}'
    chunks = (body[i:i + 65536] for i in range(0, len(body), 65536))
    conn = server.connection()
    conn.request("POST", "/validate", body=chunks, headers={"Content-Type": "application/json"},
                 encode_chunked=True)
    resp = conn.getresponse()
    data = json.loads(resp.read())
    conn.close()
    assert resp.status == status
    if status == 200:
        assert data["response"]["uid"] == "chunked"
    else:
        assert "larger than" in data["error"]


# The apiserver's requests (POST with a Content-Length) skip Flask's request cycle; chunked
# ones go through Flask. Both must answer byte for byte alike.
SAME_EITHER_WAY = [
    ("good", _with(uid="same")),
    ("invalid-json", b'{"apiVersion": '),
    ("operation-is-list", _with(operation=["CREATE"])),
    ("delete", _with(operation="DELETE", object=None, oldObject=POD)),
]


@pytest.mark.parametrize("path", ["/mutate", "/validate/"])
@pytest.mark.parametrize(("case", "body"), SAME_EITHER_WAY, ids=[c[0] for c in SAME_EITHER_WAY])
def test_fast_path_and_flask_path_agree(path: str, case: str, body: bytes) -> None:
    state = State(sources.load_catalog())
    state.update(policies=[])
    client = create_app(state).test_client()
    fast = client.post(path, data=body)
    environ = EnvironBuilder(path=path, method="POST", data=body).get_environ()
    del environ["CONTENT_LENGTH"]  # as a chunked request arrives from gunicorn
    environ["wsgi.input"] = io.BytesIO(body)
    flask = client.open(environ)
    assert (fast.status_code, fast.content_type, fast.data) == (
        flask.status_code, flask.content_type, flask.data)
    assert fast.status_code == (400 if "invalid" in case or "list" in case else 200)


def test_fast_path_unexpected_error_is_one_line_json(monkeypatch: pytest.MonkeyPatch) -> None:
    """A bug outside the engine's guard (here: the request reader) is a 500 with one line of
    JSON, like Flask's error handler gives, never a server's HTML page."""

    def broken(_: bytes) -> Any:
        raise RuntimeError("reader bug")

    monkeypatch.setattr(server_module.admission, "read_review", broken)
    state = State(sources.load_catalog())
    state.update(policies=[])
    reply = create_app(state).test_client().post("/validate", data=_with(uid="x"))
    _check_error(reply.status_code, reply.content_type, reply.data, 500, "internal error")


class _Stalled(io.RawIOBase):
    """A body the client stops sending halfway: the worker's reader times out."""

    def read(self, size: int = -1) -> bytes:
        raise TimeoutError("timed out reading the request body")


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("webhook", ["mutate", "validate"])
def test_a_body_that_stops_coming_is_a_400_that_closes(webhook: str, chunked: bool) -> None:
    """The same answer on both paths (the apiserver's Content-Length one skips Flask)."""
    app = create_app(State(sources.load_catalog()))
    environ = EnvironBuilder(path=f"/{webhook}", method="POST",
                             content_type="application/json").get_environ()
    environ["wsgi.input"] = _Stalled()
    if chunked:
        environ["HTTP_TRANSFER_ENCODING"] = "chunked"
        environ["wsgi.input_terminated"] = True
    else:
        environ["CONTENT_LENGTH"] = "100"
    answered: dict[str, Any] = {}

    def start_response(status: str, headers: list[tuple[str, str]]) -> None:
        answered.update(status=status, headers=dict(headers))

    body = b"".join(app.wsgi_app(environ, start_response))
    assert answered["status"].startswith("400"), (answered, body)
    assert answered["headers"].get("Connection") == "close"
    assert "body unreadable" in json.loads(body)["error"]


def test_log_lines_quote_what_the_client_wrote_clipped() -> None:
    """The answer echoes the uid whole (the contract); the log line is one short line."""
    from webhook.http.admission import ITEM_MAX

    state = State(sources.load_catalog())
    state.update(policies=[])
    long = "u" * 100_000
    obj = {**POD, "metadata": {"name": "n" * 100_000, "namespace": "default"}}
    records = _Records()
    logger = logs.get()
    level = logger.level
    logger.addHandler(records)
    logger.setLevel(logging.INFO)
    try:
        reply = create_app(state).test_client().post(
            "/validate", data=json.dumps(envelope({**GOOD, "uid": long, "object": obj})))
    finally:
        logger.removeHandler(records)
        logger.setLevel(level)
    assert reply.get_json()["response"]["uid"] == long
    [line] = [json.loads(x) for x in records.lines if '"admission"' in x]
    assert len(line["uid"]) <= ITEM_MAX and len(line["name"]) <= ITEM_MAX
    assert line["uid"].startswith("uuu")
