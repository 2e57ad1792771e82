"""cgpu-memory-over-card: the GPU-memory shares (`aliyun.com/gpu-mem`, GiB) placed on one card
of a cGPU / gpushare node add up to more than the card has: a shared instance fails to start
(operator-guide §2, "the sum of GPU-memory shares exceeds the card's memory"). The card's
memory is the node's `aliyun.com/gpu-mem` over its `aliyun.com/gpu-count` (else GFD's
`nvidia.com/gpu.memory`). A fact: an error. Cluster scope: `audit`.

FAIL: two pods of `aliyun.com/gpu-mem: 8` on GPU 0 of a T4 node advertising 15 GiB per card
PASS: one pod of 8 and one of 7 on that card
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.cluster import ClusterFinding, ClusterView
from policies.context import Context

ID = "cgpu-memory-over-card"
INTRINSIC = True
NATIVE = "It sums the shares placed on each card of the cluster's nodes (audit)."
SCOPE = "cluster"

EXAMPLES = """
- FAIL: 8 + 8 GiB on GPU 0 of a node whose cards have 15 GiB
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: t4-1
      labels: {ack.node.gpu.schedule: cgpu, aliyun.accelerator/nvidia_name: Tesla-T4}
    status: {allocatable: {aliyun.com/gpu-mem: "15", aliyun.com/gpu-count: "1"}}
  pods:
  - apiVersion: v1
    kind: Pod
    metadata:
      name: a
      namespace: team-a
      annotations: {ALIYUN_COM_GPU_MEM_IDX: "0"}
    spec:
      nodeName: t4-1
      containers: [{name: main, image: "server:1", resources: {limits: {aliyun.com/gpu-mem: 8}}}]
    status: {phase: Running}
  - apiVersion: v1
    kind: Pod
    metadata:
      name: b
      namespace: team-a
      annotations: {ALIYUN_COM_GPU_MEM_IDX: "0"}
    spec:
      nodeName: t4-1
      containers: [{name: main, image: "server:1", resources: {limits: {aliyun.com/gpu-mem: 8}}}]
    status: {phase: Running}
- PASS: 8 + 7 GiB on that card
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: t4-1
      labels: {ack.node.gpu.schedule: cgpu, aliyun.accelerator/nvidia_name: Tesla-T4}
    status: {allocatable: {aliyun.com/gpu-mem: "15", aliyun.com/gpu-count: "1"}}
  pods:
  - apiVersion: v1
    kind: Pod
    metadata:
      name: a
      namespace: team-a
      annotations: {ALIYUN_COM_GPU_MEM_IDX: "0"}
    spec:
      nodeName: t4-1
      containers: [{name: main, image: "server:1", resources: {limits: {aliyun.com/gpu-mem: 8}}}]
    status: {phase: Running}
  - apiVersion: v1
    kind: Pod
    metadata:
      name: b
      namespace: team-a
      annotations: {ALIYUN_COM_GPU_MEM_IDX: "0"}
    spec:
      nodeName: t4-1
      containers: [{name: main, image: "server:1", resources: {limits: {aliyun.com/gpu-mem: 7}}}]
    status: {phase: Running}
"""


def check_cluster(view: ClusterView, context: Context) -> Iterator[ClusterFinding]:
    cards = {r.name: r.card_memory_gib for r in view.nodes if r.cgpu and r.card_memory_gib}
    for (node, device), entry in sorted(view.shared.items()):
        card = cards.get(node)
        if card and entry.memory_gib > card + 1e-9:
            yield ClusterFinding(
                ID, f"GPU {device} of node {node}: {entry.pods} pods hold "
                f"{entry.memory_gib:g} GiB of GPU memory, the card has {card:g} GiB",
                "", node, device, entry.pods, int(card), tuple(entry.sample),
                severity="error")
