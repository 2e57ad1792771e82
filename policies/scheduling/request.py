"""The pod's effective request, as kube-scheduler adds it up (NodeResourcesFit's PreFilter).

Upstream's resource helper (k8s.io/component-helpers/resource, `PodRequests`):
- app containers are summed;
- a restartable init container (a sidecar, `restartPolicy: Always`) keeps running: it is added
  to the sum, and every init container that starts after it runs beside it;
- any other init container runs alone (beside the sidecars started before it): the pod needs
  at least the largest of them;
- pod-level `resources.requests` (cpu, memory, hugepages-*) replace the containers' sum;
- `overhead` (a RuntimeClass's) is added last.

A container's request for a resource is its `requests` entry, else its `limits` entry (the
API server defaults requests from limits, key by key), else the namespace's LimitRange
default. Quantities are read by policies/quantity.py; one that does not parse, or is
negative, is left out here (pod-field-invalid reports it). Ephemeral containers ask for
nothing. The pod count is always 1.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

from policies.quantity import Number, QuantityError, parse_quantity

PODS = "pods"
# What pod-level requests may name (IsSupportedPodLevelResource): cpu, memory, hugepages-*.
_POD_LEVEL = ("cpu", "memory")


class Defaults(NamedTuple):
    """A namespace's LimitRange defaults for containers (type Container): `default` (limits)
    and `defaultRequest`, as the LimitRanger admission plugin fills them in."""

    limits: Mapping[str, Number] = {}
    requests: Mapping[str, Number] = {}


NO_DEFAULTS = Defaults()


def limit_range_defaults(objects: Iterable[Mapping[str, Any]]) -> Defaults:
    """The Container defaults of a namespace's LimitRanges. As the API server defaults a
    LimitRange item: a missing `default` is its `max`, a missing `defaultRequest` its
    `default`. Several LimitRanges: the first to set a resource wins (the plugin applies
    them in turn and never overwrites a value already set)."""
    limits: dict[str, Number] = {}
    requests: dict[str, Number] = {}
    for obj in objects:
        spec = obj.get("spec")
        items = spec.get("limits") if isinstance(spec, dict) else None
        for item in items if isinstance(items, list) else ():
            if not isinstance(item, dict) or item.get("type") != "Container":
                continue
            top = {**_quantities(item.get("max")), **_quantities(item.get("default"))}
            wanted = {**top, **_quantities(item.get("defaultRequest"))}
            for name, value in top.items():
                limits.setdefault(name, value)
            for name, value in wanted.items():
                requests.setdefault(name, value)
    return Defaults(limits, requests)


def container_requests(container: Mapping[str, Any],
                       defaults: Defaults = NO_DEFAULTS) -> dict[str, Number]:
    """One container's requests: its own, else its limits', else the LimitRange's."""
    resources = container.get("resources")
    if isinstance(resources, dict):
        requests = _quantities(resources.get("requests"))
        limits = resources.get("limits")
        if isinstance(limits, dict) and limits:
            for name, value in _quantities(limits).items():
                if name not in requests:
                    requests[name] = value
    else:
        requests = {}
    if defaults.requests:
        for name, value in defaults.requests.items():
            if name not in requests:
                requests[name] = value
    return requests


def pod_requests(spec: Mapping[str, Any], defaults: Defaults = NO_DEFAULTS) -> dict[str, Number]:
    """What NodeResourcesFit asks of a node for this pod spec: resource name -> amount (cpu in
    cores, memory in bytes, `pods` 1). Linear in the pod's size."""
    total: dict[str, Number] = {}
    containers = spec.get("containers")
    for container in containers if isinstance(containers, list) else ():
        if isinstance(container, dict):
            _add(total, container_requests(container, defaults))
    sidecars: dict[str, Number] = {}
    init_peak: dict[str, Number] = {}
    inits = spec.get("initContainers")
    for container in _items(inits) if inits else ():
        asked = container_requests(container, defaults)
        if container.get("restartPolicy") == "Always":
            _add(total, asked)
            _add(sidecars, asked)
            running = sidecars
        else:
            running = dict(asked)
            _add(running, sidecars)
        _max(init_peak, running)
    if init_peak:
        _max(total, init_peak)
    resources = spec.get("resources")
    if isinstance(resources, dict):
        for name, value in _quantities(resources.get("requests")).items():
            if name in _POD_LEVEL or name.startswith("hugepages-"):
                total[name] = value
    if "overhead" in spec:
        _add(total, _quantities(spec["overhead"]))
    total[PODS] = 1
    return total


def _items(value: Any) -> list[Mapping[str, Any]]:
    return [c for c in value if isinstance(c, dict)] if isinstance(value, list) else []


def _quantities(value: Any) -> dict[str, Number]:
    found: dict[str, Number] = {}
    if not value or not isinstance(value, dict):
        return found
    for name, raw in value.items():
        if not isinstance(name, str):
            continue
        try:
            amount = parse_quantity(raw)
        except QuantityError:
            continue
        if amount >= 0:
            found[name] = amount
    return found


def _add(into: dict[str, Number], more: Mapping[str, Number]) -> None:
    for name, value in more.items():
        into[name] = into.get(name, 0) + value


def _max(into: dict[str, Number], other: Mapping[str, Number]) -> None:
    for name, value in other.items():
        if value > into.get(name, 0):
            into[name] = value
