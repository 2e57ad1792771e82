"""shared-memory-over-policy: shared-GPU memory per container within
`rules.shared.maxMemoryGiBPerContainer` (aliyun.com/gpu-mem in GiB; HAMi and Volcano in MB).

FAIL (maxMemoryGiBPerContainer: 16): `aliyun.com/gpu-mem: 20`, `nvidia.com/gpumem: 20000`
PASS: `aliyun.com/gpu-mem: 16`
"""

from __future__ import annotations

from collections.abc import Iterator
from fractions import Fraction

from policies.context import Context
from policies.decision import Finding
from policies.display import shown
from policies.model import GPUPolicy
from policies.resources import SHARED_FAMILIES
from policies.view import PodView

ID = "shared-memory-over-policy"
INTRINSIC = False

EXAMPLES = """
- FAIL: 16 GiB per container, over maxMemoryGiBPerContainer 8
  policy: {rules: {shared: {maxMemoryGiBPerContainer: 8}}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      schedulerName: gpushare-scheduler
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {aliyun.com/gpu-mem: 16}}
- PASS: 8 GiB
  policy: {rules: {shared: {maxMemoryGiBPerContainer: 8}}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      schedulerName: gpushare-scheduler
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {aliyun.com/gpu-mem: 8}}
"""
NATIVE = ""
FAMILIES = SHARED_FAMILIES
TO_GIB = {
    "aliyun.com/gpu-mem": Fraction(1),
    "nvidia.com/gpumem": Fraction(1, 1024),
    "volcano.sh/vgpu-memory": Fraction(1, 1024),
    "volcano.sh/gpu-memory": Fraction(1, 1024),
}


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    shared = policy.spec.rules.shared
    if shared is None or shared.max_memory_gib_per_container is None:
        return
    limit = shared.max_memory_gib_per_container
    for container in view.demand.containers:
        for name, factor in TO_GIB.items():
            amount = container.amounts.get(name)
            if amount is not None and amount.value * factor > limit:
                yield Finding(
                    ID, f"container {shown(container.name)} asks for {amount.value} {name} "
                    f"({float(amount.value * factor):.1f} GiB); at most {limit} GiB allowed",
                    amount.path,
                )
