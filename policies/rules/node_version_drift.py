"""node-version-drift: a GPU node whose driver, CUDA, OS image or container runtime differs
from the rest of its node pool (most of the pool's nodes run another): a hand-built node, not
replaceable; automate installation and version management before adding nodes
(operator-guide §1 "Replaceability"). A warning. Cluster scope: `audit`.

FAIL: node gpu-3 on driver 470.82.01 in node pool `train` whose other 2 nodes run 535.104.05
PASS: every node of `train` on 535.104.05
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.cluster import ClusterFinding, ClusterView
from policies.context import Context
from policies.rules._nodes import by_pool, majority

ID = "node-version-drift"
INTRINSIC = False
NATIVE = "It judges the cluster's nodes, not an object being admitted (audit)."
SCOPE = "cluster"
WHAT = (("driver", "driver"), ("cuda", "CUDA"), ("os_image", "OS image"),
        ("runtime", "runtime"))

EXAMPLES = """
- FAIL: node gpu-3 on driver 470.82.01 in a pool whose other nodes run 535.104.05
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
        nvidia.com/cuda.driver-version.full: 470.82.01
    spec: {taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]}
    status: {allocatable: {nvidia.com/gpu: "8"}}
- PASS: every node of the pool on 535.104.05
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
        for field, words in WHAT:
            usual, count = majority(getattr(r, field) for r in records)
            if not usual or count * 2 <= len(records):
                continue  # no majority: nothing to call the pool's own
            for r in records:
                have = getattr(r, field)
                if have and have != usual:
                    yield ClusterFinding(
                        ID, f"node {r.name}: {words} {have}, while {count} of the "
                        f"{len(records)} nodes of pool {pool} run {usual}", "", node=r.name,
                        pods=count, limit=len(records))
