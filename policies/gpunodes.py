"""What marks a node as a GPU node, a toleration as one for GPU nodes, and a DaemonSet as a node
agent (the GPU stack's, or a monitoring or logging agent): the rules that keep GPU nodes for GPU
work and the rules over the GPU stack read these.

A DaemonSet is judged by what it is (the host paths it mounts, the host namespaces it joins, the
images it runs), never by its name alone.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

from policies.selectors import SCHEDULING_EFFECTS

if TYPE_CHECKING:
    from policies.inventory import Inventory, Pool
    from policies.view import PodView

# Node labels only GPU nodes carry (GFD, the GPU operator, NFD, cloud providers, ACK, AMD).
GPU_LABEL_PREFIXES = ("nvidia.com/gpu.", "nvidia.com/mig", "nvidia.com/cuda.", "amd.com/gpu",
                      "aliyun.accelerator/", "feature.node.kubernetes.io/pci-10de",
                      "karpenter.k8s.aws/instance-gpu")
GPU_LABELS = frozenset({"cloud.google.com/gke-accelerator", "kubernetes.azure.com/accelerator",
                        "k8s.amazonaws.com/accelerator", "gpushare", "cgpu",
                        "ack.node.gpu.schedule", "nvidia.com/gpu"})
# Taint keys that GPU nodes carry by convention (GKE, the GPU operator, AMD, ACK); AKS taints
# GPU pools `sku=gpu`, a key other pools use with other values.
GPU_TAINT_KEYS = frozenset({"nvidia.com/gpu", "amd.com/gpu", "aliyun.com/gpu",
                            "gpu", "nvidia.com/gpu.present"})
GPU_TAINT_VALUES = frozenset({("sku", "gpu")})
HOSTNAME_KEY = "kubernetes.io/hostname"
ARCH_KEYS = ("kubernetes.io/arch", "beta.kubernetes.io/arch")

# Where the kubelet's device-plugin and DRA-plugin sockets live: a pod that mounts them is a
# device plugin or a DRA kubelet plugin.
_PLUGIN_PATHS = ("/var/lib/kubelet/device-plugins", "/var/lib/kubelet/plugins_registry",
                 "/var/lib/kubelet/plugins", "/var/lib/kubelet/pod-resources", "/dev/nvidia",
                 "/run/nvidia", "/usr/local/nvidia")
# Host paths a node's own agents read: metrics, logs, the container runtime.
_AGENT_PATHS = ("/proc", "/sys", "/var/log", "/var/lib/docker/containers", "/run/containerd",
                "/var/run/containerd", "/var/run/docker.sock", "/run/systemd", "/dev", "/")
# Images of the GPU stack: device plugins, feature discovery, DCGM, DRA drivers, HAMi, gpushare,
# Volcano's vGPU plugin, the GPU operator's own components.
_GPU_IMAGE = re.compile(
    r"(?:^|/)(?:k8s-device-plugin|nvidia-device-plugin|gpu-feature-discovery|dcgm-exporter|dcgm|"
    r"k8s-dra-driver(?:-gpu)?|gpu-operator|gpu-operator-validator|k8s-mig-manager|"
    r"container-toolkit|k8s-driver-manager|nvidia/driver|gpu-operator-validator|hami|hami-core|vgpu-device-plugin|"
    r"volcano-vgpu-device-plugin|gpushare-device-plugin|k8s-gpushare-plugin|"
    r"gpushare-scheduler-extender|amd-gpu-device-plugin|k8s-device-plugin-amd|"
    r"intel-gpu-plugin)(?::|@|$)")


# What the DaemonSet controller adds to every pod it makes (pkg/controller/daemon/util; the
# network-unavailable one only to hostNetwork pods, which the GPU stack's are not).
DAEMON_TOLERATIONS: tuple[Mapping[str, Any], ...] = tuple(
    {"key": f"node.kubernetes.io/{key}", "operator": "Exists", "effect": effect}
    for key, effect in (("not-ready", "NoExecute"), ("unreachable", "NoExecute"),
                        ("disk-pressure", "NoSchedule"), ("memory-pressure", "NoSchedule"),
                        ("pid-pressure", "NoSchedule"), ("unschedulable", "NoSchedule")))


def is_gpu_label(key: str) -> bool:
    return key in GPU_LABELS or key.startswith(GPU_LABEL_PREFIXES)


def _list(value: Any) -> list[Mapping[str, Any]]:
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def tolerations(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    return _list(spec.get("tolerations"))


def tolerates_everything(toleration: Mapping[str, Any]) -> bool:
    """`operator: Exists` with no key: every taint, of the given effect or of every effect."""
    return toleration.get("operator") == "Exists" and not toleration.get("key")


def required_expressions(spec: Mapping[str, Any]) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """("matchExpressions" | "matchFields", requirement) of every required node-affinity term."""
    affinity = spec.get("affinity")
    node = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution") \
        if isinstance(node, dict) else None
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    for term in _list(terms):
        for part in ("matchExpressions", "matchFields"):
            for expr in _list(term.get(part)):
                yield part, expr


def selected_keys(spec: Mapping[str, Any]) -> Iterator[str]:
    """Label keys the pod requires of its node (nodeSelector, required affinity that selects:
    In, Exists, Gt, Lt; NotIn and DoesNotExist keep nodes out, they select none)."""
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict):
        yield from (k for k in selector if isinstance(k, str))
    for part, expr in required_expressions(spec):
        key = expr.get("key")
        if part == "matchExpressions" and isinstance(key, str) \
                and expr.get("operator") in ("In", "Exists", "Gt", "Lt"):
            yield key


def constrains(spec: Mapping[str, Any], keys: tuple[str, ...]) -> bool:
    """The pod says something about these node label keys (any operator)."""
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict) and any(k in selector for k in keys):
        return True
    return any(expr.get("key") in keys for part, expr in required_expressions(spec)
               if part == "matchExpressions")


def gpu_pools(inventory: Inventory) -> tuple[Pool, ...]:
    """The pools whose nodes have GPUs (a count, a GPU resource, or a GPU label)."""
    return tuple(p for p in inventory.pools
                 if p.gpu_count > 0 or p.product or any(is_gpu_label(k) for k in p.labels))


_GPU_TAINTS: dict[int, tuple[Inventory, frozenset[tuple[str, str, str]]]] = {}


def dedicated_taints(inventory: Inventory | None) -> frozenset[tuple[str, str, str]]:
    """(key, value, effect) of the scheduling taints that only GPU pools carry: tolerating one
    is asking for a GPU node. Worked out once per inventory."""
    if inventory is None:
        return frozenset()
    cached = _GPU_TAINTS.get(id(inventory))
    if cached is not None and cached[0] is inventory:
        return cached[1]
    gpu = gpu_pools(inventory)
    others = {(t.key, t.value, t.effect) for p in inventory.pools if p not in gpu
              for t in p.taints}
    found = frozenset((t.key, t.value, t.effect) for p in gpu for t in p.taints
                      if t.effect in SCHEDULING_EFFECTS) - others
    if len(_GPU_TAINTS) > 8:
        _GPU_TAINTS.clear()
    _GPU_TAINTS[id(inventory)] = (inventory, found)
    return found


def _volumes(spec: Mapping[str, Any]) -> Iterator[str]:
    for volume in _list(spec.get("volumes")):
        host = volume.get("hostPath")
        path = host.get("path") if isinstance(host, dict) else None
        if isinstance(path, str):
            yield path.rstrip("/") or "/"


def _images(spec: Mapping[str, Any]) -> Iterator[str]:
    for key in ("containers", "initContainers"):
        for container in _list(spec.get(key)):
            image = container.get("image")
            if isinstance(image, str) and len(image) <= 512:
                yield image.lower()


def _under(path: str, roots: tuple[str, ...]) -> bool:
    return any(path == r or (r != "/" and path.startswith(r + "/")) for r in roots)


def runs_gpu_stack(spec: Mapping[str, Any]) -> bool:
    """The pod runs a GPU-stack component's image (a device plugin, a DRA driver's controller,
    the GPU operator's validator...), whatever kind carries it."""
    return any(_GPU_IMAGE.search(image.split("@", 1)[0].rsplit(":", 1)[0] + ":")
               or _GPU_IMAGE.search(image) for image in _images(spec))


