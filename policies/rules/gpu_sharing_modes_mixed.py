"""gpu-sharing-modes-mixed: one pod uses one way of getting GPUs. An ACK node runs one mode
(the other modes' resources are 0 there), HAMi and Volcano each need their own scheduler.

FAIL: `aliyun.com/gpu-mem: 8` and `nvidia.com/gpu: 1`;
  `nvidia.com/gpumem` and `volcano.sh/vgpu-memory`
PASS: `nvidia.com/gpu: 1` with `nvidia.com/gpumem: 4000` (HAMi)
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.view import PodView

ID = "gpu-sharing-modes-mixed"
INTRINSIC = True

EXAMPLES = """
- FAIL: a whole GPU and a gpushare memory share in one pod
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - {name: a, image: "trainer:1", resources: {limits: {nvidia.com/gpu: 1}}}
      - {name: b, image: "trainer:1", resources: {limits: {aliyun.com/gpu-mem: 4}}}
- PASS: whole GPUs only
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - {name: a, image: "trainer:1", resources: {limits: {nvidia.com/gpu: 1}}}
      - {name: b, image: "trainer:1", resources: {limits: {nvidia.com/gpu: 1}}}
"""
NATIVE = ""
_NAMES = {
    "gpushare": "gpushare/cGPU (aliyun.com/*)",
    "hami": "HAMi (nvidia.com/gpumem, gpucores)",
    "volcano-vgpu": "Volcano vGPU (volcano.sh/vgpu-*)",
    "volcano-gpushare": "Volcano gpushare (volcano.sh/gpu-*)",
    "whole": "whole GPUs",
}


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    families = set(view.demand.families) - {"mig", "other"}
    if "hami" in families:
        families.discard("whole")  # HAMi counts GPUs with nvidia.com/gpu
    if len(families) > 1:
        modes = " and ".join(_NAMES[f] for f in sorted(families))
        yield Finding(ID, f"the pod mixes {modes}; use one", view.containers_path)
