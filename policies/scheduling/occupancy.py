"""What the pods bound to each node already hold, and what that means for a pod now.

kube-scheduler counts, on each node, the requests of every pod assigned to it (bound, running
or not yet started) until it terminates: pods whose phase is Succeeded or Failed hold nothing.
Only sums are kept per node (the effective request of policies/scheduling/request.py, the pod
count included), and the names of at most HOLDERS pods holding extended resources (the GPUs
"held by"): memory stays bounded by the number of nodes, not of pods.

Admission never reads this: a pod that fits a node when it is empty is admitted, whatever the
node runs now. `explain` and the audit say "fits now" or "fits once ... are free".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policies.quantity import Number
from policies.scheduling.fit import EMPTY, Shortfall, shortfalls
from policies.scheduling.request import pod_requests

HOLDERS = 8
TERMINAL = frozenset({"Succeeded", "Failed"})


class Occupancy:
    """Node name -> the summed requests of its pods, and who holds its extended resources."""

    __slots__ = ("holders", "pods", "used")

    def __init__(self) -> None:
        self.used: dict[str, dict[str, Number]] = {}
        self.holders: dict[str, list[tuple[str, str, Number]]] = {}
        self.pods = 0

    def add_pod(self, pod: Mapping[str, Any]) -> None:
        """A pod as the cluster holds it: unbound and finished pods hold nothing."""
        spec = pod.get("spec")
        if not isinstance(spec, dict):
            return
        node = spec.get("nodeName")
        status = pod.get("status")
        if not isinstance(node, str) or not node or (
                isinstance(status, dict) and status.get("phase") in TERMINAL):
            return
        meta = pod.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        who = f"{meta.get('namespace') or 'default'}/{meta.get('name') or '?'}"
        used = self.used.setdefault(node, {})
        for name, amount in pod_requests(spec).items():
            used[name] = used.get(name, 0) + amount
            if "/" in name and amount > 0:
                held = self.holders.setdefault(node, [])
                if len(held) < HOLDERS:
                    held.append((who, name, amount))
        self.pods += 1

    def of(self, node: str) -> Mapping[str, Number]:
        return self.used.get(node, EMPTY)


def first_free(request: Mapping[str, Number], nodes: Sequence[tuple[str, Mapping[str, Number]]],
               occupancy: Occupancy, skip: Any = None) -> tuple[int, str, list[Shortfall]]:
    """How many of `nodes` (name, allocatable) can take the pod now; when none, the node
    closest to it and what it lacks."""
    free = 0
    best: tuple[str, list[Shortfall]] = ("", [])
    for name, allocatable in nodes:
        short = list(shortfalls(request, allocatable, occupancy.of(name), skip))
        if not short:
            free += 1
        elif not best[0] or len(short) < len(best[1]):
            best = (name, short)
    return free, best[0], best[1]


def once_free(node: str, short: list[Shortfall], occupancy: Occupancy) -> str:
    """`fits once 2 nvidia.com/gpu are free on gpu-1 (held by ml/a, ml/b)`."""
    parts = []
    names = set()
    for _, resource, asked, used, have in short:
        if resource == "pods":
            parts.append("a pod slot is free")
            continue
        missing = asked + used - have
        parts.append(f"{_number(missing)} {resource} {'is' if missing == 1 else 'are'} free")
        names.add(resource)
    held = [who for who, name, _ in occupancy.holders.get(node, ()) if name in names]
    by = f" (held by {', '.join(dict.fromkeys(held))})" if held else ""
    return f"fits once {' and '.join(parts)} on {node}{by}"


def _number(value: Number) -> str:
    return str(value) if value == int(value) else f"{float(value):g}"
