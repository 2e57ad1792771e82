"""gpu-max-per-container: whole devices per container stay within `rules.maxGPUsPerContainer`,
the GPUs of the ResourceClaims a container lists in `resources.claims` included.

FAIL (maxGPUsPerContainer: 4): `limits: {nvidia.com/gpu: 8}`; `resources.claims: [{name: gpus}]`
  naming a claim of 8 GPUs; `limits: {example.com/gpu: 8}` where a DeviceClass of GPUs
  serves example.com/gpu
PASS: `limits: {nvidia.com/gpu: 4}`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.display import shown
from policies.dra.demand import by_name, container_devices
from policies.model import GPUPolicy
from policies.resources import WHOLE_DEVICE
from policies.view import PodView

ID = "gpu-max-per-container"
INTRINSIC = False
NATIVE = ""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    limit = policy.spec.rules.max_gpus_per_container
    if limit is None:
        return
    named = by_name(view.demand.claims)
    for container in view.demand.containers:
        for name, amount in container.amounts.items():
            whole = name in WHOLE_DEVICE or "gpu" in amount.resource.served_kinds
            if whole and amount.value > limit:
                yield Finding(
                    ID, f"container {shown(container.name)} asks for {amount.value} {name}; "
                    f"at most {limit} allowed", amount.path,
                )
        claimed = container_devices(container.spec, named, "gpu")
        if claimed > limit:
            yield Finding(ID, f"container {shown(container.name)} is given {claimed} GPUs by the "
                          f"ResourceClaims it lists; at most {limit} allowed",
                          (*container.path, "resources", "claims"))
