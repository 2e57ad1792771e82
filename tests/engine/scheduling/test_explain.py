"""The explain door over the scheduling case table, and what nodes hold (occupancy) in the
shapes real tools write (`kubectl get nodes,pods -A -o yaml`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from policies.context import Context
from policies.engine import explain
from policies.hardware import DEFAULT_TOLERATIONS
from tests.engine.casetable import Case, context_for, load_cases
from webhook.inputs.sources import load_catalog, load_policies, read_cluster_file

FIXTURES = Path(__file__).parent.parent / "fixtures"
ROWS = [c for c in load_cases() if c.source == "scheduling.yaml"]


@pytest.mark.parametrize("case", ROWS, ids=[c.id for c in ROWS])
def test_explain_agrees_with_admission(case: Case) -> None:
    """A pod admitted on the hardware fits some pool or template in explain, and a refused
    one fits none."""
    [(_, verdicts)] = explain(case.object, context_for(case), namespace=case.namespace)
    refused = "gpu-no-matching-hardware" in case.rules
    assert any(v.fits for v in verdicts) is not refused, [v.describe() for v in verdicts]


def _context(name: str) -> Context:
    catalog = load_catalog()
    return Context(policies=load_policies(), catalog=catalog,
                   inventory=read_cluster_file(FIXTURES / f"{name}.yaml").inventory(catalog))


def _pod(gpus: int, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "vision"},
            "spec": {"containers": [{"name": "c", "resources": {
                "limits": {"nvidia.com/gpu": str(gpus)}}}], **spec}}


@pytest.mark.parametrize(("gpus", "selector", "said"), [
    (1, {"team": "vision"}, "fits now (2 of 2 nodes free)"),
    (2, {"team": "vision"}, "fits once 1 nvidia.com/gpu is free on ip-10-0-1-11.ec2.internal "
                            "(held by vision/train-0, vision/train-1)"),
    # bench-3 (6) and eval-7 (1) hold 7 of node 12's GPUs; old-run Succeeded and holds none
    (8, {"team": "vision"}, "fits once 7 nvidia.com/gpu are free on ip-10-0-1-11.ec2.internal "
                            "(held by vision/train-0, vision/train-1)"),
    (8, {"team": "batch"}, "fits now (1 of 1 node free)"),
])
def test_what_nodes_hold(gpus: int, selector: dict[str, str], said: str) -> None:
    [(_, verdicts)] = explain(_pod(gpus, nodeSelector=selector), _context("busy"),
                              namespace="vision")
    fitting = [v for v in verdicts if v.fits]
    assert [v.now for v in fitting] == [said]


def test_nine_gpus_never_fit_whatever_is_free() -> None:
    [(_, verdicts)] = explain(_pod(9), _context("busy"), namespace="vision")
    assert not any(v.fits for v in verdicts)
    assert {v.scheduler for v in verdicts} == {"Insufficient nvidia.com/gpu"}


def test_occupancy_keeps_sums_not_pods() -> None:
    inventory = read_cluster_file(FIXTURES / "busy.yaml").inventory(load_catalog())
    occupancy = inventory.occupancy
    assert occupancy is not None and occupancy.pods == 4  # old-run finished, waiting unbound
    assert occupancy.of("ip-10-0-1-12.ec2.internal")["nvidia.com/gpu"] == 7
    assert occupancy.of("ip-10-0-1-11.ec2.internal")["cpu"] == 96


def test_unreachable_node_explains_only_the_noschedule_taint() -> None:
    [(_, verdicts)] = explain(_pod(1), _context("unreachable"), namespace="vision")
    assert [v.reasons for v in verdicts] == [
        ("taint node.kubernetes.io/unreachable:NoSchedule is not tolerated",)]
    assert {t["key"] for t in DEFAULT_TOLERATIONS} == {
        "node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}


def test_the_audit_of_a_dump_says_what_holds_the_gpus_of_a_pending_pod() -> None:
    """`gpupolicy audit DUMP` (`kubectl get nodes,pods -A -o yaml`): the nodes are the
    inventory and the pods what they hold."""
    from tests.cli.test_review import gpupolicy

    done = gpupolicy("audit", "-o", "json", str(FIXTURES / "busy.yaml"))
    pending = json.loads(done.stdout)["cluster"]["pendingGPUPods"]
    assert pending["total"] == 1
    [pod] = pending["pods"]
    assert pod["name"] == "waiting"
    assert pod["pools"] == [
        "pool h100-batch: node(s) didn't match Pod's node affinity/selector "
        "(nodeSelector team=vision does not match team=batch)",
        "pool h100: fits once 7 nvidia.com/gpu are free on ip-10-0-1-11.ec2.internal "
        "(held by vision/train-0, vision/train-1)",
    ]


def test_review_and_explain_of_a_scale_from_zero_cluster_from_the_command_line(
        tmp_path: Path) -> None:
    """`review` admits what only a template can run and says so; `explain` exits 0 for it and
    1 for a pod nothing can run; `--node-templates` adds a Node-shaped template."""
    from tests.cli.test_review import gpupolicy

    inventory = str(FIXTURES / "scale-from-zero.yaml")
    fits, never = tmp_path / "fits.yaml", tmp_path / "never.yaml"
    fits.write_text(json.dumps(_pod(1)))
    never.write_text(json.dumps(_pod(16)))
    done = gpupolicy("review", str(fits), "--inventory", inventory)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fits NodePool gpu-l4-spot (g6.xlarge) on scale-up; no node now" in done.stdout
    assert "instance type p5.96xlarge is not in the GPU catalog" in done.stderr
    assert gpupolicy("review", str(never), "--inventory", inventory).returncode == 1
    assert gpupolicy("explain", str(fits), "--inventory", inventory).returncode == 0
    assert gpupolicy("explain", str(never), "--inventory", inventory).returncode == 1
    big = tmp_path / "big-node.yaml"
    big.write_text(json.dumps({"apiVersion": "v1", "kind": "Node", "metadata": {
        "name": "gke-a3-template", "labels": {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3"}},
        "status": {"allocatable": {"cpu": "200", "nvidia.com/gpu": "16", "pods": "110"}}}))
    done = gpupolicy("review", str(never), "--inventory", inventory, "--node-templates", str(big))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "fits template gke-a3-template on scale-up; no node now" in done.stdout


def test_a_pod_asking_an_extended_resource_nothing_serves_is_explained_too() -> None:
    """`example.com/gpu` is no GPU the policies know, yet no node serves it: explain says so
    instead of "not a GPU workload" (issue 28's false "fits")."""
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "sim", "namespace": "vision"},
           "spec": {"tolerations": [{"operator": "Exists"}], "containers": [
               {"name": "c", "resources": {"limits": {"example.com/gpu": "1"}}}]}}
    [(_, verdicts)] = explain(pod, _context("busy"), namespace="vision")
    assert not any(v.fits for v in verdicts)
    assert {v.scheduler for v in verdicts} == {"Insufficient example.com/gpu"}
