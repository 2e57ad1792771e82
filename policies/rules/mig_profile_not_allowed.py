"""mig-profile-not-allowed: MIG profiles limited to `rules.mig.allowedProfiles`, for extended
resources and for ResourceClaim requests on a MIG class (the profiles of the devices their
class and selectors match in the inventory's ResourceSlices: any one of them may be given).

FAIL (allowedProfiles: [1g.10gb]): `nvidia.com/mig-3g.40gb: 1`; a claim on class
  mig.nvidia.com with selector `device.attributes['gpu.nvidia.com'].profile == '3g.40gb'`
PASS: `nvidia.com/mig-1g.10gb: 1`; the claim with selector `profile == '1g.10gb'`
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from policies.context import Context
from policies.decision import Finding
from policies.dra.offers import attribute_values
from policies.model import GPUPolicy
from policies.resources import mig_profile
from policies.rules._dra import gpu_requests
from policies.view import ClaimView, PodView

ID = "mig-profile-not-allowed"
INTRINSIC = False

EXAMPLES = """
- FAIL: a 3g slice where only 1g.10gb is allowed
  policy: {rules: {mig: {allowedProfiles: ["1g.10gb"]}}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/mig-3g.40gb: 1}}
- PASS: the allowed 1g.10gb
  policy: {rules: {mig: {allowedProfiles: ["1g.10gb"]}}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/mig-1g.10gb: 1}}
"""
NATIVE = ""
FAMILIES = frozenset({"mig"})


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    mig = policy.spec.rules.mig
    if mig is None or mig.allowed_profiles is None:
        return
    allowed = {p.replace(".me", "+me") for p in mig.allowed_profiles}
    for container in view.demand.containers:
        for name, amount in container.amounts.items():
            profile = mig_profile(name)
            if profile is not None and amount.value > 0 and profile not in allowed:
                yield Finding(
                    ID, f"MIG profile {profile} is not allowed here; allowed: "
                    f"{', '.join(mig.allowed_profiles)}", amount.path,
                )
    yield from _claimed(view, mig.allowed_profiles, context)


def check_claim(view: ClaimView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    mig = policy.spec.rules.mig
    if mig is not None and mig.allowed_profiles is not None:
        yield from _claimed(view, mig.allowed_profiles, context)


def _claimed(view: PodView | ClaimView, allowed_profiles: Sequence[str],
             context: Context) -> Iterator[Finding]:
    dra = context.inventory.dra if context.inventory is not None else None
    if dra is None:
        return
    allowed = {p.replace("+me", ".me") for p in allowed_profiles}
    for path, demand, what in gpu_requests(view):
        if "mig" not in demand.kinds:
            continue
        profiles = attribute_values(demand.request, dra, "profile")
        refused = sorted(p for p in profiles if p.replace("+me", ".me") not in allowed)
        if refused:
            yield Finding(ID, f"{what} may be given MIG profile {', '.join(refused)}, not "
                          f"allowed here; allowed: {', '.join(allowed_profiles)} (select "
                          "the profile in the request's selectors)", path)
