"""gpu-max-per-container: whole devices per container stay within `rules.maxGPUsPerContainer`,
the GPUs of the ResourceClaims a container lists in `resources.claims` included, and shares
of GPUs as the devices they sit on (see gpu-max-per-pod).

FAIL (maxGPUsPerContainer: 4): `limits: {nvidia.com/gpu: 8}`; `resources.claims: [{name: gpus}]`
  naming a claim of 8 GPUs; `limits: {example.com/gpu: 8}` where a DeviceClass of GPUs
  serves example.com/gpu
  (maxGPUsPerContainer: 2) `volcano.sh/vgpu-number: 3`; a KAI `gpu-fraction` on each of
  `gpu-fraction-num-devices: "4"` (the container KAI gives it to holds all four)
PASS: `limits: {nvidia.com/gpu: 4}`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.display import shown
from policies.dra.demand import by_name, container_devices
from policies.model import GPUPolicy
from policies.resources import WHOLE_DEVICE, container_shares, kai_share
from policies.view import PodView

ID = "gpu-max-per-container"
INTRINSIC = False
NATIVE = ""

EXAMPLES = """
- FAIL: eight GPUs in one container, over maxGPUsPerContainer 4
  policy: {rules: {maxGPUsPerContainer: 4}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/gpu: 8}}
- PASS: four GPUs in one container
  policy: {rules: {maxGPUsPerContainer: 4}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/gpu: 4}}
"""


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
        for share in container_shares(container, view.demand.gpushare_cards):
            if share.devices > limit:
                yield Finding(ID, f"container {shown(container.name)} asks for a share of "
                              f"{share.devices} GPUs ({share.what}); at most {limit} allowed",
                              share.path)
        claimed = container_devices(container.spec, named, "gpu")
        if claimed > limit:
            yield Finding(ID, f"container {shown(container.name)} is given {claimed} GPUs by the "
                          f"ResourceClaims it lists; at most {limit} allowed",
                          (*container.path, "resources", "claims"))
    kai = kai_share(view.demand.fraction)
    if kai is not None and kai.devices > limit:
        yield Finding(ID, f"the KAI share spans {kai.devices} GPUs ({kai.what}), all given "
                      f"to one container; at most {limit} allowed", kai.path)
