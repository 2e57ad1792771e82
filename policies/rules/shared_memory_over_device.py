"""shared-memory-over-device: a shared-GPU memory request must fit on ONE device of the model
the pod targets. gpushare/cGPU sums `aliyun.com/gpu-mem` (GiB) over the pod's containers and
needs one GPU with that much free (`Insufficient GPU Memory in one device`), or that much
spread over the GPUs of the pod label `aliyun.com/gpu-count` (ACK multi-card sharing); HAMi
`nvidia.com/gpumem` and Volcano `volcano.sh/vgpu-memory` are MB per GPU per container.

FAIL: `aliyun.com/gpu-mem: 30` with `nodeSelector: {aliyun.accelerator/nvidia_name: NVIDIA-A10}`
PASS: `aliyun.com/gpu-mem: 16` there
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.resources import MEMORY_MB, SHARED_FAMILIES
from policies.view import PodView

ID = "shared-memory-over-device"
INTRINSIC = True

EXAMPLES = """
- FAIL: 30 GiB of GPU memory on an A10 (24 GB)
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      schedulerName: gpushare-scheduler
      nodeSelector: {aliyun.accelerator/nvidia_name: NVIDIA-A10}
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {aliyun.com/gpu-mem: 30}}
- PASS: 16 GiB there
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      schedulerName: gpushare-scheduler
      nodeSelector: {aliyun.accelerator/nvidia_name: NVIDIA-A10}
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {aliyun.com/gpu-mem: 16}}
"""
NATIVE = "It compares with the GPU catalog's memory sizes (data the webhook carries)."
FAMILIES = SHARED_FAMILIES


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    if not view.products:
        return
    models = [m for m in map(context.catalog.lookup, view.products) if m]
    if not models:
        return
    gib = sum((c.amount("aliyun.com/gpu-mem") for c in view.demand.containers
               if c.role == "app"), 0)
    cards = view.demand.gpushare_cards  # ACK multi-card: the pod label spreads it
    for model in models:
        if gib * 1024 > model.memory_mib * cards:
            spread = f" over {cards} GPUs" if cards > 1 else ""
            yield Finding(
                ID, f"aliyun.com/gpu-mem {gib} GiB (summed over the pod's containers){spread} "
                f"is more than {'one' if cards == 1 else 'each'} {model.name} has "
                f"({model.memory_mib / 1024:.1f} GiB)",
                view.containers_path,
            )
        for container in view.demand.containers:
            for name in MEMORY_MB:
                amount = container.amounts.get(name)
                if amount is not None and amount.value > model.memory_mib:
                    yield Finding(
                        ID, f"{name} {amount.value} MB is more than one {model.name} has "
                        f"({model.memory_mib} MiB)", amount.path,
                    )
