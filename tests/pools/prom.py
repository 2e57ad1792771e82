"""A real Prometheus (Debian's `prometheus` package) holding a week of DCGM Exporter series
the test writes: backfilled with `promtool tsdb create-blocks-from openmetrics`, served on
127.0.0.1 at a free port, stopped after. Skips, saying why, where the binaries are absent."""

from __future__ import annotations

import contextlib
import math
import shutil
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

WEEK = 7 * 86400
INTERVAL = 300  # a sample every 5 minutes: 2,016 per series over the week


@dataclass(frozen=True)
class Series:
    metric: str  # DCGM_FI_DEV_GPU_UTIL (percent), _RATIO, DCGM_FI_PROF_GR_ENGINE_ACTIVE
    labels: dict[str, str]
    value: Callable[[float], float]  # hours since the start -> value in the metric's unit


def need_binaries() -> None:
    for name in ("prometheus", "promtool"):
        if shutil.which(name) is None:
            pytest.skip(f"{name} not installed (Debian package `prometheus`; .ci/run installs "
                        "it): the real-Prometheus tests were not run")


def diurnal(mean: float, swing: float, scale: float = 1.0) -> Callable[[float], float]:
    """A day-night cycle around `mean` (0-1), in the metric's unit (`scale` 100: percent)."""
    return lambda h: scale * min(1.0, max(0.0, mean + swing * math.sin(2 * math.pi * h / 24)))


def openmetrics(series: list[Series], end: float) -> str:
    """The OpenMetrics text promtool backfills: one family after the other, every series in
    time order, timestamps in seconds."""
    start = end - WEEK
    lines: list[str] = []
    for metric in dict.fromkeys(s.metric for s in series):
        lines.append(f"# TYPE {metric} gauge")
        for s in (s for s in series if s.metric == metric):
            labels = ",".join(f'{k}="{v}"' for k, v in s.labels.items())
            t = start
            while t <= end:
                lines.append(f"{metric}{{{labels}}} {s.value((t - start) / 3600):.4f} {t:.0f}")
                t += INTERVAL
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def prometheus(tmp: Path, series: list[Series], end: float) -> Iterator[str]:
    need_binaries()
    data = tmp / "tsdb"
    source = tmp / "dcgm.om"
    source.write_text(openmetrics(series, end), encoding="utf-8")
    subprocess.run(["promtool", "tsdb", "create-blocks-from", "openmetrics", str(source),
                    str(data)], check=True, capture_output=True, timeout=300)
    config = tmp / "prometheus.yml"
    config.write_text("global:\n  scrape_interval: 1m\nscrape_configs: []\n", encoding="utf-8")
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    log = (tmp / "prometheus.log").open("wb")
    proc = subprocess.Popen(
        ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={data}",
         f"--web.listen-address=127.0.0.1:{port}", "--storage.tsdb.retention.time=3650d"],
        stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"{url}/-/ready", timeout=2) as resp:
                    if resp.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("prometheus did not start: "
                                   + (tmp / "prometheus.log").read_text()[-2000:])
            time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


def requests_served(url: str) -> dict[str, float]:
    """Prometheus' own count of API requests, per handler."""
    with urllib.request.urlopen(f"{url}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    found: dict[str, float] = {}
    for line in text.splitlines():
        if line.startswith("prometheus_http_requests_total{") and "/api/v1/query" in line:
            handler = line.split('handler="', 1)[1].split('"', 1)[0]
            found[handler] = found.get(handler, 0) + float(line.rsplit(" ", 1)[1])
    return found
