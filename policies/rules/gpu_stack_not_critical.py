"""gpu-stack-not-critical: a DaemonSet of the GPU stack (device plugin, GPU feature discovery,
dcgm-exporter, HAMi, gpushare, the DRA kubelet plugins, the GPU operator's components: judged by
the images it runs and the kubelet sockets it mounts, not by name) runs with
`priorityClassName: system-node-critical`, or a full node can evict it before the workloads it
serves (a device plugin's GPUs then vanish from allocatable; GFD's labels and DCGM's metrics
go stale). The `scheduler.alpha.kubernetes.io/critical-pod` annotation has done
nothing since Kubernetes 1.16. The GPU stack usually lives in namespaces the policies leave
alone (gpu-operator, kube-system): it is judged there too, under the first policy in force.
Advice.

FAIL: the gpushare device plugin DaemonSet with only the `critical-pod` annotation
PASS: the NVIDIA device plugin DaemonSet with `priorityClassName: system-node-critical`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.gpunodes import is_gpu_stack
from policies.model import GPUPolicy
from policies.view import PodView

ID = "gpu-stack-not-critical"
INTRINSIC = True
NATIVE = "Advice (a warning): one binding has one action for all its validations."
SEVERITY = "warning"
CATEGORY = "gpu-stack"
CRITICAL = "system-node-critical"
OLD_ANNOTATION = "scheduler.alpha.kubernetes.io/critical-pod"

EXAMPLES = """
- FAIL: the gpushare device plugin with only the long-ignored critical-pod annotation
  object:
    apiVersion: apps/v1
    kind: DaemonSet
    metadata: {name: gpushare-device-plugin-ds, namespace: kube-system}
    spec:
      selector: {matchLabels: {app: gpushare}}
      template:
        metadata:
          labels: {app: gpushare}
          annotations: {scheduler.alpha.kubernetes.io/critical-pod: ""}
        spec:
          nodeSelector: {gpushare: "true"}
          containers:
          - name: plugin
            image: registry.cn-hangzhou.aliyuncs.com/acs/k8s-gpushare-plugin:v2-1.11-aff8a23
            volumeMounts: [{name: device-plugin, mountPath: /var/lib/kubelet/device-plugins}]
          volumes:
          - {name: device-plugin, hostPath: {path: /var/lib/kubelet/device-plugins}}
- PASS: the NVIDIA device plugin, system-node-critical
  object:
    apiVersion: apps/v1
    kind: DaemonSet
    metadata: {name: nvidia-device-plugin, namespace: kube-system}
    spec:
      selector: {matchLabels: {app: nvidia-device-plugin}}
      template:
        metadata: {labels: {app: nvidia-device-plugin}}
        spec:
          priorityClassName: system-node-critical
          tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
          containers:
          - {name: plugin, image: "nvcr.io/nvidia/k8s-device-plugin:v0.17.1"}
          volumes:
          - {name: device-plugin, hostPath: {path: /var/lib/kubelet/device-plugins}}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    if view.kind != "DaemonSet" or view.spec.get("priorityClassName") == CRITICAL \
            or not is_gpu_stack(view):
        return
    given = view.spec.get("priorityClassName")
    now = f"priorityClassName {given}" if isinstance(given, str) and given \
        else "no priorityClassName"
    yield Finding(ID, f"a GPU-stack DaemonSet with {now}: under node pressure it can be evicted "
                  "before the workloads it serves (a device plugin's GPUs then leave "
                  "allocatable); set priorityClassName: "
                  f"{CRITICAL} (the {OLD_ANNOTATION} annotation counts for nothing since "
                  "Kubernetes 1.16)", view.at("priorityClassName"), level="warning")
