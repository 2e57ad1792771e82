"""Webhook throughput: `wrk` against `gpupolicy serve` (2 gthread workers, loopback TLS,
keep-alive), GPU-pod AdmissionReviews on /mutate and /validate, with 4 and with 16 connections,
5 interleaved rounds of 5 s each, against two baselines in the same run: a do-nothing Flask
endpoint served by the very same stack (bench/noop_app.py), and the same app on stock gunicorn
(`-k gthread`, same workers, threads, TLS files and keep-alive). Then the workers' resident
memory before and after 100,000 more requests.

Every figure is over EVERY round, as an apiserver meets the server: req/s and CPU per request
(the workers' user+system time over the requests served) are the medians of all rounds, none
run again or left out. How each round's connections fell on the workers is printed (sampled
from /proc a second into the round): a round whose connections all sit on one worker runs on
one core.

Targets: >= 0.8 of the no-op throughput, zero errors, worker RSS growth < 10 % (issue 3), p99
<= 10 ms with 4 connections; /mutate and /validate at >= 0.85 of stock gunicorn's CPU
efficiency (issues 19 and 31), with 4 and with 16 connections.
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
CONNECTIONS = (4, 16)
RSS_REQUESTS = 100_000
ROUNDS = 5  # medians over the rounds: one busy moment of the shared host moves one round
SAMPLE_AFTER = 1.0  # seconds into a round when the connections' workers are read

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
    spread: tuple[int, ...] = ()  # connections held by each worker, busiest first
    rounds: tuple[Run, ...] = ()  # every round, when this is their summary


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


def wrk(name: str, url: str, script: Path, seconds: int = DURATION, connections: int = 4,
        during: Any = None) -> Run:
    """One wrk run; `during()` is called SAMPLE_AFTER seconds in, its answer kept in spread."""
    proc = subprocess.Popen(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "--latency", "-s", str(script), url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    spread: tuple[int, ...] = ()
    try:
        if during is not None:
            time.sleep(SAMPLE_AFTER)
            spread = during()
        out, err = proc.communicate(timeout=seconds + 60)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    if proc.returncode:
        raise RuntimeError(f"wrk failed: {err}")
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    total = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    sock = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    errors = int(non2xx.group(1)) if non2xx else 0
    errors += sum(int(g) for g in sock.groups()) if sock else 0
    return Run(name, rps, _percentile(out, "50"), _percentile(out, "99"), total, errors,
               spread=spread)


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


def workers_of(master: int) -> list[int]:
    return sorted(worker_cpu_seconds(master))


def connections_per_worker(master: int, port: int) -> tuple[int, ...]:
    """Established connections to `port` held by each of the master's workers, busiest first
    (each worker's socket inodes looked up in /proc/net/tcp)."""
    established = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                if fields[3] == "01" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    established.add(fields[9])
    held = []
    for pid in workers_of(master):
        count = 0
        for fd in Path(f"/proc/{pid}/fd").glob("*"):
            try:
                target = os.readlink(fd)
            except OSError:
                continue
            if target.startswith("socket:[") and target[8:-1] in established:
                count += 1
        held.append(count)
    return tuple(sorted(held, reverse=True))


Target = tuple[str, subprocess.Popen[bytes], int, str]


def main() -> int:
    if shutil.which("wrk") is None:
        print("bench_server: wrk not installed; skipped (apt-get install wrk)")
        return 0
    work = Path(tempfile.mkdtemp(prefix="gpupolicy-bench-server-"))
    body = work / "review.json"
    body.write_bytes(review_body())
    script = work / "post.lua"
    script.write_text(LUA % body)
    results: dict[int, list[Run]] = {}
    try:
        noop, noop_port = start("noop", work)
        stock, stock_port = start_stock(work)
        hook, port = start("webhook", work)
        try:
            targets: list[Target] = [
                ("no-op Flask", noop, noop_port, "validate"),
                (STOCK, stock, stock_port, "validate"),
                ("/mutate", hook, port, "mutate"), ("/validate", hook, port, "validate")]
            for _, _, p, path in targets:
                wrk("warm-up", f"https://127.0.0.1:{p}/{path}", script, 2)
            mutated, validated = (answer(port, path, body.read_bytes())
                                  for path in ("mutate", "validate"))
            print(f"the review: /mutate patch {'yes' if 'patch' in mutated else 'no'}, "
                  f"/validate allowed={validated['allowed']} "
                  f"warnings={len(validated.get('warnings', []))}")
            for connections in CONNECTIONS:
                results[connections] = compare(targets, script, connections)
            before = worker_rss_kib(hook.pid)
            done = 0
            rate = max(max(r.rps for r in results[CONNECTIONS[0]][-1].rounds), 100.0)
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
    ok = all([report(connections, runs) for connections, runs in results.items()])
    growth = (after - before) / before * 100 if before else float("nan")
    print(f"worker RSS: {before / 1024:.1f} MiB -> {after / 1024:.1f} MiB after "
          f"{done} more requests ({growth:+.1f} %)")
    ok = ok and growth < 10
    print(f"load average now {os.getloadavg()[0]:.1f} (other work on the host skews req/s and p99)")
    print(f"targets: /validate and /mutate req/s >= 0.8 of the no-op's, CPU efficiency >= "
          f"{STOCK_EFFICIENCY} of stock gunicorn's, with {' and '.join(map(str, CONNECTIONS))} "
          f"connections, over every round; p99 <= 10 ms with {CONNECTIONS[0]}; no errors; "
          "RSS growth < 10 %: " + ("met" if ok else "MISSED"))
    return 0 if ok else 1


def measure(name: str, master: int, port: int, path: str, script: Path,
            connections: int) -> Run:
    cpu = worker_cpu_seconds(master)
    run = wrk(name, f"https://127.0.0.1:{port}/{path}", script, connections=connections,
              during=lambda: connections_per_worker(master, port))
    used = [t - cpu.get(pid, 0.0) for pid, t in worker_cpu_seconds(master).items()]
    run.cpu_us = sum(used) / max(run.requests, 1) * 1e6
    return run


def compare(targets: list[Target], script: Path, connections: int) -> list[Run]:
    """The machine is shared: the rounds are interleaved, and each endpoint's figures are the
    medians over all its rounds; the errors of every round count."""
    rounds: dict[str, list[Run]] = {name: [] for name, _, _, _ in targets}
    for _ in range(ROUNDS):
        for name, proc, port, path in targets:
            rounds[name].append(measure(name, proc.pid, port, path, script, connections))
    out = []
    for name, runs in rounds.items():
        out.append(Run(
            name, statistics.median(r.rps for r in runs),
            statistics.median(r.p50_ms for r in runs), statistics.median(r.p99_ms for r in runs),
            sum(r.requests for r in runs), sum(r.errors for r in runs),
            cpu_us=statistics.median(r.cpu_us for r in runs), rounds=tuple(runs)))
    return out


def report(connections: int, runs: list[Run]) -> bool:
    base = runs[0].rps
    stock = next(r for r in runs if r.name == STOCK)
    print(f"\nwrk -c{connections}: {DURATION} s rounds, loopback TLS keep-alive, 2 gthread "
          f"workers, {os.cpu_count()} CPUs, {ROUNDS} interleaved rounds, medians over EVERY "
          f"round; load average {os.getloadavg()[0]:.1f}")
    print(f"{'endpoint':<16}{'req/s':>8}{'p50 ms':>8}{'p99 ms':>8}{'errors':>7}{'ratio':>7}"
          f"{'CPU us/req':>11}{'vs stock':>9}   connections per worker, each round")
    ok = True
    for r in runs:
        ratio = r.rps / base if base else float("nan")
        efficiency = stock.cpu_us / r.cpu_us if r.cpu_us else float("nan")
        print(f"{r.name:<16}{r.rps:>8.0f}{r.p50_ms:>8.2f}{r.p99_ms:>8.2f}{r.errors:>7}"
              f"{ratio:>7.2f}{r.cpu_us:>11.0f}{efficiency:>9.2f}   "
              + " ".join("+".join(map(str, x.spread)) or "?" for x in r.rounds))
        if r.errors:
            ok = False
        if r.name.startswith("/") and (
                ratio < 0.8 or not efficiency >= STOCK_EFFICIENCY
                or (connections == CONNECTIONS[0] and r.p99_ms > 10)):
            ok = False
    for r in runs:
        print(f"  {r.name:<16}req/s " + " / ".join(f"{x.rps:.0f}" for x in r.rounds)
              + "   CPU us/req " + " / ".join(f"{x.cpu_us:.0f}" for x in r.rounds))
    print(f"-c{connections}: " + ", ".join(
        f"{r.name} req/s {r.rps / base:.2f} of the no-op's, CPU {stock.cpu_us / r.cpu_us:.2f} "
        "of stock's efficiency" for r in runs if r.name.startswith("/"))
        + (" (met)" if ok else " (MISSED)"))
    return ok


if __name__ == "__main__":
    sys.exit(main())
