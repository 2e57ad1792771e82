"""gpu-model-not-allowed: a pod that pins itself to a GPU model (nodeSelector or required
affinity on `nvidia.com/gpu.product`) may pin only models in `rules.allowedModels`.
Names compare after dropping `NVIDIA-` and the `-SHARED` / `-MIG-…` suffixes (a DRA
driver's `productName`, with spaces, compares the same). A ResourceClaim request whose class
and selectors match only devices of models not allowed (in the inventory's ResourceSlices) is
pinned the same way.

FAIL (allowedModels: [NVIDIA-A100-SXM4-80GB]):
  `nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}`;
  a claim request whose selector is `productName == 'NVIDIA H100 80GB HBM3'`
PASS: `nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB-MIG-1g.10gb}`;
  a claim on class gpu.nvidia.com with no selector in a cluster that has A100s
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from policies.catalog import models_equal
from policies.context import Context
from policies.decision import Finding
from policies.dra.offers import attribute_values
from policies.model import GPUPolicy
from policies.rules._dra import gpu_requests
from policies.view import ClaimView, PodView

ID = "gpu-model-not-allowed"
INTRINSIC = False
NATIVE = ""

EXAMPLES = """
- FAIL: a pod pinned to H100 where only A100 is allowed
  policy: {rules: {allowedModels: [NVIDIA-A100-SXM4-80GB]}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/gpu: 1}}
- PASS: a pod pinned to the allowed A100
  policy: {rules: {allowedModels: [NVIDIA-A100-SXM4-80GB]}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB}
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/gpu: 1}}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    allowed = policy.spec.rules.allowed_models
    if allowed is None or not view.demand.gpu:
        return
    for product in view.products:
        if not any(models_equal(product, a) for a in allowed):
            yield Finding(
                ID, f"GPU model {product} is not allowed here; allowed: {', '.join(allowed)}",
                view.at("nodeSelector") if "nodeSelector" in view.spec else view.at("affinity"),
            )
    yield from _claimed(view, allowed, context)


def check_claim(view: ClaimView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    allowed = policy.spec.rules.allowed_models
    if allowed is not None:
        yield from _claimed(view, allowed, context)


def _claimed(view: PodView | ClaimView, allowed: Sequence[str],
             context: Context) -> Iterator[Finding]:
    dra = context.inventory.dra if context.inventory is not None else None
    if dra is None:
        return
    for path, demand, what in gpu_requests(view):
        if demand.kind is None:
            continue  # a MIG device carries its parent GPU's productName
        models = attribute_values(demand.request, dra, "productName")
        if models and not any(models_equal(m, a) for m in models for a in allowed):
            yield Finding(ID, f"{what} can only be given {', '.join(sorted(models))}, not an "
                          f"allowed model; allowed: {', '.join(allowed)}", path)
