"""mig-mixed-with-whole-gpu: one pod asking for whole GPUs and MIG devices needs a node in
`mixed` strategy that also has GPUs out of MIG mode; under `single` MIG resources do not exist.

FAIL: `nvidia.com/gpu: 1` and `nvidia.com/mig-1g.10gb: 1` in one pod
PASS: either alone
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.resources import mig_profile
from policies.view import PodView

ID = "mig-mixed-with-whole-gpu"
INTRINSIC = True
FAMILIES = frozenset({"mig"})


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    totals = view.demand.totals
    whole = totals.get("nvidia.com/gpu", 0) > 0
    mig = [n for n, v in totals.items() if mig_profile(n) is not None and v > 0]
    if whole and mig:
        yield Finding(
            ID, f"the pod asks for nvidia.com/gpu and {', '.join(sorted(mig))}: request "
            "either whole GPUs or MIG devices", view.at("containers"),
        )
