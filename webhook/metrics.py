"""Prometheus metrics of the webhook.

Under gunicorn every worker is a process: `serve` points PROMETHEUS_MULTIPROC_DIR at an empty
directory *before* this module is imported, each worker then writes its samples there, and
/metrics aggregates all of them (prometheus_client multiprocess mode). Without that variable
(tests, `flask run`) the ordinary in-process registry is used.
"""

from __future__ import annotations

import os

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
)
from prometheus_client import multiprocess as _mp

MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
LATENCY_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

REQUESTS = Counter(
    "gpupolicy_admission_requests_total",
    "Admission requests answered, by webhook, operation and decision "
    "(allowed, patched, denied, error, bad_request).",
    ["webhook", "operation", "decision"],
)
LATENCY = Histogram(
    "gpupolicy_admission_request_duration_seconds",
    "Time to answer an admission request, body read to response built.",
    ["webhook"],
    buckets=LATENCY_BUCKETS,
)
VIOLATIONS = Counter(
    "gpupolicy_policy_violations_total",
    "Violations found by the validating webhook (dry-run requests not counted), by mode.",
    ["policy", "rule", "mode"],
)
ENGINE_ERRORS = Counter(
    "gpupolicy_engine_errors_total", "Exceptions raised by the policy engine.", ["webhook"]
)
RELOADS = Counter(
    "gpupolicy_policy_reloads_total",
    "Reloads of an input source (policies, namespaces, inventory), by result.",
    ["source", "result"],
)
POLICIES_LOADED = Gauge(
    "gpupolicy_policies_loaded", "Policies in effect.", multiprocess_mode="livemostrecent"
)
SOURCE_ERROR = Gauge(
    "gpupolicy_source_error",
    "1 while the last load of a source failed (the last good version stays in effect).",
    ["source"],
    multiprocess_mode="livemax",
)


def exposition() -> tuple[bytes, str]:
    """The text for GET /metrics and its content type."""
    if os.environ.get(MULTIPROC_ENV):
        registry = CollectorRegistry()
        _mp.MultiProcessCollector(registry)  # type: ignore[no-untyped-call]
        return generate_latest(registry), CONTENT_TYPE_LATEST
    return generate_latest(REGISTRY), CONTENT_TYPE_LATEST


def worker_exited(pid: int) -> None:
    """gunicorn child_exit hook: drop the live gauges of a dead worker."""
    if os.environ.get(MULTIPROC_ENV):
        _mp.mark_process_dead(pid)  # type: ignore[no-untyped-call]
