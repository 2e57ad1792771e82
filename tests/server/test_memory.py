"""What one client can make the webhook hold: bodies are counted before they are parsed, one
large body per worker at a time, and 8 clients sending the costliest bodies the limits let
through leave the server (master and workers) below the chart's memory limit, over real TLS.
bench/bench_memory.py is the same flood, printed."""

from __future__ import annotations

import io
import json
import threading
import time
from pathlib import Path
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from bench import bench_memory
from policies import jsonbudget
from tests.server.harness import envelope, make_request
from webhook.http import admission
from webhook.http import server as server_module
from webhook.http.server import create_app
from webhook.inputs import sources
from webhook.inputs.state import State

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "corpus" / "admissionreview"


def reference_count(value: Any) -> int:
    """Values the way jsonbudget counts them: every value, and every key of an object."""
    if isinstance(value, dict):
        return 1 + sum(1 + reference_count(v) for v in value.values())
    if isinstance(value, list):
        return 1 + sum(reference_count(v) for v in value)
    return 1


# An empty container is counted as two (its opening bracket is the only sign of it, and the
# bound reads the same bracket): the count may overstate by those, never understate.
def empties(value: Any) -> int:
    if isinstance(value, dict):
        return (not value) + sum(empties(v) for v in value.values())
    if isinstance(value, list):
        return (not value) + sum(empties(v) for v in value)
    return 0


COUNTS: list[tuple[str, Any]] = [
    ("scalar", 5),
    ("string with punctuation", "a,b:c[d{e"),
    ("escaped quotes", {"k": 'say "x, y": [1]', "\\": "\\\""}),
    ("nested", {"a": [1, {"b": [], "c": {}}, "x"], "d": None}),
    ("keys with colons", {"nvidia.com/gpu:1": "1", "a,b": [True, False]}),
    ("unicode", {"é": "日本,語", "emoji": "😀:"}),
]


@pytest.mark.parametrize(("case", "value"), COUNTS, ids=[c for c, _ in COUNTS])
def test_values_counted(case: str, value: Any) -> None:
    body = orjson.dumps(value)
    assert jsonbudget.values(body) == reference_count(value) + empties(value)
    assert jsonbudget.values_at_most(body) >= jsonbudget.values(body)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False)
    | st.text(alphabet=st.sampled_from('ab"\\,:[]{}é\n\t')),
    lambda inner: st.lists(inner, max_size=5)
    | st.dictionaries(st.text(alphabet=st.sampled_from('k"\\,:[{'), max_size=4), inner,
                      max_size=5),
    max_leaves=40)


@pytest.mark.fuzz
@given(JSON)
def test_values_fuzz(value: Any) -> None:
    for body in (orjson.dumps(value), json.dumps(value, indent=1).encode()):
        assert jsonbudget.values(body) == reference_count(value) + empties(value)
        assert jsonbudget.values_at_most(body) >= jsonbudget.values(body)


@pytest.mark.fuzz
@given(st.binary(max_size=300))
def test_values_of_any_bytes(body: bytes) -> None:
    """Not JSON at all (unterminated strings, stray escapes): a count, never an error."""
    assert 1 <= jsonbudget.values(body) <= jsonbudget.values_at_most(body)


@pytest.mark.parametrize("body", [
    b'"' + b'\\",' * 2_000_000,  # one unterminated string of escaped quotes
    b'"' * 6_000_000,
    b"[" + b'"\\\\",' * 1_000_000 + b"1]",  # escaped backslashes before each closing quote
], ids=["unterminated-escaped-quotes", "quotes", "escaped-backslashes"])
def test_the_exact_count_is_linear(body: bytes) -> None:
    """6 MiB of what makes a backtracking string pattern quadratic: well under a second."""
    started = time.perf_counter()
    jsonbudget.values(body)
    assert time.perf_counter() - started < 2.0


@pytest.mark.corpus
def test_real_reviews_are_far_below_the_budget() -> None:
    """The density MAX_VALUES rests on: real reviews, compact as the apiserver sends them,
    spend more than 9 bytes per value, so one of MAX_BODY bytes fits the budget."""
    if not CORPUS.is_dir():
        pytest.skip(f"{CORPUS} not found (../shared absent)")
    densities = []
    for path in CORPUS.rglob("*.json"):
        try:
            body = orjson.dumps(orjson.loads(path.read_bytes()))
        except orjson.JSONDecodeError:
            continue
        if len(body) > 1500:
            densities.append(len(body) / jsonbudget.values(body))
    assert len(densities) >= 10
    assert min(densities) >= admission.MAX_BODY / admission.MAX_VALUES


