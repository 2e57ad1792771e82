"""Accelerator resource names and the GPU demand of a pod spec.

Amounts follow the apiserver: a container's effective amount is its limit (a Pod's requests are
defaulted from limits, and for extended resources request must equal limit), else its request.
A pod needs, per resource, max(sum over app containers and sidecars, the largest init container
plus the sidecars started before it): kubelet hands init-container devices on to app containers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, replace
from fractions import Fraction
from functools import lru_cache
from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from policies.display import shown
from policies.dra.claims import gpu_kind
from policies.paths import FieldPath
from policies.quantity import Number, QuantityError, parse_quantity
from policies.workloads import ContainerSlot, walk

if TYPE_CHECKING:
    from policies.dra.demand import ClaimUse

Family = Literal["whole", "mig", "gpushare", "hami", "volcano-vgpu", "volcano-gpushare", "other"]
Role = Literal["app", "init", "sidecar", "ephemeral"]


class Resource(NamedTuple):
    name: str
    family: Family
    unit: str = "devices"  # devices | GiB | MB | percent
    counts_as_gpu: bool = True  # a request > 0 makes the pod a GPU pod
    # A name DRA serves through a DeviceClass (its extendedResourceName, or
    # deviceclass.resource.kubernetes.io/<class>): the class, and the kinds of device its
    # selectors match ("gpu", "mig"), so the GPU rules count it as they count a claim.
    served_by: str = ""
    served_kinds: frozenset[str] = frozenset()


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

DEVICE_CLASS_PREFIX = "deviceclass.resource.kubernetes.io/"
WHOLE_DEVICE = frozenset(n for n, r in _FIXED.items() if r.family == "whole")
# Shared-GPU memory asked per container, in MB of one GPU (HAMi, Volcano vGPU and gpushare).
MEMORY_MB = tuple(n for n, r in _FIXED.items() if r.unit == "MB")
SHARED_FAMILIES: frozenset[Family] = frozenset(
    {"gpushare", "hami", "volcano-vgpu", "volcano-gpushare"})


@lru_cache(maxsize=4096)
def classify(name: str) -> Resource | None:
    """The accelerator resource behind a name, or None for cpu, memory and the like (and for
    a key that is not a string: pod-field-invalid reports it)."""
    if not isinstance(name, str):
        return None
    found = _FIXED.get(name)
    if found is not None:
        return found
    if name.startswith("nvidia.com/mig-"):
        return Resource(name, "mig")
    if name.startswith("amd.com/") and "_nps" in name:  # partitioned MI300: amd.com/cpx_nps4
        return Resource(name, "whole")
    cls = name.removeprefix(DEVICE_CLASS_PREFIX)
    if cls != name and (kind := gpu_kind(cls)) is not None:
        # DRA serves every DeviceClass under this name too (reference/dra.md §3.5); with no
        # DeviceClasses to read, the class's name says what it holds
        return Resource(name, "other", served_by=cls, served_kinds=frozenset({kind}))
    return None


@lru_cache(maxsize=4096)
def mig_profile(name: str) -> str | None:
    """`nvidia.com/mig-1g.10gb.me` -> `1g.10gb+me` (the device plugin writes `+` as `.`)."""
    if not isinstance(name, str) or not name.startswith("nvidia.com/mig-"):
        return None
    profile = name.removeprefix("nvidia.com/mig-")
    return profile[: -len(".me")] + "+me" if profile.endswith(".me") else profile


class Amount(NamedTuple):
    resource: Resource
    value: Number
    path: FieldPath  # where the effective value was read (limits, else requests)


class Container(NamedTuple):
    path: FieldPath
    name: str
    role: Role
    spec: Mapping[str, Any]
    amounts: Mapping[str, Amount]  # accelerator resources only, valid (parsable, >= 0) ones
    gpu: bool  # asks for an accelerator (a quantity > 0 of a resource that counts)
    # Where its ResourceRequirements are (Kubeflow Trainer: `resourcesPerNode`).
    resources_field: str = "resources"

    def amount(self, name: str) -> Number:
        found = self.amounts.get(name)
        return found.value if found is not None else 0


KAI_SCHEDULER = "kai-scheduler"
KAI_FRACTION = "gpu-fraction"
KAI_MEMORY = "gpu-memory"
KAI_DEVICES = "gpu-fraction-num-devices"
ACK_CARDS = "aliyun.com/gpu-count"
_DECIMAL = re.compile(r"^(0|[1-9][0-9]{0,8})(\.[0-9]{1,9})?$")
_COUNT = re.compile(r"^[1-9][0-9]{0,5}$")


class FractionRequest(NamedTuple):
    """A share of a GPU asked for by pod annotations (NVIDIA KAI Scheduler), as written."""

    path: FieldPath  # the pod's metadata.annotations
    fraction: Fraction | None  # gpu-fraction: a share of each device, 0 < f <= 1
    memory_mib: int | None  # gpu-memory: MiB of each device
    devices: int  # gpu-fraction-num-devices (1 when absent)
    problems: tuple[tuple[str, str], ...] = ()  # (annotation, why KAI refuses it)


@dataclass(frozen=True, slots=True)
class PodDemand:
    """What a pod spec asks for: its containers' accelerator resources and the totals."""

    containers: tuple[Container, ...]
    totals: Mapping[str, Number]
    # Families of every accelerator resource named with a valid quantity, zero included.
    present: frozenset[Family] = frozenset()
    fraction: FractionRequest | None = None
    # ACK multi-card sharing: the pod label aliyun.com/gpu-count spreads aliyun.com/gpu-mem
    # over this many GPUs of one node (1 without the label).
    gpushare_cards: int = 1
    # The pod's ResourceClaims (DRA) the inputs hold, GPU or not, resolved by the engine.
    claims: tuple[ClaimUse, ...] = ()
    # The claim the scheduler makes for the extended resources DeviceClasses serve (one
    # request per name, the pod's total of it): GPUs of those classes, counted as claims'.
    served: tuple[ClaimUse, ...] = ()

    @property
    def gpu(self) -> bool:
        # plain loops: read several times per admission, and a generator costs more than
        # the few containers it would look at
        if self.fraction is not None:
            return True
        for use in self.claims:
            if use.gpu:
                return True
        for container in self.containers:  # noqa: SIM110 (no generator, as said)
            if container.gpu:
                return True
        return False

    @property
    def families(self) -> frozenset[Family]:
        return frozenset(
            a.resource.family
            for c in self.containers for a in c.amounts.values() if a.value > 0
        )


