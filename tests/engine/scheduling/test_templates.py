"""Node templates read as capacity (policies/scheduling/templates.py), in the shapes Karpenter
and Cluster API document; what cannot be read is a problem with its path, never capacity."""

from __future__ import annotations

import time
from typing import Any

import pytest

from policies.scheduling.templates import read_templates
from webhook.inputs.sources import load_catalog

CATALOG = load_catalog()
MIN, MAX = ("cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size",
            "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size")
CAP = "capacity.cluster-autoscaler.kubernetes.io/"


def node_pool(requirements: Any, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": {"name": "gpu"},
            "spec": {"template": {"spec": {
                "nodeClassRef": {"group": "karpenter.k8s.aws", "kind": "EC2NodeClass",
                                 "name": "default"},
                "requirements": requirements, **spec}}}}


def machine_deployment(**annotations: str) -> dict[str, Any]:
    return {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
            "metadata": {"name": "md-0", "namespace": "capi", "annotations": {
                MIN: "0", MAX: "5", **annotations}},
            "spec": {"replicas": 0}}


# (requirements, the instance types the NodePool can start)
KARPENTER = [
    ([{"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "In", "values": ["h100"]}],
     {"p5.48xlarge", "p5.4xlarge"}),
    ([{"key": "karpenter.k8s.aws/instance-family", "operator": "In", "values": ["g5"]},
      {"key": "karpenter.k8s.aws/instance-gpu-count", "operator": "Gt", "values": ["3"]}],
     {"g5.12xlarge", "g5.24xlarge", "g5.48xlarge"}),
    ([{"key": "node.kubernetes.io/instance-type", "operator": "In",
       "values": ["g6e.xlarge", "p4d.24xlarge"]}], {"g6e.xlarge", "p4d.24xlarge"}),
    ([{"key": "karpenter.k8s.aws/instance-gpu-name", "operator": "NotIn",
       "values": ["t4", "a10g", "l4", "l40s", "a100"]},
      {"key": "karpenter.k8s.aws/instance-gpu-memory", "operator": "Gt", "values": ["100000"]}],
     {"p5e.48xlarge"}),
]


@pytest.mark.parametrize(("requirements", "types"), KARPENTER)
def test_a_node_pool_starts_the_catalog_types_its_requirements_allow(
        requirements: Any, types: set[str]) -> None:
    found = read_templates([node_pool(requirements)], CATALOG)
    assert found.problems == ()
    assert {p.name.split("/")[1] for p in found.pools} == types
    assert all(p.template == "NodePool gpu" for p in found.pools)


def test_capacity_type_values_are_label_sets_and_startup_taints_are_not_taints() -> None:
    [pool] = read_templates([node_pool(
        [{"key": "node.kubernetes.io/instance-type", "operator": "In", "values": ["g6.xlarge"]},
         {"key": "karpenter.sh/capacity-type", "operator": "In", "values": ["spot", "on-demand"]}],
        taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}],
        startupTaints=[{"key": "example.com/not-ready", "effect": "NoSchedule"}])],
        CATALOG).pools
    assert [t.key for t in pool.taints] == ["nvidia.com/gpu"]
    assert sorted(pool.labels_of(n)["karpenter.sh/capacity-type"] for n in pool.node_names) == [
        "on-demand", "spot"]
    assert pool.allocatable["nvidia.com/gpu"] == 1 and pool.model is not None
    assert pool.model.name == "NVIDIA-L4"


def test_the_documented_scale_from_zero_annotations() -> None:
    """cluster-autoscaler's Cluster API example: 16 CPUs, 128G, 100Gi disk, 2 GPUs, 200 pods."""
    [pool] = read_templates([machine_deployment(**{
        CAP + "memory": "128G", CAP + "cpu": "16", CAP + "ephemeral-disk": "100Gi",
        CAP + "gpu-type": "nvidia.com/gpu", CAP + "gpu-count": "2", CAP + "maxPods": "200",
        CAP + "labels": "node-type=gpu,workload=batch",
        CAP + "taints": "workload=batch:NoSchedule"})], CATALOG).pools
    assert dict(pool.allocatable) == {"cpu": 16, "memory": 128 * 10**9,
                                      "ephemeral-storage": 100 * 2**30, "pods": 200,
                                      "nvidia.com/gpu": 2}
    assert pool.labels == {"node-type": "gpu", "workload": "batch"}
    assert [(t.key, t.value, t.effect) for t in pool.taints] == [
        ("workload", "batch", "NoSchedule")]
    assert pool.template == "MachineDeployment capi/md-0" and not pool.blocked


