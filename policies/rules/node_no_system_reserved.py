"""node-no-system-reserved: a GPU node whose allocatable cpu equals its capacity and whose
allocatable memory is at most kubelet's default hard-eviction threshold (100Mi) below it:
kubelet reserves nothing for the node's own agents (network, storage, logging, monitoring),
which then compete with the GPU work (operator-guide §1 step 5). A warning. Cluster scope:
`audit`.

FAIL: node gpu-1 with `capacity: {cpu: "96", memory: 1056Gi}` and allocatable
`{cpu: "96", memory: 1081244Mi}` (only the 100Mi eviction threshold taken off)
PASS: allocatable `cpu: 95500m`, `memory: 1050Gi` (kube-reserved / system-reserved set)
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.cluster import ClusterFinding, ClusterView
from policies.context import Context
from policies.rules._nodes import gpu_nodes

ID = "node-no-system-reserved"
INTRINSIC = False
NATIVE = "It judges the cluster's nodes, not an object being admitted (audit)."
SCOPE = "cluster"
EVICTION = 100 * 2**20  # kubelet's default evictionHard memory.available, bytes

EXAMPLES = """
- FAIL: allocatable cpu is capacity, memory only the 100Mi eviction threshold below it
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-1
      labels: {nvidia.com/gpu.count: "8"}
    status:
      capacity: {cpu: "96", memory: 1056Gi, nvidia.com/gpu: "8"}
      allocatable: {cpu: "96", memory: 1081244Mi, nvidia.com/gpu: "8"}
- PASS: kube-reserved and system-reserved set
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-1
      labels: {nvidia.com/gpu.count: "8"}
    status:
      capacity: {cpu: "96", memory: 1056Gi, nvidia.com/gpu: "8"}
      allocatable: {cpu: 95500m, memory: 1050Gi, nvidia.com/gpu: "8"}
"""


def check_cluster(view: ClusterView, context: Context) -> Iterator[ClusterFinding]:
    for r in gpu_nodes(view.nodes):
        if r.cpu_reserved is False and r.memory_reserved is not None \
                and r.memory_reserved <= EVICTION:
            yield ClusterFinding(
                ID, f"node {r.name}: allocatable cpu equals capacity and memory is "
                f"{r.memory_reserved // 2**20} MiB below it (at most the eviction threshold): "
                "nothing is reserved for kubelet and the node's agents (set kubeReserved/"
                "systemReserved)", "", node=r.name)
