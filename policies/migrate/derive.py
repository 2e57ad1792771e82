"""The inventory a fleet would have if its device-plugin GPU nodes ran the NVIDIA DRA driver.

Each selected node keeps its labels and taints, loses every device plugin's GPU resources
(the DRA driver replaces the node's whole GPU stack: NVIDIA does not support both on a node)
and gets one ResourceSlice as the driver publishes it in its default static mode
(reference/dra.md §5.3): `gpu-<minor>` for a whole GPU, the pre-created MIG devices of a MIG
GPU, with the attributes and capacity GPU Feature Discovery's labels and the catalog give.

What labels cannot tell is listed in `Derived.unknown` rather than guessed silently: GPU
UUIDs, which physical GPU holds which MIG instance under `mixed`, exact NVML product names.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from policies.catalog import Catalog, GPUModel, MigProfile
from policies.inventory import MIG_STRATEGY_LABEL, PRODUCT_LABELS

DRIVER = "gpu.nvidia.com"
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
# Resource domains of the device plugins the DRA driver replaces on a node.
PLUGIN_DOMAINS = ("nvidia.com/", "aliyun.com/", "volcano.sh/", "hami.io/")
_ARCHITECTURE = {"turing": "Turing", "volta": "Volta", "ampere": "Ampere",
                 "ada-lovelace": "Ada Lovelace", "hopper": "Hopper", "blackwell": "Blackwell",
                 "pascal": "Pascal", "rubin": "Rubin"}


def device_class(name: str, kind: str, extended: str | None = None) -> dict[str, Any]:
    """A DeviceClass as the driver's chart ships it (reference/dra.md §5.2)."""
    expression = (f"device.driver == '{DRIVER}' && "
                  f"device.attributes['{DRIVER}'].type == '{kind}'")
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
    if extended:
        spec["extendedResourceName"] = extended
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
            "metadata": {"name": name}, "spec": spec}


DRIVER_CLASSES = (device_class(GPU_CLASS, "gpu", "nvidia.com/gpu"),
                  device_class(MIG_CLASS, "mig"))


@dataclass
class Derived:
    nodes: list[dict[str, Any]] = field(default_factory=list)
    slices: list[dict[str, Any]] = field(default_factory=list)
    classes: list[dict[str, Any]] = field(default_factory=list)
    moved: list[str] = field(default_factory=list)  # node names now served by DRA
    # what labels could not tell -> the nodes it concerns
    unknown: dict[str, list[str]] = field(default_factory=dict)

    def objects(self) -> list[dict[str, Any]]:
        return [*self.nodes, *self.slices, *self.classes]


def to_dra(nodes: Iterable[Mapping[str, Any]], selected: Callable[[Mapping[str, str]], bool],
           catalog: Catalog, classes: Sequence[Mapping[str, Any]] = ()) -> Derived:
    """The target inventory: `nodes` with the selected GPU nodes moved to the DRA driver, and
    the driver's DeviceClasses unless `classes` (the cluster's own) already holds them."""
    out = Derived()
    for node in nodes:
        labels = _labels(node)
        gpus = _gpu_count(node, labels)
        if not selected(labels) or gpus <= 0:
            out.nodes.append(dict(node))
            continue
        name = str(_mapping(node.get("metadata")).get("name") or "")
        out.nodes.append(_without_plugins(node))
        devices, unknown = _devices(name, labels, _allocatable(node), gpus, catalog)
        out.slices.append(_slice(name, devices))
        out.moved.append(name)
        for what in unknown:
            out.unknown.setdefault(what, []).append(name)
    have = {str(_mapping(c.get("metadata")).get("name")) for c in classes}
    out.classes = [dict(c) for c in classes]
    out.classes += [c for c in DRIVER_CLASSES if c["metadata"]["name"] not in have]
    return out


def plugin_resource(name: str) -> bool:
    """A resource a device plugin advertises, gone once the DRA driver owns the node."""
    return name.startswith(PLUGIN_DOMAINS)


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _labels(node: Mapping[str, Any]) -> dict[str, str]:
    raw = _mapping(_mapping(node.get("metadata")).get("labels"))
    return {str(k): str(v) for k, v in raw.items()}


