"""gpu-resource-not-allowed: only the accelerator resources in `rules.allowedResources` (globs).

FAIL (allowedResources: ["nvidia.com/gpu"]): `limits: {aliyun.com/gpu-mem: 8}`
PASS: `limits: {nvidia.com/gpu: 1}`
"""

from __future__ import annotations

from collections.abc import Iterator
from fnmatch import fnmatchcase

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.view import PodView

ID = "gpu-resource-not-allowed"
INTRINSIC = False
NATIVE = ""

EXAMPLES = """
- FAIL: a MIG slice where only whole GPUs are allowed
  policy: {rules: {allowedResources: ["nvidia.com/gpu"]}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/mig-1g.10gb: 1}}
- PASS: a whole GPU
  policy: {rules: {allowedResources: ["nvidia.com/gpu"]}}
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


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    allowed = policy.spec.rules.allowed_resources
    if allowed is None:
        return
    for container in view.demand.containers:
        for name, amount in container.amounts.items():
            if amount.value > 0 and not any(fnmatchcase(name, g) for g in allowed):
                yield Finding(
                    ID, f"{name} is not allowed here; allowed: {', '.join(allowed)}", amount.path
                )
