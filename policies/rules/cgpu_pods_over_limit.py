"""cgpu-pods-over-limit: more pods placed on one GPU of an Alibaba cGPU / gpushare node than
cGPU can start: at most 20 per card, policy or not; the rest do not start (operator-guide §2
"Shared GPUs"; settable as `spec.cgpuMaxPodsPerGPU` in the thresholds file). A fact: an error.
Cluster scope: `audit` (placements from `ALIYUN_COM_GPU_MEM_IDX` and the allocation
annotations).

FAIL: 21 running pods whose `ALIYUN_COM_GPU_MEM_IDX` is 0 on cGPU node a100-1
PASS: 20 pods on GPU 0 and 1 on GPU 1
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.cluster import ClusterFinding, ClusterView
from policies.context import Context

ID = "cgpu-pods-over-limit"
INTRINSIC = True
NATIVE = "It counts the pods placed on each GPU of the cluster's nodes (audit)."
SCOPE = "cluster"

EXAMPLES = """
- FAIL: 21 running pods on GPU 0 of a cGPU node (the same pod, 21 times)
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: a100-1
      labels: {ack.node.gpu.schedule: cgpu, aliyun.accelerator/nvidia_name: A100-SXM4-80GB}
    status: {allocatable: {aliyun.com/gpu-mem: "160", aliyun.com/gpu-count: "2"}}
  pods:
  - &share
    apiVersion: v1
    kind: Pod
    metadata:
      name: share
      namespace: team-a
      annotations: {ALIYUN_COM_GPU_MEM_IDX: "0"}
    spec:
      nodeName: a100-1
      containers: [{name: main, image: "server:1", resources: {limits: {aliyun.com/gpu-mem: 2}}}]
    status: {phase: Running}
  - *share
  - *share
  - *share
  - *share
  - *share
  - *share
  - *share
  - *share
  - *share
  - *share
  - *share
  - *share
  - *share
  - *share
  - *share
  - *share
  - *share
  - *share
  - *share
  - *share
- PASS: 20 pods on GPU 0 and one on GPU 1
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: a100-1
      labels: {ack.node.gpu.schedule: cgpu, aliyun.accelerator/nvidia_name: A100-SXM4-80GB}
    status: {allocatable: {aliyun.com/gpu-mem: "160", aliyun.com/gpu-count: "2"}}
  pods:
  - &pod
    apiVersion: v1
    kind: Pod
    metadata:
      name: share
      namespace: team-a
      annotations: {ALIYUN_COM_GPU_MEM_IDX: "0"}
    spec:
      nodeName: a100-1
      containers: [{name: main, image: "server:1", resources: {limits: {aliyun.com/gpu-mem: 2}}}]
    status: {phase: Running}
  - *pod
  - *pod
  - *pod
  - *pod
  - *pod
  - *pod
  - *pod
  - *pod
  - *pod
  - *pod
  - *pod
  - *pod
  - *pod
  - *pod
  - *pod
  - *pod
  - *pod
  - *pod
  - *pod
  - apiVersion: v1
    kind: Pod
    metadata:
      name: other
      namespace: team-a
      annotations: {ALIYUN_COM_GPU_MEM_IDX: "1"}
    spec:
      nodeName: a100-1
      containers: [{name: main, image: "server:1", resources: {limits: {aliyun.com/gpu-mem: 2}}}]
    status: {phase: Running}
"""


def check_cluster(view: ClusterView, context: Context) -> Iterator[ClusterFinding]:
    cgpu = {r.name for r in view.nodes if r.cgpu}
    limit = view.thresholds.cgpu_max_pods_per_gpu
    for (node, device), entry in sorted(view.shared.items()):
        if node in cgpu and entry.pods > limit:
            yield ClusterFinding(
                ID, f"{entry.pods} pods on GPU {device} of cGPU node {node}: cGPU starts at "
                f"most {limit} per GPU, the rest do not start", "", node, device, entry.pods,
                limit, tuple(entry.sample), severity="error")