def _allocatable(node: Mapping[str, Any]) -> dict[str, int]:
    out = {}
    for key, value in _mapping(_mapping(node.get("status")).get("allocatable")).items():
        text = str(value)
        if isinstance(key, str) and text.isdigit():
            out[key] = int(text)
    return out


def _int(labels: Mapping[str, str], key: str) -> int | None:
    value = labels.get(key, "")
    return int(value) if value.isdigit() else None


def _gpu_count(node: Mapping[str, Any], labels: Mapping[str, str]) -> int:
    """Physical GPUs (MIG devices under `single`, as GFD counts them), from GFD's label, else
    the gpushare labels, else what the device plugins advertise (replicas divided out)."""
    for key in ("nvidia.com/gpu.count", "aliyun.accelerator/nvidia_count"):
        count = _int(labels, key)
        if count is not None:
            return count
    allocatable = _allocatable(node)
    if allocatable.get("aliyun.com/gpu-count"):
        return allocatable["aliyun.com/gpu-count"]
    replicas = max(1, _int(labels, "nvidia.com/gpu.replicas") or 1)
    whole = allocatable.get("nvidia.com/gpu", 0) // replicas
    return whole + sum(v for k, v in allocatable.items() if k.startswith("nvidia.com/mig-"))


def _without_plugins(node: Mapping[str, Any]) -> dict[str, Any]:
    status = dict(_mapping(node.get("status")))
    for part in ("capacity", "allocatable"):
        if part in status:
            status[part] = {k: v for k, v in _mapping(status[part]).items()
                            if not plugin_resource(str(k))}
    return {**node, "status": status}


def product_name(label: str) -> str:
    """GFD's label back to NVML's spelling, as near as a label allows: suffixes dropped, dashes
    read as spaces (`NVIDIA-H100-80GB-HBM3` -> `NVIDIA H100 80GB HBM3`; NVML's own dashes, as in
    `A100-SXM4-80GB`, cannot be told apart)."""
    base = label
    for marker in ("-SHARED", "-MIG-"):
        cut = base.find(marker)
        if cut >= 0:
            base = base[:cut]
    return base.replace("-", " ")


def _attributes(labels: Mapping[str, str], product: str, model: GPUModel | None,
                kind: str) -> dict[str, Any]:
    attrs: dict[str, Any] = {"type": {"string": kind}, "brand": {"string": "Nvidia"}}
    if product:
        attrs["productName"] = {"string": product_name(product)}
    family = labels.get("nvidia.com/gpu.family") or (model.family if model else "")
    if family in _ARCHITECTURE:
        attrs["architecture"] = {"string": _ARCHITECTURE[family]}
    major, minor = (_int(labels, f"nvidia.com/gpu.compute.{p}") for p in ("major", "minor"))
    if major is not None and minor is not None:
        attrs["cudaComputeCapability"] = {"version": f"{major}.{minor}.0"}
    driver = _version(labels, "nvidia.com/cuda.driver-version.", ("major", "minor", "revision")) \
        or _version(labels, "nvidia.com/cuda.driver.", ("major", "minor", "rev"))
    if driver:
        attrs["driverVersion"] = {"version": driver}
    cuda = _version(labels, "nvidia.com/cuda.runtime-version.", ("major", "minor")) \
        or _version(labels, "nvidia.com/cuda.runtime.", ("major", "minor"))
    if cuda:
        attrs["cudaDriverVersion"] = {"version": cuda}
    return attrs


def _version(labels: Mapping[str, str], prefix: str, parts: tuple[str, ...]) -> str:
    numbers = [_int(labels, prefix + p) for p in parts]
    if any(n is None for n in numbers):
        return ""
    return ".".join(str(n) for n in (*numbers, 0, 0)[:3])


