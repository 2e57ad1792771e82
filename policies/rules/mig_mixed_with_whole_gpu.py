"""mig-mixed-with-whole-gpu: one pod asking for whole GPUs and MIG devices needs a node in
`mixed` strategy that also has GPUs out of MIG mode (under `single` MIG resources do not exist).
Such nodes are rare, so without an inventory the pod is refused; with one, only when no node
advertises both.

FAIL: `nvidia.com/gpu: 1` and `nvidia.com/mig-1g.10gb: 1` in one pod, without an inventory or
  with no node advertising both
PASS: either alone; both, with a `mixed` node advertising both in the inventory
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

EXAMPLES = """
- FAIL: a whole GPU and a MIG slice in one pod
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/gpu: 1, nvidia.com/mig-1g.10gb: 1}}
- PASS: a MIG slice alone
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
NATIVE = "Whether a node runs both depends on the inventory's MIG strategy."
FAMILIES = frozenset({"mig"})


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    totals = view.demand.totals
    whole = totals.get("nvidia.com/gpu", 0) > 0
    mig = sorted(n for n, v in totals.items() if mig_profile(n) is not None and v > 0)
    if not (whole and mig):
        return
    inventory = context.inventory
    wanted = ("nvidia.com/gpu", *mig)
    if inventory is not None and any(
            pool.mig_strategy == "mixed" and all(pool.allocatable.get(n, 0) > 0 for n in wanted)
            for pool in inventory.pools):
        return
    where = ("no node of the inventory advertises both" if inventory is not None
             else "only a node in mixed MIG strategy with GPUs out of MIG mode can run it")
    yield Finding(
        ID, f"the pod asks for nvidia.com/gpu and {', '.join(mig)}: {where}",
        view.containers_path,
    )
