"""mig-profile-unknown: a MIG resource must name a profile that exists on the GPU model the pod
targets (or, when it targets none, on some model of the catalog). Profile names carry the
memory of one SKU: `1g.10gb` exists on A100-80GB and H100, not on H200 (`1g.18gb`).

FAIL: `nvidia.com/mig-1g.10gb` with `nodeSelector: {nvidia.com/gpu.product: NVIDIA-H200}`
PASS: `nvidia.com/mig-1g.18gb` on NVIDIA-H200; `nvidia.com/mig-1g.10gb.me` on an A100-80GB
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.resources import mig_profile
from policies.view import PodView

ID = "mig-profile-unknown"
INTRINSIC = True

EXAMPLES = """
- FAIL: an A100-80GB MIG profile on H200 nodes
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: infer}
    spec:
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-H200}
      containers:
      - {name: main, image: server:1, resources: {limits: {nvidia.com/mig-1g.10gb: 1}}}
- PASS: the H200's own smallest profile
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: infer}
    spec:
      nodeSelector: {nvidia.com/gpu.product: NVIDIA-H200}
      containers:
      - {name: main, image: server:1, resources: {limits: {nvidia.com/mig-1g.18gb: 1}}}
"""
NATIVE = "It reads the GPU catalog's MIG profiles (data the webhook carries)."
FAMILIES = frozenset({"mig"})


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    catalog = context.catalog
    targets = [m for m in map(catalog.lookup, view.products) if m is not None]
    for container in view.demand.containers:
        for name, amount in container.amounts.items():
            profile = mig_profile(name)
            if profile is None or amount.value <= 0:
                continue
            if targets:
                for model in targets:
                    if model.profile(profile) is None:
                        valid = ", ".join(model.profile_names) or "none (no MIG support)"
                        yield Finding(
                            ID, f"MIG profile {profile} does not exist on {model.name}; "
                            f"valid: {valid}", amount.path,
                        )
            elif not any(m.profile(profile) for m in catalog.models):
                yield Finding(ID, f"MIG profile {profile} exists on no known GPU model",
                              amount.path)
