"""Cluster-level facts no single admission can see (DESIGN.md §3.3).

- Shared GPUs: pods placed on one physical GPU by gpushare/cGPU (`ALIYUN_COM_GPU_MEM_IDX`,
  `scheduler.framework.gpushare.allocation`) or HAMi (`hami.io/vgpu-devices-allocated`),
  counted per node and device, against the lowest `shared.maxPodsPerGPU` of the policies that
  govern any of those pods.
- GPU pods Pending and unscheduled: the scheduler's own message plus, per node pool, why it
  cannot take the pod (policies.engine.explain).

Both keep bounded state: counters per GPU device and at most SAMPLE examples per group.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from policies.context import Context
from policies.engine import explain

SAMPLE = 5
PENDING_KEEP = 200

GPUSHARE_IDX = "ALIYUN_COM_GPU_MEM_IDX"
GPUSHARE_ALLOCATION = "scheduler.framework.gpushare.allocation"
HAMI_ALLOCATED = "hami.io/vgpu-devices-allocated"


def shared_devices(pod: Mapping[str, Any]) -> set[str]:
    """The physical GPUs (index or UUID) a sharing pod was placed on, from its annotations."""
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    found: set[str] = set()
    idx = annotations.get(GPUSHARE_IDX)
    if isinstance(idx, str):
        found.update(f"gpu{part.strip()}" for part in idx.split(",") if part.strip().isdigit())
    allocation = annotations.get(GPUSHARE_ALLOCATION)
    if isinstance(allocation, str):
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
class _Device:
    pods: int = 0
    sample: list[str] = field(default_factory=list)
    limit: int | None = None
    policy: str = ""


@dataclass
class PendingPod:
    namespace: str
    name: str
    scheduler: str  # the PodScheduled condition's message, "" when none
    pools: list[str]  # "pool X: reasons", one per pool

    def as_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name,
                "scheduler": self.scheduler, "pools": self.pools}


class ClusterChecks:
    def __init__(self, context: Context) -> None:
        self.context = context
        self._devices: dict[tuple[str, str], _Device] = {}
        self.pending: list[PendingPod] = []
        self.pending_total = 0

    def pod(self, pod: dict[str, Any], namespace: str, name: str, gpu: bool) -> None:
        status = pod.get("status") or {}
        phase = status.get("phase")
        if phase in ("Succeeded", "Failed"):
            return  # finished pods hold no GPU
        spec = pod.get("spec") or {}
        node = spec.get("nodeName")
        if node:
            self._count_shared(pod, str(node), namespace, name)
        elif gpu and phase == "Pending":  # a manifest without status is not a pending pod
            self.pending_total += 1
            if len(self.pending) < PENDING_KEEP:
                self.pending.append(self._why_pending(pod, namespace, name, status))

    def _count_shared(self, pod: dict[str, Any], node: str, namespace: str, name: str) -> None:
        devices = shared_devices(pod)
        if not devices:
            return
        limit, policy = self._limit(namespace)
        for device in devices:
            entry = self._devices.setdefault((node, device), _Device())
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

    def _why_pending(self, pod: dict[str, Any], namespace: str, name: str,
                     status: Mapping[str, Any]) -> PendingPod:
        message = ""
        for cond in status.get("conditions") or []:
            if isinstance(cond, dict) and cond.get("type") == "PodScheduled":
                message = str(cond.get("message") or cond.get("reason") or "")
        pools: list[str] = []
        try:
            for _path, verdicts in explain(pod, self.context, namespace=namespace):
                fitting = [v.pool for v in verdicts if v.fits]
                pools.extend(v.describe() for v in verdicts if not v.fits)
                if fitting:  # then the hardware is not the reason: capacity, quota, ...
                    pools.append(f"fits pool {', '.join(fitting)} once capacity is free")
        except Exception as exc:  # the report must go on; say what failed
            pools.append(f"cannot explain: {type(exc).__name__}: {exc}")
        return PendingPod(namespace, name, message, pools)

    def oversubscribed(self) -> Iterator[dict[str, Any]]:
        for (node, device), entry in sorted(self._devices.items()):
            if entry.limit is not None and entry.pods > entry.limit:
                yield {"node": node, "device": device, "pods": entry.pods,
                       "maxPodsPerGPU": entry.limit, "policy": entry.policy,
                       "sample": entry.sample}

    def shared_gpus(self) -> int:
        return len(self._devices)
