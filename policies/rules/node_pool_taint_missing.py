"""node-pool-taint-missing: a node of a tainted (dedicated) GPU pool that lacks taints most of
the pool has: work without the toleration lands on it, and the pool is no longer dedicated
("a temporary looser window must not become permanent", operator-guide §1 step 3). A warning.
Cluster scope: `audit`.

FAIL: node gpu-3 of pool `train` without `nvidia.com/gpu=present:NoSchedule`, which the other
2 nodes have
PASS: every node of `train` with that taint
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from policies.cluster import ClusterFinding, ClusterView
from policies.context import Context
from policies.rules._nodes import by_pool

ID = "node-pool-taint-missing"
INTRINSIC = False
NATIVE = "It judges the cluster's nodes, not an object being admitted (audit)."
SCOPE = "cluster"
EXCLUSIVE = ("NoSchedule", "NoExecute")

EXAMPLES = """
- FAIL: node gpu-3 lacks the taint the pool's other nodes have
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-1
      labels:
        karpenter.sh/nodepool: train
        nvidia.com/gpu.count: "8"
        nvidia.com/cuda.driver-version.full: 535.104.05
    spec: {taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]}
    status: {allocatable: {nvidia.com/gpu: "8"}}
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-2
      labels:
        karpenter.sh/nodepool: train
        nvidia.com/gpu.count: "8"
        nvidia.com/cuda.driver-version.full: 535.104.05
    spec: {taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]}
    status: {allocatable: {nvidia.com/gpu: "8"}}
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-3
      labels:
        karpenter.sh/nodepool: train
        nvidia.com/gpu.count: "8"
        nvidia.com/cuda.driver-version.full: 535.104.05
    status: {allocatable: {nvidia.com/gpu: "8"}}
- PASS: every node of the pool tainted
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-1
      labels:
        karpenter.sh/nodepool: train
        nvidia.com/gpu.count: "8"
        nvidia.com/cuda.driver-version.full: 535.104.05
    spec: {taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]}
    status: {allocatable: {nvidia.com/gpu: "8"}}
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-2
      labels:
        karpenter.sh/nodepool: train
        nvidia.com/gpu.count: "8"
        nvidia.com/cuda.driver-version.full: 535.104.05
    spec: {taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]}
    status: {allocatable: {nvidia.com/gpu: "8"}}
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-3
      labels:
        karpenter.sh/nodepool: train
        nvidia.com/gpu.count: "8"
        nvidia.com/cuda.driver-version.full: 535.104.05
    spec: {taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]}
    status: {allocatable: {nvidia.com/gpu: "8"}}
"""


def check_cluster(view: ClusterView, context: Context) -> Iterator[ClusterFinding]:
    for pool, records in sorted(by_pool(view.nodes).items()):
        if len(records) < 2:
            continue
        counts = Counter(t for r in records for t in set(r.taints) if t.effect in EXCLUSIVE)
        usual = [t for t, n in counts.items() if n * 2 > len(records)]
        for r in records:
            missing = [t for t in usual if t not in r.taints]
            if missing and not r.unschedulable:
                shown = ", ".join(f"{t.key}={t.value}:{t.effect}" if t.value
                                  else f"{t.key}:{t.effect}" for t in missing)
                yield ClusterFinding(
                    ID, f"node {r.name}: lacks {shown}, which {counts[missing[0]]} of the "
                    f"{len(records)} nodes of pool {pool} have: untolerating work lands on it",
                    "", node=r.name, pods=counts[missing[0]], limit=len(records))
