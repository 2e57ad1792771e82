"""privileged-gpu-container: no privileged container in a GPU pod. A privileged container sees
every device of the node, so the device plugin's accounting (and HAMi's isolation) is void.

FAIL: a GPU pod with any container `securityContext: {privileged: true}`
PASS: the same pod unprivileged; a privileged pod that requests no GPU
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.display import shown
from policies.model import GPUPolicy
from policies.view import PodView

ID = "privileged-gpu-container"
INTRINSIC = False
NATIVE = ""

EXAMPLES = """
- FAIL: a privileged container in a GPU pod
  policy: {rules: {denyPrivilegedGPUContainers: true}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: train}
    spec:
      containers:
      - name: main
        image: nvidia/cuda:12.4.1-base-ubuntu22.04
        resources: {limits: {nvidia.com/gpu: 1}}
        securityContext: {privileged: true}
- PASS: the same GPU pod unprivileged
  policy: {rules: {denyPrivilegedGPUContainers: true}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: train}
    spec:
      containers:
      - name: main
        image: nvidia/cuda:12.4.1-base-ubuntu22.04
        resources: {limits: {nvidia.com/gpu: 1}}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    if not policy.spec.rules.deny_privileged_gpu_containers or not view.demand.gpu:
        return
    for container in view.demand.containers:
        context_ = container.spec.get("securityContext")
        if isinstance(context_, dict) and context_.get("privileged") is True:
            yield Finding(
                ID, f"container {shown(container.name)} is privileged in a GPU pod; it would see "
                "every GPU of the node", (*container.path, "securityContext", "privileged"),
            )
