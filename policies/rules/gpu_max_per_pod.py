"""gpu-max-per-pod: whole devices a pod holds at once (app containers and sidecars summed,
init containers max'ed, GPUs of its ResourceClaims added) stay within `rules.maxGPUsPerPod`.
A claim that asks for more GPUs than any pod may hold is refused on its own. A share of a GPU
occupies its device, so shares count as the devices they sit on: a KAI `gpu-fraction` on each
of `gpu-fraction-num-devices` devices counts that many, `gpu-memory` one; Volcano
`vgpu-number` / `gpu-number` their number; HAMi memory or cores without `nvidia.com/gpu` one;
gpushare memory the pod label `aliyun.com/gpu-count` (one without it).

FAIL (maxGPUsPerPod: 8): two containers with `nvidia.com/gpu: 6`; one with `nvidia.com/gpu: 4`
  and a ResourceClaim of 6 GPUs
  `deviceclass.resource.kubernetes.io/gpu.nvidia.com: 9`, or 9 of a class's own
  `extendedResourceName` (`example.com/gpu`): DRA serves them from the class's GPUs
FAIL (maxGPUsPerPod: 2): annotations `gpu-fraction: "1"`, `gpu-fraction-num-devices: "16"`;
  `volcano.sh/vgpu-number: 3`
PASS: one container with 8; an init container with 8 then an app container with 8;
  (maxGPUsPerPod: 2) `gpu-fraction: "0.5"` on 2 devices
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.dra.claims import devices_of
from policies.dra.demand import devices
from policies.model import GPUPolicy
from policies.resources import WHOLE_DEVICE, shared_gpus
from policies.view import ClaimView, PodView

ID = "gpu-max-per-pod"
INTRINSIC = False
NATIVE = ""

EXAMPLES = """
- FAIL: two containers of six GPUs each, over maxGPUsPerPod 8
  policy: {rules: {maxGPUsPerPod: 8}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: train}
    spec:
      containers:
      - {name: a, image: trainer:1, resources: {limits: {nvidia.com/gpu: 6}}}
      - {name: b, image: trainer:1, resources: {limits: {nvidia.com/gpu: 6}}}
- PASS: an init container of eight GPUs, then an app container of eight
  policy: {rules: {maxGPUsPerPod: 8}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: train}
    spec:
      initContainers:
      - {name: warm, image: trainer:1, resources: {limits: {nvidia.com/gpu: 8}}}
      containers:
      - {name: main, image: trainer:1, resources: {limits: {nvidia.com/gpu: 8}}}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    limit = policy.spec.rules.max_gpus_per_pod
    if limit is None:
        return
    claimed = devices(view.demand.claims, "gpu")
    served = devices(view.demand.served, "gpu")
    shared, shares = shared_gpus(view.demand)
    if claimed or served or shared:
        plugin = sum(v for n, v in view.demand.totals.items() if n in WHOLE_DEVICE)
        total = plugin + claimed + served + shared
        if total > limit:
            parts = [f"{claimed} through ResourceClaims" if claimed else "",
                     f"{served} through {_names(view)}, served by DRA" if served else "",
                     f"{shared} through GPU shares ("
                     f"{'; '.join(s.what for s in shares)})" if shared else "",
                     f"{plugin} through extended resources" if plugin else ""]
            where = view.at("resourceClaims") if claimed else \
                max(shares, key=lambda s: s.devices).path if shared and not plugin \
                else view.containers_path
            yield Finding(ID, f"the pod holds {total} GPUs at once "
                          f"({' and '.join(p for p in parts if p)}); at most {limit} allowed",
                          where)
        return
    for name, total in view.demand.totals.items():
        if name in WHOLE_DEVICE and total > limit:
            yield Finding(
                ID, f"the pod holds {total} {name} at once; at most {limit} allowed",
                view.containers_path,
            )


def check_claim(view: ClaimView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    limit = policy.spec.rules.max_gpus_per_pod
    total = devices_of(view.demands, "gpu")
    if limit is not None and total > limit:
        yield Finding(ID, f"the claim asks for {total} GPUs; a pod may hold at most {limit}, "
                      "so no pod here can use it", (*view.claim.base, "devices", "requests"))


def _names(view: PodView) -> str:
    return ", ".join(d.request.name for u in view.demand.served for d in u.demands
                     if "gpu" in d.kinds)
