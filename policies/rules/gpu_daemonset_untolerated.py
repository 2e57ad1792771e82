"""gpu-daemonset-untolerated: a DaemonSet of the GPU stack (dcgm-exporter, a device plugin,
GPU Feature Discovery) that cannot run on some GPU nodes because it tolerates none of their
taints (or its nodeSelector excludes them): on those nodes nothing is monitored, advertised or
labelled (operator-guide §1 step 5: "DCGM Exporter's DaemonSet tolerates the pool's taints").
The tolerations the DaemonSet controller adds to every daemon pod (not-ready, unreachable,
pressure, unschedulable) count. A warning. Cluster scope: `audit`.

FAIL: DaemonSet monitoring/dcgm-exporter without tolerations, and GPU nodes tainted
`nvidia.com/gpu=present:NoSchedule`
PASS: the DaemonSet tolerates `{key: nvidia.com/gpu, operator: Exists}`
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from policies.cluster import ClusterFinding, ClusterView
from policies.context import Context
from policies.gpunodes import DAEMON_TOLERATIONS
from policies.rules._nodes import gpu_nodes
from policies.selectors import node_selector_matches, untolerated

ID = "gpu-daemonset-untolerated"
INTRINSIC = False
NATIVE = "It compares a DaemonSet's tolerations with the GPU nodes' taints (inventory)."
SCOPE = "cluster"

EXAMPLES = """
- FAIL: dcgm-exporter tolerates nothing, the GPU nodes are tainted
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-1
      labels: {nvidia.com/gpu.count: "8"}
    spec: {taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]}
    status: {allocatable: {nvidia.com/gpu: "8"}}
  pods:
  - apiVersion: apps/v1
    kind: DaemonSet
    metadata: {name: dcgm-exporter, namespace: monitoring}
    spec:
      template:
        spec:
          containers:
          - {name: exporter, image: "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.0-ubuntu22.04"}
- PASS: dcgm-exporter tolerates the GPU taint
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-1
      labels: {nvidia.com/gpu.count: "8"}
    spec: {taints: [{key: nvidia.com/gpu, value: present, effect: NoSchedule}]}
    status: {allocatable: {nvidia.com/gpu: "8"}}
  pods:
  - apiVersion: apps/v1
    kind: DaemonSet
    metadata: {name: dcgm-exporter, namespace: monitoring}
    spec:
      template:
        spec:
          tolerations: [{key: nvidia.com/gpu, operator: Exists}]
          containers:
          - {name: exporter, image: "nvcr.io/nvidia/k8s/dcgm-exporter:3.3.5-3.4.0-ubuntu22.04"}
"""


def check_cluster(view: ClusterView, context: Context) -> Iterator[ClusterFinding]:
    nodes = gpu_nodes(view.nodes)
    if not nodes:
        return
    for ds in view.daemonsets:
        tolerations = (*ds.tolerations, *DAEMON_TOLERATIONS)
        missed: Counter[str] = Counter()
        unreached = []
        for r in nodes:
            blocking = untolerated(tolerations, r.taints)
            if blocking or not node_selector_matches(ds.node_selector, r.labels):
                unreached.append(r.name)
                missed.update(f"{t.key}={t.value}:{t.effect}" if t.value
                              else f"{t.key}:{t.effect}" for t in blocking)
        if unreached:
            why = (f"untolerated taints: {', '.join(t for t, _ in missed.most_common(3))}"
                   if missed else "its nodeSelector excludes them")
            yield ClusterFinding(
                ID, f"DaemonSet {ds.namespace}/{ds.name} runs on {len(nodes) - len(unreached)} "
                f"of {len(nodes)} GPU nodes ({why}): nothing of it on "
                f"{', '.join(unreached[:3])}{', ...' if len(unreached) > 3 else ''}", "",
                node=unreached[0], pods=len(nodes) - len(unreached), limit=len(nodes))
