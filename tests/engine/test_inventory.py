"""Nodes -> pools: facts read from Node objects, grouping, naming, model lookup, speed."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.catalog import Catalog
from policies.inventory import Inventory, Node, Taint

HERE = Path(__file__).resolve().parent
CATALOG_FILE = HERE.parents[1] / "policies" / "data" / "catalog.yaml"
CATALOG = Catalog.from_data(yaml.safe_load(CATALOG_FILE.read_text(encoding="utf-8")))
NODES: list[dict[str, Any]] = yaml.safe_load(
    (HERE / "fixtures" / "nodes.yaml").read_text(encoding="utf-8")
)["items"]
INVENTORY = Inventory.from_nodes(NODES, CATALOG)
POOLS = {p.name: p for p in INVENTORY.pools}


def test_pools_of_fixture() -> None:
    assert [p.name for p in INVENTORY.pools] == [
        "a100-mig", "h100", "t4", "ecs.gn7i-c32g1.32xlarge", "m5.xlarge",
    ]
    assert len(INVENTORY.nodes) == 8  # the cordoned node is listed, in no pool
    assert POOLS["a100-mig"].node_names == ("gke-a100-mig-1", "gke-a100-mig-2")
    assert POOLS["h100"].node_names == ("ip-10-0-1-17.ec2.internal", "ip-10-0-1-18.ec2.internal")


@pytest.mark.parametrize(
    ("pool", "model", "product", "gpus", "strategy"),
    [
        ("a100-mig", "NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB", 1, "mixed"),
        ("h100", "NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-80GB-HBM3", 8, ""),
        ("t4", "Tesla-T4", "Tesla-T4-SHARED", 4, ""),
        ("ecs.gn7i-c32g1.32xlarge", "NVIDIA-A10", "NVIDIA-A10", 4, ""),
        ("m5.xlarge", None, "", 0, ""),
    ],
)
def test_pool_facts(
    pool: str, model: str | None, product: str, gpus: int, strategy: str
) -> None:
    found = POOLS[pool]
    assert (found.model.name if found.model else None) == model
    assert (found.product, found.gpu_count, found.mig_strategy) == (product, gpus, strategy)


@pytest.mark.parametrize(
    ("pool", "allocatable"),
    [
        ("a100-mig", {"nvidia.com/mig-1g.10gb": 7, "cpu": Fraction(119, 10),
                      "memory": 160 * 2**30, "pods": 110, "ephemeral-storage": 100 * 2**30,
                      "hugepages-1Gi": 0}),
        ("h100", {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32, "cpu": Fraction(191450, 1000),
                  "memory": 2000 * 2**30}),
        ("t4", {"nvidia.com/gpu": 40, "cpu": Fraction(478, 10)}),
        ("ecs.gn7i-c32g1.32xlarge", {"aliyun.com/gpu-mem": 88, "aliyun.com/gpu-count": 4,
                                     "cpu": 128}),
        ("m5.xlarge", {"cpu": Fraction(392, 100), "memory": 15 * 2**30, "pods": 58}),
    ],
)
def test_allocatable_is_what_the_scheduler_compares(pool: str, allocatable: dict[str, int]
                                                     ) -> None:
    """Extended resources, and the natives NodeResourcesFit compares, exact."""
    assert dict(POOLS[pool].allocatable) == allocatable


def test_nodes_that_differ_only_in_cpu_or_memory_share_a_pool() -> None:
    """gke-a100-mig-1 and -2 list different natives: one pool, the second kept as a variant."""
    assert POOLS["a100-mig"].node_names == ("gke-a100-mig-1", "gke-a100-mig-2")
    assert len(POOLS["a100-mig"].variants) == 1


def test_taints_and_shared_labels() -> None:
    h100 = POOLS["h100"]
    assert h100.taints == (
        Taint("nvidia.com/gpu", "", "NoSchedule"),
        Taint("dedicated", "training", "NoExecute"),
    )
    a100 = POOLS["a100-mig"]
    assert "kubernetes.io/hostname" not in a100.labels
    assert "nvidia.com/gfd.timestamp" not in a100.labels
    assert a100.labels["nvidia.com/mig-1g.10gb.count"] == "7"
    assert a100.labels_of("gke-a100-mig-2")["kubernetes.io/hostname"] == "gke-a100-mig-2"


def test_label_sets_per_node_only_when_needed() -> None:
    a100 = POOLS["a100-mig"]
    assert [name for name, _ in a100.label_sets({"nvidia.com/gpu.product"})] == ["gke-a100-mig-1"]
    per_node = list(a100.label_sets({"kubernetes.io/hostname"}))
    assert [n for n, _ in per_node] == ["gke-a100-mig-1", "gke-a100-mig-2"]
    assert [labels["kubernetes.io/hostname"] for _, labels in per_node] == [
        "gke-a100-mig-1", "gke-a100-mig-2",
    ]
    assert len(list(a100.label_sets((), by_name=True))) == 2


def test_cordoned_node_listed() -> None:
    cordoned = INVENTORY.node("gke-a100-mig-3")
    assert cordoned is not None and cordoned.unschedulable
    assert all("gke-a100-mig-3" not in p.node_names for p in INVENTORY.pools)
    assert INVENTORY.node("nope") is None


def node(name: str, labels: dict[str, str], allocatable: dict[str, str] | None = None,
         taints: list[dict[str, str]] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name, **labels}},
        "spec": {"taints": taints} if taints else {},
        "status": {"allocatable": allocatable or {}},
    }


@pytest.mark.parametrize(
    ("nodes", "names"),
    [
        # no pool label: the product label, then the node's name
        ([node("a", {"nvidia.com/gpu.product": "NVIDIA-L4"}), node("b", {})], ["NVIDIA-L4", "b"]),
        # same pool label, different taints: the first node's name, as the cluster has it
        (
            [
                node("a", {"karpenter.sh/nodepool": "gpu"}),
                node("b", {"karpenter.sh/nodepool": "gpu"},
                     taints=[{"key": "x", "effect": "NoSchedule"}]),
                node("c", {"karpenter.sh/nodepool": "gpu"}, {"nvidia.com/gpu": "2"}),
                node("d", {"karpenter.sh/nodepool": "gpu"}),
            ],
            ["gpu", "b", "c"],
        ),
        # the first present pool label wins
        (
            [node("a", {"node.kubernetes.io/instance-type": "g5.xlarge",
                        "eks.amazonaws.com/nodegroup": "ng-1"})],
            ["ng-1"],
        ),
    ],
)
def test_pool_names(nodes: list[dict[str, Any]], names: list[str]) -> None:
    assert [p.name for p in Inventory.from_nodes(nodes, CATALOG).pools] == names


@pytest.mark.parametrize(
    ("labels", "allocatable", "gpus", "model"),
    [
        ({"nvidia.com/gpu.count": "2"}, {"nvidia.com/gpu": "20"}, 2, None),
        ({}, {"nvidia.com/gpu": "4"}, 4, None),
        ({}, {"nvidia.com/gpu": "4000m"}, 4, None),
        ({}, {"aliyun.com/gpu-count": "2"}, 2, None),
        ({"aliyun.accelerator/nvidia_count": "3",
          "aliyun.accelerator/nvidia_name": "Tesla-V100-SXM2-16GB"}, {}, 3, "Tesla-V100-SXM2-16GB"),
        ({"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB-MIG-1g.5gb"}, {}, 0,
         "NVIDIA-A100-SXM4-40GB"),
        ({"nvidia.com/gpu.product": "NVIDIA-RTX-9999"}, {}, 0, None),
    ],
)
def test_node_facts(
    labels: dict[str, str], allocatable: dict[str, str], gpus: int, model: str | None
) -> None:
    parsed = Node.from_object(node("n", labels, allocatable), CATALOG)
    assert parsed.gpu_count == gpus
    assert (parsed.model.name if parsed.model else None) == model


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"nvidia.com/gpu": "8"}, {"nvidia.com/gpu": 8}),
        ({"nvidia.com/gpu": 8}, {"nvidia.com/gpu": 8}),
        ({"example.com/mem": "80Gi"}, {"example.com/mem": 80 * 2**30}),
        ({"example.com/x": "1k"}, {"example.com/x": 1000}),
        ({"example.com/x": "garbage"}, {}),
        ({"kubernetes.io/batch": "1", "node.kubernetes.io/x": "1", "cpu": "4"}, {"cpu": 4}),
    ],
)
def test_allocatable_parsing(raw: dict[str, Any], expected: dict[str, int]) -> None:
    assert dict(Node.from_object(node("n", {}, raw), CATALOG).allocatable) == expected


def test_malformed_nodes_do_not_crash() -> None:
    inventory = Inventory.from_nodes([{}, {"metadata": None, "spec": None}, "junk"], CATALOG)  # type: ignore[list-item]
    assert len(inventory.nodes) == 2
    assert Inventory.empty().pools == ()


def generated(count: int) -> list[dict[str, Any]]:
    kinds = [
        ({"cloud.google.com/gke-nodepool": "a100",
          "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB", "nvidia.com/gpu.count": "8"},
         {"nvidia.com/gpu": "8"},
         [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]),
        ({"cloud.google.com/gke-nodepool": "l4", "nvidia.com/gpu.product": "NVIDIA-L4"},
         {"nvidia.com/gpu": "1"}, None),
        ({"cloud.google.com/gke-nodepool": "cpu"}, {}, None),
    ]
    out = []
    for i in range(count):
        labels, allocatable, taints = kinds[i % 3]
        extra = {"nvidia.com/gfd.timestamp": str(1764547200 + i), "kubernetes.io/os": "linux"}
        out.append(node(f"node-{i}", {**labels, **extra}, {**allocatable, "cpu": "8"}, taints))
    return out


def test_thousand_nodes_three_pools() -> None:
    # How long this takes is measured in `make bench` (bench_engine), not asserted here.
    inventory = Inventory.from_nodes(generated(1000), CATALOG)
    assert [(p.name, len(p.node_names)) for p in inventory.pools] == [
        ("a100", 334), ("l4", 333), ("cpu", 333),
    ]