def _devices(node: str, labels: Mapping[str, str], allocatable: Mapping[str, int], gpus: int,
             catalog: Catalog) -> tuple[list[dict[str, Any]], list[str]]:
    product = next((labels[k] for k in PRODUCT_LABELS if labels.get(k)), "")
    model = catalog.lookup(product) if product else None
    unknown = ["GPU UUIDs (no `uuid` attribute is derived)"]
    if not product:
        unknown.append("GPU model (no nvidia.com/gpu.product label)")
    strategy = labels.get(MIG_STRATEGY_LABEL, "")
    memory_label = _int(labels, "nvidia.com/gpu.memory")
    if strategy == "single" and "-MIG-" in product:
        profile = model.profile(product.split("-MIG-", 1)[1].removesuffix("-SHARED")) \
            if model else None
        if model is None or profile is None:
            return [], [*unknown, f"MIG profile of {product} (not in the catalog)"]
        per_gpu = profile.max_instances
        mig = {profile: gpus}
        whole, physical = 0, math.ceil(gpus / per_gpu)
    else:
        mig = _mixed_profiles(labels, model)
        whole = allocatable.get("nvidia.com/gpu", 0) if mig else gpus
        replicas = _int(labels, "nvidia.com/gpu.replicas") or 1
        if mig and replicas > 1:
            whole //= replicas
        physical = gpus if not mig else max(gpus, whole + 1)
        if mig:
            unknown.append("which GPU holds which MIG instance (placed in catalog order)")
    devices = []
    memory = memory_label if memory_label and strategy != "single" else \
        (model.memory_mib if model else 0)
    for minor in range(whole):
        device: dict[str, Any] = {"name": f"gpu-{minor}",
                                  "attributes": _attributes(labels, product, model, "gpu")}
        if memory:
            device["capacity"] = {"memory": {"value": f"{memory}Mi"}}
        devices.append(device)
    if mig and model is not None:
        devices += _mig_devices(labels, product, model, mig, whole, physical, unknown)
    return devices, unknown


def _mixed_profiles(labels: Mapping[str, str], model: GPUModel | None) -> dict[MigProfile, int]:
    out: dict[MigProfile, int] = {}
    if model is None:
        return out
    for key, value in labels.items():
        if key.startswith("nvidia.com/mig-") and key.endswith(".count") and value.isdigit():
            profile = model.profile(key.removeprefix("nvidia.com/mig-").removesuffix(".count"))
            if profile is not None and int(value) > 0:
                out[profile] = int(value)
    return out


def _mig_devices(labels: Mapping[str, str], product: str, model: GPUModel,
                 counts: Mapping[MigProfile, int], first: int, physical: int,
                 unknown: list[str]) -> list[dict[str, Any]]:
    """Pre-created MIG devices, first-fit over GPUs `first`.. in the catalog's placements."""
    used: dict[int, int] = {}  # GPU minor -> occupied memory-slot bits
    out = []
    for profile, count in sorted(counts.items(), key=lambda pc: -pc[0].size):
        for _ in range(count):
            spot = _place(profile, used, first, max(physical, first + 1) + count)
            if spot is None:
                unknown.append(f"a place for MIG {profile.name}")
                continue
            minor, start = spot
            attrs = _attributes(labels, product, model, "mig")
            attrs["profile"] = {"string": profile.name}
            mem = _int(labels, f"nvidia.com/mig-{profile.resource_suffix}.memory") \
                or profile.memory_gb * 1024
            capacity: dict[str, Any] = {"memory": {"value": f"{mem}Mi"}}
            sms = _int(labels, f"nvidia.com/mig-{profile.resource_suffix}.multiprocessors")
            if sms:
                capacity["multiprocessors"] = {"value": str(sms)}
            out.append({"name": f"gpu-{minor}-mig-{profile.name.replace('.', '')}-{start}",
                        "attributes": attrs, "capacity": capacity})
    return out


def _place(profile: MigProfile, used: dict[int, int], first: int,
           limit: int) -> tuple[int, int] | None:
    mask = (1 << profile.size) - 1
    for minor in range(first, limit):
        for start in profile.starts:
            bits = mask << start
            if not used.get(minor, 0) & bits:
                used[minor] = used.get(minor, 0) | bits
                return minor, start
    return None


def _slice(node: str, devices: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": f"{node}-{DRIVER}-derived"},
            "spec": {"driver": DRIVER, "nodeName": node,
                     "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
                     "devices": devices}}
