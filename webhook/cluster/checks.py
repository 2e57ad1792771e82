"""Cluster-level facts no single admission can see (DESIGN.md §3.3): running pods go to the
core's ClusterView (its cluster-scope rules judge shared GPUs); GPU pods Pending and
unscheduled get the scheduler's own message plus, per node pool, why it cannot take the pod
(policies.engine.explain). At most PENDING_KEEP pending pods are kept."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from policies.cluster import ClusterFinding, ClusterView
from policies.context import Context
from policies.engine import explain, review_cluster
from policies.scheduling.occupancy import Occupancy

if TYPE_CHECKING:
    from policies.pools.thresholds import Thresholds
    from policies.pools.view import PoolView

PENDING_KEEP = 200


@dataclass
class PendingPod:
    namespace: str
    name: str
    scheduler: str  # the PodScheduled condition's message, "" when none
    pools: list[str]  # "pool X: reasons", one per pool
    waited: float | None = None  # seconds since its creation; None when unknown

    def as_dict(self) -> dict[str, Any]:
        return {"namespace": self.namespace, "name": self.name,
                "scheduler": self.scheduler, "pools": self.pools,
                "waitSeconds": round(self.waited) if self.waited is not None else None}


class ClusterChecks:
    """`nodes`: the cluster's Node objects, for the node facts; `pools`: the pool view
    (`audit --pools`), fed every pod too."""

    def __init__(self, context: Context, nodes: Iterable[Mapping[str, Any]] = (),
                 thresholds: Thresholds | None = None, pools: PoolView | None = None,
                 now: float | None = None) -> None:
        self.context = context
        self.now = time.time() if now is None else now
        self.view = ClusterView(context, nodes, thresholds)
        self.pools = pools
        # what the pods bound to each node hold (sums per node, not pods): the Pending pods
        # are explained against it once every pod has been read
        self.occupancy = Occupancy()
        if pools is not None:  # one count of what nodes hold, for both
            pools.count_with(self.occupancy)
        self._waiting: list[tuple[dict[str, Any], str, str, Mapping[str, Any]]] = []
        self._pending: list[PendingPod] | None = None
        self.pending_total = 0

    def hold(self, pod: Mapping[str, Any]) -> None:
        """A pod that holds what it requests on its node (any namespace, any shard)."""
        self.occupancy.add_pod(pod)

    def pod(self, pod: dict[str, Any], namespace: str, name: str, gpu: bool,
            judged: bool = True) -> None:
        """`judged`: a policy governs the pod, so `gpu` is the engine's answer (else the
        engine did not look, and the pool view reads the pod's demand itself)."""
        self.view.add_pod(pod, namespace, name)
        self.occupancy.add_pod(pod)
        if self.pools is not None:
            self.pools.add_pod(pod, namespace, name, gpu if judged else None)
        status = pod.get("status")
        status = status if isinstance(status, dict) else {}
        spec = pod.get("spec")
        placed = isinstance(spec, dict) and bool(spec.get("nodeName"))
        # a manifest without status is not a pending pod
        if gpu and not placed and status.get("phase") == "Pending":
            self.pending_total += 1
            if len(self._waiting) < PENDING_KEEP:
                self._waiting.append((pod, namespace, name, status))

    @property
    def pending(self) -> list[PendingPod]:
        """The Pending GPU pods kept, each explained against what the nodes hold now."""
        if self._pending is None:
            context = self.context
            if context.inventory is not None and self.occupancy.pods:
                context = replace(context, inventory=replace(context.inventory,
                                                             occupancy=self.occupancy))
            self._pending = [self._why_pending(pod, namespace, name, status, context)
                             for pod, namespace, name, status in self._waiting]
            self._waiting = []
        return self._pending

    def _why_pending(self, pod: dict[str, Any], namespace: str, name: str,
                     status: Mapping[str, Any], context: Context) -> PendingPod:
        message = ""
        for cond in status.get("conditions") or []:
            if isinstance(cond, dict) and cond.get("type") == "PodScheduled":
                message = str(cond.get("message") or cond.get("reason") or "")
        pools: list[str] = []
        try:
            for _path, verdicts in explain(pod, context, namespace=namespace):
                fitting = [v for v in verdicts if v.fits]
                pools.extend(v.pending() for v in verdicts if not v.fits)
                # then the hardware is not the reason: what the nodes hold, quota, ...
                pools.extend(f"{v.label}: {v.now}" for v in fitting if v.now)
                plain = [v.pool for v in fitting if not v.now]
                if plain:
                    pools.append(f"fits pool {', '.join(plain)} once capacity is free")
        except Exception as exc:  # the report must go on; say what failed
            pools.append(f"cannot explain: {type(exc).__name__}: {exc}")
        from policies.pools.view import timestamp  # the pool view loads only when asked for

        meta = pod.get("metadata")
        created = timestamp(meta.get("creationTimestamp")) if isinstance(meta, dict) else None
        return PendingPod(namespace, name, message, pools,
                          max(0.0, self.now - created) if created is not None else None)

    def findings(self) -> list[ClusterFinding]:
        return review_cluster(self.view, self.context)

    def shared_gpus(self) -> int:
        return len(self.view.shared)
