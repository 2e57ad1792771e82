"""gpu-stack-misses-gpu-nodes: a DaemonSet of the GPU stack (the device plugin, GPU Feature
Discovery, dcgm-exporter, HAMi, a DRA kubelet plugin; judged by what it runs, as for
gpu-stack-not-critical) that cannot run on GPU nodes of the inventory: their taints are not
tolerated (`nvidia.com/gpu`, a dedicated pool's), its selectors pin an architecture the pool is
not (amd64 only, with arm64 GH200 nodes in the cluster), or its selectors match no GPU pool at
all. Without the device plugin a node advertises no GPU; without dcgm-exporter its metrics never
arrive (operator-guide §1 step 5: check that DCGM Exporter's metrics really arrive, which means
its DaemonSet tolerates the pool's taints). The message counts the GPU nodes it runs on ("runs
on 6 of 9 GPU nodes; untolerated taints: nvidia.com/gpu=present:NoSchedule").

A selector is taken as meant: one that leaves some GPU pools out while it matches one
(gpushare's `gpushare=true`, a device plugin per labelled pool) is fine, and the nodes it leaves
out are counted, not reported; what the rule reports is a GPU node the selector asks for and a
taint or the architecture keeps it off. The tolerations the DaemonSet controller adds itself
(not-ready, unreachable, pressure, unschedulable) count. Needs an inventory (`lint`/`review`
with `--inventory`, the webhook's inventory, `audit`, which reads the cluster's nodes). Advice.

FAIL: dcgm-exporter with no tolerations, in a cluster whose GPU nodes are tainted
`nvidia.com/gpu:NoSchedule`
PASS: the same DaemonSet tolerating `nvidia.com/gpu`
PASS: gpushare's device plugin selecting `gpushare=true`, one of two GPU pools, and tolerating
the GPU taint
"""

from __future__ import annotations

from collections import Counter
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


_NODE = """\
  - apiVersion: v1
    kind: Node
    metadata:
      name: {name}
      labels: {{nvidia.com/gpu.present: "true", nvidia.com/gpu.product: {product}{extra}}}
    spec: {{taints: [{{key: nvidia.com/gpu, effect: NoSchedule}}]}}
    status: {{allocatable: {{nvidia.com/gpu: "1"}}}}
"""
_NODES = "  nodes:\n" + _NODE.format(name="gpu-1", product="NVIDIA-L4", extra="")
_SHARED_NODES = _NODES + _NODE.format(name="t4-1", product="Tesla-T4", extra=", gpushare: \"true\"")
_DAEMONSET = """\
  object:
    apiVersion: apps/v1
    kind: DaemonSet
    metadata: {{name: {name}, namespace: gpu-operator}}
    spec:
      selector: {{matchLabels: {{app: {name}}}}}
      template:
        metadata: {{labels: {{app: {name}}}}}
        spec:
          priorityClassName: system-node-critical
          nodeSelector: {{{selector}}}
          tolerations: {tolerations}
          containers:
          - {{name: main, image: "{image}"}}
"""
_DCGM = "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.1-ubuntu22.04"
_GPUSHARE = "registry.cn-hangzhou.aliyuncs.com/acs/k8s-gpushare-plugin:v2-1.11-aff8a23"
_TOLERATES = "[{key: nvidia.com/gpu, operator: Exists}]"
EXAMPLES = f"""
- FAIL: dcgm-exporter that tolerates nothing, on tainted GPU nodes
{_NODES}{_DAEMONSET.format(name="dcgm-exporter", selector='nvidia.com/gpu.present: "true"',
                           tolerations="[]", image=_DCGM)}
- PASS: the same DaemonSet tolerating the GPU taint
{_NODES}{_DAEMONSET.format(name="dcgm-exporter", selector='nvidia.com/gpu.present: "true"',
                           tolerations=_TOLERATES, image=_DCGM)}
- PASS: gpushare's device plugin, on the gpushare=true pool only
{_SHARED_NODES}{_DAEMONSET.format(name="gpushare-device-plugin", selector='gpushare: "true"',
                                  tolerations=_TOLERATES, image=_GPUSHARE)}
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
    cover = _Coverage()
    selected, arch, tainted = 0, [], []
    missed: Counter[str] = Counter()
    for pool in pools:
        if not _selects(spec, pool):
            if _selects(_without_arch(spec), pool):
                arch.append(f"pool {pool.name} ({_arch(pool)})")
                cover.add(pool, "missed")
            else:
                cover.add(pool, "left out")
            continue
        selected += 1
        blocked = untolerated(tols, pool.taints)
        if blocked:
            names = [f"{t.key}{'=' + t.value if t.value else ''}:{t.effect}" for t in blocked]
            missed.update(names)
            tainted.append(f"pool {pool.name}")
            cover.add(pool, "missed")
        else:
            cover.add(pool, "runs")
    if tainted:
        taints = _some(list(missed))
        yield Finding(ID, f"a GPU-stack DaemonSet that {cover}; untolerated taints: {taints} "
                      f"(on {_some(tainted)}): without it there the nodes' GPUs are not served "
                      "or watched", view.at("tolerations"), level="warning")
    if arch:
        yield Finding(ID, f"a GPU-stack DaemonSet pinned to another architecture than GPU "
                      f"nodes of {_some(arch)}: it {cover}", view.at("nodeSelector"),
                      level="warning")
    elif not selected:
        yield Finding(ID, f"a GPU-stack DaemonSet whose selectors match none of the "
                      f"{len(pools)} GPU pool{'s' * (len(pools) != 1)} of the inventory: it "
                      f"{cover}", view.at("nodeSelector"), level="warning")


class _Coverage:
    """How many GPU nodes the DaemonSet runs on, misses, and leaves out by its selectors (the
    inventory's nodes; node templates are not among gpu_pools)."""

    def __init__(self) -> None:
        self.nodes: Counter[str] = Counter()

    def add(self, pool: Pool, how: str) -> None:
        self.nodes[how] += len(pool.node_names)

    def __str__(self) -> str:
        total = sum(self.nodes.values())
        out = f"runs on {self.nodes['runs']} of {total} GPU node{'s' * (total != 1)}"
        if self.nodes["left out"]:
            out += f" (its selectors leave {self.nodes['left out']} out)"
        return out


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
