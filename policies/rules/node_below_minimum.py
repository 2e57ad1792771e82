"""node-below-minimum: a GPU node whose NVIDIA driver (GFD's `nvidia.com/cuda.driver-version.*`
or older `nvidia.com/cuda.driver.major/minor/rev` labels) or container runtime
(`status.nodeInfo.containerRuntimeVersion`) is older than the minimum: driver 418.87.01,
containerd 1.4.3, Docker 19.03.5 (operator-guide §2 "Prerequisites per node"; settable in
the thresholds file, `spec.minimums`). A fact: an error. Cluster scope: `audit`.

FAIL: node gpu-2 with `nvidia.com/cuda.driver.major: "410"` (driver 410.48)
PASS: driver 535.104.05 on containerd://1.7.2
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.cluster import ClusterFinding, ClusterView
from policies.context import Context
from policies.pools.nodes import version_key
from policies.rules._nodes import gpu_nodes

ID = "node-below-minimum"
INTRINSIC = True
NATIVE = "It judges the cluster's nodes, not an object being admitted (audit)."
SCOPE = "cluster"

EXAMPLES = """
- FAIL: driver 410.48, older than 418.87.01
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-2
      labels:
        nvidia.com/gpu.count: "8"
        nvidia.com/cuda.driver.major: "410"
        nvidia.com/cuda.driver.minor: "48"
    status:
      capacity: {nvidia.com/gpu: "8"}
      allocatable: {nvidia.com/gpu: "8"}
      nodeInfo: {containerRuntimeVersion: "containerd://1.7.2"}
- PASS: driver 535.104.05 on containerd 1.7.2
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-2
      labels:
        nvidia.com/gpu.count: "8"
        nvidia.com/cuda.driver-version.full: 535.104.05
    status:
      capacity: {nvidia.com/gpu: "8"}
      allocatable: {nvidia.com/gpu: "8"}
      nodeInfo: {containerRuntimeVersion: "containerd://1.7.2"}
"""


def check_cluster(view: ClusterView, context: Context) -> Iterator[ClusterFinding]:
    minimums = view.thresholds.minimums
    for r in gpu_nodes(view.nodes):
        checks = [("driver", r.driver, minimums.driver)]
        kind, _, _ = r.runtime.partition("://")
        if kind in ("containerd", "docker"):
            checks.append((kind, r.runtime, getattr(minimums, kind)))
        for what, have, least in checks:
            have_key, least_key = version_key(have), version_key(least)
            if have_key is not None and least_key is not None and have_key < least_key:
                yield ClusterFinding(
                    ID, f"node {r.name}: {what} {have} is below the minimum {least}",
                    "", node=r.name, severity="error")
