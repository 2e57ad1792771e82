"""gpu-scheduler-mismatch: shared-GPU resources only work with their own scheduler.
HAMi leaves alone pods of another scheduler (and the default scheduler cannot place
`nvidia.com/gpumem`, which no node advertises), refuses pods with `spec.nodeName` preset, and
Volcano vGPU needs `schedulerName: volcano`.

FAIL: `schedulerName: volcano` with `nvidia.com/gpumem`; `nodeName: n1` with `nvidia.com/gpumem`;
  `volcano.sh/vgpu-memory` without `schedulerName: volcano`
PASS: `nvidia.com/gpumem` with no schedulerName;
  `volcano.sh/vgpu-number` with `schedulerName: volcano`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.view import PodView

ID = "gpu-scheduler-mismatch"
INTRINSIC = True

EXAMPLES = """
- FAIL: HAMi GPU memory under the Volcano scheduler
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      schedulerName: volcano
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 4000}}
- PASS: HAMi GPU memory with the default scheduler name (HAMi's webhook sets its own)
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/gpu: 1, nvidia.com/gpumem: 4000}}
"""
NATIVE = "Not translated yet: scheduler and sharing-family pairing (a fact the webhook reports)."
FAMILIES = frozenset({"hami", "volcano-vgpu"})
HAMI_SCHEDULERS = frozenset({"", "default-scheduler", "hami-scheduler"})


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    families = view.demand.families
    scheduler = str(view.spec.get("schedulerName") or "")
    if "hami" in families:
        if scheduler not in HAMI_SCHEDULERS:
            yield Finding(
                ID, f"HAMi resources (nvidia.com/gpumem, gpucores) with schedulerName {scheduler}: "
                "HAMi skips the pod and no node advertises them, so it stays Pending"
                + ("; Volcano takes volcano.sh/vgpu-* instead" if scheduler == "volcano" else ""),
                view.at("schedulerName"),
            )
        if view.spec.get("nodeName"):
            yield Finding(
                ID, "HAMi refuses pods whose nodeName is preset; use a nodeSelector instead",
                view.at("nodeName"),
            )
    if "volcano-vgpu" in families and scheduler != "volcano":
        yield Finding(
            ID, "volcano.sh/vgpu-* resources need schedulerName: volcano",
            view.at("schedulerName") if scheduler else view.containers_path,
        )
