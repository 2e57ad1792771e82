"""`gpupolicy explain`: every pool and why it cannot take the pod, from a file or the cluster."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.cluster.conftest import gpupolicy, namespace
from tests.cluster.test_audit import NODES, _load, _nodes, gpupolicy_cli
from webhook.inputs import reading

TOLERATE = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def pod(name: str, limits: dict[str, Any], ns: str = "ml", **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": ns},
            "spec": {"containers": [{"name": "c", "image": "cuda",
                                     "resources": {"limits": limits}}], **spec}}


ONLY_H100 = gpupolicy("h100-only", namespaces=["ml"], rules={
    "allowedModels": ["NVIDIA-H100-80GB-HBM3"]})
AFFINITY = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
    "nodeSelectorTerms": [{"matchExpressions": [
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["NVIDIA-H100-80GB-HBM3"]}]}]}}}

# (objects in the cluster / file besides the nodes, the pod, pool -> words its reason must hold)
CASES = {
    "taint-not-tolerated": (
        [], pod("t", {"nvidia.com/gpu": 1}, ns="kube-system"),  # excluded: nothing injected
        {"p4de.24xlarge": ["nvidia.com/gpu", "taint"], "g4dn.xlarge": ["taint"]}),
    "selector-mismatch": (
        [], pod("s", {"nvidia.com/gpu": 1}, nodeSelector={"workload": "inference"}),
        {"p4de.24xlarge": ["nodeSelector", "workload=inference"]}),
    "affinity-mismatch": (
        [], pod("a", {"nvidia.com/gpu": 1}, affinity=AFFINITY),
        {"p4de.24xlarge": ["affinity"], "g4dn.xlarge": ["affinity"]}),
    "not-enough-gpus": (
        [], pod("n", {"nvidia.com/gpu": 8}),
        {"p4de.24xlarge": ["not enough nvidia.com/gpu", "needs 8", "has 6"],
         "g4dn.xlarge": ["has 1"]}),
    "mig-profile-absent": (
        [], pod("m", {"nvidia.com/mig-1g.18gb": 1}),
        {"p4de.24xlarge": ["MIG profile 1g.18gb does not exist", "1g.10gb"]}),
    "shared-memory-too-large": (
        [], pod("g", {"aliyun.com/gpu-mem": 30}),
        {"NVIDIA-A10": ["does not fit on one GPU", "22"]}),
    "model-not-allowed": (
        [ONLY_H100], pod("x", {"nvidia.com/gpu": 1}),
        {"p4de.24xlarge": ["NVIDIA-A100-SXM4-80GB is not allowed"],
         "g4dn.xlarge": ["is not allowed"]}),
}


def _explain_file(tmp_path: Path, objects: list[dict[str, Any]], *argv: str) -> tuple[int, Any]:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump_all(objects), encoding="utf-8")
    code, out, err = gpupolicy_cli("explain", str(manifest), "--format", "json", *argv)
    assert code in (0, 1), err
    return code, json.loads(out)


def _reasons(answer: dict[str, Any]) -> dict[str, str]:
    (spec,) = answer["podSpecs"]
    return {p["pool"]: " ".join(p["reasons"]) for p in spec["pools"]}


@pytest.mark.parametrize("case", list(CASES))
def test_each_pool_says_why_from_a_file(tmp_path, case):
    extra, workload, expect = CASES[case]
    code, (answer,) = _explain_file(tmp_path, [*extra, workload], "--inventory", str(NODES))
    assert code == 1
    reasons = _reasons(answer)
    assert set(reasons) == {"NVIDIA-A10", "p4de.24xlarge", "m5.2xlarge", "g4dn.xlarge"}
    for pool, words in expect.items():
        for word in words:
            assert word in reasons[pool], (pool, reasons[pool])


@pytest.mark.parametrize("case", list(CASES))
def test_live_cluster_gives_the_same_answer(api_server, kubeconfig, tmp_path, case):
    extra, workload, _ = CASES[case]
    _load(api_server, [namespace("ml"), *_nodes(), *extra, workload])
    code, out, err = gpupolicy_cli("explain", f"{workload['metadata']['namespace']}/"
                                              f"{workload['metadata']['name']}",
                                   "--kubeconfig", kubeconfig, "-o", "json")
    assert code == 1, err
    live = json.loads(out)
    for answer in live:  # live, explain also says what the running pods hold ("now")
        for spec in answer["podSpecs"]:
            for verdict in spec["pools"]:
                assert verdict.pop("now") == "never fits"
    _, offline = _explain_file(tmp_path, [*extra, workload, *_nodes()])
    assert live == offline  # nodes as documents of the file
    _, with_inventory = _explain_file(tmp_path, [*extra, workload], "--inventory", str(NODES))
    assert live == with_inventory


def test_fitting_pod_exits_zero_and_names_the_pools(tmp_path):
    code, (answer,) = _explain_file(tmp_path, [pod("ok", {"nvidia.com/gpu": 1})],
                                    "--inventory", str(NODES))
    assert code == 0
    fits = {p["pool"] for p in answer["podSpecs"][0]["pools"] if p["fits"]}
    assert fits == {"p4de.24xlarge", "g4dn.xlarge"}


def test_deployment_by_kind_and_scheduler_message(api_server, kubeconfig):
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "web", "namespace": "ml"},
                  "spec": {"template": {"spec": pod("x", {"nvidia.com/gpu": 8})["spec"]}}}
    pending = pod("p", {"nvidia.com/gpu": 8}, tolerations=TOLERATE)
    pending["status"] = {"phase": "Pending", "conditions": [{
        "type": "PodScheduled", "status": "False", "reason": "Unschedulable",
        "message": "0/4 nodes are available: 4 Insufficient nvidia.com/gpu."}]}
    _load(api_server, [namespace("ml"), *_nodes(), deployment, pending])
    code, out, _ = gpupolicy_cli("explain", "deployment/ml/web", "--kubeconfig", kubeconfig)
    assert code == 1
    assert "Deployment ml/web" in out and "pod spec spec.template.spec: fits NO node pool" in out
    code, out, _ = gpupolicy_cli("explain", "ml/p", "--kubeconfig", kubeconfig)
    assert "scheduler says: 0/4 nodes are available" in out


@pytest.mark.parametrize(
    ("target", "message"),
    [("ml/missing", "not found in the cluster"), ("a/b/c/d", "a/b/c/d: no such file or directory"),
     ("/nonexistent", "/nonexistent: no such file or directory"),
     ("widget/ml/x", "unknown kind")],
)
def test_bad_targets_are_clear_errors(api_server, kubeconfig, target, message):
    _load(api_server, [namespace("ml"), *_nodes()])
    code, _, err = gpupolicy_cli("explain", target, "--kubeconfig", kubeconfig)
    assert code == 2
    assert message in err and "Traceback" not in err


def test_without_inventory_the_catalog_stands_in(tmp_path):
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump(pod("m", {"nvidia.com/mig-3g.40gb": 1})), "utf-8")
    code, out, _ = gpupolicy_cli("explain", str(manifest))
    assert code == 0
    assert "No inventory" in out and "NVIDIA-A100-SXM4-80GB" in out


def test_not_a_gpu_workload(tmp_path):
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(yaml.safe_dump(pod("cpu", {"cpu": 1})), "utf-8")
    code, out, _ = gpupolicy_cli("explain", str(manifest), "--inventory", str(NODES))
    assert code == 0
    assert "not a GPU workload" in out


# ---- DRA: a ResourceClaim or ResourceClaimTemplate is explained per DRA node group ----------

DRA = Path(__file__).parent / "data" / "dra.yaml"  # h100-1 (8 GPUs), l4-1 and l4-2 (2 each)


def claim(name: str, *requests: dict[str, Any], template: bool = False,
          spec: Any = None) -> dict[str, Any]:
    devices = {"devices": {"requests": list(requests)}}
    body = spec if spec is not None else {"spec": devices} if template else devices
    return {"apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate" if template else "ResourceClaim",
            "metadata": {"name": name, "namespace": "ml"}, "spec": body}


def gpus(count: int, name: str = "gpu", device_class: str = "gpu.nvidia.com") -> dict[str, Any]:
    return {"name": name, "exactly": {"deviceClassName": device_class, "count": count}}


# claim -> (exit status, DRA node group -> words its reason holds ("" = it fits),
#           words of the claim's problems)
CLAIM_CASES: dict[str, tuple[dict[str, Any], int, dict[str, list[str]], list[str]]] = {
    "template-fits-one-group": (
        claim("four", gpus(4), template=True), 0,
        {"node h100-1": [], "node l4-1": ["2 devices match class gpu.nvidia.com",
                                          "the claim asks for 4"]}, []),
    "fits-no-group": (
        claim("sixteen", gpus(16)), 1,
        {"node h100-1": ["8 devices match", "asks for 16"], "node l4-1": ["asks for 16"]}, []),
    "mig-class-without-mig-devices": (
        claim("mig", gpus(1, device_class="mig.nvidia.com")), 1,
        {"node h100-1": ["0 devices match class mig.nvidia.com"]}, []),
    "each-request-named": (
        claim("two", gpus(1), gpus(1, "slice", "mig.nvidia.com")), 1,
        {"node h100-1": ["claim two request slice:", "0 devices match class mig.nvidia.com"]},
        []),
    "first-available": (
        claim("alt", {"name": "gpu", "firstAvailable": [
            {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 4},
            {"name": "small", "deviceClassName": "gpu.nvidia.com", "count": 2}]}), 0,
        {"node h100-1": [], "node l4-1": []}, []),
    "unknown-class": (
        claim("nope", gpus(1, device_class="tpu.example.com")), 1,
        {"node h100-1": ["device class tpu.example.com does not exist"]}, []),
    "malformed-count": (
        claim("bad", {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                 "count": "many"}}), 0,
        {}, ["spec.devices.requests[0].exactly.count must be an integer"]),
    "template-spec-a-list": (
        claim("junk", template=True, spec=[1, 2]), 0, {}, ["spec must be an object"]),
}


def _groups(answer: dict[str, Any]) -> dict[str, str]:
    (devices,) = answer["devices"]
    assert devices["path"] in ("spec.devices", "spec.spec.devices")
    return {p["pool"]: " ".join(p["reasons"]) for p in devices["pools"]}


@pytest.mark.parametrize("case", list(CLAIM_CASES))
def test_a_claim_from_a_file_per_node_group(tmp_path, case):
    obj, status, expect, problems = CLAIM_CASES[case]
    code, (answer,) = _explain_file(tmp_path, [obj], "--inventory", str(DRA))
    assert code == status
    assert (answer["kind"], answer["claim"], answer["podSpecs"]) == (obj["kind"], True, [])
    groups = _groups(answer)
    assert set(groups) == {"node h100-1", "node l4-1"}  # l4-2 is alike: l4-1's group
    for group, words in expect.items():
        assert (groups[group] == "") is (not words), (group, groups[group])
        for word in words:
            assert word in groups[group], (group, groups[group])
    found = " ".join(p["message"] for p in answer["problems"])
    assert all(word in found for word in problems) and bool(found) is bool(problems)


@pytest.mark.parametrize("case", list(CLAIM_CASES))
def test_a_claim_in_the_cluster_gives_the_same_answer(api_server, kubeconfig, tmp_path, case):
    obj = CLAIM_CASES[case][0]
    _load(api_server, [namespace("ml"), *reading.read_objects(DRA), obj])
    plural = "resourceclaimtemplates" if obj["kind"] == "ResourceClaimTemplate" else \
        "resourceclaim"  # the plural and the kind both name it, as for kubectl
    code, out, err = gpupolicy_cli("explain", f"{plural}/ml/{obj['metadata']['name']}",
                                   "--kubeconfig", kubeconfig, "-o", "json")
    assert code == CLAIM_CASES[case][1], err
    _, offline = _explain_file(tmp_path, [obj, *reading.read_objects(DRA)])
    assert json.loads(out) == offline


def test_claim_text_names_each_group_and_exits_one_when_none_fits(tmp_path):
    manifest = tmp_path / "claims.yaml"
    manifest.write_text(yaml.safe_dump_all([CLAIM_CASES["template-fits-one-group"][0],
                                            CLAIM_CASES["each-request-named"][0]]), "utf-8")
    code, out, err = gpupolicy_cli("explain", str(manifest), "--inventory", str(DRA))
    assert code == 1, err
    assert out.splitlines()[:4] == [
        "ResourceClaimTemplate ml/four  (policies: gpu-defaults)",
        "  devices spec.spec.devices: fits 1 of 2 node groups",
        "    node h100-1: fits, taking gpu: gpu-0, gpu-1, gpu-2, gpu-3",
        "    node l4-1 and 1 more alike: 2 devices match class gpu.nvidia.com, the claim asks "
        "for 4",
    ]
    assert "ResourceClaim ml/two  (policies: gpu-defaults)\n  devices spec.devices: fits NO " \
           "node group\n    node h100-1: claim two request slice: 0 devices" in out


# claim case -> node group -> what its first allocation takes (the alternative chosen too)
ALLOCATIONS = {
    "template-fits-one-group": {"node h100-1": "gpu: gpu-0, gpu-1, gpu-2, gpu-3",
                                "node l4-1": None},
    "first-available": {"node h100-1": "gpu (gpu/big): gpu-0, gpu-1, gpu-2, gpu-3",
                        "node l4-1": "gpu (gpu/small): gpu-0, gpu-1"},
}


@pytest.mark.parametrize("case", list(ALLOCATIONS))
def test_a_fitting_group_says_what_it_would_take(tmp_path, case):
    _, (answer,) = _explain_file(tmp_path, [CLAIM_CASES[case][0]], "--inventory", str(DRA))
    (devices,) = answer["devices"]
    taken = {p["pool"]: p.get("allocation") for p in devices["pools"]}
    assert taken == ALLOCATIONS[case]


def test_claim_without_dra_inventory_says_what_is_missing(tmp_path):
    manifest = tmp_path / "claim.yaml"
    manifest.write_text(yaml.safe_dump(claim("one", gpus(1))), "utf-8")
    for argv in ((), ("--inventory", str(NODES))):  # no inventory; nodes without DRA objects
        code, out, err = gpupolicy_cli("explain", str(manifest), *argv)
        assert code == 0, err
        assert "no DRA inventory to allocate it from" in out


def test_a_pod_with_a_claim_in_the_cluster_names_pool_and_request(api_server, kubeconfig):
    template = claim("four", gpus(4), template=True)
    worker = pod("w", {}, resourceClaims=[{"name": "gpu", "resourceClaimTemplateName": "four"}])
    _load(api_server, [namespace("ml"), *reading.read_objects(DRA), template, worker])
    code, out, err = gpupolicy_cli("explain", "ml/w", "--kubeconfig", kubeconfig)
    assert code == 0, err
    assert "pool NVIDIA-H100-80GB-HBM3 (1 node, NVIDIA-H100-80GB-HBM3): fits" in out
    assert ("pool NVIDIA-L4 (2 nodes, NVIDIA-L4): cannot allocate all claims\n"
            "      - 2 devices match class gpu.nvidia.com, the claim asks for 4") in out


def test_live_explain_says_what_the_running_pods_hold(api_server, kubeconfig):
    """Issue 28: in a cluster, explain subtracts what the pods bound to each node request;
    a finished pod holds nothing; admission would still admit (the nodes fit when empty)."""
    def running(name: str, node: str, gpus: int, phase: str = "Running") -> dict[str, Any]:
        held = pod(name, {"nvidia.com/gpu": gpus}, nodeName=node, tolerations=TOLERATE)
        held["status"] = {"phase": phase}
        return held

    _load(api_server, [namespace("ml"), *_nodes(), running("train-0", "a100-1", 4),
                       running("done", "t4-1", 1, phase="Succeeded"),
                       running("infer-0", "t4-1", 1)])
    api_server.add(pod("next", {"nvidia.com/gpu": 4}, tolerations=TOLERATE))
    code, out, err = gpupolicy_cli("explain", "ml/next", "--kubeconfig", kubeconfig, "-o",
                                   "json")
    assert code == 0, err
    pools = {p["pool"]: p for p in json.loads(out)[0]["podSpecs"][0]["pools"]}
    assert pools["p4de.24xlarge"]["now"] == ("fits once 2 nvidia.com/gpu are free on a100-1 "
                                             "(held by ml/train-0)")
    api_server.add(pod("small", {"nvidia.com/gpu": 1}, tolerations=TOLERATE))
    code, out, err = gpupolicy_cli("explain", "ml/small", "--kubeconfig", kubeconfig, "-o",
                                   "json")
    pools = {p["pool"]: p for p in json.loads(out)[0]["podSpecs"][0]["pools"]}
    assert pools["p4de.24xlarge"]["now"] == "fits now (1 of 1 node free)"
    assert pools["g4dn.xlarge"]["now"] == ("fits once 1 nvidia.com/gpu is free on t4-1 "
                                           "(held by ml/infer-0)")
