"""mig-multiple-per-container (advice): CUDA uses one MIG device per process and the device
plugin exposes only one to a container, so asking for more leaves the rest idle.

FAIL: `nvidia.com/mig-1g.10gb: 2`, or two MIG resources in one container
PASS: `nvidia.com/mig-1g.10gb: 1`; two containers with one each
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.display import shown
from policies.model import GPUPolicy
from policies.resources import mig_profile
from policies.view import PodView

ID = "mig-multiple-per-container"
INTRINSIC = True
SEVERITY = "warning"  # advice: every finding it makes is a warning

EXAMPLES = """
- FAIL: two MIG slices in one container (CUDA sees one)
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/mig-1g.10gb: 2}}
- PASS: one slice per container
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
NATIVE = "Advice (a warning): one binding has one action for all its validations."
FAMILIES = frozenset({"mig"})


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    for container in view.demand.containers:
        mig = {n: a for n, a in container.amounts.items() if mig_profile(n) and a.value > 0}
        total = sum(a.value for a in mig.values())
        if total > 1:
            yield Finding(
                ID, f"container {shown(container.name)} asks for {total} MIG devices; only one is "
                "visible to it", next(iter(mig.values())).path, level="warning",
            )
