"""Engine speed: reviews per second over every corpus document (YAML parsing excluded) and the
median time to review one GPU pod with a full policy and 1,000 nodes. A baseline (a JSON round
trip of the same objects, the cheapest thing a front door does with them) runs in the same
process, so the ratio holds on a noisy machine."""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

import yaml

from policies.context import Context
from policies.engine import review
from policies.inventory import Inventory
from policies.loading import parse_policies
from webhook.inputs.sources import load_catalog, load_policies

CORPUS = Path(__file__).resolve().parent.parent.parent / "shared" / "corpus"
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

FULL_POLICY = """
apiVersion: gpupolicy.io/v1alpha1
kind: GPUPolicy
metadata: {name: training}
spec:
  namespaces: ["ml-*"]
  inject:
    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
    nodeSelector: {workload: gpu-training}
    nodeAffinity:
      required:
        - key: nvidia.com/gpu.product
          operator: In
          values: [NVIDIA-A100-SXM4-80GB, NVIDIA-H100-80GB-HBM3]
      preferred:
        - weight: 50
          preference: {matchExpressions: [{key: gpu-memory, operator: In, values: [large]}]}
    runtimeClassName: nvidia
    priorityClassName: gpu-batch
    gpuLimitsFromRequests: true
    hideGPUsFromNonGPUContainers: true
  rules:
    allowedResources: ["nvidia.com/gpu", "nvidia.com/mig-*"]
    maxGPUsPerPod: 8
    maxGPUsPerContainer: 8
    allowedModels: [NVIDIA-A100-SXM4-80GB, NVIDIA-H100-80GB-HBM3]
    requireHardwareMatch: true
    mig: {allowedProfiles: ["1g.10gb", "3g.40gb"], maxInstancesPerPod: 4}
    shared: {maxMemoryGiBPerContainer: 16}
    denyPrivilegedGPUContainers: true
    denyVisibleDevicesBypass: true
"""
PRODUCTS = ["NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "Tesla-T4", "NVIDIA-L4", ""]


def nodes(count: int) -> list[dict[str, Any]]:
    out = []
    for i in range(count):
        product = PRODUCTS[i % len(PRODUCTS)]
        labels = {"kubernetes.io/hostname": f"node-{i}", "workload": "gpu-training",
                  "topology.kubernetes.io/zone": f"zone-{i % 3}"}
        allocatable = {"cpu": "64", "memory": "512Gi"}
        if product:
            labels.update({"nvidia.com/gpu.product": product, "nvidia.com/gpu.count": "8"})
            allocatable["nvidia.com/gpu"] = "8"
        out.append({"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"node-{i}",
                    "labels": labels},
                    "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]
                             if product else []},
                    "status": {"allocatable": allocatable}})
    return out


GPU_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml-a"},
           "spec": {"containers": [
               {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "4"}}},
               {"name": "log", "image": "fluent"}]}}


def corpus_documents() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(CORPUS.rglob("*.y*ml")):
        try:
            docs += [d for d in yaml.load_all(path.read_text(), Loader=_Loader)
                     if isinstance(d, dict)]
        except (yaml.YAMLError, UnicodeDecodeError):
            continue
    return docs


def best_rate(func: Any, items: list[Any], rounds: int = 5) -> float:
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for item in items:
            func(item)
        best = min(best, time.perf_counter() - start)
    return len(items) / best


def median_us(func: Any, rounds: int = 2000) -> tuple[float, float]:
    """Median and p99 of one call, in µs."""
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        func()
        samples.append(time.perf_counter() - start)
    samples.sort()
    return statistics.median(samples) * 1e6, samples[int(len(samples) * 0.99)] * 1e6


# A GPU pod with cpu, memory and ephemeral-storage requests, a sidecar and overhead: the fit
# adds every resource up as kube-scheduler does.
FIT_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml-a"},
           "spec": {"overhead": {"cpu": "250m", "memory": "120Mi"},
                    "initContainers": [{"name": "proxy", "image": "envoy",
                                        "restartPolicy": "Always",
                                        "resources": {"requests": {"cpu": "100m",
                                                                   "memory": "64Mi"}}}],
                    "containers": [
                        {"name": "main", "image": "cuda", "resources": {
                            "requests": {"cpu": "16", "memory": "128Gi",
                                         "ephemeral-storage": "50Gi"},
                            "limits": {"nvidia.com/gpu": "4"}}},
                        {"name": "log", "image": "fluent",
                         "resources": {"requests": {"cpu": "100m"}}}]}}


