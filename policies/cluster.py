"""What only the whole cluster shows: pods that the GPU-sharing schedulers placed together on
one physical GPU (gpushare/cGPU `ALIYUN_COM_GPU_MEM_IDX` or
`scheduler.framework.gpushare.allocation`, HAMi `hami.io/vgpu-devices-allocated`).

The audit feeds every running pod to a ClusterView; cluster-scope rules
(policies/rules, `SCOPE = "cluster"`) judge it at the end. State stays bounded: one counter
per (node, GPU) and a few example pods each.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, NamedTuple

from policies.context import Context

if TYPE_CHECKING:
    from policies.pools.nodes import NodeRecord
    from policies.pools.thresholds import Thresholds

SAMPLE = 5
GPUSHARE_IDX = "ALIYUN_COM_GPU_MEM_IDX"
GPUSHARE_ALLOCATION = "scheduler.framework.gpushare.allocation"
HAMI_ALLOCATED = "hami.io/vgpu-devices-allocated"


def shared_devices(pod: Mapping[str, Any]) -> set[str]:
    """The physical GPUs (index or UUID) a sharing pod was placed on, from its annotations;
    malformed annotations give nothing."""
    meta = pod.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, dict) else None
    if not isinstance(annotations, dict):
        return set()
    found: set[str] = set()
    idx = annotations.get(GPUSHARE_IDX)
    if isinstance(idx, str):
        found.update(f"gpu{part.strip()}" for part in idx.split(",")
                     if part.strip().isascii() and part.strip().isdigit())
    allocation = annotations.get(GPUSHARE_ALLOCATION)
    if isinstance(allocation, str) and len(allocation) < 65536:
        try:
            data = json.loads(allocation)
        except ValueError:
            data = None
        if isinstance(data, dict):  # {"<container index>": {"<gpu index>": amount}}
            for per_container in data.values():
                if isinstance(per_container, dict):
                    found.update(f"gpu{k}" for k in per_container)
    hami = annotations.get(HAMI_ALLOCATED)
    if isinstance(hami, str):  # "uuid,type,mem,cores:uuid,...;" per container
        for container in hami.split(";"):
            for device in container.split(":"):
                uuid = device.split(",")[0].strip()
                if uuid:
                    found.add(uuid)
    return found


@dataclass
class SharedGPU:
    """Pods placed on one physical GPU, and the lowest maxPodsPerGPU among their policies."""

    node: str
    device: str
    pods: int = 0
    sample: list[str] = field(default_factory=list)
    limit: int | None = None
    policy: str = ""
    memory_gib: float = 0.0  # the GPU-memory shares (aliyun.com/gpu-mem) placed on it


class ClusterView:
    """`nodes`: the cluster's Node objects (for the node facts), `thresholds`: their
    minimums (policies/pools/thresholds.py; the defaults when None)."""

    def __init__(self, context: Context, nodes: Iterable[Mapping[str, Any]] = (),
                 thresholds: Thresholds | None = None) -> None:
        self.context = context
        self.shared: dict[tuple[str, str], SharedGPU] = {}
        self._node_objects = nodes
        self._thresholds = thresholds

    @cached_property
    def nodes(self) -> tuple[NodeRecord, ...]:
        from policies.pools.nodes import read_node
        return tuple(read_node(n) for n in self._node_objects if isinstance(n, Mapping))

    @property
    def thresholds(self) -> Thresholds:
        if self._thresholds is None:
            from policies.pools.thresholds import DEFAULT
            return DEFAULT
        return self._thresholds

    def add_pod(self, pod: Mapping[str, Any], namespace: str, name: str) -> None:
        """A pod as the cluster runs it: finished pods and unplaced pods hold no GPU."""
        status = pod.get("status")
        if isinstance(status, dict) and status.get("phase") in ("Succeeded", "Failed"):
            return
        spec = pod.get("spec")
        node = spec.get("nodeName") if isinstance(spec, dict) else None
        if not isinstance(node, str) or not node:
            return
        devices = shared_devices(pod)
        if not devices:
            return
        limit, policy = self._limit(namespace)
        memory = _share_memory(pod) / len(devices)
        for device in devices:
            entry = self.shared.setdefault((node, device), SharedGPU(node, device))
            entry.pods += 1
            entry.memory_gib += memory
            if len(entry.sample) < SAMPLE:
                entry.sample.append(f"{namespace}/{name}")
            if limit is not None and (entry.limit is None or limit < entry.limit):
                entry.limit, entry.policy = limit, policy

    def _limit(self, namespace: str) -> tuple[int | None, str]:
        best: tuple[int | None, str] = (None, "")
        for policy in self.context.governing(namespace):
            shared = policy.spec.rules.shared
            limit = shared.max_pods_per_gpu if shared is not None else None
            if limit is not None and (best[0] is None or limit < best[0]):
                best = (limit, policy.name)
        return best


def _share_memory(pod: Mapping[str, Any]) -> float:
    """GiB of GPU memory a gpushare/cGPU pod asks (aliyun.com/gpu-mem), as the engine reads it."""
    from policies.resources import demand
    spec = pod.get("spec")
    if not isinstance(spec, dict):
        return 0.0
    return float(demand(spec, ("spec",)).totals.get("aliyun.com/gpu-mem", 0))


class ClusterFinding(NamedTuple):
    """What a cluster-scope rule yields: a breach on a node's device (shared GPUs), or a
    hazard of the cluster's GPU stacks (`node` names the first node concerned, if any)."""

    rule: str
    message: str
    policy: str
    node: str = ""
    device: str = ""
    pods: int = 0
    limit: int = 0
    sample: tuple[str, ...] = ()
    severity: str = "warning"  # "error" for a fact: what the scheduler will do regardless
