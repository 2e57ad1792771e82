"""The pool view: per GPU node pool, allocation and fragmentation, Pending GPU pods and how
long they wait (with the first scheduler filter each pool fails them on), failing GPU pods by
cause, version spread and isolation (DESIGN §3.3; operator-guide §1 "the four indicators").

Pods are fed one at a time (`add_pod`) as the audit streams them; what is kept is bounded:
counters per node and pool, at most WAITS waiting times per pool and PENDING_KEEP Pending
pods in detail. `report()` is called once, at the end, with optional utilisation.

A pool is the cluster's own node pool (nodes.NODE_POOL_LABELS), so a drifted node stays in
it; else the GPU product; else the engine's pool of the node (policies/inventory.py).

What a node's GPUs are allocated to is the scheduler's own count, policies/scheduling's
Occupancy (the effective requests of the pods bound to it, not finished): in the audit, the one
the Pending pods are explained against.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from policies.cluster import shared_devices
from policies.context import Context
from policies.engine import explain
from policies.hardware import NODE_AFFINITY
from policies.pools import advice as advising
from policies.pools.failures import CAUSES, cause
from policies.pools.nodes import NodeRecord, bounded, read_node
from policies.pools.thresholds import DEFAULT, Thresholds
from policies.pools.utilization import Utilization, for_pool, quantile
from policies.resources import classify, demand
from policies.scheduling.occupancy import Occupancy
from policies.scheduling.request import pod_requests

WAITS = 10_000  # waiting times kept per pool for the median (the max is kept exactly)
PENDING_KEEP = 200
BLOCKERS = 20  # distinct first-failing filters counted per pool; more go under "other"
EXPLAINED = 1024  # distinct pod shapes whose explanation is remembered
WAIT_BUCKETS = ((60, "<1m"), (600, "<10m"), (3600, "<1h"), (6 * 3600, "<6h"),
                (86400, "<1d"), (math.inf, ">=1d"))
FITS = "fits (waits for capacity)"


def _devices(totals: Mapping[str, Any]) -> int:
    """GPU devices (whole GPUs and MIG instances) among requests summed by resource name."""
    held = 0
    for name, amount in totals.items():
        resource = classify(name)
        if resource is not None and resource.family in ("whole", "mig") and amount > 0:
            held += math.ceil(amount)
    return held


def timestamp(text: Any) -> float | None:
    if not isinstance(text, str) or len(text) > 40:
        return None
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


class _Pool:
    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: list[NodeRecord] = []
        self.pending = 0
        self.waits: list[float] = []
        self.wait_max = 0.0
        self.wait_buckets: Counter[str] = Counter()
        self.smallest_request = 0  # the smallest GPU count a pod waiting for the pool asks
        self.blocked: Counter[str] = Counter()
        self.failures: Counter[str] = Counter()
        self.gpu_pods = 0
        self.latency_critical = False

    def wait(self, seconds: float | None) -> None:
        if seconds is None:
            return
        seconds = max(0.0, seconds)
        self.wait_max = max(self.wait_max, seconds)
        self.wait_buckets[next(label for limit, label in WAIT_BUCKETS if seconds < limit)] += 1
        if len(self.waits) < WAITS:
            self.waits.append(seconds)
        else:  # a spread sample of the rest, deterministic
            self.waits[self.pending % WAITS] = seconds


class PoolView:
    def __init__(self, nodes: Iterable[Mapping[str, Any]], context: Context, now: float,
                 thresholds: Thresholds = DEFAULT) -> None:
        self.context = context
        self.now = now
        self.thresholds = thresholds
        self.pools: dict[str, _Pool] = {}
        self.records: dict[str, NodeRecord] = {}
        self.occupancy = Occupancy()
        self._counts = True  # add_pod sums what bound pods hold, until count_with()
        self.held: dict[str, int] = {}  # node -> GPU devices its bound pods hold (report())
        self.cards: dict[str, set[str]] = {}  # cGPU node -> cards holding a share
        self.pending: list[dict[str, Any]] = []
        self.pending_total = 0
        self._explained: dict[str, list[tuple[str, str]]] = {}
        engine_pool = {}
        inventory = context.inventory
        if inventory is not None:
            for p in (*inventory.pools, *inventory.cordoned):
                for n in p.node_names:
                    engine_pool[n] = p.name
        self._engine_to_pool: dict[str, str] = {}
        label = thresholds.advice.latency_critical_label
        for obj in nodes:
            if not isinstance(obj, Mapping):
                continue
            record = read_node(obj)
            if not record.gpu_node or not record.name or record.name in self.records:
                continue
            name = record.pool or record.product or engine_pool.get(record.name) or record.name
            self.records[record.name] = record
            pool = self.pools.setdefault(name, _Pool(name))
            pool.nodes.append(record)
            pool.latency_critical |= record.labels.get(label) == "true"
            if record.name in engine_pool:
                self._engine_to_pool.setdefault(engine_pool[record.name], name)
        self.pool_of = {r.name: name for name, p in self.pools.items() for r in p.nodes}

    # -- feeding --------------------------------------------------------------------------

    def count_with(self, occupancy: Occupancy) -> None:
        """Read what nodes hold from `occupancy`, which whoever feeds this view fills with
        every pod too (the audit's ClusterChecks): each pod is summed once."""
        self.occupancy = occupancy
        self._counts = False

    def add_pod(self, pod: Mapping[str, Any], namespace: str, name: str,
                gpu: bool | None) -> None:
        """One pod as the cluster has it; `gpu`: whether the engine found it asks for a GPU,
        None when it did not look (no policy governs the pod): its demand is read here."""
        if self._counts:
            self.occupancy.add_pod(pod)
        if gpu is False:
            return
        spec = pod.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        if gpu is None and not demand(spec, ("spec",)).gpu:
            return
        status = pod.get("status")
        status = status if isinstance(status, dict) else {}
        phase = status.get("phase")
        raw = spec.get("nodeName")
        node = raw if isinstance(raw, str) else ""
        pool = self.pools.get(self.pool_of.get(node, "")) if node else None
        if pool is not None:
            pool.gpu_pods += 1
            found = cause(pod)
            if found is not None:
                pool.failures[found] += 1
            if phase not in ("Succeeded", "Failed"):
                devices = shared_devices(pod)
                if devices and self.records[node].cgpu:
                    cards = self.cards.setdefault(node, set())
                    if len(cards) < 1024:
                        cards.update(devices)
                classes = self.thresholds.advice.latency_critical_priority_classes
                if classes and spec.get("priorityClassName") in classes:
                    pool.latency_critical = True
        elif phase == "Pending" and not node:
            self._pending(pod, spec, namespace, name, _devices(pod_requests(spec)))

    def _pending(self, pod: Mapping[str, Any], spec: Mapping[str, Any], namespace: str,
                 name: str, gpus: int) -> None:
        self.pending_total += 1
        meta = pod.get("metadata")
        created = timestamp(meta.get("creationTimestamp")) if isinstance(meta, dict) else None
        waited = self.now - created if created is not None else None
        first = self._first_failing(pod, spec, namespace)
        for pool_name, words in first:
            pool = self.pools[pool_name]
            if words == FITS:
                pool.pending += 1
                pool.wait(waited)
                if gpus and (not pool.smallest_request or gpus < pool.smallest_request):
                    pool.smallest_request = gpus
            elif len(pool.blocked) < BLOCKERS or words in pool.blocked:
                pool.blocked[words] += 1
            else:
                pool.blocked["other"] += 1
        if len(self.pending) < PENDING_KEEP:
            self.pending.append({
                "namespace": bounded(namespace, 253), "name": bounded(name, 253),
                "waitSeconds": round(waited) if waited is not None else None,
                "gpus": gpus, "pools": dict(first)})

    def _first_failing(self, pod: Mapping[str, Any], spec: Mapping[str, Any],
                       namespace: str) -> list[tuple[str, str]]:
        """Per GPU pool, the first of kube-scheduler's filters it fails the pod on (the
        engine's per-pool hardware explanation, what `gpupolicy explain` prints), or FITS."""
        key = _shape(pod, spec, namespace)
        known = self._explained.get(key)
        if known is not None:
            return known
        best: dict[str, str] = {}
        try:
            explained = explain(dict(pod), self.context, namespace=namespace)
        except Exception as exc:  # one odd pod must not end the report: say what failed
            explained = []
            best = {p: f"cannot explain: {type(exc).__name__}" for p in self.pools}
        for _path, verdicts in explained[:1]:
            for v in verdicts:
                pool = self._engine_to_pool.get(v.pool)
                if pool is None or not v.relevant:
                    continue
                words = FITS if v.fits else bounded(v.scheduler or v.reasons[0], 200)
                if best.get(pool) != FITS:
                    best[pool] = words
        found = sorted(best.items())
        if len(self._explained) >= EXPLAINED:
            self._explained.clear()
        self._explained[key] = found
        return found

    # -- reading --------------------------------------------------------------------------

    def free(self, record: NodeRecord) -> int:
        if record.cgpu and record.ack_cards:
            return max(0, record.ack_cards - len(self.cards.get(record.name, ())))
        return max(0, record.gpus - self.held.get(record.name, 0))

    def allocated(self, record: NodeRecord) -> int:
        if record.cgpu and record.ack_cards:
            return min(record.ack_cards, len(self.cards.get(record.name, ())))
        return min(record.gpus, self.held.get(record.name, 0))

    def report(self, utilization: Utilization | None = None) -> dict[str, Any]:
        self.held = {node: _devices(self.occupancy.of(node)) for node in self.records}
        pools = [self._pool_report(p, utilization) for p in
                 sorted(self.pools.values(), key=lambda p: p.name)]
        for record in self.pending:
            record["excludedWithFree"] = self._excluded_with_free(record)
        out: dict[str, Any] = {"pools": pools,
                               "pending": {"total": self.pending_total, "pods": self.pending}}
        if utilization is not None:
            out["utilizationSource"] = {
                "windowSeconds": utilization.window,
                "available": not utilization.unavailable,
                **({"reason": utilization.unavailable} if utilization.unavailable else {}),
                **({"partial": utilization.partial} if utilization.partial else {})}
        return out

    def _excluded_with_free(self, record: Mapping[str, Any]) -> list[str]:
        """Pools the pod's selector or affinity keeps it from that have the free GPUs it
        asks for, of a model it would take elsewhere."""
        first: Mapping[str, str] = record["pools"]
        wanted = {self.pools[p].nodes[0].product for p, w in first.items() if w == FITS}
        need = max(1, record["gpus"])
        return [p for p, w in first.items() if w == NODE_AFFINITY
                and self.pools[p].nodes[0].product in wanted
                and any(self.free(n) >= need for n in self.pools[p].nodes)]

    def _pool_report(self, pool: _Pool, utilization: Utilization | None) -> dict[str, Any]:
        nodes = pool.nodes
        allocatable = sum(n.ack_cards if n.cgpu and n.ack_cards else n.gpus for n in nodes)
        allocated = sum(self.allocated(n) for n in nodes)
        free = sum(self.free(n) for n in nodes)
        # free GPUs no waiting pod can use where they are: fewer on a node than the smallest
        # request of the pods waiting for this pool (none waiting: nothing is stranded)
        fragmented = sum(f for n in nodes if 0 < (f := self.free(n)) < pool.smallest_request)
        waits = sorted(pool.waits)
        taints = Counter(t for n in nodes for t in n.taints if t.effect in
                         ("NoSchedule", "NoExecute"))
        report: dict[str, Any] = {
            "name": pool.name,
            "product": nodes[0].product,
            "nodes": [n.name for n in nodes],
            "gpus": {"allocatable": allocatable, "allocated": allocated, "free": free,
                     "fragmented": fragmented},
            "gpuPods": pool.gpu_pods,
            "pending": {"count": pool.pending,
                        "waitSeconds": {"p50": round(quantile(waits, 0.5)),
                                        "max": round(pool.wait_max)},
                        "smallestRequest": pool.smallest_request,
                        "waitBuckets": {label: pool.wait_buckets[label]
                                        for _, label in WAIT_BUCKETS},
                        "blockedBy": dict(pool.blocked.most_common())},
            "failures": {c: pool.failures[c] for c in CAUSES if pool.failures[c]},
            "versions": {what: _spread(nodes, what)
                         for what in ("driver", "cuda", "os_image", "runtime")},
            "isolation": {"tainted": bool(taints),
                          "taints": [_taint(t) for t, _ in taints.most_common()],
                          "latencyCritical": pool.latency_critical},
        }
        report["versions"]["os"] = report["versions"].pop("os_image")
        if utilization is not None and not utilization.unavailable:
            found = for_pool(utilization, (n.name for n in nodes), self.held,
                             self.thresholds.advice.idle_below)
            if found is not None:
                report["utilization"] = {
                    "p50": round(found.p50, 3), "p95": round(found.p95, 3),
                    "idleAllocatedGPUs": found.idle_allocated,
                    "hours": round(found.hours, 1),
                    "series": [[round(t), round(v, 3)] for t, v in found.series]}
        advice, notes = advising.advise(report, self.thresholds.advice,
                                        utilization is not None)
        report["advice"] = advice
        report["notes"] = notes
        return report


def _spread(nodes: Iterable[NodeRecord], what: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for n in nodes:
        out.setdefault(getattr(n, what) or "unknown", []).append(n.name)
    return dict(sorted(out.items(), key=lambda kv: -len(kv[1])))


def _taint(t: Any) -> str:
    return f"{t.key}={t.value}:{t.effect}" if t.value else f"{t.key}:{t.effect}"


def _shape(pod: Mapping[str, Any], spec: Mapping[str, Any], namespace: str) -> str:
    """What the hardware explanation of a pod depends on: pods of one Job share it."""
    meta = pod.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    marks = {k: v for part in ("labels", "annotations")
             if isinstance(meta.get(part), dict) for k, v in meta[part].items()
             if isinstance(k, str) and "gpu" in k.lower()}
    containers = []
    for key in ("initContainers", "containers"):
        listed = spec.get(key)
        for c in listed[:100] if isinstance(listed, list) else ():
            containers.append(c.get("resources") if isinstance(c, dict) else None)
    parts = {k: spec.get(k) for k in ("nodeSelector", "affinity", "tolerations",
                                       "resourceClaims", "schedulerName", "runtimeClassName",
                                       "overhead")}
    return json.dumps([namespace, marks, containers, parts], sort_keys=True, default=str)