def node_pools(count: int, catalog: Any) -> list[dict[str, Any]]:
    """Karpenter NodePools, each on one GPU instance type of the catalog."""
    names = sorted(n for n, t in catalog.instances.items() if t.cloud == "aws")
    return [{"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
             "metadata": {"name": f"np-{i}"},
             "spec": {"template": {"spec": {
                 "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                  "name": "gpu"},
                 "requirements": [
                     {"key": "node.kubernetes.io/instance-type", "operator": "In",
                      "values": [names[i % len(names)]]},
                     {"key": "karpenter.sh/capacity-type", "operator": "In",
                      "values": ["spot", "on-demand"]}],
                 "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]}}}}
            for i in range(count)]


def fit_and_templates(catalog: Any) -> bool:
    """The whole fit (policies/scheduling) against 1,000 nodes and 50 node templates: a pod
    that fits a node, and one that only a template can run (no GPU node at rest)."""
    from dataclasses import replace

    from policies.scheduling.templates import read_templates, with_templates

    templates = read_templates(node_pools(50, catalog), catalog)
    inventory = with_templates(Inventory.from_nodes(nodes(1000), catalog), templates)
    context = Context(policies=load_policies(), catalog=catalog, inventory=inventory)
    assert review(FIT_POD, context).allowed
    median, p99 = median_us(lambda: review(FIT_POD, context))
    cpu_only = replace(inventory, pools=tuple(p for p in inventory.pools if p.model is None))
    zero = Context(policies=load_policies(), catalog=catalog, inventory=cpu_only)
    decision = review(FIT_POD, zero)
    assert decision.allowed and decision.notes, decision
    scale_up, _ = median_us(lambda: review(FIT_POD, zero))
    print(f"GPU pod, whole fit (cpu, memory, storage, sidecar, overhead), 1,000 nodes and "
          f"{len(templates.pools)} NodePool templates: median {median:.0f} µs (target ≤ 150 "
          f"µs), p99 {p99:.0f} µs; fitting a template only (no GPU node): {scale_up:.0f} µs")
    return median <= 150


def main() -> int:
    catalog = load_catalog()
    context = Context(policies=load_policies(), catalog=catalog)
    node_objects = nodes(1000)
    start = time.perf_counter()
    inventory = Inventory.from_nodes(node_objects, catalog)
    print(f"inventory: 1,000 nodes grouped into {len(inventory.pools)} pools in "
          f"{(time.perf_counter() - start) * 1000:.1f} ms")
    full = Context(policies=parse_policies(FULL_POLICY), catalog=catalog, inventory=inventory)
    decision = review(GPU_POD, full)
    assert decision.allowed and decision.patch, decision.violations
    # Interleaved with its baseline, before the corpus is loaded (as in a webhook process).
    base, _ = median_us(lambda: json.loads(json.dumps(GPU_POD)))
    median, p99 = median_us(lambda: review(GPU_POD, full))
    bundled, _ = median_us(lambda: review(GPU_POD, context))
    base = min(base, median_us(lambda: json.loads(json.dumps(GPU_POD)))[0])
    print(f"GPU pod, full policy, 1,000 nodes in {len(inventory.pools)} pools: median "
          f"{median:.0f} µs (target ≤ 100 µs), p99 {p99:.0f} µs, {median / base:.1f}× a JSON "
          f"round trip of the pod ({base:.1f} µs); bundled policy, no inventory: {bundled:.0f} µs")
    ok = median <= 100
    fit_ok = fit_and_templates(catalog)
    ok = ok and fit_ok
    if CORPUS.is_dir():
        docs = corpus_documents()
        reviews = best_rate(lambda d: review(d, context), docs)
        baseline = best_rate(lambda d: json.loads(json.dumps(d, default=str)), docs)
        print(f"corpus: {len(docs)} documents, {reviews:,.0f} reviews/s on one core "
              f"(target ≥ 10,000); JSON round trip {baseline:,.0f}/s; "
              f"review costs {baseline / reviews:.2f}× a round trip")
        ok = ok and reviews >= 10_000
    else:
        print(f"corpus not present at {CORPUS}: corpus rate not measured")
    print("targets (≥ 10,000 documents/s, ≤ 100 µs per GPU pod): " + ("met" if ok else "MISSED"))
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
