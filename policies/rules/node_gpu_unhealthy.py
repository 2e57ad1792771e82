"""node-gpu-unhealthy: a node whose allocatable GPUs are fewer than its capacity: the device
plugin marked devices unhealthy (an Xid error, a GPU fallen off the bus), so the node serves
fewer GPUs than it has (operator-guide §2, "a GPU disappears from allocatable"). A fact: an
error. Cluster scope: `audit`.

FAIL: node gpu-5 with `capacity: {nvidia.com/gpu: "8"}` and `allocatable: {nvidia.com/gpu: "7"}`
PASS: capacity and allocatable both 8
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.cluster import ClusterFinding, ClusterView
from policies.context import Context
from policies.rules._nodes import gpu_nodes

ID = "node-gpu-unhealthy"
INTRINSIC = True
NATIVE = "It judges the cluster's nodes, not an object being admitted (audit)."
SCOPE = "cluster"

EXAMPLES = """
- FAIL: 8 GPUs in capacity, 7 allocatable (one marked unhealthy)
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-5
      labels: {nvidia.com/gpu.count: "8"}
    status: {capacity: {nvidia.com/gpu: "8"}, allocatable: {nvidia.com/gpu: "7"}}
- PASS: every GPU allocatable
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-5
      labels: {nvidia.com/gpu.count: "8"}
    status: {capacity: {nvidia.com/gpu: "8"}, allocatable: {nvidia.com/gpu: "8"}}
"""


def check_cluster(view: ClusterView, context: Context) -> Iterator[ClusterFinding]:
    for r in gpu_nodes(view.nodes):
        for resource, capacity in sorted(r.capacity.items()):
            allocatable = r.allocatable.get(resource, 0)
            if allocatable < capacity:
                yield ClusterFinding(
                    ID, f"node {r.name}: {resource} capacity {capacity}, allocatable "
                    f"{allocatable}: {capacity - allocatable} device"
                    f"{'s' * (capacity - allocatable != 1)} unhealthy (look for Xid errors: "
                    "DCGM_FI_DEV_XID_ERRORS, the device plugin's log)", "", node=r.name,
                    pods=allocatable, limit=capacity, severity="error")
