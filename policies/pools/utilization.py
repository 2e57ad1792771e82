"""GPU utilisation from DCGM Exporter, as Prometheus answers two queries, turned into
per-node series and per-GPU busy-hour figures (operator-guide §3 "Utilisation").

The metric, whichever the exporter writes (a GPU has one of them):
- `DCGM_FI_DEV_GPU_UTIL`, in percent (dcgm-exporter before 4.9);
- `DCGM_FI_DEV_GPU_UTIL_RATIO`, a 0-1 ratio (4.9 renamed the DCGM 4.7-deprecated fields and
  moved utilisation from percent to ratio);
- `DCGM_FI_PROF_GR_ENGINE_ACTIVE` on MIG instances (series with a `GPU_I_ID`): the one
  utilisation that works on MIG, a ratio.
The node is the `Hostname` label (`hostname` since dcgm-exporter 4.8.3); the pod holding a GPU
is `pod` (or `exported_pod` when Prometheus renamed it) when pod mapping is on.

Points per series stay below Prometheus' 11,000 limit: the step is the window over
`POINTS` (1,000), never below 60 s.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from policies.pools.nodes import bounded

POINTS = 1000
MIN_STEP = 60
MAX_SERIES = 100_000  # series read from one answer; more is not a DCGM fleet
UTIL = ('(DCGM_FI_DEV_GPU_UTIL / 100) or DCGM_FI_DEV_GPU_UTIL_RATIO '
        'or DCGM_FI_PROF_GR_ENGINE_ACTIVE{GPU_I_ID!=""}')
HOST_LABELS = ("Hostname", "hostname")
POD_LABELS = ("pod", "exported_pod")


def step_for(window: float) -> int:
    return max(MIN_STEP, math.ceil(window / POINTS))


def queries(window: float) -> dict[str, str]:
    """The two PromQL expressions of a run: node averages over the window (a range query at
    `step_for(window)`), and each GPU's p95 over the window (an instant query)."""
    step = step_for(window)
    return {
        "nodes": f"avg by (Hostname, hostname) ({UTIL})",
        "gpus": f"quantile_over_time(0.95, ({UTIL})[{int(window)}s:{step}s])",
    }


@dataclass(frozen=True)
class GPUBusy:
    node: str
    gpu: str
    p95: float
    pod: str  # "" when the exporter does not map pods


@dataclass
class Utilization:
    """What Prometheus said, or why it could not be asked (`unavailable`)."""

    window: float
    node_series: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    gpus: list[GPUBusy] = field(default_factory=list)
    unavailable: str = ""
    partial: str = ""  # answered, but something was dropped (and why)


class ParseError(ValueError):
    pass


def _result(answer: Any, kind: str) -> list[Mapping[str, Any]]:
    if not isinstance(answer, dict) or answer.get("status") != "success":
        error = answer.get("error") if isinstance(answer, dict) else None
        raise ParseError(f"Prometheus answered no success: {bounded(error, 200) or 'no status'}")
    data = answer.get("data")
    if not isinstance(data, dict) or data.get("resultType") != kind \
            or not isinstance(data.get("result"), list):
        raise ParseError(f"Prometheus answered no {kind}")
    return [r for r in data["result"][:MAX_SERIES] if isinstance(r, dict)]


def _label(metric: Any, names: Sequence[str]) -> str:
    if not isinstance(metric, dict):
        return ""
    return next((bounded(metric[n], 253) for n in names if isinstance(metric.get(n), str)
                 and metric[n]), "")


def _number(raw: Any) -> float | None:
    try:
        value = float(raw)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def _ratio(value: float) -> float:
    return min(1.0, max(0.0, value))


def parse(window: float, nodes_answer: Any, gpus_answer: Any) -> Utilization:
    """The two answers (the JSON of /api/v1/query_range and /api/v1/query); ParseError when
    either is not a Prometheus answer of its kind. Values out of 0-1 are clamped, points that
    are no numbers dropped (and said)."""
    util = Utilization(window)
    dropped = 0
    for series in _result(nodes_answer, "matrix"):
        node = _label(series.get("metric"), HOST_LABELS)
        values = series.get("values")
        if not node or not isinstance(values, list):
            dropped += 1
            continue
        points = util.node_series.setdefault(node, [])
        for point in values[: POINTS * 11]:
            t = _number(point[0]) if isinstance(point, list) and len(point) == 2 else None
            v = _number(point[1]) if t is not None else None
            if t is None or v is None:
                dropped += 1
                continue
            points.append((t, _ratio(v)))
    for series in _result(gpus_answer, "vector"):
        metric = series.get("metric")
        value = series.get("value")
        v = _number(value[1]) if isinstance(value, list) and len(value) == 2 else None
        node = _label(metric, HOST_LABELS)
        if v is None or not node:
            dropped += 1
            continue
        gpu = _label(metric, ("UUID", "uuid", "gpu")) + (
            "/" + _label(metric, ("GPU_I_ID",)) if _label(metric, ("GPU_I_ID",)) else "")
        util.gpus.append(GPUBusy(node, gpu, _ratio(v), _label(metric, POD_LABELS)))
    if dropped:
        util.partial = f"{dropped} series or points without a node or a number were left out"
    return util


def quantile(values: Sequence[float], q: float) -> float:
    """The q-quantile of sorted values (nearest rank)."""
    if not values:
        return 0.0
    rank = max(1, math.ceil(q * len(values)))
    return values[rank - 1]


@dataclass(frozen=True)
class PoolUtilization:
    p50: float
    p95: float
    hours: float  # how much of the window the samples cover
    idle_allocated: int
    series: tuple[tuple[float, float], ...]  # the pool's mean over time, for a chart


def for_pool(util: Utilization, nodes: Iterable[str], held: Mapping[str, int],
             idle_below: float, chart_points: int = 200) -> PoolUtilization | None:
    """The pool's figures, None when no node of it has samples."""
    names = list(nodes)
    values: list[float] = []
    first, last = math.inf, -math.inf
    by_time: dict[float, list[float]] = {}
    for name in names:
        for t, v in util.node_series.get(name, ()):
            values.append(v)
            first, last = min(first, t), max(last, t)
            by_time.setdefault(t, []).append(v)
    if not values:
        return None
    values.sort()
    wanted = set(names)
    idle_by_node: dict[str, int] = {}
    idle_pods = 0
    for gpu in util.gpus:
        if gpu.node in wanted and gpu.p95 < idle_below:
            if gpu.pod:
                idle_pods += 1
            else:
                idle_by_node[gpu.node] = idle_by_node.get(gpu.node, 0) + 1
    # without pod mapping, an idle GPU on a node holding N GPUs counts as allocated up to N
    idle = idle_pods + sum(min(n, held.get(node, 0)) for node, n in idle_by_node.items())
    times = sorted(by_time)
    stride = max(1, math.ceil(len(times) / chart_points))
    series = tuple((t, sum(by_time[t]) / len(by_time[t])) for t in times[::stride])
    return PoolUtilization(quantile(values, 0.5), quantile(values, 0.95),
                           (last - first) / 3600, idle, series)
