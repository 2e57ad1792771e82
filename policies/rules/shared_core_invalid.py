"""shared-core-invalid: compute shares must be valid percentages. ACK cGPU takes
`aliyun.com/gpu-core.percentage` only as a multiple of 5 from 5 to 100; HAMi and Volcano
cores and memory percentages lie within 0..100.

FAIL: `aliyun.com/gpu-core.percentage: 33`, `nvidia.com/gpucores: 120`
PASS: `aliyun.com/gpu-core.percentage: 35`, `nvidia.com/gpucores: 50`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.resources import SHARED_FAMILIES
from policies.view import PodView

ID = "shared-core-invalid"
INTRINSIC = True

EXAMPLES = """
- FAIL: HAMi compute share of 120 per cent
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpucores: 120}}
- PASS: half the card's compute
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpucores: 50}}
"""
NATIVE = "Not translated yet: shared-core percentages (a fact the webhook reports)."
FAMILIES = SHARED_FAMILIES
PERCENT = ("nvidia.com/gpucores", "nvidia.com/gpumem-percentage",
           "volcano.sh/vgpu-cores", "volcano.sh/vgpu-memory-percentage")


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    for container in view.demand.containers:
        ack = container.amounts.get("aliyun.com/gpu-core.percentage")
        if ack is not None and not (5 <= ack.value <= 100 and ack.value % 5 == 0):
            yield Finding(
                ID, f"aliyun.com/gpu-core.percentage {ack.value} must be a multiple of 5 "
                "from 5 to 100", ack.path,
            )
        for name in PERCENT:
            amount = container.amounts.get(name)
            if amount is not None and not 0 <= amount.value <= 100:
                yield Finding(ID, f"{name} {amount.value} must be from 0 to 100", amount.path)
