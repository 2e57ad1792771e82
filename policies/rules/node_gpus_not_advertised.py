"""node-gpus-not-advertised: GPU Feature Discovery labels the node with GPUs
(`nvidia.com/gpu.count`) but the node advertises no GPU resource to the scheduler: the device
plugin is not serving it (plugin pod not running, driver mismatch in its logs), so no GPU pod
can land there (operator-guide §2, "`nvidia.com/gpu` missing on a node"). A fact: an error.
Cluster scope: `audit`.

FAIL: node gpu-3 labelled `nvidia.com/gpu.count: "8"` with no `nvidia.com/gpu` (nor MIG
resource) in capacity or allocatable
PASS: the same node with `allocatable: {nvidia.com/gpu: "8"}`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.cluster import ClusterFinding, ClusterView
from policies.context import Context
from policies.rules._nodes import gpu_nodes

ID = "node-gpus-not-advertised"
INTRINSIC = True
NATIVE = "It judges the cluster's nodes, not an object being admitted (audit)."
SCOPE = "cluster"

EXAMPLES = """
- FAIL: GPU Feature Discovery labels 8 GPUs, the node advertises none
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-3
      labels: {nvidia.com/gpu.count: "8", nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
    status: {capacity: {cpu: "96"}, allocatable: {cpu: "96"}}
- PASS: the device plugin advertises them
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-3
      labels: {nvidia.com/gpu.count: "8", nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
    status: {capacity: {nvidia.com/gpu: "8"}, allocatable: {nvidia.com/gpu: "8"}}
"""


def check_cluster(view: ClusterView, context: Context) -> Iterator[ClusterFinding]:
    served = {n.name for n in context.inventory.nodes if n.dra_served} \
        if context.inventory is not None else set()
    for r in gpu_nodes(view.nodes):
        if r.labelled_gpus and not r.gpus and not r.capacity and not r.cgpu \
                and r.name not in served:
            product = f" {r.product}" if r.product else ""
            yield ClusterFinding(
                ID, f"node {r.name}: GPU Feature Discovery labels {r.labelled_gpus}{product} "
                "GPUs, but the node advertises 0 to the scheduler: the device plugin is not "
                "serving them (is its pod running on the node? does its log show a driver "
                "mismatch?)", "", node=r.name, pods=r.labelled_gpus, severity="error")