def iter_containers(
    spec: Mapping[str, Any], prefix: FieldPath, slots: tuple[ContainerSlot, ...] = ()
) -> Iterator[tuple[FieldPath, Role, Mapping[str, Any]]]:
    """Every container of a pod spec: its lists, then the container-like `slots` of its kind
    (KServe `model`, Argo `container`, a NIMService spec itself), which run as app containers."""
    for slot in slots:
        for path, found in walk(spec, slot.location, prefix):
            yield path, "app", found
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


Served = Callable[[str], "Resource | None"]


def demand(
    spec: Mapping[str, Any], prefix: FieldPath, previous: PodDemand | None = None,
    slots: tuple[ContainerSlot, ...] = (), served: Served | None = None,
) -> PodDemand:
    """The GPU demand of a pod spec. `previous`, the demand of an earlier version of the same
    spec, lends its amounts to every container whose `resources` is still the same object.
    `served` names the resources the cluster's DeviceClasses serve (policies/dra/served.py),
    read before the names this module knows."""
    earlier = {c.path: c for c in previous.containers} if previous is not None else {}
    fields = {(*prefix, *s.location): s for s in slots} if slots else {}
    containers = []
    reused = 0
    present: set[Family] = set()
    for path, role, c in iter_containers(spec, prefix, slots):
        slot = fields.get(path) if fields else None
        field = slot.resources_field if slot is not None else "resources"
        before = earlier.get(path) if earlier else None
        if before is not None and before.spec.get(field) is c.get(field) and (
                slot is None or not slot.gpu_field):
            # the same container object (no op went into it): the same Container
            containers.append(before if before.spec is c else Container(
                path, before.name, role, c, before.amounts, before.gpu, field))
            reused += 1
            continue
        amounts = _amounts(c, path, field, served)
        if slot is not None and slot.gpu_field:
            amounts.update(_gpu_field(c, path, slot.gpu_field))
        gpu = False
        for amount in amounts.values():  # most containers have none: no generator made
            present.add(amount.resource.family)
            gpu = gpu or (amount.value > 0 and amount.resource.counts_as_gpu)
        name = c.get("name") or (path[-1] if slot is not None and path else "")
        containers.append(Container(path, name if isinstance(name, str) else shown(name), role,
                                    c, amounts, gpu, field))
    if previous is not None and reused == len(containers) == len(earlier):
        if all(a is b for a, b in zip(containers, previous.containers, strict=True)):
            return previous
        return PodDemand(tuple(containers), previous.totals, previous.present,
                         previous.fraction, previous.gpushare_cards, previous.claims,
                         previous.served)
    if reused:  # the families of the amounts lent by `previous` too
        present.update(a.resource.family for c in containers for a in c.amounts.values())
    # no family present: no amount at all (most pods), so no totals to work out
    found = PodDemand(tuple(containers), _totals(containers) if present else {},
                      frozenset(present))
    if previous is not None:
        return replace(found, fraction=previous.fraction, gpushare_cards=previous.gpushare_cards,
                       claims=previous.claims, served=previous.served)
    return found