@pytest.fixture(scope="module")
def app() -> Any:
    state = State(sources.load_catalog())
    state.update(policies=[])
    return create_app(state).test_client()


def _padded(values: int) -> bytes:
    """A valid review whose object carries `values` values in all (within a few)."""
    req = make_request({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                        "spec": {"containers": [{"name": "c", "image": "i"}]}}, uid="pad")
    base = jsonbudget.values(orjson.dumps(envelope(req)))
    req["object"]["pad"] = list(range(values - base - 2))
    return orjson.dumps(envelope(req))


@pytest.mark.parametrize(("values", "status"), [
    (admission.MAX_VALUES, 200), (admission.MAX_VALUES + 1, 413),
], ids=["at-the-budget", "one-over"])
def test_value_budget(app: Any, values: int, status: int) -> None:
    body = _padded(values)
    assert jsonbudget.values(body) == values
    reply = app.post("/validate", data=body)
    assert reply.status_code == status
    if status == 413:
        assert "JSON values" in reply.get_json()["error"]
    else:
        assert reply.get_json()["response"]["uid"] == "pad"


def test_small_bodies_are_not_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast path: an ordinary review is parsed without a scan."""
    def counted(_: bytes) -> int:
        raise AssertionError("scanned")
    monkeypatch.setattr(jsonbudget, "values_at_most", counted)
    monkeypatch.setattr(jsonbudget, "values", counted)
    req = make_request({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                        "spec": {"containers": [{"name": "c", "image": "i"}]}})
    admission.read_review(orjson.dumps(envelope(req)))


@pytest.mark.parametrize("length", [jsonbudget.SMALL_BODY + 1, None], ids=["length", "chunked"])
def test_a_large_body_waits_for_the_worker_turn(monkeypatch: pytest.MonkeyPatch,
                                                 length: int | None) -> None:
    """While another large body holds the turn, a second one is refused with 429 after
    LARGE_WAIT, before it is read whole; a small one is not held up."""
    monkeypatch.setattr(server_module, "LARGE_WAIT", 0.05)
    slots = threading.BoundedSemaphore(1)
    assert slots.acquire()
    body = b" " * (jsonbudget.SMALL_BODY + 1)
    stream = io.BytesIO(body)
    with pytest.raises(server_module._Busy) as refused, server_module._Turn(slots) as turn:
        server_module._read_body(stream, length, admission.MAX_BODY, turn)
    assert refused.value.status == 429
    assert stream.tell() <= jsonbudget.SMALL_BODY + 65536
    with server_module._Turn(slots) as turn:
        assert server_module._read_body(io.BytesIO(b"{}"), 2, admission.MAX_BODY, turn) == b"{}"
    slots.release()
    with server_module._Turn(slots) as turn:
        server_module._read_body(io.BytesIO(body), length, admission.MAX_BODY, turn)
        assert turn.held
    assert slots.acquire(blocking=False)  # given back


@pytest.fixture(scope="module")
def flooded(tmp_path_factory: pytest.TempPathFactory) -> tuple[bench_memory.Flood, dict[int, float]]:
    proc, port, ca = bench_memory.start(tmp_path_factory.mktemp("memory"))
    try:
        result = bench_memory.flood(port, ca)
        return result, bench_memory.peak_mib(proc.pid)
    finally:
        bench_memory.stop(proc)


def test_eight_hostile_bodies_stay_below_the_chart_limit(
        flooded: tuple[bench_memory.Flood, dict[int, float]]) -> None:
    _, peaks = flooded
    limit = bench_memory.chart_memory_mib("limits")
    assert len(peaks) == 1 + bench_memory.WORKERS  # the master and every worker, all alive
    assert sum(peaks.values()) < limit, (peaks, limit)


@pytest.mark.parametrize(("shape", "answers"), [
    ("empty objects", {413, 429}), ("short strings", {200, 429}), ("GPU containers", {200, 429}),
])
def test_every_hostile_body_is_answered(flooded: tuple[bench_memory.Flood, dict[int, float]],
                                        shape: str, answers: set[int]) -> None:
    """Never a reset, a 500 or a dead worker: refused by the count, judged, or asked to wait
    its turn (a busy host makes a turn slower); at least one of each is refused or judged."""
    statuses = flooded[0].statuses[shape]
    assert len(statuses) == bench_memory.CLIENTS and set(statuses) <= answers, statuses
    assert min(statuses) in answers - {429}
