"""mig-profile-not-allowed: MIG profiles limited to `rules.mig.allowedProfiles`.

FAIL (allowedProfiles: [1g.10gb]): `nvidia.com/mig-3g.40gb: 1`
PASS: `nvidia.com/mig-1g.10gb: 1`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.resources import mig_profile
from policies.view import PodView

ID = "mig-profile-not-allowed"
INTRINSIC = False
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
