"""The cluster and the week of DCGM series the Prometheus tests (and the recorded answers in
data/prometheus/) are made of: both naming schemes of dcgm-exporter and MIG instances."""

from __future__ import annotations

from typing import Any

from tests.pools import shapes
from tests.pools.prom import Series, diurnal

A100 = "NVIDIA-A100-SXM4-80GB"


def objects() -> list[dict[str, Any]]:
    items = [
        shapes.node("batch-1", pool="batch", gpus=8),
        shapes.node("batch-2", pool="batch", gpus=8),
        shapes.node("infer-1", pool="infer", product="NVIDIA-L4", gpus=1, memory_mib=23034),
        shapes.node("infer-2", pool="infer", product="NVIDIA-L4", gpus=1, memory_mib=23034),
        shapes.node("mig-1", pool="mig", gpus=1, advertised=0,
                    extra_labels={"nvidia.com/mig.strategy": "mixed"},
                    extra_allocatable={"nvidia.com/mig-1g.10gb": "7"}),
    ]
    items += [shapes.pod(f"batch-{n}", node_name=f"batch-{n}", gpus=8, tolerations=[])
              for n in (1, 2)]
    items += [shapes.pod(f"infer-{n}", node_name=f"infer-{n}", gpus=1, tolerations=[])
              for n in (1, 2)]
    items.append(shapes.pod("mig-a", node_name="mig-1", gpus=7,
                            resource="nvidia.com/mig-1g.10gb", tolerations=[]))
    return items


def series() -> list[Series]:
    found = []
    for gpu in range(8):
        # dcgm-exporter before 4.9: percent, `Hostname`
        found.append(Series("DCGM_FI_DEV_GPU_UTIL", {
            "gpu": str(gpu), "UUID": f"GPU-b1-{gpu}", "device": f"nvidia{gpu}",
            "modelName": "NVIDIA A100-SXM4-80GB", "Hostname": "batch-1",
            "DCGM_FI_DRIVER_VERSION": "535.104.05", "namespace": "ml", "pod": "batch-1",
            "container": "main"}, diurnal(0.85, 0.1, 100)))
        # 4.9 and later: a 0-1 ratio, `hostname`, the driver label renamed
        found.append(Series("DCGM_FI_DEV_GPU_UTIL_RATIO", {
            "gpu": str(gpu), "UUID": f"GPU-b2-{gpu}", "device": f"nvidia{gpu}",
            "modelName": "NVIDIA A100-SXM4-80GB", "hostname": "batch-2",
            "DCGM_FI_SYSTEM_DRIVER_VERSION": "535.104.05", "namespace": "ml",
            "pod": "batch-2", "container": "main"}, diurnal(0.85, 0.1)))
    # the profiling metric on a whole GPU (profiling enabled everywhere): not read, or the
    # GPU would count twice
    found.append(Series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", {
        "gpu": "0", "UUID": "GPU-b1-0", "Hostname": "batch-1"}, lambda h: 0.0))
    found.append(Series("DCGM_FI_DEV_GPU_UTIL_RATIO", {
        "gpu": "0", "UUID": "GPU-i1", "hostname": "infer-1", "namespace": "web",
        "pod": "infer-1"}, diurnal(0.1, 0.05)))
    found.append(Series("DCGM_FI_DEV_GPU_UTIL_RATIO", {
        "gpu": "0", "UUID": "GPU-i2", "hostname": "infer-2", "namespace": "web",
        "pod": "infer-2"}, lambda h: 0.0))  # allocated, never used
    for instance in range(7):
        # MIG: only the profiling metric reports instances
        found.append(Series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", {
            "gpu": "0", "UUID": "GPU-m1", "GPU_I_ID": str(instance + 7),
            "GPU_I_PROFILE": "1g.10gb", "Hostname": "mig-1", "namespace": "ml",
            "pod": "mig-a"}, diurnal(0.5, 0.1)))
    return found


def record(path: str) -> None:
    """Ask a real Prometheus holding `series()` the pool view's two queries and keep its raw
    answers (data/prometheus/week.json, read by test_advice.py):
    `python -c 'from tests.pools.promcluster import record; record("tests/pools/data/prometheus/week.json")'`."""
    import json
    import tempfile
    import time
    import urllib.parse
    import urllib.request
    from pathlib import Path

    from policies.pools.utilization import queries, step_for
    from tests.pools.prom import WEEK, prometheus

    end = float(int(time.time()) // 300 * 300)
    with tempfile.TemporaryDirectory() as tmp, prometheus(Path(tmp), series(), end) as url:
        exprs = queries(WEEK)
        answers = {"end": end, "window": WEEK}
        for key, api, params in (
                ("range", "query_range", {"query": exprs["nodes"], "start": str(end - WEEK),
                                          "end": str(end), "step": str(step_for(WEEK))}),
                ("instant", "query", {"query": exprs["gpus"], "time": str(end)})):
            with urllib.request.urlopen(f"{url}/api/v1/{api}?"
                                        f"{urllib.parse.urlencode(params)}") as resp:
                answers[key] = json.load(resp)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(answers, separators=(",", ":")), encoding="utf-8")
