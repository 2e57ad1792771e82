"""GPUs asked for by name through the extended resources DRA serves: a DeviceClass's
`extendedResourceName` (any name: the Kubernetes docs use `example.com/gpu`) and
`deviceclass.resource.kubernetes.io/<class>` for every class (reference/dra.md §2.2, §3.5).

The scheduler turns them into one claim per pod, a request per name on the serving class;
the GPU rules count that claim as they count the pod's own (maxGPUsPerPod,
mig.maxInstancesPerPod, allowedDeviceClasses, allowedModels), and a name that serves GPUs
makes a GPU pod. The names this project knows already (`nvidia.com/gpu`, the MIG names) keep
their meaning: they are counted as the device plugin's, whoever serves them on a node.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from policies.dra.claims import gpu_demand, request_kinds
from policies.dra.demand import ClaimUse
from policies.paths import FieldPath
from policies.resources import DEVICE_CLASS_PREFIX, PodDemand, Resource, classify

if TYPE_CHECKING:  # the DRA object model loads once an input holds a claim or a class
    from policies.dra.objects import Request
    from policies.dra.pools import DraInventory

SERVED = "extended-resources"  # the claim's name, as the scheduler's claim begins


def served_lookup(dra: DraInventory | None) -> Callable[[str], Resource | None] | None:
    """name -> the Resource a DeviceClass serves under it (None for names it does not serve,
    names this project knows, and classes whose devices are not GPUs)."""
    if dra is None or not dra.extended:
        return None

    def lookup(name: str) -> Resource | None:
        if name not in dra.extended:
            return None
        if classify(name) is not None and not name.startswith(DEVICE_CLASS_PREFIX):
            return None  # nvidia.com/gpu, the MIG names...: counted as they always are
        return dra.remember(("served", name), lambda: _resource(dra, name))

    return lookup


def _resource(dra: DraInventory, name: str) -> Resource | None:
    cls = dra.extended[name]
    kinds, matched = request_kinds(_request(name, cls, 1, ()), dra)
    if not kinds and matched:
        return None  # NICs and the like: not this project's business
    return Resource(name, "other", served_by=cls, served_kinds=frozenset(kinds))


def served_uses(found: PodDemand, dra: DraInventory | None,
                path: FieldPath) -> tuple[ClaimUse, ...]:
    """The scheduler's claim for the pod's served names, as a claim use pointing at `path`
    (the pod's containers): empty when the pod asks for none. Without an inventory only
    deviceclass.resource.kubernetes.io/<class> names are served, known by the class's name."""
    named = {name: amount.resource for c in found.containers
             for name, amount in c.amounts.items() if amount.resource.served_by}
    amounts = {n: int(v) for n, v in found.totals.items()
               if n in named and v > 0 and v == int(v)}
    if not amounts:
        return ()
    from policies.dra.objects import Claim, RequestSlot
    slots = []
    for name, amount in sorted(amounts.items()):
        request = _request(name, named[name].served_by, amount, path)
        slots.append(RequestSlot(name, (request,), path))
    claim = Claim("ResourceClaim", SERVED, "", tuple(slots), ())
    return (ClaimUse(path, "", claim, tuple(gpu_demand(claim, dra))),)


def _request(name: str, cls: str, count: int, path: FieldPath) -> Request:
    from policies.dra.objects import Request
    return Request(name=name, class_name=cls, selectors=(), mode="ExactCount", count=count,
                   admin_access=False, tolerations=(), capacity={}, path=path)
