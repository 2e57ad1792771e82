"""Accelerator resource names and the GPU demand of a pod spec.

Amounts follow the apiserver: a container's effective amount is its limit (a Pod's requests are
defaulted from limits, and for extended resources request must equal limit), else its request.
A pod needs, per resource, max(sum over app containers and sidecars, the largest init container
plus the sidecars started before it): kubelet hands init-container devices on to app containers.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from policies.paths import FieldPath
from policies.quantity import Number, QuantityError, parse_quantity

Family = Literal["whole", "mig", "gpushare", "hami", "volcano-vgpu", "volcano-gpushare", "other"]
Role = Literal["app", "init", "sidecar", "ephemeral"]


@dataclass(frozen=True, slots=True)
class Resource:
    name: str
    family: Family
    unit: str = "devices"  # devices | GiB | MB | percent
    counts_as_gpu: bool = True  # a request > 0 makes the pod a GPU pod


_FIXED: dict[str, Resource] = {
    r.name: r
    for r in (
        Resource("nvidia.com/gpu", "whole"),
        Resource("nvidia.com/gpu.shared", "whole"),
        Resource("amd.com/gpu", "whole"),
        Resource("gpu.intel.com/i915", "whole"),
        Resource("gpu.intel.com/xe", "whole"),
        Resource("habana.ai/gaudi", "whole"),
        Resource("aws.amazon.com/neuron", "whole"),
        Resource("aws.amazon.com/neuroncore", "whole"),
        Resource("aliyun.com/gpu-mem", "gpushare", "GiB"),
        Resource("aliyun.com/gpu-core.percentage", "gpushare", "percent"),
        Resource("aliyun.com/gpu-count", "gpushare"),
        Resource("nvidia.com/gpumem", "hami", "MB"),
        Resource("nvidia.com/gpumem-percentage", "hami", "percent"),
        Resource("nvidia.com/gpucores", "hami", "percent"),
        Resource("nvidia.com/priority", "hami", "priority", counts_as_gpu=False),
        Resource("volcano.sh/vgpu-number", "volcano-vgpu"),
        Resource("volcano.sh/vgpu-memory", "volcano-vgpu", "MB"),
        Resource("volcano.sh/vgpu-memory-percentage", "volcano-vgpu", "percent"),
        Resource("volcano.sh/vgpu-cores", "volcano-vgpu", "percent"),
        Resource("volcano.sh/gpu-memory", "volcano-gpushare", "MB"),
        Resource("volcano.sh/gpu-number", "volcano-gpushare"),
    )
}

WHOLE_DEVICE = frozenset(n for n, r in _FIXED.items() if r.family == "whole")
SHARED_FAMILIES: frozenset[Family] = frozenset(
    {"gpushare", "hami", "volcano-vgpu", "volcano-gpushare"})


@lru_cache(maxsize=4096)
def classify(name: str) -> Resource | None:
    """The accelerator resource behind a name, or None for cpu, memory and the like."""
    found = _FIXED.get(name)
    if found is not None:
        return found
    if name.startswith("nvidia.com/mig-"):
        return Resource(name, "mig")
    if name.startswith("amd.com/") and "_nps" in name:  # partitioned MI300: amd.com/cpx_nps4
        return Resource(name, "whole")
    return None


@lru_cache(maxsize=4096)
def mig_profile(name: str) -> str | None:
    """`nvidia.com/mig-1g.10gb.me` -> `1g.10gb+me` (the device plugin writes `+` as `.`)."""
    if not name.startswith("nvidia.com/mig-"):
        return None
    profile = name.removeprefix("nvidia.com/mig-")
    return profile[: -len(".me")] + "+me" if profile.endswith(".me") else profile


@dataclass(frozen=True, slots=True)
class Amount:
    resource: Resource
    value: Number
    path: FieldPath  # where the effective value was read (limits, else requests)


@dataclass(frozen=True, slots=True)
class Container:
    path: FieldPath
    name: str
    role: Role
    spec: Mapping[str, Any]
    amounts: Mapping[str, Amount]  # accelerator resources only, parsable ones
    gpu: bool  # asks for an accelerator (a quantity > 0 of a resource that counts)

    def amount(self, name: str) -> Number:
        found = self.amounts.get(name)
        return found.value if found is not None else 0


@dataclass(frozen=True, slots=True)
class PodDemand:
    containers: tuple[Container, ...]
    totals: Mapping[str, Number]
    # Families of every accelerator resource named with a valid quantity, zero included.
    present: frozenset[Family] = frozenset()

    @property
    def gpu(self) -> bool:
        return any(c.gpu for c in self.containers)

    @property
    def families(self) -> frozenset[Family]:
        return frozenset(
            a.resource.family
            for c in self.containers for a in c.amounts.values() if a.value > 0
        )


def iter_containers(
    spec: Mapping[str, Any], prefix: FieldPath
) -> Iterator[tuple[FieldPath, Role, Mapping[str, Any]]]:
    for key, default_role in (("initContainers", "init"), ("containers", "app"),
                              ("ephemeralContainers", "ephemeral")):
        items = spec.get(key)
        if not isinstance(items, list):
            continue
        for index, container in enumerate(items):
            if not isinstance(container, dict):
                continue
            role: Role = default_role  # type: ignore[assignment]
            if role == "init" and container.get("restartPolicy") == "Always":
                role = "sidecar"
            yield (*prefix, key, index), role, container


def demand(
    spec: Mapping[str, Any], prefix: FieldPath, previous: PodDemand | None = None
) -> PodDemand:
    """The GPU demand of a pod spec. `previous`, the demand of an earlier version of the same
    spec, lends its amounts to every container whose `resources` is still the same object."""
    earlier = {c.path: c for c in previous.containers} if previous is not None else {}
    containers = []
    reused = 0
    for path, role, c in iter_containers(spec, prefix):
        before = earlier.get(path)
        if before is not None and before.spec.get("resources") is c.get("resources"):
            containers.append(Container(path, before.name, role, c, before.amounts, before.gpu))
            reused += 1
            continue
        amounts = _amounts(c, path)
        gpu = any(a.value > 0 and a.resource.counts_as_gpu for a in amounts.values())
        containers.append(Container(path, str(c.get("name", "")), role, c, amounts, gpu))
    if previous is not None and reused == len(containers) == len(earlier):
        return PodDemand(tuple(containers), previous.totals, previous.present)
    present = frozenset(a.resource.family for c in containers for a in c.amounts.values())
    return PodDemand(tuple(containers), _totals(containers), present)


def _amounts(container: Mapping[str, Any], path: FieldPath) -> dict[str, Amount]:
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return {}
    found: dict[str, Amount] = {}
    for section in ("requests", "limits"):  # limits read last: they win
        values = resources.get(section)
        if not isinstance(values, dict):
            continue
        for name, raw in values.items():
            resource = classify(name)
            if resource is None:
                continue
            try:
                value = parse_quantity(raw)
            except QuantityError:
                continue  # reported by the quantity rule
            found[name] = Amount(resource, value, (*path, "resources", section, name))
    return found


def _totals(containers: list[Container]) -> dict[str, Number]:
    names = {n for c in containers for n in c.amounts}
    totals: dict[str, Number] = {}
    for name in names:
        running: Number = sum(c.amount(name) for c in containers
                              if c.role in ("app", "sidecar"))
        peak: Number = 0
        sidecars: Number = 0
        for c in containers:
            if c.role == "sidecar":
                sidecars += c.amount(name)
            elif c.role == "init":
                peak = max(peak, sidecars + c.amount(name))
        totals[name] = max(running, peak)
    return totals
