"""webhook/http/metrics.py: exact totals from many threads without a lock, the sum over processes
through prometheus_client's multiprocess files, families registered by other modules, and
nothing built at import."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.server.harness import ROOT
from webhook.http import metrics


def parse(text: bytes) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(text.decode()) for s in family.samples}


def test_threads_count_exactly() -> None:
    m = metrics.Metrics()
    per_thread, threads = 20_000, 8

    def work() -> None:
        for i in range(per_thread):
            m.requests.inc("validate", "CREATE", "allowed")
            m.latency.observe(0.003 if i % 2 else 0.3, "validate")

    pool = [threading.Thread(target=work) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    found = parse(metrics.exposition(m)[0])
    labels = frozenset({"webhook": "validate", "operation": "CREATE", "decision": "allowed"}.items())
    assert found[("gpupolicy_admission_requests_total", labels)] == per_thread * threads
    hist = "gpupolicy_admission_request_duration_seconds"
    v = frozenset({"webhook": "validate"}.items())
    assert found[(f"{hist}_count", v)] == per_thread * threads
    assert found[(f"{hist}_bucket", v | {("le", "0.0025")})] == 0
    assert found[(f"{hist}_bucket", v | {("le", "0.005")})] == per_thread * threads / 2
    assert found[(f"{hist}_bucket", v | {("le", "+Inf")})] == per_thread * threads
    assert found[(f"{hist}_sum", v)] == pytest.approx(per_thread * threads / 2 * 0.303)


def test_other_modules_register_families() -> None:
    m = metrics.Metrics()
    cache = {"nodes": 3.0}
    objects = m.gauge("gpupolicy_cluster_cache_objects", "Objects held by a cache.", ["cache"],
                      read=lambda: {(k,): v for k, v in cache.items()})
    errors = m.counter("gpupolicy_cluster_watch_errors_total", "Watch errors.", ["cache"])
    stale = m.gauge("gpupolicy_cluster_cache_stale_seconds", "Seconds since the last event.")
    errors.inc("nodes")
    errors.inc("nodes", amount=2)
    stale.set(1.5)
    cache["pods"] = 7.0
    found = parse(metrics.exposition(m)[0])
    assert found[("gpupolicy_cluster_watch_errors_total", frozenset({("cache", "nodes")}))] == 3
    assert found[("gpupolicy_cluster_cache_objects", frozenset({("cache", "pods")}))] == 7
    assert found[("gpupolicy_cluster_cache_stale_seconds", frozenset())] == 1.5
    assert objects.totals() == {("nodes",): 3.0, ("pods",): 7.0}
    with pytest.raises(ValueError, match="registered twice"):
        m.counter("gpupolicy_cluster_watch_errors", "again")


WORKER = """
import os, sys
os.environ["PROMETHEUS_MULTIPROC_DIR"] = sys.argv[1]
import prometheus_client
from webhook.http import metrics
# A module's own prometheus_client metrics, beside ours in the same per-process files; new
# keys appended by either side in turn must not overwrite the other's.
relists = prometheus_client.Counter("gpupolicy_cluster_relists", "Relists.", ["resource"])
relists.labels("nodes").inc(2)
m = metrics.Metrics(sys.argv[1])
m.requests.inc("validate", "DELETE", "allowed")
m.flush()
relists.labels("pods").inc(3)
m.engine_errors.inc("mutate")
m.flush()
m.gauge("gpupolicy_policies_loaded", "Policies.", read=lambda: {(): 3.0}, mode="livemostrecent")
for _ in range(int(sys.argv[2])):
    m.requests.inc("mutate", "CREATE", "patched")
    m.latency.observe(0.002, "mutate")
m.start()  # flushes now and at exit
"""


def test_processes_sum_through_the_multiprocess_files(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """What gunicorn's workers do: each writes its own totals; the exposition adds them up,
    with what other modules count through prometheus_client itself (one writer per file)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for count in (5, 7):
        subprocess.run([sys.executable, "-c", WORKER, str(tmp_path), str(count)], env=env,
                       check=True, timeout=60)
    monkeypatch.setenv(metrics.MULTIPROC_ENV, str(tmp_path))
    found = parse(metrics.exposition()[0])
    labels = frozenset({"webhook": "mutate", "operation": "CREATE", "decision": "patched"}.items())
    assert found[("gpupolicy_admission_requests_total", labels)] == 12
    mutate = frozenset({("webhook", "mutate")})
    assert found[("gpupolicy_admission_request_duration_seconds_count", mutate)] == 12
    assert found[("gpupolicy_admission_request_duration_seconds_bucket",
                  mutate | {("le", "0.001")})] == 0
    assert found[("gpupolicy_policies_loaded", frozenset())] == 3
    assert found[("gpupolicy_cluster_relists_total", frozenset({("resource", "nodes")}))] == 4
    assert found[("gpupolicy_cluster_relists_total", frozenset({("resource", "pods")}))] == 6
    assert found[("gpupolicy_engine_errors_total", mutate)] == 2


def test_flush_writes_only_changes(tmp_path: Path) -> None:
    m = metrics.Metrics(str(tmp_path))
    m.requests.inc("validate", "DELETE", "allowed")
    m.flush()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert f"counter_{os.getpid()}.db" in files
    written: list[str] = []
    for key, (_, holder) in m._flushed.items():
        holder.set = lambda *_a, name=key[1], **_k: written.append(name)
    m.flush()  # nothing new but what the process itself changes (its CPU time, memory)
    assert set(written) <= {"process_cpu_seconds_total", "process_resident_memory_bytes",
                            "process_open_fds"}


def test_nothing_is_built_at_import() -> None:
    """Importing the webhook creates no metric: prometheus_client's default registry holds
    no gpupolicy family, whatever PROMETHEUS_MULTIPROC_DIR says at that moment."""
    code = ("import prometheus_client, webhook.http.server, webhook.http.metrics, webhook.inputs.state\n"
            "names = [m.name for m in prometheus_client.REGISTRY.collect()]\n"
            "print([n for n in names if n.startswith('gpupolicy')])\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(metrics.MULTIPROC_ENV, None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True, timeout=60).stdout
    assert out.strip() == "[]"


def test_a_fresh_server_exposes_what_dashboards_and_alerts_need(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from prometheus_client.parser import text_string_to_metric_families

    monkeypatch.delenv(metrics.MULTIPROC_ENV, raising=False)
    m = metrics.Metrics(None)
    m.latency.observe(0.0003, "validate")
    text, _ = metrics.exposition(m)
    families = {f.name: f for f in text_string_to_metric_families(text.decode())}
    buckets = [s.labels["le"] for s in families["gpupolicy_admission_request_duration_seconds"]
               .samples if s.name.endswith("_bucket")]
    assert buckets[:4] == ["0.0001", "0.00025", "0.0005", "0.001"]  # a review is ~0.3 ms
    zero = {(s.labels["webhook"], s.value) for s in families["gpupolicy_engine_errors"].samples
            if s.name.endswith("_total")}
    assert zero == {("mutate", 0.0), ("validate", 0.0)}  # present before the first error
    [info] = families["gpupolicy_build_info"].samples
    assert info.value == 1 and info.labels["version"] and info.labels["python"]
    assert families["process_resident_memory_bytes"].samples[0].value > 0
    assert families["process_cpu_seconds"].samples[0].value > 0
