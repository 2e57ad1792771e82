"""mig-instances-over-policy: MIG instances a pod holds (extended resources and the MIG devices
of its ResourceClaims) stay within `rules.mig.maxInstancesPerPod`.

FAIL (maxInstancesPerPod: 2): three containers with `nvidia.com/mig-1g.10gb: 1`; a claim of 3
  devices of class mig.nvidia.com; `deviceclass.resource.kubernetes.io/mig.nvidia.com: 3`
PASS: two of them
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.dra.claims import devices_of
from policies.dra.demand import devices
from policies.model import GPUPolicy
from policies.resources import mig_profile
from policies.view import ClaimView, PodView

ID = "mig-instances-over-policy"
INTRINSIC = False

EXAMPLES = """
- FAIL: three MIG slices, over maxInstancesPerPod 2
  policy: {rules: {mig: {maxInstancesPerPod: 2}}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - {name: c0, image: "trainer:1", resources: {limits: {nvidia.com/mig-1g.10gb: 1}}}
      - {name: c1, image: "trainer:1", resources: {limits: {nvidia.com/mig-1g.10gb: 1}}}
      - {name: c2, image: "trainer:1", resources: {limits: {nvidia.com/mig-1g.10gb: 1}}}
- PASS: two slices
  policy: {rules: {mig: {maxInstancesPerPod: 2}}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - {name: c0, image: "trainer:1", resources: {limits: {nvidia.com/mig-1g.10gb: 1}}}
      - {name: c1, image: "trainer:1", resources: {limits: {nvidia.com/mig-1g.10gb: 1}}}
"""
NATIVE = "Not translated: the per-pod sum over every MIG resource name."
FAMILIES = frozenset({"mig"})


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    mig = policy.spec.rules.mig
    if mig is None or mig.max_instances_per_pod is None:
        return
    claimed = devices(view.demand.claims, "mig") + devices(view.demand.served, "mig")
    total = sum(v for n, v in view.demand.totals.items() if mig_profile(n) is not None)
    if total + claimed > mig.max_instances_per_pod:
        through = f" ({claimed} through DRA)" if claimed else ""
        own = devices(view.demand.claims, "mig")
        yield Finding(
            ID, f"the pod holds {total + claimed} MIG instances{through}; at most "
            f"{mig.max_instances_per_pod} allowed",
            view.at("resourceClaims") if own else view.containers_path,
        )


def check_claim(view: ClaimView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    mig = policy.spec.rules.mig
    total = devices_of(view.demands, "mig")
    if mig is not None and mig.max_instances_per_pod is not None \
            and total > mig.max_instances_per_pod:
        yield Finding(ID, f"the claim asks for {total} MIG instances; a pod may hold at most "
                      f"{mig.max_instances_per_pod}", (*view.claim.base, "devices", "requests"))
