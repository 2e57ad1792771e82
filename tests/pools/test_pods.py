"""The pool view's reading of pods: failure causes (cases/failures.yaml), Pending pods with
how long they waited and the first filter each pool fails them on, pools their selector
excludes that have free GPUs of the model they would take; running pods are not "would
mutate"; hostile labels stay bounded."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.pools.failures import cause
from tests.pools import shapes
from tests.pools.helpers import HERE, NOW, cli

FAILURES = yaml.safe_load((HERE / "cases" / "failures.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("row", FAILURES, ids=[r["name"] for r in FAILURES])
def test_failure_cause(row: dict[str, Any]) -> None:
    pod = shapes.pod("p", node_name="n-1", phase=row.get("phase", "Running"))
    pod["status"] = {"phase": row.get("phase", "Running"), **row["status"]}
    assert cause(pod) == row["cause"]


def _audit(tmp_path: Path, objects: list[dict[str, Any]], *extra: str) -> tuple[int, str, str]:
    dump = tmp_path / "dump.yaml"
    dump.write_text(shapes.dump(objects), encoding="utf-8")
    return cli("audit", str(dump), *extra)


def test_failing_pods_of_each_cause_are_counted_apart_per_pool(tmp_path: Path) -> None:
    pods = []
    for i, row in enumerate(r for r in FAILURES if r["cause"]):
        pod = shapes.pod(f"p{i}", node_name="s-1")
        pod["status"] = {"phase": row.get("phase", "Running"), **row["status"]}
        pods.append(pod)
    code, out, err = _audit(tmp_path, [shapes.node("s-1", pool="s"), *pods], "--pools", "-o",
                            "json", "--now", NOW)
    assert code == 0, err
    pool = json.loads(out)["pools"][0]
    assert pool["failures"] == {"capacity": 2, "image": 2, "host-oom": 2, "device": 3,
                                "gpu-oom": 1, "other": 1}


def test_pending_pods_wait_and_pools_their_selector_excludes_with_free_gpus(
        tmp_path: Path) -> None:
    taint = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    objects = [
        shapes.node("a-1", pool="team-a", taints=taint),
        shapes.node("b-1", pool="team-b", taints=taint),  # the same model, free
        shapes.node("l4-1", pool="l4", product="NVIDIA-L4", gpus=1, memory_mib=23034),
        shapes.pod("hold", node_name="a-1", gpus=8),
        # pinned to team-a's pool, which is full; team-b has 8 free A100s
        shapes.pod("pinned", gpus=4, phase="Pending", created="2026-05-01T11:30:00Z",
                   node_selector={"karpenter.sh/nodepool": "team-a"}),
        # tolerates nothing: the A100 pools' taint is its first failing filter
        shapes.pod("untolerated", gpus=1, phase="Pending", created="2026-05-01T09:00:00Z",
                   tolerations=[]),
        shapes.pod("done", node_name="b-1", gpus=8, phase="Succeeded"),
    ]
    code, out, err = _audit(tmp_path, objects, "--pools", "-o", "json", "--now", NOW)
    assert code == 0, err
    doc = json.loads(out)
    pools = {p["name"]: p for p in doc["pools"]}
    assert pools["team-a"]["pending"]["count"] == 1
    assert pools["team-a"]["pending"]["waitSeconds"] == {"p50": 1800, "max": 1800}
    assert pools["team-a"]["pending"]["blockedBy"] == {
        "node(s) had untolerated taint(s)": 1}
    assert pools["team-b"]["pending"]["blockedBy"] == {
        "node(s) didn't match Pod's node affinity/selector": 1,
        "node(s) had untolerated taint(s)": 1}
    assert pools["team-b"]["gpus"] == {"allocatable": 8, "allocated": 0, "free": 8,
                                       "fragmented": 0}  # the Succeeded pod holds nothing
    by_name = {p["name"]: p for p in doc["pending"]["pods"]}
    assert by_name["pinned"]["excludedWithFree"] == ["team-b"]
    assert by_name["pinned"]["pools"]["team-a"] == "fits (waits for capacity)"
    assert by_name["untolerated"]["waitSeconds"] == 10800
    assert by_name["untolerated"]["pools"]["l4"] == "fits (waits for capacity)"
    assert by_name["untolerated"]["excludedWithFree"] == []
    code, text, _ = _audit(tmp_path, objects, "--pools", "--now", NOW)
    assert "1 are kept by their selector from pools with free GPUs" in text
    assert "ml/pinned (4 GPUs): team-b" in text


def test_running_pods_are_not_would_mutate_and_phases_are_named(tmp_path: Path) -> None:
    policy = {"apiVersion": "gpupolicy.io/v1alpha1", "kind": "GPUPolicy",
              "metadata": {"name": "inject"},
              "spec": {"mode": "Warn", "inject": {"priorityClassName": "batch-low"}}}
    objects = [shapes.node("a-1", pool="a"), policy,
               shapes.pod("running", node_name="a-1"),
               shapes.pod("waiting", phase="Pending"),
               shapes.pod("failed", node_name="a-1", phase="Failed")]
    new = shapes.pod("manifest")
    del new["status"]
    objects.append(new)
    code, out, err = _audit(tmp_path, objects, "-o", "json")
    assert code in (0, 1), err
    summary = json.loads(out)["summary"]
    assert summary["podPhases"] == {"Failed": 1, "Pending": 1, "Running": 1, "none": 1}
    assert summary["mutatedObjects"] == 1  # the manifest alone: the others exist already
    _code, out, _err = _audit(tmp_path, objects)
    assert "(4 pods: 1 Failed, 1 Pending, 1 Running, 1 without status, 0 templates)" in out


def test_hostile_labels_and_names_are_bounded(tmp_path: Path) -> None:
    long = "x" * 20_000
    node = shapes.node("a-1", pool="p\x1b[31m" + long, driver="535." + "9" * 5000,
                       os_image="\u202eevil" + long)
    node["metadata"]["labels"].update({f"k{i}": long for i in range(50)})
    pod = shapes.pod("w" * 250, phase="Pending", created="not a time")
    code, out, err = _audit(tmp_path, [node, pod], "--pools", "--now", NOW)
    assert code == 0, err
    assert len(out) < 20_000 and "\x1b" not in out and "\u202e" not in out
    code, out, err = _audit(tmp_path, [node, pod], "--pools", "-o", "json", "--now", NOW)
    doc = json.loads(out)
    assert len(doc["pools"][0]["name"]) <= 64
    assert doc["pending"]["pods"][0]["waitSeconds"] is None
    code, page, err = _audit(tmp_path, [node, pod], "--pools", "-o", "html", "--now", NOW)
    assert "\x1b" not in page and "<script" not in page


@pytest.mark.parametrize(("args", "says"), [
    (["-o", "html"], "-o html is a format of the pool view: add --pools"),
    (["--prometheus", "http://127.0.0.1:1"], "--prometheus is read by the pool view"),
    (["--pools", "-o", "sarif"], "--pools reports in text, json, markdown or html"),
    (["--pools", "--window", "5m"], "is no window between 1h and 90d"),
    (["--pools", "--now", "yesterday"], "is no RFC 3339 time"),
])
def test_pool_options_misused_are_usage_errors(args: list[str], says: str,
                                               tmp_path: Path) -> None:
    code, _out, err = _audit(tmp_path, [shapes.node("a-1")], *args)
    assert code == 2 and says in err


def test_the_pool_view_writes_no_reports() -> None:
    code, out, err = cli("audit", "--pools", "--apply")
    assert (code, out) == (2, "") and "it writes no reports (no --apply)" in err


def test_the_plain_audit_says_how_long_a_pending_gpu_pod_has_waited() -> None:
    from tests.pools.helpers import DUMP
    code, out, err = cli("audit", str(DUMP), "--now", NOW)
    assert code == 1, err
    assert "  ml/waiting-8 (waiting 2h00m)\n" in out
    code, out, err = cli("audit", str(DUMP), "-o", "json", "--now", NOW)
    assert code == 1, err
    pending = json.loads(out)["cluster"]["pendingGPUPods"]["pods"]
    assert [(p["name"], p["waitSeconds"]) for p in pending] == [("waiting-8", 7200)]
    finding = next(r for r in json.loads(out)["findings"] if r["rule"] == "gpu-pod-pending")
    assert finding["message"].startswith("GPU pod Pending for 2h00m: scheduler: 0/12 nodes")


def _with_init(pod: dict[str, Any], gpus: int, sidecar: bool) -> dict[str, Any]:
    init = {"name": "init", "image": "busybox:1.36",
            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}
    if sidecar:
        init["restartPolicy"] = "Always"
    pod["spec"]["initContainers"] = [init]
    return pod


@pytest.mark.parametrize(("pods", "allocated"), [
    # a plain init container runs alone: the pod holds the larger of it and its app
    ([_with_init(shapes.pod("a", node_name="s-1", gpus=1), 4, sidecar=False)], 4),
    # a sidecar keeps running beside the app: both hold theirs
    ([_with_init(shapes.pod("a", node_name="s-1", gpus=1), 2, sidecar=True)], 3),
    # finished pods hold nothing; a Pending pod already bound holds what it asks
    ([shapes.pod("a", node_name="s-1", gpus=2, phase="Succeeded"),
      shapes.pod("b", node_name="s-1", gpus=2, phase="Failed"),
      shapes.pod("c", node_name="s-1", gpus=3, phase="Pending")], 3),
], ids=["init-container", "sidecar", "phases"])
def test_allocated_is_what_the_scheduler_counts(tmp_path: Path, pods: list[dict[str, Any]],
                                                allocated: int) -> None:
    """The pool view's allocated GPUs are kube-scheduler's count of the pods bound to a node
    (policies/scheduling/occupancy.py), the one the Pending pods are explained against."""
    code, out, err = _audit(tmp_path, [shapes.node("s-1", pool="s"), *pods], "--pools", "-o",
                            "json", "--now", NOW)
    assert code in (0, 1), err
    gpus = json.loads(out)["pools"][0]["gpus"]
    assert (gpus["allocated"], gpus["free"]) == (allocated, 8 - allocated)
