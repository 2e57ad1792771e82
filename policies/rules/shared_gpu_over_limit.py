"""shared-gpu-over-limit: no more pods share one physical GPU than the lowest
`rules.shared.maxPodsPerGPU` of the policies governing them. Cluster scope: only the audit sees
every pod placed on a GPU (from the gpushare/cGPU and HAMi allocation annotations).

FAIL (maxPodsPerGPU: 2): three running pods whose `ALIYUN_COM_GPU_MEM_IDX` is 1 on one node
PASS: two pods on GPU 1 and two on GPU 0 of that node
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.cluster import ClusterFinding, ClusterView
from policies.context import Context

ID = "shared-gpu-over-limit"
INTRINSIC = False

EXAMPLES = """
- FAIL: three running pods on GPU 1 of one node, over maxPodsPerGPU 2
  policy: {rules: {shared: {maxPodsPerGPU: 2}}}
  pods:
  - apiVersion: v1
    kind: Pod
    metadata:
      name: a
      namespace: team-a
      annotations: {ALIYUN_COM_GPU_MEM_IDX: "1"}
    spec:
      nodeName: gpu-1
      containers: [{name: main, image: "server:1", resources: {limits: {aliyun.com/gpu-mem: 4}}}]
    status: {phase: Running}
  - apiVersion: v1
    kind: Pod
    metadata:
      name: b
      namespace: team-a
      annotations: {ALIYUN_COM_GPU_MEM_IDX: "1"}
    spec:
      nodeName: gpu-1
      containers: [{name: main, image: "server:1", resources: {limits: {aliyun.com/gpu-mem: 4}}}]
    status: {phase: Running}
  - apiVersion: v1
    kind: Pod
    metadata:
      name: c
      namespace: team-a
      annotations: {ALIYUN_COM_GPU_MEM_IDX: "1"}
    spec:
      nodeName: gpu-1
      containers: [{name: main, image: "server:1", resources: {limits: {aliyun.com/gpu-mem: 4}}}]
    status: {phase: Running}
- PASS: two pods on GPU 1 and one on GPU 0
  policy: {rules: {shared: {maxPodsPerGPU: 2}}}
  pods:
  - apiVersion: v1
    kind: Pod
    metadata:
      name: a
      namespace: team-a
      annotations: {ALIYUN_COM_GPU_MEM_IDX: "1"}
    spec:
      nodeName: gpu-1
      containers: [{name: main, image: "server:1", resources: {limits: {aliyun.com/gpu-mem: 4}}}]
    status: {phase: Running}
  - apiVersion: v1
    kind: Pod
    metadata:
      name: b
      namespace: team-a
      annotations: {ALIYUN_COM_GPU_MEM_IDX: "1"}
    spec:
      nodeName: gpu-1
      containers: [{name: main, image: "server:1", resources: {limits: {aliyun.com/gpu-mem: 4}}}]
    status: {phase: Running}
  - apiVersion: v1
    kind: Pod
    metadata:
      name: c
      namespace: team-a
      annotations: {ALIYUN_COM_GPU_MEM_IDX: "0"}
    spec:
      nodeName: gpu-1
      containers: [{name: main, image: "server:1", resources: {limits: {aliyun.com/gpu-mem: 4}}}]
    status: {phase: Running}
"""
NATIVE = "It counts the running pods that share a node's GPU (the audit's)."
SCOPE = "cluster"


def check_cluster(view: ClusterView, context: Context) -> Iterator[ClusterFinding]:
    for (node, device), entry in sorted(view.shared.items()):
        if entry.limit is not None and entry.pods > entry.limit:
            yield ClusterFinding(
                ID, f"{entry.pods} pods share GPU {device} on node {node}, over "
                f"maxPodsPerGPU {entry.limit}", entry.policy, node, device, entry.pods,
                entry.limit, tuple(entry.sample))
