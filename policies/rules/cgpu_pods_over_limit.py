"""cgpu-pods-over-limit: more pods placed on one GPU of an Alibaba cGPU / gpushare node than
cGPU can start: at most 20 per card, policy or not; the rest do not start (operator-guide §2
"Shared GPUs"; settable as `spec.cgpuMaxPodsPerGPU` in the thresholds file). A fact: an error.
Cluster scope: `audit` (placements from `ALIYUN_COM_GPU_MEM_IDX` and the allocation
annotations).

FAIL: 21 running pods whose `ALIYUN_COM_GPU_MEM_IDX` is 0 on cGPU node t4-1
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


def check_cluster(view: ClusterView, context: Context) -> Iterator[ClusterFinding]:
    cgpu = {r.name for r in view.nodes if r.cgpu}
    limit = view.thresholds.cgpu_max_pods_per_gpu
    for (node, device), entry in sorted(view.shared.items()):
        if node in cgpu and entry.pods > limit:
            yield ClusterFinding(
                ID, f"{entry.pods} pods on GPU {device} of cGPU node {node}: cGPU starts at "
                f"most {limit} per GPU, the rest do not start", "", node, device, entry.pods,
                limit, tuple(entry.sample), severity="error")
