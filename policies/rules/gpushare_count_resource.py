"""gpushare-count-resource: `aliyun.com/gpu-count` is not something a pod requests. The device
plugin writes it into node status; ACK multi-GPU sharing takes it as a pod LABEL beside
`aliyun.com/gpu-mem` (which must divide evenly by it).

FAIL: `limits: {aliyun.com/gpu-count: 2}`
PASS: label `aliyun.com/gpu-count: "2"` with `limits: {aliyun.com/gpu-mem: 16}`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.view import PodView

ID = "gpushare-count-resource"
INTRINSIC = True
FAMILIES = frozenset({"gpushare"})


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    for container in view.demand.containers:
        amount = container.amounts.get("aliyun.com/gpu-count")
        if amount is not None:
            yield Finding(
                ID, "aliyun.com/gpu-count is a node fact, not a resource: for multi-GPU sharing "
                "set the pod label aliyun.com/gpu-count and request aliyun.com/gpu-mem",
                amount.path,
            )
