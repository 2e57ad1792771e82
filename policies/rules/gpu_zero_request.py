"""gpu-zero-request (advice): `nvidia.com/gpu: 0` asks for no GPU, yet a CUDA image still sees
every GPU of the node through the runtime's NVIDIA_VISIBLE_DEVICES=all.

FAIL: `limits: {nvidia.com/gpu: 0}` without NVIDIA_VISIBLE_DEVICES=none
PASS: `limits: {nvidia.com/gpu: 0}` with env NVIDIA_VISIBLE_DEVICES=none; no GPU resource at all
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.view import PodView

ID = "gpu-zero-request"
INTRINSIC = True
SEVERITY = "warning"  # advice: every finding it makes is a warning

EXAMPLES = """
- FAIL: "nvidia.com/gpu: 0"
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/gpu: 0}}
- PASS: one GPU
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/gpu: 1}}
"""
NATIVE = "Advice (a warning): one binding has one action for all its validations."
_HIDDEN = {"none", "void", ""}


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    for container in view.demand.containers:
        if container.gpu or _hidden(container.spec.get("env")):
            continue
        for name, amount in container.amounts.items():
            if amount.value == 0 and amount.resource.counts_as_gpu:
                yield Finding(
                    ID,
                    f"{name} is 0: the container gets no GPU of its own but may see all of "
                    "them; set env NVIDIA_VISIBLE_DEVICES=none or drop the resource",
                    amount.path, level="warning",
                )
                break


def _hidden(env: object) -> bool:
    if not isinstance(env, list):
        return False
    return any(isinstance(e, dict) and e.get("name") == "NVIDIA_VISIBLE_DEVICES"
               and str(e.get("value", "")).lower() in _HIDDEN for e in env)