def is_gpu_stack(view: PodView) -> bool:
    """A DaemonSet of the GPU stack: it runs a GPU component's image, or registers a device
    plugin or DRA plugin with the kubelet while reaching for NVIDIA's devices."""
    if view.kind != "DaemonSet":
        return False
    spec = view.spec
    if runs_gpu_stack(spec):
        return True
    paths = list(_volumes(spec))
    plugin = any(_under(p, _PLUGIN_PATHS[:4]) for p in paths)
    nvidia = any(_under(p, _PLUGIN_PATHS[4:]) for p in paths) or _nvidia_env(spec)
    return plugin and nvidia


def _nvidia_env(spec: Mapping[str, Any]) -> bool:
    for container in _list(spec.get("containers")):
        for env in _list(container.get("env")):
            name = env.get("name")
            if isinstance(name, str) and name.startswith("NVIDIA_"):
                return True
    return False


def is_node_agent(view: PodView) -> bool:
    """What serves the GPU nodes themselves: any workload of the GPU stack (by its images: the
    device plugin, a DRA driver's controller, the operator's validator), and a DaemonSet that
    registers a device or DRA plugin, reads the host (metrics from /proc and /sys, logs from
    /var/log, the runtime's socket) or joins its namespaces. Such agents belong on GPU nodes."""
    spec = view.spec
    if runs_gpu_stack(spec):
        return True
    if view.kind != "DaemonSet":
        return False
    if spec.get("hostPID") is True or spec.get("hostNetwork") is True:
        return True
    return any(_under(p, _PLUGIN_PATHS) or _under(p, _AGENT_PATHS) for p in _volumes(spec)) \
        or is_gpu_stack(view)
