"""mig-instances-over-policy: MIG instances a pod holds stay within `rules.mig.maxInstancesPerPod`.

FAIL (maxInstancesPerPod: 2): three containers with `nvidia.com/mig-1g.10gb: 1`
PASS: two of them
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.resources import mig_profile
from policies.view import PodView

ID = "mig-instances-over-policy"
INTRINSIC = False
FAMILIES = frozenset({"mig"})


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    mig = policy.spec.rules.mig
    if mig is None or mig.max_instances_per_pod is None:
        return
    total = sum(v for n, v in view.demand.totals.items() if mig_profile(n) is not None)
    if total > mig.max_instances_per_pod:
        yield Finding(
            ID, f"the pod holds {total} MIG instances; at most {mig.max_instances_per_pod} "
            "allowed", view.containers_path,
        )
