"""Advice per pool from the four indicators of reference/operator-guide.md §1: utilisation
(share, dedicate), queue time (grow), failure reasons (isolate), replaceability (automate);
latency-critical work is dedicated whatever its utilisation ("strict production latency:
dedicated nodes plus reserved resources"). Each advice names the numbers behind it; what the
data cannot support is said in `notes`, and advises nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policies.pools.failures import NEIGHBOUR_CAUSES
from policies.pools.thresholds import Advice

VERSION_WORDS = {"driver": "driver", "cuda": "CUDA", "os": "OS image", "runtime": "runtime"}


def _pct(ratio: float) -> str:
    return f"{ratio:.0%}"


def _spread(versions: Mapping[str, list[str]]) -> str:
    parts = []
    for version, nodes in list(versions.items())[:4]:
        named = f" ({', '.join(nodes[:3])}{', ...' if len(nodes) > 3 else ''})" \
            if len(nodes) <= 3 or version == "unknown" else ""
        parts.append(f"{version} on {len(nodes)} node{'s' * (len(nodes) != 1)}{named}")
    return ", ".join(parts)


def advise(pool: Mapping[str, Any], t: Advice, asked_prometheus: bool
           ) -> tuple[list[dict[str, str]], list[str]]:
    advice: list[dict[str, str]] = []
    notes: list[str] = []

    def give(action: str, because: str) -> None:
        advice.append({"action": action, "because": because})

    tainted = pool["isolation"]["tainted"]
    critical = pool["isolation"]["latencyCritical"]
    util = pool.get("utilization")
    gpus = pool["gpus"]
    considered = False
    enough_util = util is not None and util["hours"] >= t.min_utilization_hours
    if not enough_util and not pool["gpuPods"] and not pool["pending"]["count"]:
        why = ("utilisation unavailable" if asked_prometheus and util is None else
               "no utilisation (no --prometheus)" if util is None else
               f"utilisation over {util['hours']:.1f} h of the {t.min_utilization_hours:g} h "
               "needed")
        return [], [f"too little data to advise: no GPU pod ran, failed or waited here, and {why}"]

    # 1. utilisation: share or dedicate, only on days of samples
    if util is not None and util["hours"] < t.min_utilization_hours:
        notes.append(f"utilisation covers {util['hours']:.1f} h of the "
                     f"{t.min_utilization_hours:g} h needed: too little data to advise "
                     "sharing or dedicating from it")
    elif util is not None:
        considered = True
        figures = (f"GPU utilisation p50 {_pct(util['p50'])}, p95 {_pct(util['p95'])} over "
                   f"{util['hours']:.0f} h; {util['idleAllocatedGPUs']} of "
                   f"{gpus['allocated']} allocated GPUs idle")
        if util["p95"] < t.share_below_p95:
            if critical:
                notes.append(f"{figures}, but the pool runs latency-critical work: "
                             "not advised to share")
            else:
                give("share", f"{figures} (p95 below {_pct(t.share_below_p95)}): over-"
                     "dedication wastes; share the nodes with quotas and priorities, or slice "
                     "the GPUs once memory isolation and fault impact are checked")
        elif util["p50"] >= t.dedicate_above_p50 and not tainted:
            give("dedicate", f"{figures} (p50 at or above {_pct(t.dedicate_above_p50)}) on "
                 "untainted nodes: sustained work; taint the pool and give the work node "
                 "affinity and a GPU request")
    elif asked_prometheus:
        notes.append("no utilisation for this pool's nodes: share and dedicate not advised")
    if critical and not tainted:
        considered = True
        give("dedicate", "latency-critical work runs on untainted nodes (no taint with "
             "NoSchedule or NoExecute on the pool): dedicate the nodes and reserve resources "
             "to cut noisy neighbours and jitter")

    # 2. failure reasons: isolate when neighbours cause most of them
    failures: Mapping[str, int] = pool["failures"]
    total = sum(failures.values())
    if total >= t.isolate_min_failures:
        considered = True
        neighbours = sum(n for c, n in failures.items() if c in NEIGHBOUR_CAUSES)
        if neighbours / total >= t.isolate_neighbour_share:
            causes = ", ".join(f"{c} {n}" for c, n in failures.items() if c in NEIGHBOUR_CAUSES)
            give("isolate", f"{neighbours} of {total} failing GPU pods failed from "
                 f"neighbours ({causes}; at least {_pct(t.isolate_neighbour_share)}): "
                 "isolating the work is cheaper than repeated troubleshooting")
    elif total:
        notes.append(f"{total} failing GPU pod{'s' * (total != 1)}: fewer than "
                     f"{t.isolate_min_failures}, too few to judge isolation")

    # 3. replaceability: drift means automate before adding nodes
    if len(pool["nodes"]) > 1:
        considered = True
        drifted = [(what, v) for what, v in pool["versions"].items()
                   if len([k for k in v if k != "unknown"]) > t.max_versions]
        if drifted:
            give("automate", "; ".join(f"{VERSION_WORDS[w]}: {_spread(v)}" for w, v in drifted)
                 + ": nodes are not alike; automate installation and version management "
                 "before adding nodes")

    # 4. queue time: grow when GPU work waits for a full pool
    pending = pool["pending"]
    if pending["count"]:
        considered = True
        usable = gpus["free"] - gpus["fragmented"]
        wait = pending["waitSeconds"]
        if pending["count"] >= t.grow_min_pending and wait["p50"] >= t.grow_wait_seconds:
            if usable >= max(1, pending["smallestRequest"]):
                notes.append(f"{pending['count']} GPU pods wait (p50 {wait['p50']} s) though "
                             f"{usable} GPUs are free: the wait is not for GPUs (cpu, memory, "
                             "quota or priority)")
            else:
                give("grow", f"{pending['count']} GPU pod{'s' * (pending['count'] != 1)} wait "
                     f"for the pool (p50 {wait['p50']} s, max {wait['max']} s, at least "
                     f"{t.grow_wait_seconds:g} s) with {gpus['free']} GPUs free "
                     f"({gpus['fragmented']} fragmented): the pool is full")
    if not considered:
        notes.insert(0, "nothing to advise: no GPU pod waited or failed here, utilisation "
                     "is neither low nor high, one node")
    return advice, notes