@pytest.mark.parametrize(("obj", "path", "words"), [
    (node_pool([{"key": "node.kubernetes.io/instance-type", "operator": "In",
                 "values": ["p5.96xlarge"]}]),
     "spec.template.spec.requirements[0].values[0]", "not in the GPU catalog"),
    (node_pool([{"key": "karpenter.sh/capacity-type", "operator": "Sometimes"}]),
     "spec.template.spec.requirements[0]", "not a requirement"),
    (node_pool("everything"), "spec.template.spec.requirements", "must be a list"),
    (node_pool([], taints=[{"effect": "NoSchedule"}]), "spec.template.spec.taints[0]",
     "a taint needs a key"),
    (machine_deployment(**{CAP + "cpu": "16", CAP + "memory": "64Gi", CAP + "gpu-count": "two"}),
     f"metadata.annotations[{CAP}gpu-count]", "'two' is not a whole number"),
    (machine_deployment(**{CAP + "cpu": "lots", CAP + "memory": "64Gi"}),
     f"metadata.annotations[{CAP}cpu]", "is not a quantity"),
    (machine_deployment(**{CAP + "gpu-count": "1"}),
     f"metadata.annotations[{CAP}cpu]", "cannot scale this group from zero"),
    (machine_deployment(**{CAP + "cpu": "8", CAP + "memory": "32Gi",
                           CAP + "taints": "nvidia.com/gpu=present"}),
     f"metadata.annotations[{CAP}taints]", "is not key=value:Effect"),
    (machine_deployment(**{CAP + "cpu": "8", CAP + "memory": "32Gi", CAP + "labels": "gpu"}),
     f"metadata.annotations[{CAP}labels]", "is not key=value"),
    ({**machine_deployment(), "metadata": {"name": "md-1", "annotations": {MIN: "-1", MAX: "3"}}},
     f"metadata.annotations[{MIN}]", "is not a whole number"),
])
def test_what_cannot_be_read_is_a_problem_with_its_path_and_never_capacity(
        obj: dict[str, Any], path: str, words: str) -> None:
    found = read_templates([obj], CATALOG)
    assert any(p.path == path and words in p.message for p in found.problems), found.problems
    if obj["kind"] != "NodePool":
        assert found.pools == ()


def test_a_group_at_its_max_size_and_a_node_pool_at_its_limits_start_nothing() -> None:
    group = machine_deployment(**{CAP + "cpu": "8", CAP + "memory": "32Gi", MAX: "2"})
    group["spec"]["replicas"] = 2
    [pool] = read_templates([group], CATALOG).pools
    assert "max size (2)" in pool.blocked
    limited = node_pool([{"key": "node.kubernetes.io/instance-type", "operator": "In",
                          "values": ["g5.48xlarge", "g5.xlarge"]}])
    limited["spec"]["limits"] = {"nvidia.com/gpu": "10"}
    limited["status"] = {"resources": {"nvidia.com/gpu": "4"}}
    pools = {p.name: p.blocked for p in read_templates([limited], CATALOG).pools}
    assert "leave 6 nvidia.com/gpu" in pools["gpu/g5.48xlarge"]
    assert pools["gpu/g5.xlarge"] == ""


def test_objects_that_are_not_node_groups_are_not_templates() -> None:
    plain = {"apiVersion": "cluster.x-k8s.io/v1beta1", "kind": "MachineDeployment",
             "metadata": {"name": "workers"}, "spec": {"replicas": 3}}
    assert read_templates([plain, "text", None], CATALOG) == ((), ())  # type: ignore[list-item]


def test_ten_thousand_requirements_stay_bounded() -> None:
    requirements = [{"key": f"example.com/k{i}", "operator": "In",
                     "values": [str(v) for v in range(100)]} for i in range(10_000)]
    started = time.perf_counter()
    found = read_templates([node_pool(requirements)], CATALOG)
    assert time.perf_counter() - started < 2.0
    assert found.pools == ()
    [problem] = found.problems
    assert "at most 100" in problem.message


def test_a_hundred_multi_valued_requirements_give_a_bounded_number_of_label_sets() -> None:
    requirements = [{"key": "node.kubernetes.io/instance-type", "operator": "In",
                     "values": ["g6.xlarge"]},
                    *({"key": f"example.com/k{i}", "operator": "In",
                       "values": [str(v) for v in range(1000)]} for i in range(99))]
    started = time.perf_counter()
    [pool] = read_templates([node_pool(requirements)], CATALOG).pools
    assert time.perf_counter() - started < 2.0
    assert len(pool.node_names) <= 32
