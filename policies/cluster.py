"""What only the whole cluster shows: pods that the GPU-sharing schedulers placed together on
one physical GPU (gpushare/cGPU `ALIYUN_COM_GPU_MEM_IDX` or
`scheduler.framework.gpushare.allocation`, HAMi `hami.io/vgpu-devices-allocated`).

The audit feeds every running pod to a ClusterView; cluster-scope rules
(policies/rules, `SCOPE = "cluster"`) judge it at the end. State stays bounded: one counter
per (node, GPU) and a few example pods each.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from policies.context import Context

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


class ClusterView:
    def __init__(self, context: Context) -> None:
        self.context = context
        self.shared: dict[tuple[str, str], SharedGPU] = {}

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
        for device in devices:
            entry = self.shared.setdefault((node, device), SharedGPU(node, device))
            entry.pods += 1
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
