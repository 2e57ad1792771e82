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
NATIVE = "It counts the running pods that share a node's GPU (the audit's)."
SCOPE = "cluster"


def check_cluster(view: ClusterView, context: Context) -> Iterator[ClusterFinding]:
    for (node, device), entry in sorted(view.shared.items()):
        if entry.limit is not None and entry.pods > entry.limit:
            yield ClusterFinding(
                ID, f"{entry.pods} pods share GPU {device} on node {node}, over "
                f"maxPodsPerGPU {entry.limit}", entry.policy, node, device, entry.pods,
                entry.limit, tuple(entry.sample))
