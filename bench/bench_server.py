"""Webhook throughput: `wrk` against `gpupolicy serve` (2 gthread workers, loopback TLS,
keep-alive), GPU-pod AdmissionReviews on /mutate and /validate, 4 connections, 7 interleaved
rounds of 5 s each (one whose connections all fell on one worker run again, up to twice),
against two baselines in the same run: a do-nothing Flask endpoint served
by the very same stack (bench/noop_app.py), and the same app on stock gunicorn (`-k gthread`,
same workers, threads, TLS files and keep-alive). Then the workers' resident memory before and after
100,000 more requests.

CPU per request (the workers' user+system time over the requests served) is the figure to
compare: requests/s moves with how wrk's connections fall on the two workers.

Targets: >= 0.8 of the no-op throughput, p99 <= 10 ms, zero errors, worker RSS growth < 10 %
(issue 3); /mutate and /validate at >= 0.85 of stock gunicorn's CPU efficiency (issue 19).
main() returns 1 when a target is missed, 0 (with a message) without wrk.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GPUPOLICY = [sys.executable, "-c",
             "import sys; from webhook.cli import main; sys.argv[0] = 'gpupolicy'; main()", "serve"]
NOOP = [sys.executable, "-m", "bench.noop_app"]  # the same `serve`, a do-nothing app
STOCK = "stock gunicorn"
STOCK_EFFICIENCY = 0.85
DURATION = 5
CONNECTIONS = 4
RSS_REQUESTS = 100_000
ROUNDS = 7  # CPU per request is the median over the rounds: one busy moment moves one round
# A round whose connections all landed on one worker is run again, at most this many times:
# without it an endpoint's median could rest on one balanced round, and the ratio to stock
# moved by 0.1 from one run to the next.
RETRIES = 2
BALANCED = 0.6  # busiest worker's share of the CPU time at most this: both workers served

LUA = """wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
local f = io.open("%s", "rb")
wrk.body = f:read("*a")
f:close()
"""

GPU_POD = {
    "apiVersion": "v1", "kind": "Pod",
    "metadata": {"name": "", "generateName": "train-", "namespace": "ml", "creationTimestamp": None,
                 "labels": {"app": "train"}},
    "spec": {
        "containers": [{
            "name": "trainer", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
            "command": ["python", "train.py"],
            "resources": {"limits": {"nvidia.com/gpu": "2", "cpu": "8", "memory": "32Gi"},
                          "requests": {"nvidia.com/gpu": "2", "cpu": "8", "memory": "32Gi"}},
            "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
            "terminationMessagePath": "/dev/termination-log", "imagePullPolicy": "IfNotPresent",
        }],
        "restartPolicy": "Never", "schedulerName": "default-scheduler",
        "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists",
                         "effect": "NoExecute", "tolerationSeconds": 300}],
    },
}


def review_body() -> bytes:
    request = {
        "uid": "0b2f7c1e-6f1e-4a57-9d8e-3c2b1a0f9e8d",
        "kind": {"group": "", "version": "v1", "kind": "Pod"},
        "resource": {"group": "", "version": "v1", "resource": "pods"},
        "requestKind": {"group": "", "version": "v1", "kind": "Pod"},
        "requestResource": {"group": "", "version": "v1", "resource": "pods"},
        "namespace": "ml", "operation": "CREATE",
        "userInfo": {"username": "system:serviceaccount:kube-system:job-controller"},
        "object": GPU_POD, "oldObject": None, "dryRun": False,
        "options": {"kind": "CreateOptions", "apiVersion": "meta.k8s.io/v1"},
    }
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": request}
    return json.dumps(review).encode()


@dataclass
class Run:
    name: str
    rps: float
    p50_ms: float
    p99_ms: float
    requests: int
    errors: int
    cpu_us: float = float("nan")  # worker CPU time per request: less sensitive to a busy host
    # (CPU per request, busiest worker's share) of every round; cpu_us is the median of the
    # balanced ones (all rounds' when none was)
    cpu_rounds: tuple[tuple[float, float], ...] = ()
    busiest: float = float("nan")  # share of that CPU time spent by the busiest worker
    rounds: tuple[float, ...] = ()  # req/s of every round


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(app: str, work: Path) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("PROMETHEUS_MULTIPROC_DIR", None)
    log = (work / f"{app}.log").open("wb")
    proc = subprocess.Popen(
        [*(NOOP if app == "noop" else GPUPOLICY), "--host", "127.0.0.1", "--port", str(port),
         "--workers", "2", "--metrics-port", "0", "--certs-dir", str(work / "certs")],
        cwd=work, stdout=log, stderr=log, env=env,
    )
    _wait_healthy(proc, port, work / f"{app}.log")
    return proc, port


def start_stock(work: Path, threads: int = 4, keepalive: int = 120
                ) -> tuple[subprocess.Popen[bytes], int]:
    """The no-op app on plain gunicorn gthread, with the TLS pair `serve` made for the no-op
    run (started first) and the settings `serve` uses by default."""
    port = _free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    log = (work / "stock.log").open("wb")
    certs = work / "certs"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gunicorn", "-k", "gthread", "-w", "2", "--threads", str(threads),
         "--keep-alive", str(keepalive), "--certfile", str(certs / "tls.crt"),
         "--keyfile", str(certs / "tls.key"), "-b", f"127.0.0.1:{port}",
         "bench.noop_app:create_app()"],
        cwd=ROOT, stdout=log, stderr=log, env=env,
    )
    _wait_healthy(proc, port, work / "stock.log")
    return proc, port


def _wait_healthy(proc: subprocess.Popen[bytes], port: int, log: Path) -> None:
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=insecure, timeout=2)
            return
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"server did not start: {log.read_text()}")


def answer(port: int, path: str, body: bytes) -> dict[str, Any]:
    """One review through the server, so the run is known to measure real answers."""
    insecure = ssl.create_default_context()
    insecure.check_hostname, insecure.verify_mode = False, ssl.CERT_NONE
    req = urllib.request.Request(f"https://127.0.0.1:{port}/{path}", data=body,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, context=insecure, timeout=10) as resp:
        response: dict[str, Any] = json.loads(resp.read())["response"]
        return response


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def wrk(name: str, url: str, script: Path, seconds: int = DURATION) -> Run:
    out = subprocess.run(
        ["wrk", "-t2", f"-c{CONNECTIONS}", f"-d{seconds}s", "--latency", "-s", str(script), url],
        capture_output=True, text=True, timeout=seconds + 60, check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = int(non2xx.group(1)) if non2xx else 0
    errors += sum(int(g) for g in sock.groups()) if sock else 0
    return Run(name, rps, _percentile(out, "50"), _percentile(out, "99"), total, errors)


def _percentile(out: str, pct: str) -> float:
    m = re.search(rf"^\s+{pct}%\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
    if not m:
        return float("nan")
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]
    return float(m.group(1)) * scale


def worker_cpu_seconds(master: int) -> dict[int, float]:
    """User + system CPU time used so far by each of the master's children (the workers)."""
    found: dict[int, float] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[1]) == master:
            ticks = int(fields[11]) + int(fields[12])
            found[int(stat.parent.name)] = ticks / os.sysconf("SC_CLK_TCK")
    return found


