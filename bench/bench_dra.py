"""DRA feasibility speed: a pod with one GPU claim against 1,000 nodes x 8 GPUs published in
ResourceSlices (8,000 devices, 4 models). Target: median ≤ 1 ms. Beside it, what the CEL
library itself costs per evaluation, and what a cold check (empty selector cache) costs."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

from policies.dra import cel
from policies.dra.allocate import check
from policies.dra.parse_claims import parse_claim
from policies.dra.pools import DraInventory

MODELS = [
    ("NVIDIA H100 80GB HBM3", "Hopper", "81559Mi", "9.0.0"),
    ("NVIDIA A100-SXM4-80GB", "Ampere", "80Gi", "8.0.0"),
    ("NVIDIA L40S", "Ada Lovelace", "46068Mi", "8.9.0"),
    ("NVIDIA B200", "Blackwell", "183359Mi", "10.0.0"),
]
GPU_CLASS = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
             "metadata": {"name": "gpu.nvidia.com"},
             "spec": {"extendedResourceName": "nvidia.com/gpu", "selectors": [{"cel": {
                 "expression": "device.driver == 'gpu.nvidia.com' && "
                               "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}]}}
CLAIM = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
         "metadata": {"name": "h100", "namespace": "ml-train"},
         "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
             "deviceClassName": "gpu.nvidia.com",
             "selectors": [{"cel": {"expression":
                                    "device.attributes['gpu.nvidia.com'].productName == "
                                    "'NVIDIA H100 80GB HBM3' && device.capacity['gpu.nvidia.com']"
                                    ".memory.compareTo(quantity('80Gi')) < 0"}}]}}]}}}


def slices(nodes: int) -> list[dict[str, Any]]:
    out = []
    for i in range(nodes):
        product, arch, memory, cc = MODELS[i % len(MODELS)]
        devices = [{"name": f"gpu-{g}", "attributes": {
            "type": {"string": "gpu"}, "productName": {"string": product},
            "architecture": {"string": arch}, "cudaComputeCapability": {"version": cc},
            "driverVersion": {"version": "580.105.8"},
            "resource.kubernetes.io/pcieRoot": {"string": f"pci0000:{g // 4}0"}},
            "capacity": {"memory": {"value": memory}}} for g in range(8)]
        out.append({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
                    "metadata": {"name": f"node-{i}-gpu.nvidia.com-x"},
                    "spec": {"driver": "gpu.nvidia.com", "nodeName": f"node-{i}",
                             "pool": {"name": f"node-{i}", "generation": 1,
                                      "resourceSliceCount": 1},
                             "devices": devices}})
    return out


def _median_us(fn: Callable[[], object], rounds: int) -> float:
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def main() -> int:
    start = time.perf_counter()
    inventory = DraInventory.build(slices(1000), [GPU_CLASS])
    built = time.perf_counter() - start
    devices = sum(len(p.devices) for g in inventory.groups for p in g.pools) // len(
        inventory.groups) * len(inventory.by_node)
    print(f"inventory: 1,000 nodes, {devices:,} devices in ResourceSlices, "
          f"{len(inventory.groups)} node groups, built in {built * 1e3:.0f} ms")
    claim = parse_claim(CLAIM)
    cel._CACHE.clear()
    cold = _median_us(lambda: check([claim], inventory), 1)
    verdicts = check([claim], inventory)
    fitting = sum(len(v.nodes) for v in verdicts if v.fits)
    median = _median_us(lambda: check([claim], inventory), 300)
    probe = cel.library_cost_probe()
    library = _median_us(lambda: [probe() for _ in range(100)], 50) / 100
    program = cel.compile_selector(CLAIM["spec"]["devices"]["requests"][0]["exactly"]
                                   ["selectors"][0]["cel"]["expression"])
    device = inventory.groups[0].pools[0].devices[0]
    ours = _median_us(lambda: [cel._run(program, device) for _ in range(100)], 50) / 100
    print(f"one GPU claim, {fitting} of 1,000 nodes fit: median {median:.0f} µs "
          f"(target ≤ 1,000 µs); cold (selector cache empty) {cold:.0f} µs")
    print(f"CEL: cel-expr-python evaluation {library:.1f} µs; with the device converted and "
          f"quantity() {ours:.1f} µs; each selector runs once per distinct device")
    ok = median <= 1000 and fitting == 250
    print("target (≤ 1 ms per pod): " + ("met" if ok else "MISSED"))
    return 0 if ok else 1
