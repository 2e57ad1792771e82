"""gpu-share-whole-card: a GPU share as large as the whole card (15 GiB of a 15 GiB T4 with
gpushare's `aliyun.com/gpu-mem`, HAMi's `nvidia.com/gpumem` or Volcano's MB as much as the card
has, or 100 per cent of its memory) is a whole GPU asked for the slow way: it goes through the
sharing scheduler and isolation, and shuts every other pod out of the card anyway. Ask for
`nvidia.com/gpu: 1`. The card is the model the pod pins, else that of every pool it can reach.
Advice.

FAIL: `aliyun.com/gpu-mem: 15` pinned to `Tesla-T4` (15 GiB)
PASS: `aliyun.com/gpu-mem: 8` there; `nvidia.com/gpu: 1`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.catalog import GPUModel
from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.resources import SHARED_FAMILIES
from policies.rules._reach import reachable
from policies.view import PodView

ID = "gpu-share-whole-card"
INTRINSIC = True
NATIVE = "It needs the card memory of the pools the pod can reach (inventory)."
SEVERITY = "warning"
CATEGORY = "sharing"
FAMILIES = SHARED_FAMILIES
PERCENTAGES = ("nvidia.com/gpumem-percentage", "volcano.sh/vgpu-memory-percentage")
MB = ("nvidia.com/gpumem", "volcano.sh/vgpu-memory", "volcano.sh/gpu-memory")

_POD = """\
    apiVersion: v1
    kind: Pod
    metadata: {{name: infer}}
    spec:
      schedulerName: gpushare-scheduler
      nodeSelector: {{aliyun.accelerator/nvidia_name: Tesla-T4}}
      containers:
      - {{name: main, image: "server:1", resources: {{limits: {{aliyun.com/gpu-mem: {gib}}}}}}}
"""
EXAMPLES = f"""
- FAIL: all 15 GiB of a T4 as a share
  object:
{_POD.format(gib=15)}
- PASS: half of it
  object:
{_POD.format(gib=8)}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    models = _cards(view, context)
    for container in view.demand.containers:
        if container.role == "ephemeral":
            continue
        for name in PERCENTAGES:
            amount = container.amounts.get(name)
            if amount is not None and amount.value == 100:
                yield _finding(f"{name} {amount.value}: all of the card's memory", amount.path)
        if not models:
            continue
        smallest = min(m.memory_mib for m in models)
        card = min(models, key=lambda m: m.memory_mib).name
        gib = container.amounts.get("aliyun.com/gpu-mem")
        cards = view.demand.gpushare_cards
        if gib is not None and cards == 1 and smallest // 1024 <= gib.value \
                and gib.value * 1024 <= smallest:
            yield _finding(f"aliyun.com/gpu-mem {gib.value} GiB: all of a {card}", gib.path)
        for name in MB:
            mb = container.amounts.get(name)
            if mb is not None and smallest * 0.97 <= mb.value <= smallest:
                yield _finding(f"{name} {mb.value} MB: all of a {card}", mb.path)


def _cards(view: PodView, context: Context) -> list[GPUModel]:
    pinned = [m for m in map(context.catalog.lookup, view.products) if m]
    if pinned:
        return pinned
    pools = reachable(view, context)
    found = [p.model for p in pools if p.model is not None]
    return found if found and len(found) == len(pools) else []


def _finding(what: str, path: tuple[str | int, ...]) -> Finding:
    return Finding(ID, f"{what}; a share of a whole card is a whole GPU asked the slow way: "
                   "request nvidia.com/gpu: 1", path, level="warning")
