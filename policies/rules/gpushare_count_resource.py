"""gpushare-count-resource: `aliyun.com/gpu-count` as a container resource is advice: the
device plugin advertises it per node and a pod that asks for it runs, but it does not spread
`aliyun.com/gpu-mem` over several GPUs; ACK multi-GPU sharing takes the pod LABEL
`aliyun.com/gpu-count` for that, and then refuses a memory request that does not divide evenly
by it (each GPU gives the same whole number of GiB).

FAIL: label `aliyun.com/gpu-count: "4"` with `aliyun.com/gpu-mem: 10`
WARN: `limits: {aliyun.com/gpu-count: 1}`
PASS: label `aliyun.com/gpu-count: "4"` with `limits: {aliyun.com/gpu-mem: 24}`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.resources import ACK_CARDS
from policies.view import PodView

ID = "gpushare-count-resource"
INTRINSIC = True

EXAMPLES = """
- FAIL: gpu-count as a container resource
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      schedulerName: gpushare-scheduler
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {aliyun.com/gpu-mem: 8, aliyun.com/gpu-count: 2}}
- PASS: gpu-count as the pod label, the memory dividing evenly
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p, labels: {aliyun.com/gpu-count: "4"}}
    spec:
      schedulerName: gpushare-scheduler
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {aliyun.com/gpu-mem: 24}}
"""
NATIVE = "Not translated yet: gpushare's count resource (a fact the webhook reports)."
FAMILIES = frozenset({"gpushare"})


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    for container in view.demand.containers:
        amount = container.amounts.get(ACK_CARDS)
        if amount is not None:
            yield Finding(
                ID, f"{ACK_CARDS} as a resource does not spread aliyun.com/gpu-mem over "
                f"several GPUs: for multi-GPU sharing set the pod label {ACK_CARDS}",
                amount.path, level="warning",
            )
    cards = view.demand.gpushare_cards
    if cards > 1:
        gib = sum((c.amount("aliyun.com/gpu-mem") for c in view.demand.containers
                   if c.role == "app"), 0)
        if gib and gib % cards:
            yield Finding(
                ID, f"aliyun.com/gpu-mem {gib} GiB cannot be spread evenly over the {cards} "
                f"GPUs of label {ACK_CARDS}: ACK needs the same whole number of GiB on each",
                view.containers_path,
            )
