"""gpu-shared-request-over-one (advice): `nvidia.com/gpu.shared` is a time-slicing or MPS
replica, access to a GPU rather than a share of it. Asking for several gives no more of the
GPU, and where the device plugin runs MPS or `failRequestsGreaterThanOne` it fails at
Allocate (`maximum request size for shared resources is 1`).

FAIL: `limits: {nvidia.com/gpu.shared: 2}`
PASS: `limits: {nvidia.com/gpu.shared: 1}`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.display import shown
from policies.model import GPUPolicy
from policies.view import PodView

ID = "gpu-shared-request-over-one"
INTRINSIC = True
SEVERITY = "warning"  # advice: every finding it makes is a warning

EXAMPLES = """
- FAIL: two time-sliced replicas in one container
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/gpu.shared: 2}}
- PASS: one replica
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/gpu.shared: 1}}
"""
NATIVE = "Not translated yet: shared-GPU count facts stay in the webhook."
NAME = "nvidia.com/gpu.shared"


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    for container in view.demand.containers:
        amount = container.amounts.get(NAME)
        if amount is not None and amount.value > 1:
            yield Finding(
                ID, f"container {shown(container.name)} asks for {amount.value} {NAME}: a "
                "replica is access to a GPU, not a share of it; ask for 1 (more fails under MPS)",
                amount.path, level="warning",
            )
