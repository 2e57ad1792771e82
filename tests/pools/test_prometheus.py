"""Utilisation from a real Prometheus holding a week of DCGM series (tests/pools/prom.py), and
what the pool view does when Prometheus is down, slow, answers garbage or half an answer."""

from __future__ import annotations

import contextlib
import http.server
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.pools import promcluster, shapes
from tests.pools.helpers import cli
from tests.pools.prom import prometheus, requests_served


def _iso(t: float) -> str:
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path, float]]:
    tmp = tmp_path_factory.mktemp("prometheus")
    end = float(int(time.time()) // 300 * 300)
    dump = tmp / "dump.yaml"
    dump.write_text(shapes.dump(promcluster.objects()), encoding="utf-8")
    with prometheus(tmp, promcluster.series(), end) as url:
        yield url, dump, end


def _pools(out: str) -> dict[str, Any]:
    return {p["name"]: p for p in json.loads(out)["pools"]}


def test_a_week_of_dcgm_series_under_both_names_and_mig_per_pool(served: tuple[str, Path, float]
                                                                ) -> None:
    url, dump, end = served
    before = requests_served(url)
    code, out, err = cli("audit", str(dump), "--pools", "-o", "json", "--prometheus", url,
                         "--window", "7d", "--now", _iso(end))
    after = requests_served(url)
    assert code == 0, err
    # a fixed number of queries per run: one range query, one instant query
    assert {h: after.get(h, 0) - before.get(h, 0) for h in after} == {
        "/api/v1/query_range": 1, "/api/v1/query": 1}
    pools = _pools(out)
    batch, infer, mig = pools["batch"]["utilization"], pools["infer"]["utilization"], \
        pools["mig"]["utilization"]
    # both naming schemes read alike (percent /100 and ratio), the whole-GPU profiling series
    # left out (it would pull batch-1 to 0)
    assert 0.8 <= batch["p50"] <= 0.9 and 0.9 <= batch["p95"] <= 0.96
    assert batch["hours"] >= 160 and batch["idleAllocatedGPUs"] == 0
    assert infer["p95"] < 0.2 and infer["idleAllocatedGPUs"] == 1  # infer-2's GPU
    assert 0.45 <= mig["p50"] <= 0.55  # MIG instances through GR_ENGINE_ACTIVE
    assert [a["action"] for a in pools["batch"]["advice"]] == ["dedicate"]
    assert [a["action"] for a in pools["infer"]["advice"]] == ["share"]
    assert "p95 15%" in pools["infer"]["advice"][0]["because"] or \
        "p95 14%" in pools["infer"]["advice"][0]["because"]
    assert pools["mig"]["advice"] == []
    assert json.loads(out)["utilizationSource"] == {"windowSeconds": 7 * 86400.0,
                                                    "available": True}


def test_a_window_shorter_than_the_data_needed_advises_nothing_from_utilisation(
        served: tuple[str, Path, float]) -> None:
    url, dump, end = served
    code, out, err = cli("audit", str(dump), "--pools", "--prometheus", url, "--window", "36h",
                         "--now", _iso(end))
    assert code == 0, err
    assert "utilisation covers 36.0 h of the 72 h needed: too little data" in out
    assert "-> share" not in out and "-> dedicate" not in out


def test_the_text_and_html_show_the_utilisation(served: tuple[str, Path, float]) -> None:
    url, dump, end = served
    code, out, err = cli("audit", str(dump), "--pools", "--prometheus", url, "--now", _iso(end))
    assert code == 0, err
    assert "utilisation  p50 " in out and "-> share: GPU utilisation p50 " in out
    code, page, err = cli("audit", str(dump), "--pools", "-o", "html", "--prometheus", url,
                          "--now", _iso(end))
    assert code == 0, err
    assert page.count('class="chart utilization"') == 3


# -- Prometheus that misbehaves -------------------------------------------------------------

def _server(handler: Callable[[http.server.BaseHTTPRequestHandler], None],
            tls: Any = None) -> tuple[http.server.HTTPServer, str]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            handler(self)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        server.socket = tls.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}"


def _answer(body: bytes, status: int = 200, delay: float = 0.0
            ) -> Callable[[http.server.BaseHTTPRequestHandler], None]:
    def handle(req: http.server.BaseHTTPRequestHandler) -> None:
        time.sleep(delay)
        req.send_response(status)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        with contextlib.suppress(BrokenPipeError):  # the slow case: the client gave up
            req.wfile.write(body)
    return handle


PARTIAL = {
    "/api/v1/query_range": {"status": "success", "data": {"resultType": "matrix", "result": [
        {"metric": {"Hostname": "batch-1"}, "values": [[1.0, "0.5"], [2.0, "NaN"],
                                                       [3.0, "bogus"]]},
        {"metric": {"job": "no-host"}, "values": [[1.0, "0.1"]]},
        {"metric": {"Hostname": "batch-2" * 1000}, "values": "not a list"}]}},
    "/api/v1/query": {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"Hostname": "batch-1", "gpu": "0"}, "value": [3.0, "7"]}]}},
}


def _partial(req: http.server.BaseHTTPRequestHandler) -> None:
    _answer(json.dumps(PARTIAL[req.path.split("?")[0]]).encode())(req)


