"""`gpupolicy audit --pools` beside the plain audit, on the simulated cluster of
bench_audit.py (served by the fake list API on 127.0.0.1), its nodes given node-pool and GPU
Feature Discovery labels and versions as real GPU nodes have, a few failing GPU pods added.

Targets (issue 32): at 100,000 pods on 2,000 nodes the pool view adds at most 20% to the plain
audit's time, and its peak RSS is at most 1.25x that of the pool view at 20,000 pods.
The time compared is the audit process's CPU time (user + system): on this machine, shared
by several people, wall time moves with their load far more than with the pool view (wall
time is printed too). The plain and pool runs alternate (plain, pools, plain, pools) and
each figure is the better of two.
"""

from __future__ import annotations

import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any

from bench.bench_audit import LAUNCH, ROOT, cluster, warm
from tests.cluster.fakeapi import FakeAPIServer

TIME_RATIO = 1.20
RSS_RATIO = 1.25


def gpu_nodes(objects: list[dict[str, Any]]) -> None:
    """Node-pool labels, GFD versions and nodeInfo on the simulated nodes; one node in 50 on
    another driver (drift), so the facts and the spread have something to say."""
    rng = random.Random(7)
    for obj in objects:
        if obj["kind"] == "Node":
            labels = obj["metadata"]["labels"]
            name = obj["metadata"]["name"]
            labels["karpenter.sh/nodepool"] = name.rsplit("-", 1)[0]
            driver = "470.82.01" if rng.random() < 0.02 else "535.104.05"
            labels.update({"nvidia.com/cuda.driver-version.full": driver,
                           "nvidia.com/cuda.runtime-version.full": "12.2"})
            obj["status"]["capacity"] = {**obj["status"]["capacity"], "memory": "257Gi"}
            obj["status"]["nodeInfo"] = {"osImage": "Ubuntu 22.04.4 LTS",
                                         "containerRuntimeVersion": "containerd://1.7.13",
                                         "kernelVersion": "5.15.0-1056-aws"}
        elif obj["kind"] == "Pod" and rng.random() < 0.01:
            obj["status"]["containerStatuses"] = [{
                "name": "main", "restartCount": 2,
                "lastState": {"terminated": {"reason": "OOMKilled", "exitCode": 137}},
                "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]
        if obj["kind"] == "Pod" and obj["status"].get("phase") == "Pending":
            obj["metadata"]["creationTimestamp"] = "2026-05-01T10:00:00Z"
        if obj["kind"] == "Pod":  # GPU pods tolerate the GPU nodes' taint, as they do
            obj["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists",
                                           "effect": "NoSchedule"}]


def run_audit(config: str, out: str, pools: bool) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS MB) of one audit in a child process."""
    extra = ["--pools", "--now", "2026-05-01T12:00:00Z"] if pools else []
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", LAUNCH, "audit", "--kubeconfig", config, "--format", "json",
         "--output-file", out, "--progress", "never", *extra],
        cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode not in (0, 1) or "VmHWM" not in proc.stderr:
        raise RuntimeError(f"audit failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return wall, cpu, int(proc.stderr.rsplit("VmHWM", 1)[1].split()[0]) / 1024


def measure(pods: int, plain: bool) -> dict[str, float]:
    server = FakeAPIServer().start()
    try:
        objects = cluster(pods, pods // 10, 2_000)
        gpu_nodes(objects)
        server.add_all(objects)
        del objects
        for path in ("/api/v1/pods", "/apis/apps/v1/deployments", "/api/v1/nodes",
                     "/apis/apps/v1/daemonsets"):
            warm(server, path)
        with tempfile.TemporaryDirectory() as tmp:
            config = server.kubeconfig(os.path.join(tmp, "kubeconfig"))
            out = os.path.join(tmp, "report.json")
            walls: dict[str, list[float]] = {"plain": [], "pools": []}
            cpus: dict[str, list[float]] = {"plain": [], "pools": []}
            rss: dict[str, list[float]] = {"plain": [], "pools": []}
            for _ in range(2 if plain else 1):
                for kind in ("plain", "pools") if plain else ("pools",):
                    wall, cpu, peak = run_audit(config, out, kind == "pools")
                    walls[kind].append(wall)
                    cpus[kind].append(cpu)
                    rss[kind].append(peak)
    finally:
        server.stop()
    return {f"{k}_{m}": min(v) for m, d in (("wall", walls), ("cpu", cpus), ("rss", rss))
            for k, v in d.items() if v}


def main() -> int:
    small = measure(20_000, plain=False)
    print(f"audit --pools  20,000 pods + 2,000 nodes: {small['pools_cpu']:.1f} s CPU "
          f"({small['pools_wall']:.1f} s wall), peak RSS {small['pools_rss']:.0f} MB",
          flush=True)
    big = measure(100_000, plain=True)
    ratio = big["pools_cpu"] / big["plain_cpu"]
    growth = big["pools_rss"] / small["pools_rss"]
    print(f"audit         100,000 pods + 2,000 nodes: {big['plain_cpu']:.1f} s CPU "
          f"({big['plain_wall']:.1f} s wall), peak RSS {big['plain_rss']:.0f} MB")
    print(f"audit --pools 100,000 pods + 2,000 nodes: {big['pools_cpu']:.1f} s CPU "
          f"({big['pools_wall']:.1f} s wall; {ratio:.2f}x the plain audit's CPU; target <= "
          f"{TIME_RATIO}), peak RSS "
          f"{big['pools_rss']:.0f} MB ({growth:.2f}x the 20,000-pod run; target <= "
          f"{RSS_RATIO})")
    ok = ratio <= TIME_RATIO and growth <= RSS_RATIO
    print(f"targets {'met' if ok else 'NOT met'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
