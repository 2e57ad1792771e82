"""gpu-double-advertised: a node whose GPUs a device plugin advertises as an extended resource
while a DRA GPU driver publishes them as devices too. The scheduler counts the two stacks
apart, so one GPU can be given to two pods; NVIDIA supports only one stack per node. A fact,
so an error whatever the policies say. Cluster scope: `audit` and `migrate`.

FAIL: node gpu-1 with `allocatable: {nvidia.com/gpu: "8"}` and a ResourceSlice of driver
gpu.nvidia.com for gpu-1
PASS: the same slice on a node whose allocatable lists no nvidia.com/* resource
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.cluster import ClusterFinding, ClusterView
from policies.context import Context
from policies.dra.claims import GPU_DRIVERS
from policies.resources import classify

ID = "gpu-double-advertised"
INTRINSIC = True
NATIVE = "A cluster-wide rule over nodes (the audit's)."
SCOPE = "cluster"

EXAMPLES = """
- FAIL: a node whose GPU the device plugin and the DRA driver both advertise
  nodes:
  - apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: gpu.nvidia.com}
    spec:
      selectors:
      - cel: {expression: "device.driver == 'gpu.nvidia.com'"}
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-1
      labels: {kubernetes.io/hostname: gpu-1}
    status: {allocatable: {cpu: "8", nvidia.com/gpu: "1"}}
  - apiVersion: resource.k8s.io/v1
    kind: ResourceSlice
    metadata: {name: gpu-1-slice}
    spec:
      driver: gpu.nvidia.com
      nodeName: gpu-1
      pool: {name: gpu-1, generation: 1, resourceSliceCount: 1}
      devices:
      - name: gpu-0
        attributes: {type: {string: gpu}, productName: {string: NVIDIA A100-SXM4-80GB}}
- PASS: the DRA driver alone
  nodes:
  - apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: gpu.nvidia.com}
    spec:
      selectors:
      - cel: {expression: "device.driver == 'gpu.nvidia.com'"}
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-1
      labels: {kubernetes.io/hostname: gpu-1}
    status: {allocatable: {cpu: "8"}}
  - apiVersion: resource.k8s.io/v1
    kind: ResourceSlice
    metadata: {name: gpu-1-slice}
    spec:
      driver: gpu.nvidia.com
      nodeName: gpu-1
      pool: {name: gpu-1, generation: 1, resourceSliceCount: 1}
      devices:
      - name: gpu-0
        attributes: {type: {string: gpu}, productName: {string: NVIDIA A100-SXM4-80GB}}
"""


def check_cluster(view: ClusterView, context: Context) -> Iterator[ClusterFinding]:
    inventory = context.inventory
    dra = inventory.dra if inventory is not None else None
    if inventory is None or dra is None:
        return
    for node in inventory.nodes:
        group = dra.group_of(node.name)
        if group is None:
            continue
        drivers = sorted({d.driver for _, d in group.devices() if d.driver in GPU_DRIVERS
                          and (d.node_name in (None, node.name))})
        plugin = sorted(name for name, amount in node.allocatable.items()
                        if amount > 0 and name not in node.dra_served
                        and classify(name) is not None)
        if drivers and plugin:
            yield ClusterFinding(
                ID, f"node {node.name}: GPUs advertised twice, by a device plugin "
                f"({', '.join(plugin)}) and by the DRA driver {', '.join(drivers)}: the "
                "scheduler can give one GPU to two pods; run one stack per node",
                "", node=node.name, severity="error")
