"""mig-count-over-geometry: the MIG instances a pod needs must fit the slice geometry of the
model it targets, on the GPUs of one node (the GPU count from the node label when the pod pins
a pool, else 8, the largest common board). Placement is per GPU: `4g` + `4g` never fits one
GPU, `3g` + three `2g` neither.

FAIL: `nvidia.com/mig-7g.80gb: 9` on NVIDIA-A100-SXM4-80GB
PASS: `nvidia.com/mig-3g.40gb: 2` on NVIDIA-A100-SXM4-80GB
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.catalog import GPUS_PER_NODE
from policies.context import Context
from policies.decision import Finding
from policies.mig import fits
from policies.model import GPUPolicy
from policies.resources import mig_profile
from policies.view import PodView

ID = "mig-count-over-geometry"
INTRINSIC = True

EXAMPLES = """
- FAIL: nine 7g slices (one per A100, eight A100s on the largest board)
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/mig-7g.80gb: 9}}
- PASS: two 3g slices
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/mig-3g.40gb: 2}}
"""
NATIVE = "It needs the MIG geometry of the cluster's nodes (inventory)."
FAMILIES = frozenset({"mig"})


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    counts = {
        profile: int(v) for n, v in view.demand.totals.items()
        if (profile := mig_profile(n)) is not None and v > 0 and v.denominator == 1
    }
    if not counts:
        return
    for product in view.products:
        model = context.catalog.lookup(product)
        if model is None or any(model.profile(p) is None for p in counts):
            continue  # unknown models and profiles are other rules' business
        if not fits(model, counts, GPUS_PER_NODE):
            wanted = ", ".join(f"{n}×{p}" for p, n in counts.items())
            yield Finding(
                ID, f"{wanted} cannot be placed on the {GPUS_PER_NODE} GPUs of one "
                f"{model.name} node", view.containers_path,
            )
