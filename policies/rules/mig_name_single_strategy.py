"""mig-name-single-strategy: a pod asks for `nvidia.com/mig-<profile>` (the mixed strategy's
name) where the nodes with that profile run the single strategy: there the device plugin serves
every MIG device as `nvidia.com/gpu` and labels the product `<model>-MIG-<profile>`, so the
resource the pod asks for does not exist and it stays Pending. Ask for `nvidia.com/gpu` and
select the product label. Needs an inventory. Advice (gpu-no-matching-hardware refuses the pod
when the policy asks for a hardware match).

FAIL: `nvidia.com/mig-1g.10gb: 1` where the A100 pool is single strategy
(`nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB-MIG-1g.10gb`)
PASS: `nvidia.com/gpu: 1` with that product selected
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.resources import mig_profile
from policies.view import PodView

ID = "mig-name-single-strategy"
INTRINSIC = True
NATIVE = "It needs the MIG strategy the nodes serve (inventory)."
SEVERITY = "warning"
CATEGORY = "mig"
FAMILIES = frozenset({"mig"})

_NODES = """\
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: a100-1
      labels:
        nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB-MIG-1g.10gb
        nvidia.com/mig.strategy: single
        nvidia.com/gpu.count: "7"
    status: {allocatable: {nvidia.com/gpu: "7"}}
"""
EXAMPLES = f"""
- FAIL: the mixed strategy's resource name on single-strategy nodes
{_NODES}
  policy: {{}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {{name: infer}}
    spec:
      containers:
      - {{name: main, image: "server:1", resources: {{limits: {{nvidia.com/mig-1g.10gb: 1}}}}}}
- PASS: a whole nvidia.com/gpu with the MIG product selected
{_NODES}
  policy: {{}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {{name: infer}}
    spec:
      nodeSelector: {{nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB-MIG-1g.10gb}}
      containers:
      - {{name: main, image: "server:1", resources: {{limits: {{nvidia.com/gpu: 1}}}}}}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    inventory = context.inventory
    if inventory is None:
        return
    for container in view.demand.containers:
        for name, amount in container.amounts.items():
            profile = mig_profile(name)
            if profile is None or amount.value <= 0:
                continue
            if any(p.allocatable.get(name, 0) > 0 for p in inventory.pools):
                continue  # some node serves the name: the mixed strategy is there
            suffix = f"-MIG-{profile}".lower()
            single = sorted({p.product for p in inventory.pools
                             if p.mig_strategy == "single" and p.product.lower().endswith(suffix)})
            if single:
                yield Finding(
                    ID, f"no node serves {name}: the nodes with {profile} run the single MIG "
                    f"strategy and serve it as nvidia.com/gpu; ask for nvidia.com/gpu: "
                    f"{amount.value} with nodeSelector nvidia.com/gpu.product: {single[0]}",
                    amount.path, level="warning")
