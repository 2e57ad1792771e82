"""extended-resource-served-twice: two DeviceClasses name the same `extendedResourceName`.
The scheduler serves the name from one of them only (the newest, then the lowest name), so
the other class's devices never serve it. Cluster scope: `audit` and `migrate`.

FAIL: classes gpu.nvidia.com and gpu-a100 both with `extendedResourceName: nvidia.com/gpu`
PASS: gpu.nvidia.com serves nvidia.com/gpu, and gpu-a100 names no extended resource
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.cluster import ClusterFinding, ClusterView
from policies.context import Context

ID = "extended-resource-served-twice"
INTRINSIC = True
SEVERITY = "warning"  # its ClusterFindings are warnings
NATIVE = "A cluster-wide rule over nodes and DeviceClasses (the audit's)."
SCOPE = "cluster"

EXAMPLES = """
- FAIL: two DeviceClasses serving nvidia.com/gpu
  nodes:
  - apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: gpu.nvidia.com}
    spec:
      selectors:
      - cel: {expression: "device.driver == 'gpu.nvidia.com'"}
      extendedResourceName: nvidia.com/gpu
  - apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: gpu-copy.nvidia.com}
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
- PASS: one class serving it
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


def check_cluster(view: ClusterView, context: Context) -> Iterator[ClusterFinding]:
    dra = context.inventory.dra if context.inventory is not None else None
    if dra is None:
        return
    by_name: dict[str, list[str]] = {}
    for cls in dra.classes.values():
        if cls.extended_resource_name:
            by_name.setdefault(cls.extended_resource_name, []).append(cls.name)
    for resource, classes in sorted(by_name.items()):
        if len(classes) > 1:
            winner = dra.extended.get(resource, "")
            yield ClusterFinding(
                ID, f"DeviceClasses {', '.join(sorted(classes))} all serve {resource}: only "
                f"{winner} does; the others' devices never serve it", "")
