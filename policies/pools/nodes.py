"""What a Node object says of its GPUs as the operator checks it (operator-guide §2, §3):
what GPU Feature Discovery labelled, what the device plugin advertises (capacity and
allocatable), the driver / CUDA / OS / runtime versions, taints, and whether kubelet reserves
anything for the node's own agents.

Every string taken from the node is bounded (labels and nodeInfo are input like any other),
and every part of the wrong type reads as absent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

from policies.inventory import PER_NODE_LABELS, PRODUCT_LABELS
from policies.quantity import Number, QuantityError, parse_quantity
from policies.resources import classify
from policies.selectors import Taint

TEXT = 64  # longest version, product or pool name kept from a node
# The cluster's own node pools (Karpenter, GKE, EKS, AKS, eksctl, OKE, Rancher ...): a node
# drifted from its pool (another driver, a lost taint) stays in it, which the engine's
# grouping by identical labels could not do.
NODE_POOL_LABELS = (
    "karpenter.sh/nodepool",
    "cloud.google.com/gke-nodepool",
    "eks.amazonaws.com/nodegroup",
    "alpha.eksctl.io/nodegroup-name",
    "kubernetes.azure.com/agentpool",
    "oci.oraclecloud.com/node-pool-id",
    "node.kubernetes.io/pool",
    "gpupolicy.io/pool",
)
GFD_COUNT = "nvidia.com/gpu.count"
GFD_MEMORY = "nvidia.com/gpu.memory"  # MiB per GPU
CGPU_SCHEDULE = "ack.node.gpu.schedule"
ACK_MEMORY = "aliyun.com/gpu-mem"
ACK_CARDS = "aliyun.com/gpu-count"
_VERSION = re.compile(r"[0-9]+(?:\.[0-9]+)*")


def bounded(value: Any, limit: int = TEXT) -> str:
    text = value if isinstance(value, str) else ""
    text = "".join(ch if ch.isprintable() else "?" for ch in text[: limit + 1])
    return text if len(text) <= limit else text[: limit - 1] + "…"


def version_key(text: str) -> tuple[int, ...] | None:
    """The numbers of a version string ("535.104.05", "containerd://1.7.2", "1.4.3-k3s1"),
    to compare; None when it has none."""
    found = _VERSION.search(text)
    if not found:
        return None
    return tuple(int(p[:9]) for p in found.group().split(".")[:6])


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _amount(raw: Any) -> Number | None:
    try:
        return parse_quantity(raw)
    except QuantityError:
        return None


def _int(text: str) -> int | None:
    return int(text) if text.isascii() and text.isdigit() and len(text) < 7 else None


class NodeRecord(NamedTuple):
    name: str
    pool: str  # the cluster's node pool, else the GPU product, else "" (the caller decides)
    labels: Mapping[str, str]
    taints: tuple[Taint, ...]
    product: str
    labelled_gpus: int  # GFD's nvidia.com/gpu.count, 0 without
    gpu_memory_mib: int  # GFD's nvidia.com/gpu.memory, 0 without
    # accelerator resources (devices: whole GPUs, MIG instances, ACK cards), name -> count
    capacity: Mapping[str, int]
    allocatable: Mapping[str, int]
    cpu_reserved: bool | None  # allocatable below capacity; None when either is missing
    memory_reserved: int | None  # bytes of capacity not allocatable; None when unknown
    driver: str
    cuda: str
    os_image: str
    kernel: str
    runtime: str  # containerRuntimeVersion, e.g. containerd://1.7.2
    cgpu: bool  # Alibaba cGPU / gpushare node
    ack_memory_gib: int  # aliyun.com/gpu-mem allocatable (GiB over all cards)
    ack_cards: int
    unschedulable: bool

    @property
    def gpus(self) -> int:
        """The GPU devices the node advertises to the scheduler."""
        return sum(self.allocatable.values())

    @property
    def gpu_node(self) -> bool:
        return bool(self.labelled_gpus or self.capacity or self.allocatable or self.product
                    or self.cgpu)

    @property
    def card_memory_gib(self) -> float:
        """Memory of one card as the share scheduler counts it (ACK: gpu-mem over cards)."""
        if self.ack_cards and self.ack_memory_gib:
            return self.ack_memory_gib / self.ack_cards
        return self.gpu_memory_mib / 1024


def _devices(raw: Mapping[str, Any]) -> dict[str, int]:
    """Accelerator device resources (whole GPUs, MIG instances, ACK cards) and their counts."""
    out: dict[str, int] = {}
    for key, value in raw.items():
        if not isinstance(key, str):
            continue
        resource = classify(key)
        if resource is None or resource.unit != "devices" or not resource.counts_as_gpu:
            continue
        if resource.family not in ("whole", "mig") and key != ACK_CARDS:
            continue
        amount = _amount(value)
        if amount is not None and amount >= 0:
            out[key] = int(amount)
    return out


def _reserved(capacity: Mapping[str, Any], allocatable: Mapping[str, Any], key: str
              ) -> bool | None:
    cap, alloc = _amount(capacity.get(key)), _amount(allocatable.get(key))
    if cap is None or alloc is None:
        return None
    return alloc < cap


def _held_back(capacity: Mapping[str, Any], allocatable: Mapping[str, Any], key: str
               ) -> int | None:
    cap, alloc = _amount(capacity.get(key)), _amount(allocatable.get(key))
    if cap is None or alloc is None:
        return None
    return int(cap - alloc)


def _gfd_version(labels: Mapping[str, str], full: str, old: str) -> str:
    """A GFD version label: `<full>` (nvidia.com/cuda.driver-version.full), else
    major.minor.rev from the newer `.major/.minor/.revision` labels or the older
    `nvidia.com/cuda.driver.major/minor/rev`."""
    if labels.get(full):
        return bounded(labels[full])
    base = full.rsplit(".", 1)[0]
    for prefix, rev in ((base, "revision"), (old, "rev")):
        parts = [labels.get(f"{prefix}.{p}", "") for p in ("major", "minor", rev)]
        if parts[0]:
            return bounded(".".join(p for p in parts if p))
    return ""


def read_node(obj: Mapping[str, Any]) -> NodeRecord:
    metadata, spec, status = (_mapping(obj.get(k)) for k in ("metadata", "spec", "status"))
    labels = {bounded(k, 253): bounded(v, TEXT) for k, v in _mapping(metadata.get("labels")).items()
              if isinstance(k, str)}
    listed = spec.get("taints")
    taints = tuple(Taint.from_dict(t) for t in listed if isinstance(t, dict)) \
        if isinstance(listed, list) else ()
    capacity, allocatable = _mapping(status.get("capacity")), _mapping(status.get("allocatable"))
    info = _mapping(status.get("nodeInfo"))
    product = next((labels[k] for k in PRODUCT_LABELS if labels.get(k)), "")
    pool = next((labels[k] for k in NODE_POOL_LABELS if labels.get(k)), "")
    ack = _amount(allocatable.get(ACK_MEMORY))
    return NodeRecord(
        name=bounded(metadata.get("name"), 253),
        pool=pool,
        labels={k: v for k, v in labels.items() if k not in PER_NODE_LABELS},
        taints=taints,
        product=product,
        labelled_gpus=_int(labels.get(GFD_COUNT, "")) or 0,
        gpu_memory_mib=_int(labels.get(GFD_MEMORY, "")) or 0,
        capacity=_devices(capacity),
        allocatable=_devices(allocatable),
        cpu_reserved=_reserved(capacity, allocatable, "cpu"),
        memory_reserved=_held_back(capacity, allocatable, "memory"),
        driver=_gfd_version(labels, "nvidia.com/cuda.driver-version.full",
                            "nvidia.com/cuda.driver"),
        cuda=_gfd_version(labels, "nvidia.com/cuda.runtime-version.full",
                          "nvidia.com/cuda.runtime"),
        os_image=bounded(info.get("osImage")),
        kernel=bounded(info.get("kernelVersion")),
        runtime=bounded(info.get("containerRuntimeVersion")),
        cgpu=labels.get(CGPU_SCHEDULE) in ("cgpu", "share", "core_mem")
        or "cgpu.disable.isolation" in labels or (ack is not None and ack > 0),
        ack_memory_gib=int(ack) if ack is not None and ack > 0 else 0,
        # ACK's card count: allocatable, else its accelerator label, else GFD's
        ack_cards=int(_amount(allocatable.get(ACK_CARDS)) or 0)
        or _int(labels.get("aliyun.accelerator/nvidia_count", "")) or 0,
        unschedulable=bool(spec.get("unschedulable")),
    )