def with_metadata(found: PodDemand, metadata: Any, path: FieldPath) -> PodDemand:
    """The demand the pod's own metadata adds: KAI annotations, the ACK multi-card label."""
    if not isinstance(metadata, dict):
        return found
    annotations = metadata.get("annotations")
    fraction = fraction_request(annotations, (*path, "annotations")) \
        if isinstance(annotations, dict) else None
    labels = metadata.get("labels")
    cards = labels.get(ACK_CARDS) if isinstance(labels, dict) else None
    count = int(cards) if isinstance(cards, str) and _COUNT.match(cards) else 1
    if fraction is None and count == 1:
        return found
    return replace(found, fraction=fraction, gpushare_cards=count)


def fraction_request(annotations: Mapping[str, Any], path: FieldPath) -> FractionRequest | None:
    """What KAI Scheduler reads from `gpu-fraction`, `gpu-memory` and
    `gpu-fraction-num-devices`; None when the pod has none of them."""
    if not any(k in annotations for k in (KAI_FRACTION, KAI_MEMORY, KAI_DEVICES)):
        return None
    problems: list[tuple[str, str]] = []
    fraction: Fraction | None = None
    raw = annotations.get(KAI_FRACTION)
    if raw is not None:
        if isinstance(raw, str) and _DECIMAL.match(raw) and 0 < Fraction(raw) <= 1:
            fraction = Fraction(raw)
        else:
            problems.append((KAI_FRACTION, "must be a decimal greater than 0 and at most 1"))
    memory = _whole(annotations, KAI_MEMORY, "a whole number of MiB", problems)
    devices = _whole(annotations, KAI_DEVICES, "a whole number", problems) or 1
    if annotations.get(KAI_DEVICES) is not None and KAI_FRACTION not in annotations:
        problems.append((KAI_DEVICES, f"applies only together with {KAI_FRACTION}"))
    if KAI_FRACTION in annotations and KAI_MEMORY in annotations:
        problems.append((KAI_MEMORY, f"cannot be given together with {KAI_FRACTION}"))
    return FractionRequest(path, fraction, memory, devices, tuple(problems))


