"""gpu-mixed-architectures: a GPU workload that can land on GPU pools of different CPU
architectures (amd64 L4 nodes and arm64 GH200 nodes, say) with no constraint on
`kubernetes.io/arch`: unless every image is multi-architecture, some of its pods will fail with
`exec format error` depending on where they land. Select the architecture the images are built
for. Needs an inventory. Advice.

FAIL: `nvidia.com/gpu: 1` in a cluster with an amd64 L4 pool and an arm64 GH200 pool
PASS: the same pod with `nodeSelector: {kubernetes.io/arch: amd64}`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.display import shown
from policies.gpunodes import ARCH_KEYS, constrains
from policies.inventory import Pool
from policies.model import GPUPolicy
from policies.rules._reach import reachable
from policies.view import PodView

ID = "gpu-mixed-architectures"
INTRINSIC = True
NATIVE = "It needs the architectures of the GPU pools the pod can reach (inventory)."
SEVERITY = "warning"
CATEGORY = "scheduling"

_NODES = """\
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: l4-1
      labels:
        kubernetes.io/arch: amd64
        nvidia.com/gpu.product: NVIDIA-L4
        nvidia.com/gpu.count: "1"
    status: {allocatable: {nvidia.com/gpu: "1"}}
  - apiVersion: v1
    kind: Node
    metadata:
      name: gh200-1
      labels:
        kubernetes.io/arch: arm64
        nvidia.com/gpu.product: NVIDIA-GH200-480GB
        nvidia.com/gpu.count: "1"
    status: {allocatable: {nvidia.com/gpu: "1"}}
"""
EXAMPLES = f"""
- FAIL: a GPU pod that may land on amd64 or arm64 GPU nodes
{_NODES}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {{name: infer}}
    spec:
      containers:
      - {{name: main, image: "server:1", resources: {{limits: {{nvidia.com/gpu: 1}}}}}}
- PASS: the same pod pinned to amd64
{_NODES}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {{name: infer}}
    spec:
      nodeSelector: {{kubernetes.io/arch: amd64}}
      containers:
      - {{name: main, image: "server:1", resources: {{limits: {{nvidia.com/gpu: 1}}}}}}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    if context.inventory is None or not view.demand.gpu or constrains(view.spec, ARCH_KEYS):
        return
    if len({_arch(p) for p in context.inventory.pools} - {None}) < 2:
        return  # one architecture in the whole inventory: where the pod lands cannot matter
    arches: dict[str, str] = {}
    for pool in reachable(view, context):
        arch = _arch(pool)
        if arch is not None:
            arches.setdefault(arch, pool.name)
    if len(arches) > 1:
        which = ", ".join(f"{_short(arch)} (pool {pool})"
                          for arch, pool in sorted(arches.items())[:4])
        yield Finding(ID, f"the pod can land on GPU nodes of {len(arches)} architectures: "
                      f"{which}; select kubernetes.io/arch for the images it runs",
                      view.containers_path, level="warning")


def _arch(pool: Pool) -> str | None:
    return next((pool.labels[k] for k in ARCH_KEYS if k in pool.labels), None)


def _short(value: str) -> str:
    """A label value as a message shows it: hostile values are long."""
    return value if len(value) <= 40 else shown(value)
