"""cuda-driver-too-old: the CUDA an image needs is newer than the NVIDIA driver of a pool the
pod can be placed on runs: the container runtime refuses to start it (`unsatisfied condition:
cuda>=12.2`), the classic "CUDA unusable in the container". The image's CUDA comes from its tag:
`nvidia/cuda:X.Y[.Z]-…` (any registry or mirror), and the NGC framework containers
(`nvcr.io/nvidia/pytorch:YY.MM-py3`, tensorflow, tritonserver…) through the table of their
CUDA versions; the driver from GPU feature discovery's `nvidia.com/cuda.driver-version.*` labels
(older `nvidia.com/cuda.driver.*`), else its `nvidia.com/cuda.runtime-version.*`, against
NVIDIA's minimum-driver table (policies/data/cuda.yaml, with its source). An error when no pool
the pod can reach runs it; a warning when some can (the scheduler may pick the others). NGC
containers ship forward-compatibility packages that let some data-center GPUs run them on older
driver branches: that is said, not taken as a pass. Needs an inventory; an image whose tag says
no CUDA version (`latest`, a digest alone, another repository) and a pool without driver labels
say nothing.

FAIL: `nvidia/cuda:12.2.0-base-ubuntu22.04` where the only GPU pool runs driver 470 (CUDA 11.4)
PASS: `nvidia/cuda:11.4.3-base-ubuntu20.04` on driver 470.57.02; `nvidia/cuda:latest`
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from policies.context import Context
from policies.cuda import ImageCuda, Version, node_driver, node_runtime, shown
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.rules._reach import reachable
from policies.view import PodView

ID = "cuda-driver-too-old"
INTRINSIC = True
NATIVE = "It needs the driver labels of the nodes the pod can reach (inventory)."
CATEGORY = "compatibility"

_NODES = """\
  - apiVersion: v1
    kind: Node
    metadata:
      name: t4-1
      labels:
        nvidia.com/gpu.product: Tesla-T4
        nvidia.com/gpu.count: "1"
        nvidia.com/cuda.driver-version.full: 470.57.02
        nvidia.com/cuda.runtime-version.major: "11"
        nvidia.com/cuda.runtime-version.minor: "4"
    spec: {taints: [{key: nvidia.com/gpu, effect: NoSchedule}]}
    status: {allocatable: {nvidia.com/gpu: "1"}}
"""
EXAMPLES = f"""
- FAIL: a CUDA 12.2 image where the GPU nodes run driver 470 (CUDA 11.4)
  nodes:
{_NODES}
  object:
    apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: infer}}
    spec:
      selector: {{matchLabels: {{app: infer}}}}
      template:
        metadata: {{labels: {{app: infer}}}}
        spec:
          containers:
          - name: main
            image: nvidia/cuda:12.2.0-base-ubuntu22.04
            resources: {{limits: {{nvidia.com/gpu: 1}}}}
- PASS: a CUDA 11.4 image on driver 470
  nodes:
{_NODES}
  object:
    apiVersion: apps/v1
    kind: Deployment
    metadata: {{name: infer}}
    spec:
      selector: {{matchLabels: {{app: infer}}}}
      template:
        metadata: {{labels: {{app: infer}}}}
        spec:
          containers:
          - name: main
            image: nvidia/cuda:11.4.3-base-ubuntu20.04
            resources: {{limits: {{nvidia.com/gpu: 1}}}}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    table = context.catalog.cuda
    if context.inventory is None or not table.drivers or not view.demand.gpu:
        return
    images = []
    for container in view.demand.containers:
        if container.role != "ephemeral":
            needs = table.image(container.spec.get("image"))
            if needs is not None:
                images.append((container, needs))
    if not images:
        return
    pools = reachable(view, context)
    for container, needs in images:
        too_old, fine = [], 0
        for pool in pools:
            verdict = _runs(pool.labels, needs.cuda, context)
            if verdict is None:
                continue
            if verdict:
                fine += 1
            else:
                too_old.append(f"pool {pool.name} runs {_driver(pool.labels, context)}")
        if not too_old:
            continue
        minimum = table.minimum_driver(needs.cuda)
        where = "; ".join(too_old[:3]) + (f" and {len(too_old) - 3} more" if len(too_old) > 3
                                          else "")
        some = f" ({fine} other pool{'s' * (fine != 1)} can run it)" if fine else ""
        yield Finding(
            ID, f"image {container.spec.get('image')} needs CUDA {shown(needs.cuda)} (driver >= "
            f"{shown(minimum) if minimum else '?'}): {where}{some}; the container would not "
            f"start there{_forward(needs)}", (*container.path, "image"),
            level="warning" if fine else "error")


def _runs(labels: Mapping[str, str], cuda: Version, context: Context) -> bool | None:
    """Whether a node with these labels runs this CUDA; None when its labels do not say."""
    driver = node_driver(labels)
    if driver is not None:
        minimum = context.catalog.cuda.minimum_driver(cuda)
        return None if minimum is None else driver >= minimum
    runtime = node_runtime(labels)
    return None if runtime is None else runtime >= cuda[:2]


def _driver(labels: Mapping[str, str], context: Context) -> str:
    driver = node_driver(labels)
    runtime = node_runtime(labels)
    if driver is not None:
        runs = runtime or context.catalog.cuda.driver_cuda(driver)
        return f"driver {shown(driver)}" + (f" (CUDA {shown(runs)})" if runs else "")
    return f"CUDA {shown(runtime)}" if runtime else "an unknown driver"


def _forward(needs: ImageCuda) -> str:
    if not needs.ngc:
        return ""
    return (" (NGC containers carry CUDA forward-compatibility packages that run on some "
            "data-center GPUs with older driver branches; check the release notes)")