def _whole(annotations: Mapping[str, Any], key: str, what: str,
           problems: list[tuple[str, str]]) -> int | None:
    """A count annotation as KAI reads it; None (and a problem) when it is not one."""
    raw = annotations.get(key)
    if raw is None:
        return None
    if isinstance(raw, str) and _COUNT.match(raw):
        return int(raw)
    problems.append((key, f"must be {what} greater than 0"))
    return None


def _amounts(
    container: Mapping[str, Any], path: FieldPath, field: str = "resources",
    served: Served | None = None,
) -> dict[str, Amount]:
    resources = container.get(field)
    if not isinstance(resources, dict):
        return {}
    found: dict[str, Amount] = {}
    for section in ("requests", "limits"):  # limits read last: they win
        values = resources.get(section)
        if not isinstance(values, dict):
            continue
        for name, raw in values.items():
            resource = (served(name) if served is not None and isinstance(name, str)
                        else None) or classify(name)
            if resource is None:
                continue
            try:
                value = parse_quantity(raw)
            except QuantityError:
                continue  # reported by the quantity rule
            if value < 0:
                continue  # refused by the apiserver (the quantity rule says so): never summed
            found[name] = Amount(resource, value, (*path, field, section, name))
    return found


def _gpu_field(container: Mapping[str, Any], path: FieldPath, field: str) -> dict[str, Amount]:
    """Spark's `gpu: {name: nvidia.com/gpu, quantity: 1}`: a resource name and a count."""
    gpu = container.get(field)
    if not isinstance(gpu, dict):
        return {}
    name, raw = gpu.get("name"), gpu.get("quantity")
    resource = classify(name) if isinstance(name, str) else None
    if resource is None or isinstance(raw, bool) or not isinstance(raw, int):
        return {}
    return {resource.name: Amount(resource, raw, (*path, field, "quantity"))}


def _totals(containers: list[Container]) -> dict[str, Number]:
    """One pass in container order, so the work is the containers' amounts, not names times
    containers. An init container raises the peak only for what it asks for: for any other
    name the sidecars started before it hold no more than the running total already does."""
    running: dict[str, Number] = {}
    sidecars: dict[str, Number] = {}
    peak: dict[str, Number] = {}
    for c in containers:
        for name, amount in c.amounts.items():
            value = amount.value
            if c.role in ("app", "sidecar"):
                running[name] = running.get(name, 0) + value
            if c.role == "sidecar":
                sidecars[name] = sidecars.get(name, 0) + value
            elif c.role == "init":
                peak[name] = max(peak.get(name, 0), sidecars.get(name, 0) + value)
    return {name: max(running.get(name, 0), peak.get(name, 0))
            for name in {n for c in containers for n in c.amounts}}


# ---- GPU-equivalents of shared GPUs -----------------------------------------------------------
# A share of a GPU still occupies the device: a pod that asks for a share on each of N devices
# holds N devices as far as "how many GPUs may one pod or container hold" goes, whatever the
# share's size. Whole-device names (nvidia.com/gpu, which is also HAMi's vGPU count) are counted
# as they are; what follows counts the other forms.
_DEVICE_COUNT = {"volcano-vgpu": "volcano.sh/vgpu-number",
                 "volcano-gpushare": "volcano.sh/gpu-number"}


class SharedDevices(NamedTuple):
    """Devices one form of GPU sharing occupies, and where the pod asks for it."""

    devices: int
    path: FieldPath
    # how a message names the form: (the name asked for, what it asks, why so many devices),
    # put together only when a rule reports it
    parts: tuple[str, object, str]

    @property
    def what(self) -> str:
        name, value, why = self.parts
        return f"{name} {value}{why}" if value != "" else f"{name}{why}"


