"""NodeResourcesFit on one node: what the pod asks against what the node has left.

The scheduler's order and words (pkg/scheduler/framework/plugins/noderesources/fit.go,
`fitsRequest`): `Too many pods` first, then `Insufficient cpu`, `Insufficient memory`,
`Insufficient ephemeral-storage`, then `Insufficient <name>` for every other resource the
scheduler counts (hugepages-*, extended resources, `kubernetes.io/`-prefixed natives), a zero
request skipped. Upstream walks that last group in map order; here it is in name order, so
the answer is stable.

A native resource the node's allocatable does not list is not known here (a hand-written
inventory): it is not checked. An extended resource the node does not list is 0, as the
scheduler reads it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

from policies.quantity import Number
from policies.scheduling.request import PODS

TOO_MANY_PODS = "Too many pods"
NATIVE = ("cpu", "memory", "ephemeral-storage")
EMPTY: Mapping[str, Number] = {}


def insufficient(resource: str) -> str:
    """NodeResourcesFit's words for a resource the node has too little of."""
    return f"Insufficient {resource}"


def counted(name: str) -> bool:
    """A resource NodeResourcesFit compares beyond cpu, memory and ephemeral-storage (upstream
    IsScalarResourceName: hugepages, extended and prefixed native resources, attachable
    volumes). A bare name it does not know (`gpu`) is not counted at all."""
    return "/" in name or name.startswith(("hugepages-", "attachable-volumes-"))


class Shortfall(tuple[str, str, Number, Number, Number]):
    """(scheduler words, resource, requested, already used, allocatable)."""

    __slots__ = ()

    @property
    def words(self) -> str:
        return self[0]

    @property
    def resource(self) -> str:
        return self[1]


def shortfalls(request: Mapping[str, Number], allocatable: Mapping[str, Number],
               used: Mapping[str, Number] = EMPTY,
               skip: Callable[[str], bool] | None = None) -> Iterator[Shortfall]:
    """Every resource the node lacks for the pod, in the scheduler's order. `used`: what the
    pods bound to the node request (EMPTY: the node as it is empty, admission's question).
    `skip`: resources another scheduler accounts for (HAMi's GPU memory)."""
    pods = allocatable.get(PODS)
    if pods is not None and used.get(PODS, 0) + 1 > pods:
        yield Shortfall((TOO_MANY_PODS, PODS, 1, used.get(PODS, 0), pods))
    for name in NATIVE:
        asked = request.get(name, 0)
        have = allocatable.get(name)
        if asked > 0 and have is not None and have < asked + used.get(name, 0):
            yield Shortfall((insufficient(name), name, asked, used.get(name, 0), have))
    for name in sorted(request):
        asked = request[name]
        if asked <= 0 or not counted(name) or (skip is not None and skip(name)):
            continue
        have = allocatable.get(name, 0)
        if have < asked + used.get(name, 0):
            yield Shortfall((insufficient(name), name, asked, used.get(name, 0), have))
