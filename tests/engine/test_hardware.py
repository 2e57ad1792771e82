"""Per-pool verdicts of the hardware match (what `explain` prints), as a table: one small
cluster built here, one pod per row, and the reasons each pool gives."""

from __future__ import annotations

from typing import Any

import pytest

from policies.context import Context
from policies.engine import explain
from policies.inventory import Inventory
from policies.loading import parse_policies
from tests.engine.casetable import expand
from webhook.inputs.sources import load_catalog

CATALOG = load_catalog()


def node(name: str, labels: dict[str, str], allocatable: dict[str, str],
         taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
            "spec": {"taints": taints or []}, "status": {"allocatable": allocatable}}


NODES = [
    node("mps-1", {"karpenter.sh/nodepool": "mps", "nvidia.com/gpu.product": "NVIDIA-L4-SHARED",
                   "nvidia.com/gpu.sharing-strategy": "mps", "nvidia.com/gpu.count": "1"},
         {"nvidia.com/gpu": "4"}),
    node("h200-1", {"karpenter.sh/nodepool": "h200", "nvidia.com/gpu.product": "NVIDIA-H200",
                    "nvidia.com/mig.strategy": "mixed", "nvidia.com/gpu.count": "1"},
         {"nvidia.com/mig-1g.18gb": "7"},
         [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]),
    node("share-1", {"karpenter.sh/nodepool": "share",
                     "aliyun.accelerator/nvidia_name": "NVIDIA-A10"},
         {"aliyun.com/gpu-mem": "48", "aliyun.com/gpu-count": "2"}),
    node("vgpu-1", {"karpenter.sh/nodepool": "vgpu", "nvidia.com/gpu.product": "NVIDIA-L4"},
         {"volcano.sh/vgpu-number": "40", "nvidia.com/gpu": "4"}),
]
INVENTORY = Inventory.from_nodes(NODES, CATALOG)
POLICY = parse_policies("""
apiVersion: gpupolicy.io/v1alpha1
kind: GPUPolicy
metadata: {name: p}
spec:
  inject:
    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
""")


def reasons(pod: dict[str, Any]) -> dict[str, list[str]]:
    context = Context(policies=POLICY, catalog=CATALOG, inventory=INVENTORY)
    [(_, verdicts)] = explain(expand(pod), context, namespace="ml")
    return {v.pool: list(v.reasons) for v in verdicts}


@pytest.mark.parametrize(
    ("pod", "pool", "expected"),
    [
        ({"containers": [{"limits": {"nvidia.com/gpu": 1}}]}, "mps", []),
        ({"containers": [{"limits": {"nvidia.com/gpu": 2}}]}, "mps",
         ["GPUs are shared with MPS here: a container may ask for 1 nvidia.com/gpu, not 2"]),
        ({"containers": [{"limits": {"nvidia.com/gpu": 1}}, {"limits": {"nvidia.com/gpu": 1}}]},
         "mps", []),
        ({"containers": [{"limits": {"nvidia.com/mig-1g.18gb": 1}}]}, "h200", []),
        ({"containers": [{"limits": {"nvidia.com/mig-1g.10gb": 1}}]}, "h200",
         # the scheduler's NodeResourcesFit first, then what the device plugin would refuse
         ["not enough nvidia.com/mig-1g.10gb: the pod needs 1, a node has none",
          "MIG profile 1g.10gb does not exist on NVIDIA-H200; valid: 1g.18gb, 1g.18gb+me, "
          "1g.35gb, 2g.35gb, 3g.71gb, 4g.71gb, 7g.141gb"]),
        ({"containers": [{"limits": {"nvidia.com/mig-1g.18gb": 8}}]}, "h200",
         ["not enough nvidia.com/mig-1g.18gb: the pod needs 8, a node has 7",
          "8×1g.18gb cannot be placed on the 1 GPU(s) of a node"]),
        ({"containers": [{"limits": {"nvidia.com/gpu": 1}}], "tolerations": []}, "h200",
         ["not enough nvidia.com/gpu: the pod needs 1, a node has none"]),
        ({"containers": [{"limits": {"aliyun.com/gpu-mem": 24}}]}, "share", []),
        ({"containers": [{"limits": {"aliyun.com/gpu-mem": 25}}]}, "share",
         ["aliyun.com/gpu-mem 25 GiB does not fit on one GPU (24.0 GiB)"]),
        ({"containers": [{"limits": {"aliyun.com/gpu-mem": 8}}],
          "nodeSelector": {"aliyun.accelerator/nvidia_name": "NVIDIA-A100"}}, "share",
         ["nodeSelector aliyun.accelerator/nvidia_name=NVIDIA-A100 does not match "
          "aliyun.accelerator/nvidia_name=NVIDIA-A10"]),
        ({"containers": [{"limits": {"nvidia.com/gpu": 1}}],
          "nodeSelector": {"kubernetes.io/hostname": "mps-2"}}, "mps",
         ["nodeSelector kubernetes.io/hostname=mps-2 matches none of its nodes"]),
        ({"containers": [{"limits": {"nvidia.com/gpu": 1}}],
          "nodeSelector": {"kubernetes.io/hostname": "mps-1"}}, "mps", []),
        # every per-GPU memory resource is held to one device, as shared-memory-over-device does
        ({"containers": [{"limits": {"volcano.sh/vgpu-number": 1,
                                     "volcano.sh/vgpu-memory": 8000}}]}, "vgpu", []),
        ({"containers": [{"limits": {"volcano.sh/vgpu-number": 1,
                                     "volcano.sh/vgpu-memory": 30000}}]}, "vgpu",
         ['volcano.sh/vgpu-memory 30000 MB of container "c0" is more than one NVIDIA-L4 has '
          "(23034 MiB)"]),
    ],
)
def test_pool_reasons(pod: dict[str, Any], pool: str, expected: list[str]) -> None:
    assert reasons(pod)[pool] == expected


def test_without_inventory_the_catalog_stands_in() -> None:
    context = Context(policies=POLICY, catalog=CATALOG)
    pod = expand({"containers": [{"limits": {"nvidia.com/mig-1g.18gb": 1}}]})
    [(_, verdicts)] = explain(pod, context, namespace="ml")
    fitting = sorted(v.pool for v in verdicts if v.fits)
    assert fitting == ["NVIDIA-H200"]
