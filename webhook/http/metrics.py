"""Prometheus metrics of the webhook: a Metrics object built by the app factory and passed to
whatever records into it. Nothing is created at import, so the import order of modules no
longer matters.

The request path only adds to a plain dict owned by its own thread: no lock, no system call
(prometheus_client's multiprocess values take a lock, check the pid and write an mmap on every
inc: about 4 µs per admission and label lookup here, against 0.1 µs). Totals are the sum over
the threads. Under gunicorn (PROMETHEUS_MULTIPROC_DIR set) a flusher thread per worker copies
the worker's totals into prometheus_client's multiprocess files every FLUSH_SECONDS, and the
exposition reads the files of every worker; so a scrape may lag the last admissions by that
much. Without the variable (tests, `flask run`) the exposition reads the totals directly.

Other modules register their own families on the same object: `metrics.counter(...)`,
`metrics.gauge(...)`, `metrics.histogram(...)`; a family given `read=` is computed at flush and
scrape time (state the module already keeps, such as how many policies are loaded).
"""

from __future__ import annotations

import atexit
import bisect
import os
import platform
import resource
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.metrics_core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString

from webhook.http.shared import MULTIPROC_ENV

FLUSH_SECONDS = 0.25  # a flush of unchanged totals costs a few dict copies
# A review takes about 0.1-0.5 ms: buckets from 100 µs, so p50 and p99 can be read off them.
LATENCY_BUCKETS = (0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                   0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
WEBHOOKS = ("mutate", "validate")

Labels = tuple[str, ...]
Reader = Callable[[], Mapping[Labels, float]]
_Key = tuple[str, str, Labels, Labels]  # family, sample name, label names, label values


class _Family:
    """One metric family; values per label tuple, kept per thread."""

    kind = ""

    def __init__(self, name: str, help_text: str, labelnames: Sequence[str],
                 read: Reader | None = None) -> None:
        self.name, self.help, self.labelnames, self.read = name, help_text, tuple(labelnames), read
        self._local = threading.local()
        self._shards: list[dict[Any, float]] = []
        self._register = threading.Lock()  # taken once per thread, at its first sample

    def _shard(self) -> dict[Any, float]:
        try:
            shard: dict[Any, float] = self._local.shard
        except AttributeError:
            shard = self._local.shard = {}
            with self._register:
                self._shards.append(shard)
        return shard

    def totals(self) -> dict[Any, float]:
        """Sum over the threads. Only the owning thread writes a shard, and copying a dict is
        atomic under the GIL, so a sample is either in the copy or in the next one."""
        if self.read is not None:
            return dict(self.read())
        out: dict[Any, float] = {}
        for shard in list(self._shards):
            for key, value in shard.copy().items():
                out[key] = out.get(key, 0) + value
        return out


class Counter(_Family):
    kind = "counter"

    def inc(self, *labels: str, amount: float = 1) -> None:
        shard = self._shard()
        shard[labels] = shard.get(labels, 0) + amount


class Gauge(_Family):
    kind = "gauge"

    def __init__(self, name: str, help_text: str, labelnames: Sequence[str],
                 read: Reader | None = None, mode: str = "livemax") -> None:
        super().__init__(name, help_text, labelnames, read)
        self.mode = mode  # how prometheus_client combines the workers' values
        self._values: dict[Labels, float] = {}

    def set(self, value: float, *labels: str) -> None:
        self._values[labels] = float(value)  # one assignment: no lock needed

    def totals(self) -> dict[Any, float]:
        return dict(self.read()) if self.read is not None else self._values.copy()


class Histogram(_Family):
    """Keys are (labels, bucket index) for counts and (labels, -1) for the sum."""

    kind = "histogram"

    def __init__(self, name: str, help_text: str, labelnames: Sequence[str],
                 buckets: Sequence[float] = LATENCY_BUCKETS) -> None:
        super().__init__(name, help_text, labelnames)
        self.bounds = tuple(sorted(float(b) for b in buckets))
        self.les = (*(floatToGoString(b) for b in self.bounds), "+Inf")  # type: ignore[no-untyped-call]

    def observe(self, value: float, *labels: str) -> None:
        shard = self._shard()
        key = (labels, bisect.bisect_left(self.bounds, value))
        shard[key] = shard.get(key, 0) + 1
        key = (labels, -1)
        shard[key] = shard.get(key, 0.0) + value


class Metrics:
    """The families of one process. `multiproc_dir`: write them there for a scrape that sums
    every gunicorn worker (start() begins flushing)."""

    def __init__(self, multiproc_dir: str | None = None) -> None:
        global _latest
        self.dir = multiproc_dir
        self.families: dict[str, _Family] = {}
        self._flushed: dict[_Key, tuple[float, Any]] = {}  # key -> (value, mmap value)
        self._value_class: Any = None
        self._flush_lock = threading.Lock()
        self.requests = self.counter(
            "gpupolicy_admission_requests",
            "Admission requests answered, by webhook, operation and decision "
            "(allowed, patched, denied, error, bad_request; too_large: over the byte or value "
            "budget, 413; busy: a large body while the worker parsed another, 429; not_ready: "
            "refused unjudged, with a 503, by a worker whose sources are not all loaded).",
            ["webhook", "operation", "decision"])
        self.latency = self.histogram(
            "gpupolicy_admission_request_duration_seconds",
            "Time to answer an admission request, body read to response built.", ["webhook"])
        self.violations = self.counter(
            "gpupolicy_policy_violations",
            "Violations found by the validating webhook (dry-run requests not counted), by mode.",
            ["policy", "rule", "mode"])
        self.engine_errors = self.counter(
            "gpupolicy_engine_errors", "Exceptions raised by the policy engine.", ["webhook"])
        # Series that must read 0 rather than be absent: alerts on `rate(...) > 0` and
        # absent() both need them from the start.
        for webhook in WEBHOOKS:
            self.engine_errors.inc(webhook, amount=0)
            self.requests.inc(webhook, "CREATE", "error", amount=0)
            self.requests.inc(webhook, "", "bad_request", amount=0)
            self.requests.inc(webhook, "", "not_ready", amount=0)
            self.requests.inc(webhook, "", "too_large", amount=0)
            self.requests.inc(webhook, "", "busy", amount=0)
        self.gauge("gpupolicy_build_info", "Always 1; the labels say what is running.",
                   ["version", "python"], mode="livemax",
                   read=lambda: {(_version(), platform.python_version()): 1.0})
        self.counter("process_cpu_seconds", "User and system CPU time, summed over workers.",
                     read=lambda: {(): _cpu_seconds()})
        self.gauge("process_resident_memory_bytes", "Resident memory, summed over workers.",
                   mode="livesum", read=lambda: {(): float(_rss_bytes())})
        self.gauge("process_open_fds", "Open file descriptors, summed over workers.",
                   mode="livesum", read=lambda: {(): float(_open_fds())})
        _latest = self

    def _add(self, family: _Family) -> Any:
        if family.name in self.families:
            raise ValueError(f"metric {family.name} registered twice")
        self.families[family.name] = family
        return family

    def counter(self, name: str, help_text: str, labelnames: Sequence[str] = (),
                read: Reader | None = None) -> Counter:
        """A counter; `name` without the `_total` the exposition adds."""
        family: Counter = self._add(Counter(name.removesuffix("_total"), help_text, labelnames,
                                            read))
        return family

    def gauge(self, name: str, help_text: str, labelnames: Sequence[str] = (),
              read: Reader | None = None, mode: str = "livemax") -> Gauge:
        family: Gauge = self._add(Gauge(name, help_text, labelnames, read, mode))
        return family

    def histogram(self, name: str, help_text: str, labelnames: Sequence[str] = (),
                  buckets: Sequence[float] = LATENCY_BUCKETS) -> Histogram:
        family: Histogram = self._add(Histogram(name, help_text, labelnames, buckets))
        return family

    # --- across processes ----------------------------------------------------------------

    def start(self) -> None:
        """In a gunicorn worker: flush now, then every FLUSH_SECONDS and once more at exit."""
        if not self.dir:
            return
        self.flush()

        def loop() -> None:
            while True:
                time.sleep(FLUSH_SECONDS)
                self.flush()

        threading.Thread(target=loop, name="gpupolicy-metrics", daemon=True).start()
        atexit.register(self.flush)

    def flush(self) -> None:
        """Write this process's totals into its multiprocess files (only what changed)."""
        if not self.dir:
            return
        with self._flush_lock:
            for key, value, mp_mode in self._samples():
                known = self._flushed.get(key)
                if known is not None and known[0] == value:
                    continue
                holder = known[1] if known is not None else self._mmap_value(key, mp_mode)
                stamp = time.time() if "mostrecent" in mp_mode else None
                holder.set(value, timestamp=stamp)
                self._flushed[key] = (value, holder)

    def _samples(self) -> Iterator[tuple[_Key, float, str]]:
        """((family, sample name, label names, label values), value, gauge mode)."""
        for family in list(self.families.values()):
            totals = family.totals()
            if isinstance(family, Histogram):
                names = (*family.labelnames, "le")
                # Every bucket of a label set, empty ones too: the exposition has them all.
                for labels in {labels for labels, _ in totals}:
                    yield ((family.name, family.name + "_sum", family.labelnames, labels),
                           totals.get((labels, -1), 0.0), "")
                    for index, le in enumerate(family.les):
                        yield ((family.name, family.name + "_bucket", names, (*labels, le)),
                               totals.get((labels, index), 0), "")
            elif isinstance(family, Gauge):
                for labels, value in totals.items():
                    yield (family.name, family.name, family.labelnames, labels), value, family.mode
            else:
                for labels, value in totals.items():
                    yield ((family.name, family.name + "_total", family.labelnames, labels),
                           value, "")

    def _mmap_value(self, key: _Key, mode: str) -> Any:
        if self._value_class is None:
            from prometheus_client import values

            # One writer per process and file: a second MultiProcessValue class would keep
            # its own offsets in the same counter_<pid>.db and overwrite the other's entries.
            # So use prometheus_client's own when it is already the multiprocess one, else
            # make it so (its documented hook), for every metric made from now on too.
            if not getattr(values.ValueClass, "_multiprocess", False):
                os.environ.setdefault(MULTIPROC_ENV, str(self.dir))
                values.ValueClass = values.MultiProcessValue()  # type: ignore[no-untyped-call]
            self._value_class = values.ValueClass
        name, sample, labelnames, labels = key
        kind = self.families[name].kind
        return self._value_class(kind, name, sample, list(labelnames), list(labels),
                                 self.families[name].help, multiprocess_mode=mode)

    # --- exposition ----------------------------------------------------------------------

    def collect(self) -> Iterator[Metric]:
        """This process's families (prometheus_client collector protocol)."""
        for family in list(self.families.values()):
            totals = family.totals()
            if isinstance(family, Histogram):
                hist = HistogramMetricFamily(family.name, family.help,
                                             labels=list(family.labelnames))
                for labels in sorted({labels for labels, _ in totals}):
                    running, buckets = 0.0, []
                    for index, le in enumerate(family.les):
                        running += totals.get((labels, index), 0)
                        buckets.append((le, running))
                    hist.add_metric(list(labels), buckets, totals.get((labels, -1), 0.0))
                yield hist
                continue
            cls = GaugeMetricFamily if isinstance(family, Gauge) else CounterMetricFamily
            metric = cls(family.name, family.help, labels=list(family.labelnames))
            for labels, value in sorted(totals.items()):
                metric.add_metric(list(labels), value)
            yield metric


def _version() -> str:
    from webhook.output.findings import version

    return version()


def _cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return float(usage.ru_utime + usage.ru_stime)


def _rss_bytes() -> int:
    try:  # the current size; getrusage only knows the peak
        with open("/proc/self/statm", "rb") as statm:
            return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def _open_fds() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 0


_latest: Metrics | None = None  # the process's most recently built Metrics (for exposition())


def exposition(source: Metrics | None = None) -> tuple[bytes, str]:
    """The Prometheus text and its content type: summed over every gunicorn worker when
    PROMETHEUS_MULTIPROC_DIR is set, else `source` (default: this process's Metrics)."""
    registry = CollectorRegistry()
    directory = os.environ.get(MULTIPROC_ENV)
    if directory:
        from prometheus_client.multiprocess import MultiProcessCollector

        if source is not None:
            source.flush()
        MultiProcessCollector(registry, path=directory)  # type: ignore[no-untyped-call]
    else:
        chosen = source or _latest
        if chosen is not None:
            registry.register(chosen)
    return generate_latest(registry), CONTENT_TYPE_LATEST


def multiproc_dir() -> str | None:
    """Where gunicorn's workers share their samples (`serve` sets it), or None."""
    return os.environ.get(MULTIPROC_ENV) or None


def worker_exited(pid: int) -> None:
    """gunicorn child_exit hook: drop the live gauges of a dead worker."""
    directory = os.environ.get(MULTIPROC_ENV)
    if directory:
        from prometheus_client.multiprocess import mark_process_dead

        mark_process_dead(pid, directory)  # type: ignore[no-untyped-call]
