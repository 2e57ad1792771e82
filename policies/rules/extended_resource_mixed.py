"""extended-resource-mixed: a DeviceClass serves an extended resource (say `nvidia.com/gpu`)
while other nodes still advertise it through a device plugin. A pod asking for it may land on
either kind of node: on the plugin's, DRA's claims and policies on classes do not apply; on
DRA's, the plugin's sharing and MIG resources do not. Advice, for a fleet in the middle of a
move. Cluster scope: `audit` and `migrate`.

FAIL: class gpu.nvidia.com serves nvidia.com/gpu on dra-1, and node dp-1 lists nvidia.com/gpu: 8
PASS: every node serves nvidia.com/gpu the same way
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.cluster import ClusterFinding, ClusterView
from policies.context import Context

ID = "extended-resource-mixed"
INTRINSIC = True
SEVERITY = "warning"  # its ClusterFindings are warnings
NATIVE = "A cluster-wide rule over nodes and running pods (the audit's)."
SCOPE = "cluster"

EXAMPLES = """
- FAIL: a class serves nvidia.com/gpu while another node's device plugin advertises it
  nodes:
  - apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: gpu.nvidia.com}
    spec:
      selectors:
      - cel: {expression: "device.driver == 'gpu.nvidia.com'"}
      extendedResourceName: nvidia.com/gpu
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
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-2
      labels: {kubernetes.io/hostname: gpu-2}
    status: {allocatable: {cpu: "8", nvidia.com/gpu: "4"}}
- PASS: every GPU node on the DRA driver
  nodes:
  - apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: gpu.nvidia.com}
    spec:
      selectors:
      - cel: {expression: "device.driver == 'gpu.nvidia.com'"}
      extendedResourceName: nvidia.com/gpu
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
_NAMED = 3


def check_cluster(view: ClusterView, context: Context) -> Iterator[ClusterFinding]:
    inventory = context.inventory
    dra = inventory.dra if inventory is not None else None
    if inventory is None or dra is None:
        return
    for resource, cls in sorted(dra.extended.items()):
        via_dra = [n.name for n in inventory.nodes if resource in n.dra_served]
        via_plugin = [n.name for n in inventory.nodes
                      if n.allocatable.get(resource, 0) > 0 and resource not in n.dra_served]
        if via_dra and via_plugin:
            yield ClusterFinding(
                ID, f"{resource} is served by DeviceClass {cls} on {_nodes(via_dra)} and by "
                f"a device plugin on {_nodes(via_plugin)}: a pod asking for it may land on "
                "either", "", node=via_plugin[0])


def _nodes(names: list[str]) -> str:
    shown = ", ".join(names[:_NAMED])
    more = f" and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
    return f"{len(names)} node{'s' * (len(names) != 1)} ({shown}{more})"