@pytest.mark.parametrize(("name", "handler", "code", "says"), [
    ("garbage", _answer(b"<html>502 Bad Gateway</html>"), 0,
     "utilisation unavailable: Prometheus' answer is not JSON"),
    ("error", _answer(b'{"status":"error","errorType":"bad_data","error":"parse error"}', 400),
     0, "utilisation unavailable: Prometheus answered HTTP 400: parse error"),
    ("no series", lambda req: _answer(json.dumps({"status": "success", "data": {
        "resultType": "matrix" if "range" in req.path else "vector", "result": []}}).encode()
        )(req), 0, "holds no DCGM utilisation series"),
    ("wrong kind", _answer(b'{"status":"success","data":{"resultType":"scalar","result":[1,"1"]}}'),
     0, "Prometheus answered no matrix"),
    ("slow", _answer(b"{}", delay=3.0), 2, "did not answer"),
    ("partial", _partial, 0, "Utilisation partial: 4 series or points"),
])
def test_prometheus_that_misbehaves_leaves_the_pool_view_standing(
        name: str, handler: Callable[[http.server.BaseHTTPRequestHandler], None], code: int,
        says: str, tmp_path: Path) -> None:
    dump = tmp_path / "dump.yaml"
    dump.write_text(shapes.dump(promcluster.objects()), encoding="utf-8")
    server, url = _server(handler)
    try:
        got, out, err = cli("audit", str(dump), "--pools", "--prometheus", url,
                            "--prometheus-timeout", "1", "--now", shapes.T0)
    finally:
        server.shutdown()
        server.server_close()
    assert got == code, err
    assert "Pool batch" in out and "Pool infer" in out  # what the cluster says still prints
    assert says in out + err
    if name == "partial":
        assert "batch-2batch-2" not in out  # the hostile label bounded, and its series dropped


def test_prometheus_down_exits_2_after_printing_the_view(tmp_path: Path) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dump = tmp_path / "dump.yaml"
    dump.write_text(shapes.dump(promcluster.objects()), encoding="utf-8")
    code, out, err = cli("audit", str(dump), "--pools", "-o", "json", "--prometheus",
                         f"http://127.0.0.1:{port}", "--now", shapes.T0)
    assert code == 2
    doc = json.loads(out)
    assert {p["name"] for p in doc["pools"]} == {"batch", "infer", "mig"}
    assert all("utilization" not in p for p in doc["pools"])
    assert doc["utilizationSource"]["available"] is False
    assert "did not answer" in doc["utilizationSource"]["reason"]
    assert "utilisation unavailable" in err


def test_the_bearer_token_is_sent(tmp_path: Path) -> None:
    seen: list[str] = []
    empty = {"status": "success", "data": {"resultType": "matrix", "result": []}}

    def handle(req: http.server.BaseHTTPRequestHandler) -> None:
        seen.append(req.headers.get("Authorization", ""))
        if req.headers.get("Authorization") != "Bearer s3cret":
            _answer(b'{"status":"error","error":"unauthorized"}', 401)(req)
            return
        kind = "matrix" if "range" in req.path else "vector"
        _answer(json.dumps({**empty, "data": {"resultType": kind, "result": []}}).encode())(req)

    dump = tmp_path / "dump.yaml"
    dump.write_text(shapes.dump(promcluster.objects()), encoding="utf-8")
    token = tmp_path / "token"
    token.write_text("s3cret\n", encoding="utf-8")
    server, url = _server(handle)
    try:
        code, out, err = cli("audit", str(dump), "--pools", "--prometheus", url, "--now",
                             shapes.T0)
        assert code == 0 and "Prometheus answered HTTP 401: unauthorized" in out, err
        code, out, err = cli("audit", str(dump), "--pools", "--prometheus", url,
                             "--prometheus-token-file", str(token), "--now", shapes.T0)
        assert code == 0 and "holds no DCGM utilisation series" in out, err
    finally:
        server.shutdown()
        server.server_close()
    assert seen == ["", "Bearer s3cret", "Bearer s3cret"]


def test_an_https_prometheus_is_trusted_through_the_ca_option(tmp_path: Path) -> None:
    import ssl

    from webhook.certs import build_ca, build_serving_cert, write_bundle

    paths = write_bundle(build_serving_cert("prometheus", "monitoring", build_ca()),
                         tmp_path / "tls")

    def handle(req: http.server.BaseHTTPRequestHandler) -> None:
        kind = "matrix" if "range" in req.path else "vector"
        _answer(json.dumps({"status": "success", "data": {
            "resultType": kind, "result": []}}).encode())(req)

    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(paths["cert"], paths["key"])
    server, url = _server(handle, tls)
    dump = tmp_path / "dump.yaml"
    dump.write_text(shapes.dump(promcluster.objects()), encoding="utf-8")
    https = url.replace("http://", "https://")
    try:
        code, out, err = cli("audit", str(dump), "--pools", "--prometheus", https,
                             "--prometheus-timeout", "5", "--now", shapes.T0)
        # not trusted: no answer that counts (the TLS handshake fails), exit 2
        assert code == 2 and "CERTIFICATE_VERIFY_FAILED" in out, err
        code, out, err = cli("audit", str(dump), "--pools", "--prometheus", https,
                             "--prometheus-ca", str(paths["ca"]), "--now", shapes.T0)
        assert code == 0 and "holds no DCGM utilisation series" in out, err
    finally:
        server.shutdown()
        server.server_close()
