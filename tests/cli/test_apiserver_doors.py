"""Quota, priority and runtime classes through the command-line doors, with an inventory as
kubectl writes it (tests/engine/fixtures/classes.yaml): lint, review, explain and the offline
audit of a dump say what the API server's own admission plugins would, in their words, and
explain tells them, and a policy's allowedModels, apart from the scheduler's filters."""

from __future__ import annotations

import json
from pathlib import Path

import yaml

from tests.cli.test_review import gpupolicy

INVENTORY = str(Path(__file__).resolve().parents[1] / "engine" / "fixtures" / "classes.yaml")
POLICY = """apiVersion: gpupolicy.io/v1alpha1
kind: GPUPolicy
metadata: {name: a100-batch}
spec:
  inject:
    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
    priorityClassName: gpu-batch
  rules: {requireHardwareMatch: true, allowedModels: [NVIDIA-A100-SXM4-80GB]}
"""
QUOTA = ("exceeded quota: gpu-quota, requested: requests.nvidia.com/gpu=4, used: "
         "requests.nvidia.com/gpu=6, limited: requests.nvidia.com/gpu=8")


def _pod(gpus: int, **spec: object) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "train", "namespace":
                                                            "ml-train"},
            "spec": {"containers": [{"name": "c", "image": "cuda", "resources": {
                "limits": {"nvidia.com/gpu": gpus}}}], **spec}}


def _files(tmp_path: Path, *objects: dict[str, object]) -> tuple[str, str]:
    policy, pod = tmp_path / "policy.yaml", tmp_path / "pod.yaml"
    policy.write_text(POLICY)
    pod.write_text(yaml.safe_dump_all(objects))
    return str(policy), str(pod)


def test_lint_and_review_say_the_quota_plugins_words(tmp_path: Path) -> None:
    policy, pod = _files(tmp_path, _pod(4))
    linted = gpupolicy("lint", "--policies", policy, "--inventory", INVENTORY, pod)
    assert linted.returncode == 1 and QUOTA in linted.stdout
    reviewed = gpupolicy("review", "--policies", policy, "--inventory", INVENTORY, pod)
    [decision] = [json.loads(line) for line in reviewed.stdout.splitlines() if line.strip()] \
        if reviewed.stdout.lstrip().startswith("{") else json.loads(reviewed.stdout)
    assert not decision["allowed"]
    assert QUOTA in json.dumps(decision)


def test_review_injects_the_class_with_its_priority(tmp_path: Path) -> None:
    policy, pod = _files(tmp_path, _pod(2))
    reviewed = gpupolicy("review", "--policies", policy, "--inventory", INVENTORY, pod)
    assert reviewed.returncode == 0, reviewed.stderr
    patch = json.dumps(json.loads(reviewed.stdout))
    for path, value in (("/spec/priorityClassName", '"gpu-batch"'), ("/spec/priority", "500"),
                        ("/spec/preemptionPolicy", '"Never"')):
        assert f'"path": "{path}", "value": {value}' in patch, patch


def test_explain_tells_the_api_server_the_policy_and_the_scheduler_apart(tmp_path: Path
                                                                        ) -> None:
    policy, pod = _files(tmp_path, _pod(4, priorityClassName="gpu-batchh"))
    done = gpupolicy("explain", "--policies", policy, "--inventory", INVENTORY, pod)
    lines = done.stdout.splitlines()
    assert "  API server refuses: no PriorityClass with name gpu-batchh was found  " \
           "[priority-class-unknown]" in lines
    assert any(line.startswith("  API server refuses: exceeded quota: gpu-quota") for line in lines)
    # the L4 pool: the scheduler's filter first (the affinity allowedModels injects), the
    # policy's say apart
    assert "    pool g6.xlarge (1 node, NVIDIA-L4): node(s) didn't match Pod's node " \
           "affinity/selector" in lines
    assert "      - policy: GPU model NVIDIA-L4 is not allowed (NVIDIA-A100-SXM4-80GB)" in lines
    [answer] = json.loads(gpupolicy("explain", "--policies", policy, "--inventory", INVENTORY,
                                    pod, "-o", "json").stdout)
    assert {(r["by"], r["rule"]) for r in answer["refusals"]} == {
        ("API server", "priority-class-unknown"), ("API server", "resource-quota-exceeded")}


def test_the_offline_audit_of_a_dump_judges_what_is_new_not_what_runs(tmp_path: Path) -> None:
    running = {**_pod(4), "metadata": {"name": "running", "namespace": "ml-train"},
               "status": {"phase": "Running"}}
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "train", "namespace": "ml-train"},
                  "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                      "metadata": {"labels": {"a": "b"}}, "spec": _pod(4)["spec"]}}}
    policy, dump = _files(tmp_path, running, deployment,
                          *yaml.safe_load(Path(INVENTORY).read_text())["items"])
    done = gpupolicy("audit", "--policies", policy, "--format", "json", dump)
    found = [f for f in json.loads(done.stdout)["findings"]
             if f["rule"] == "resource-quota-exceeded"]
    # the running pod is in status.used already; the Deployment's next pod is not
    assert [(f["object"], f["message"]) for f in found] == [
        ("Deployment ml-train/train", QUOTA)]
