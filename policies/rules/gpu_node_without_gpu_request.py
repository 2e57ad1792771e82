"""gpu-node-without-gpu-request: a workload that asks for no GPU yet selects GPU nodes (a
nodeSelector or required affinity on their labels: `nvidia.com/gpu.present`, `gpu.product`,
`cloud.google.com/gke-accelerator`…) or tolerates their taints (`nvidia.com/gpu`, or, with an
inventory, a taint only GPU pools carry) takes CPU and memory on the dedicated GPU nodes that
GPU work then lacks (a pod that reaches for GPUs through NVIDIA_VISIBLE_DEVICES is
visible-devices-bypass's to judge). Labels, tolerations and the GPU request work together:
one without the others is a mistake. Node agents are excepted by what they are: the GPU stack
(device plugins, feature discovery, DCGM, DRA drivers and their controllers, by their images)
and DaemonSets that register a kubelet plugin, read the host (metrics from /proc and /sys,
logs, the runtime's socket) or join its network or PID namespace.
Advice.

FAIL: a Deployment with `nodeSelector: {nvidia.com/gpu.present: "true"}`, the GPU toleration and
no GPU request
PASS: the same Deployment requesting `nvidia.com/gpu: 1`; dcgm-exporter's DaemonSet
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from policies.context import Context
from policies.decision import Finding
from policies.gpunodes import (
    GPU_TAINT_KEYS,
    GPU_TAINT_VALUES,
    dedicated_taints,
    is_gpu_label,
    is_node_agent,
    selected_keys,
)
from policies.model import GPUPolicy
from policies.view import PodView

ID = "gpu-node-without-gpu-request"
INTRINSIC = True
NATIVE = "Advice (a warning) that needs the GPU nodes' labels and taints (inventory)."
SEVERITY = "warning"
CATEGORY = "scheduling"

_DEPLOYMENT = """\
    apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: web}}
    spec:
      selector: {{matchLabels: {{app: web}}}}
      template:
        metadata: {{labels: {{app: web}}}}
        spec:
          nodeSelector: {{nvidia.com/gpu.present: "true"}}
          tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}]
          containers:
          - name: web
            image: nginx:1.27
            resources: {{limits: {{cpu: "1", memory: 1Gi{gpu}}}}}
"""
EXAMPLES = f"""
- FAIL: a web server that selects GPU nodes and tolerates their taint, asking for no GPU
  object:
{_DEPLOYMENT.format(gpu="")}
- PASS: the same Deployment asking for a GPU
  object:
{_DEPLOYMENT.format(gpu=", nvidia.com/gpu: 1")}
- PASS: dcgm-exporter, a node agent of the GPU stack, on the GPU nodes
  object:
    apiVersion: apps/v1
    kind: DaemonSet
    metadata: {{name: dcgm-exporter}}
    spec:
      selector: {{matchLabels: {{app: dcgm}}}}
      template:
        metadata: {{labels: {{app: dcgm}}}}
        spec:
          nodeSelector: {{nvidia.com/gpu.present: "true"}}
          tolerations: [{{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}}]
          priorityClassName: system-node-critical
          containers:
          - {{name: exporter, image: "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.1-ubuntu22.04"}}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    if view.demand.gpu or view.demand.claims:
        return
    # plain loops: every pod of a governed namespace that asks for no GPU comes by here
    spec = view.spec
    selects = _gpu_keys(spec)
    tolerated = _gpu_taint_keys(spec, context)
    if not selects and not tolerated:
        return
    if is_node_agent(view) or _reaches_gpus(view):
        return
    if selects:
        selector = spec.get("nodeSelector")
        in_selector = isinstance(selector, dict) and any(k in selector for k in selects)
        yield Finding(ID, f"selects GPU nodes ({', '.join(sorted(set(selects)))}) but requests "
                      "no GPU: it takes room on GPU nodes that GPU work needs; request a GPU, "
                      "or select other nodes",
                      view.at("nodeSelector" if in_selector else "affinity"), level="warning")
    else:
        yield Finding(ID, f"tolerates the GPU nodes' taint ({', '.join(sorted(tolerated))}) but "
                      "requests no GPU: it can take room on GPU nodes that GPU work needs; drop "
                      "the toleration or request a GPU", view.at("tolerations"), level="warning")


def _gpu_keys(spec: Mapping[str, Any]) -> list[str]:
    """GPU node labels the pod selects."""
    found = []
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict):
        for key in selector:
            if isinstance(key, str) and is_gpu_label(key):
                found.append(key)
    if "affinity" in spec:
        found += [k for k in selected_keys({"affinity": spec["affinity"]}) if is_gpu_label(k)]
    return found


def _gpu_taint_keys(spec: Mapping[str, Any], context: Context) -> set[str]:
    """Keys of the GPU taints the pod tolerates (tolerate-everything is another rule's)."""
    listed = spec.get("tolerations")
    if not isinstance(listed, list):
        return set()
    found: set[str] = set()
    dedicated: frozenset[str] | None = None
    for toleration in listed:
        key = toleration.get("key") if isinstance(toleration, dict) else None
        if not isinstance(key, str) or not key:
            continue
        value = toleration.get("value")
        if key in GPU_TAINT_KEYS or (key, value if isinstance(value, str) else "") \
                in GPU_TAINT_VALUES:
            found.add(key)
            continue
        if dedicated is None:
            dedicated = frozenset(k for k, _, _ in dedicated_taints(context.inventory))
        if key in dedicated:
            found.add(key)
    return found


def _reaches_gpus(view: PodView) -> bool:
    """A container sets NVIDIA_VISIBLE_DEVICES to devices: it uses GPUs, not spare room."""
    for container in view.demand.containers:
        env = container.spec.get("env")
        for item in env if isinstance(env, list) else ():
            if isinstance(item, dict) and item.get("name") == "NVIDIA_VISIBLE_DEVICES" \
                    and item.get("value") not in (None, "", "none", "void"):
                return True
    return False