def container_shares(container: Container, cards: int = 1) -> list[SharedDevices]:
    """The devices a container's shared-GPU resources occupy: Volcano's vgpu-number and
    gpu-number (a vGPU on each of that many devices; 1 when only memory or cores are given),
    HAMi memory or cores without nvidia.com/gpu (HAMi gives such a container one vGPU), and
    gpushare memory, spread over the pod label's `cards` devices."""
    found: list[SharedDevices] = []
    families: dict[str, Amount] = {}
    for amount in container.amounts.values():
        if amount.value > 0 and amount.resource.counts_as_gpu:
            families.setdefault(amount.resource.family, amount)
    for family, first in families.items():
        if family == "hami":
            if "whole" not in families:
                found.append(SharedDevices(1, first.path, (first.resource.name, "",
                                                            " (one HAMi vGPU)")))
        elif family in _DEVICE_COUNT:
            count = container.amounts.get(_DEVICE_COUNT[family])
            if count is not None and count.value > 0:
                found.append(SharedDevices(_ceil(count.value), count.path,
                                           (count.resource.name, count.value, "")))
            else:
                found.append(SharedDevices(1, first.path, (first.resource.name, "",
                                                            " (one shared device)")))
        elif family == "gpushare" and first.resource.name != ACK_CARDS:
            found.append(SharedDevices(cards, first.path, (
                first.resource.name, "", f" on {cards} card{'s' * (cards != 1)}")))
    return found


def kai_share(fraction: FractionRequest | None) -> SharedDevices | None:
    """The devices a KAI share occupies: `gpu-fraction` of each of
    `gpu-fraction-num-devices` devices, or `gpu-memory` of one. None when neither is valid
    (gpu-fraction-annotation says why)."""
    if fraction is None or (fraction.fraction is None and fraction.memory_mib is None):
        return None
    if fraction.fraction is None:
        return SharedDevices(1, (*fraction.path, KAI_MEMORY), (KAI_MEMORY, "",
                                                                " on one device"))
    devices = fraction.devices if fraction.memory_mib is None else 1
    return SharedDevices(devices, (*fraction.path, KAI_DEVICES if devices > 1 else KAI_FRACTION),
                         (KAI_FRACTION, fraction.fraction, f" of each of {devices} device"
                          f"{'s' * (devices != 1)}" if devices != 1 else " of one device"))


def shared_gpus(found: PodDemand) -> tuple[int, list[SharedDevices]]:
    """The devices the pod's GPU shares occupy at once (containers' shares summed as their
    resources are: app containers and sidecars added, init containers max'ed; gpushare's
    cards once per pod, since the pod's memory is spread over the same cards; a KAI share
    once per pod), and the shares themselves."""
    if found.fraction is None and found.present.isdisjoint(SHARED_FAMILIES):
        return 0, []  # almost every pod: nothing to walk
    running = sidecars = peak = 0
    shares: list[SharedDevices] = []
    gpushare: SharedDevices | None = None
    for container in found.containers:
        if not container.gpu:
            continue
        for share in container_shares(container, found.gpushare_cards):
            if share.path[-1] in _POD_WIDE:
                gpushare = gpushare or share
                continue
            shares.append(share)
            if container.role in ("app", "sidecar"):
                running += share.devices
            if container.role == "sidecar":
                sidecars += share.devices
            elif container.role == "init":
                peak = max(peak, sidecars + share.devices)
    total = max(running, peak)
    for pod_wide in (gpushare, kai_share(found.fraction)):
        if pod_wide is not None:
            shares.append(pod_wide)
            total += pod_wide.devices
    return total, shares


# gpushare memory and cores: the pod's amounts, summed, go to the same cards
# (and Volcano gpushare memory without a gpu-number: one card for the pod)
_POD_WIDE = frozenset({"aliyun.com/gpu-mem", "aliyun.com/gpu-core.percentage",
                       "volcano.sh/gpu-memory"})


def _ceil(value: Number) -> int:
    return int(-(-value // 1))