def worker_rss_kib(master: int) -> int:
    """Resident memory of the master's children (the gunicorn workers), in KiB."""
    total = 0
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            text = status.read_text()
        except OSError:
            continue
        if re.search(rf"^PPid:\s+{master}$", text, re.M):
            rss = re.search(r"^VmRSS:\s+(\d+) kB", text, re.M)
            total += int(rss.group(1)) if rss else 0
    return total


def main() -> int:
    if shutil.which("wrk") is None:
        print("bench_server: wrk not installed; skipped (apt-get install wrk)")
        return 0
    work = Path(tempfile.mkdtemp(prefix="gpupolicy-bench-server-"))
    body = work / "review.json"
    body.write_bytes(review_body())
    script = work / "post.lua"
    script.write_text(LUA % body)
    runs: list[Run] = []
    try:
        noop, noop_port = start("noop", work)
        stock, stock_port = start_stock(work)
        hook, port = start("webhook", work)
        try:
            targets = [("no-op Flask", noop, noop_port, "validate"),
                       (STOCK, stock, stock_port, "validate"),
                       ("/mutate", hook, port, "mutate"), ("/validate", hook, port, "validate")]
            for _, _, p, path in targets:
                wrk("warm-up", f"https://127.0.0.1:{p}/{path}", script, 2)
            mutated, validated = (answer(port, path, body.read_bytes())
                                  for path in ("mutate", "validate"))
            print(f"the review: /mutate patch {'yes' if 'patch' in mutated else 'no'}, "
                  f"/validate allowed={validated['allowed']} "
                  f"warnings={len(validated.get('warnings', []))}")
            runs = compare(targets, script)
            before = worker_rss_kib(hook.pid)
            done = 0
            rate = max(*runs[-1].rounds, 100.0)
            while done < RSS_REQUESTS:
                seconds = max(2, int((RSS_REQUESTS - done) / rate) + 1)
                done += wrk("rss", f"https://127.0.0.1:{port}/validate", script, seconds).requests
            after = worker_rss_kib(hook.pid)
        finally:
            stop(hook)
            stop(stock)
            stop(noop)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return report(runs, before, after, done)


def measure(name: str, master: int, url: str, script: Path) -> Run:
    cpu = worker_cpu_seconds(master)
    run = wrk(name, url, script)
    # A handful of kept-alive connections can all land on one worker (each accepts for
    # itself): such a round runs on one core. `busiest` shows it.
    used = [t - cpu.get(pid, 0.0) for pid, t in worker_cpu_seconds(master).items()]
    run.cpu_us = sum(used) / max(run.requests, 1) * 1e6
    run.busiest = max(used) / sum(used) if sum(used) else float("nan")
    return run


def _rank(run: Run) -> tuple[bool, float]:
    """A round whose connections spread over both workers beats one that ran on one core."""
    return (run.busiest <= BALANCED, run.rps)


