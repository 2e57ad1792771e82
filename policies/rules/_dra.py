"""What the DRA rules share: a pod's or a claim's GPU requests, each with where to point."""

from __future__ import annotations

from collections.abc import Iterator

from policies.dra.claims import Demand
from policies.paths import FieldPath
from policies.view import ClaimView, PodView


def gpu_requests(view: PodView | ClaimView) -> Iterator[tuple[FieldPath, Demand, str]]:
    """(path, demand, "claim X request r" as a message names it) for every request on a GPU
    or MIG class: a pod's point at its spec.resourceClaims entry, a claim's at the request;
    the extended resources a class serves count as requests on it, pointing at the pod's
    containers."""
    if isinstance(view, ClaimView):
        for demand in view.demands:
            if demand.kind is not None:
                yield demand.request.path, demand, f"request {demand.request.name}"
        return
    for use in view.demand.claims:
        for demand in use.demands:
            if demand.kind is not None:
                yield (use.path, demand,
                       f"claim {use.claim.name} request {demand.request.name}")
    for use in view.demand.served:  # names a DeviceClass serves: the scheduler's claim
        for demand in use.demands:
            if demand.kind is not None:
                yield (use.path, demand, f"{demand.request.name} (served by device class "
                       f"{demand.request.class_name})")
