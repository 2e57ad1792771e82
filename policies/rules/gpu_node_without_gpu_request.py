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

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.gpunodes import (
    GPU_TAINT_KEYS,
    dedicated_taints,
    is_gpu_label,
    is_node_agent,
    selected_keys,
    tolerates_everything,
    tolerations,
)
from policies.model import GPUPolicy
from policies.view import PodView

ID = "gpu-node-without-gpu-request"
INTRINSIC = True
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
    spec = view.spec
    selects = [k for k in selected_keys(spec) if is_gpu_label(k)]
    listed = tolerations(spec)
    dedicated = dedicated_taints(context.inventory) if listed else frozenset()
    tolerated = [t for t in listed if isinstance(t.get("key"), str)
                 and not tolerates_everything(t)
                 and (t["key"] in GPU_TAINT_KEYS
                      or any(t["key"] == key for key, _, _ in dedicated))]
    if not selects and not tolerated:
        return
    if is_node_agent(view) or _reaches_gpus(view):
        return
    if selects:
        yield Finding(ID, f"selects GPU nodes ({', '.join(sorted(set(selects)))}) but requests "
                      "no GPU: it takes room on GPU nodes that GPU work needs; request a GPU, "
                      "or select other nodes", view.at("nodeSelector")
                      if isinstance(spec.get("nodeSelector"), dict)
                      and any(k in spec["nodeSelector"] for k in selects)
                      else view.at("affinity"), level="warning")
    else:
        keys = sorted({str(t.get("key")) for t in tolerated})
        yield Finding(ID, f"tolerates the GPU nodes' taint ({', '.join(keys)}) but requests no "
                      "GPU: it can take room on GPU nodes that GPU work needs; drop the "
                      "toleration or request a GPU", view.at("tolerations"), level="warning")


def _reaches_gpus(view: PodView) -> bool:
    """A container sets NVIDIA_VISIBLE_DEVICES to devices: it uses GPUs, not spare room."""
    for container in view.demand.containers:
        env = container.spec.get("env")
        for item in env if isinstance(env, list) else ():
            if isinstance(item, dict) and item.get("name") == "NVIDIA_VISIBLE_DEVICES" \
                    and item.get("value") not in (None, "", "none", "void"):
                return True
    return False