def compare(targets: list[tuple[str, subprocess.Popen[bytes], int, str]], script: Path
            ) -> list[Run]:
    """The machine is shared: interleave the rounds, keep each endpoint's best req/s and the
    median of its CPU per request; the errors of every round count."""
    best: dict[str, Run] = {}
    errors: dict[str, int] = {}
    rounds: dict[str, tuple[float, ...]] = {}
    cpu: dict[str, tuple[tuple[float, float], ...]] = {}
    for _ in range(ROUNDS):
        for name, proc, port, path in targets:
            for _ in range(1 + RETRIES):
                run = measure(name, proc.pid, f"https://127.0.0.1:{port}/{path}", script)
                errors[name] = errors.get(name, 0) + run.errors
                rounds[name] = (*rounds.get(name, ()), run.rps)
                cpu[name] = (*cpu.get(name, ()), (run.cpu_us, run.busiest))
                if name not in best or _rank(run) > _rank(best[name]):
                    best[name] = run
                if run.busiest <= BALANCED:
                    break
    runs = [best[name] for name, _, _, _ in targets]
    for run in runs:
        run.errors, run.rounds = errors[run.name], rounds[run.name]
        run.cpu_rounds = cpu[run.name]
        run.cpu_us = statistics.median(_comparable(run.cpu_rounds))
    return runs


def _comparable(rounds: tuple[tuple[float, float], ...]) -> list[float]:
    """The CPU per request of the rounds whose connections were spread over both workers:
    four connections on one worker make its threads take turns at one GIL, which costs CPU
    per request on any stack, so such rounds are compared only when there is nothing else."""
    balanced = [cpu for cpu, busiest in rounds if busiest <= BALANCED]
    return balanced or [cpu for cpu, _ in rounds]


def report(runs: list[Run], before: int, after: int, rss_requests: int) -> int:
    base = runs[0].rps
    print(f"wrk: {CONNECTIONS} connections, {DURATION} s, loopback TLS keep-alive, "
          f"2 gthread workers, {os.cpu_count()} CPUs, {ROUNDS} interleaved rounds (req/s: the "
          f"best; CPU per request: the median, below), "
          f"load average {os.getloadavg()[0]:.1f}")
    stock = next(r for r in runs if r.name == STOCK)
    print(f"{'endpoint':<16}{'req/s':>10}{'p50 ms':>9}{'p99 ms':>9}{'errors':>8}{'ratio':>8}"
          f"{'CPU us/req':>12}{'CPU ratio':>10}{'vs stock':>9}{'busiest':>9}   "
          "req/s of each round")
    ok = True
    for r in runs:
        ratio = r.rps / base if base else float("nan")
        cpu_ratio = runs[0].cpu_us / r.cpu_us if r.cpu_us else float("nan")
        efficiency = stock.cpu_us / r.cpu_us if r.cpu_us else float("nan")
        print(f"{r.name:<16}{r.rps:>10.0f}{r.p50_ms:>9.2f}{r.p99_ms:>9.2f}{r.errors:>8}"
              f"{ratio:>8.2f}{r.cpu_us:>12.0f}{cpu_ratio:>10.2f}{efficiency:>9.2f}"
              f"{r.busiest:>9.0%}   " + " / ".join(f"{x:.0f}" for x in r.rounds))
        if r.errors:
            ok = False
        if r.name.startswith("/") and (ratio < 0.8 or r.p99_ms > 10
                                       or not efficiency >= STOCK_EFFICIENCY):
            ok = False
    growth = (after - before) / before * 100 if before else float("nan")
    print(f"worker RSS: {before / 1024:.1f} MiB -> {after / 1024:.1f} MiB after "
          f"{rss_requests} more requests ({growth:+.1f} %)")
    if not growth < 10:
        ok = False
    print("CPU per request (workers' user+system time / requests), the median of the rounds "
          f"spread over both workers (busiest <= {BALANCED:.0%}; all rounds when none was):")
    for r in runs:
        print(f"  {r.name:<16}{r.cpu_us:>5.0f} us   rounds: "
              + " / ".join(f"{cpu:.0f}" + ("" if busiest <= BALANCED else f" ({busiest:.0%})")
                           for cpu, busiest in r.cpu_rounds))
    print(f"CPU efficiency against {STOCK} + Flask no-op (its CPU per request / ours; "
          f"target >= {STOCK_EFFICIENCY}): "
          + ", ".join(f"{r.name} {stock.cpu_us / r.cpu_us:.2f}" for r in runs
                      if r.name.startswith("/") and r.cpu_us))
    print(f"load average now {os.getloadavg()[0]:.1f} (other work on the host skews req/s and p99)")
    if any(r.busiest > BALANCED for r in runs):
        print("some endpoint never had its connections spread over both workers: its req/s ratio "
              "is not comparable; CPU ratio (no-op CPU per request / endpoint's) still is")
    print(f"targets: ratio >= 0.8, p99 <= 10 ms, CPU efficiency >= {STOCK_EFFICIENCY} of "
          "stock gunicorn's, no errors, RSS growth < 10 %: "
          + ("met" if ok else "MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
