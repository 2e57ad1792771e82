"""gpu-model-not-allowed: a pod that pins itself to a GPU model (nodeSelector or required
affinity on `nvidia.com/gpu.product`) may pin only models in `rules.allowedModels`.
Names compare after dropping `NVIDIA-` and the `-SHARED` / `-MIG-…` suffixes.

FAIL (allowedModels: [NVIDIA-A100-SXM4-80GB]):
  `nodeSelector: {nvidia.com/gpu.product: NVIDIA-H100-80GB-HBM3}`
PASS: `nodeSelector: {nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB-MIG-1g.10gb}`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.catalog import models_equal
from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.view import PodView

ID = "gpu-model-not-allowed"
INTRINSIC = False


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
