"""gpu-stack-misses-gpu-nodes: a DaemonSet of the GPU stack (judged by what it runs, as for
gpu-stack-not-critical) that cannot run on GPU nodes of the inventory: their taints are not
tolerated (`nvidia.com/gpu`, a dedicated pool's), its selectors pin an architecture the pool is
not (amd64 only, with arm64 GH200 nodes in the cluster), or its selectors match no GPU pool at
all. Without the device plugin a node advertises no GPU; without dcgm-exporter its metrics never
arrive. A selector that leaves some GPU pools out on purpose (gpushare's `gpushare=true`) is
fine while it matches one. The tolerations the DaemonSet controller adds itself
(not-ready, unreachable, pressure, unschedulable) count. Needs an inventory. Advice.

FAIL: dcgm-exporter with no tolerations, in a cluster whose GPU nodes are tainted
`nvidia.com/gpu:NoSchedule`
PASS: the same DaemonSet tolerating `nvidia.com/gpu`
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from policies.context import Context
from policies.decision import Finding
from policies.display import shown
from policies.gpunodes import ARCH_KEYS, DAEMON_TOLERATIONS, gpu_pools, is_gpu_stack, tolerations
from policies.inventory import Pool
from policies.model import GPUPolicy
from policies.selectors import node_affinity_matches, node_selector_matches, untolerated
from policies.view import PodView

ID = "gpu-stack-misses-gpu-nodes"
INTRINSIC = True
NATIVE = "It needs the GPU nodes' taints, labels and architectures (inventory)."
SEVERITY = "warning"
CATEGORY = "gpu-stack"


_NODES = """\
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-1
      labels: {nvidia.com/gpu.present: "true", nvidia.com/gpu.product: NVIDIA-L4}
    spec: {taints: [{key: nvidia.com/gpu, effect: NoSchedule}]}
    status: {allocatable: {nvidia.com/gpu: "1"}}
"""
_DAEMONSET = """\
  object:
    apiVersion: apps/v1
    kind: DaemonSet
    metadata: {{name: dcgm-exporter, namespace: gpu-operator}}
    spec:
      selector: {{matchLabels: {{app: dcgm}}}}
      template:
        metadata: {{labels: {{app: dcgm}}}}
        spec:
          priorityClassName: system-node-critical
          nodeSelector: {{nvidia.com/gpu.present: "true"}}
          tolerations: {tolerations}
          containers:
          - {{name: exporter, image: "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.1-ubuntu22.04"}}
"""
EXAMPLES = f"""
- FAIL: dcgm-exporter that tolerates nothing, on tainted GPU nodes
{_NODES}{_DAEMONSET.format(tolerations="[]")}
- PASS: the same DaemonSet tolerating the GPU taint
{_NODES}{_DAEMONSET.format(tolerations="[{key: nvidia.com/gpu, operator: Exists}]")}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    inventory = context.inventory
    if view.kind != "DaemonSet" or inventory is None or not is_gpu_stack(view):
        return
    pools = gpu_pools(inventory)
    if not pools:
        return
    spec = view.spec
    tols = [*tolerations(spec), *DAEMON_TOLERATIONS]
    selected, arch, tainted = 0, [], []
    for pool in pools:
        if not _selects(spec, pool):
            if _selects(_without_arch(spec), pool):
                arch.append(f"pool {pool.name} ({_arch(pool)})")
            continue
        selected += 1
        blocked = untolerated(tols, pool.taints)
        if blocked:
            taints = ", ".join(f"{t.key}{'=' + t.value if t.value else ''}:{t.effect}"
                               for t in blocked)
            tainted.append(f"pool {pool.name} (taint {taints})")
    if tainted:
        yield Finding(ID, f"a GPU-stack DaemonSet that cannot run on GPU nodes: {_some(tainted)} "
                      "not tolerated; without it there the nodes' GPUs are not served or "
                      "watched", view.at("tolerations"), level="warning")
    if arch:
        yield Finding(ID, f"a GPU-stack DaemonSet pinned to another architecture than GPU "
                      f"nodes of {_some(arch)}", view.at("nodeSelector"), level="warning")
    elif not selected:
        yield Finding(ID, f"a GPU-stack DaemonSet whose selectors match none of the "
                      f"{len(pools)} GPU pool{'s' * (len(pools) != 1)} of the inventory",
                      view.at("nodeSelector"), level="warning")


def _selects(spec: Mapping[str, Any], pool: Pool) -> bool:
    selector = spec.get("nodeSelector")
    return node_selector_matches(selector if isinstance(selector, dict) else None, pool.labels) \
        and node_affinity_matches(spec.get("affinity"), pool.labels, pool.node_names[0])


def _without_arch(spec: Mapping[str, Any]) -> dict[str, Any]:
    """The spec with its architecture constraints left out (nodeSelector keys, affinity
    requirements on kubernetes.io/arch)."""
    out = dict(spec)
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict):
        out["nodeSelector"] = {k: v for k, v in selector.items() if k not in ARCH_KEYS}
    affinity = spec.get("affinity")
    node = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution") \
        if isinstance(node, dict) else None
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    if isinstance(terms, list):
        kept = [{**t, "matchExpressions": [e for e in t.get("matchExpressions") or []
                                           if not (isinstance(e, dict)
                                                   and e.get("key") in ARCH_KEYS)]}
                if isinstance(t, dict) and isinstance(t.get("matchExpressions") or [], list)
                else t for t in terms]
        out["affinity"] = {**affinity, "nodeAffinity": {  # type: ignore[dict-item]
            **node, "requiredDuringSchedulingIgnoredDuringExecution": {  # type: ignore[dict-item]
                **required, "nodeSelectorTerms": kept}}}  # type: ignore[dict-item]
    return out


def _arch(pool: Pool) -> str:
    arch = next((pool.labels[k] for k in ARCH_KEYS if k in pool.labels), "architecture unknown")
    return arch if len(arch) <= 40 else shown(arch)


def _some(items: list[str]) -> str:
    shown = ", ".join(items[:3])
    return shown + (f" and {len(items) - 3} more" if len(items) > 3 else "")
