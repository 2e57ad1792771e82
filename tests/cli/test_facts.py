"""A fact (what the API server or kubelet refuses whatever our policy says) is an error in
every report and exits 1 under Warn and Audit policies too; the webhook still admits it with
the policy's say (the API server refuses it anyway). A policy rule follows the mode."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_review import gpupolicy

POLICY = ("apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: p}\n"
          "spec:\n  mode: %s\n  rules: {maxGPUsPerPod: 1}\n")
# a half GPU: the API server refuses it (gpu-quantity-not-integer, a fact)
FACT = ("apiVersion: v1\nkind: Pod\nmetadata: {name: half}\nspec:\n  containers:\n"
        "  - {name: c, image: i, resources: {limits: {nvidia.com/gpu: '0.5'}}}\n")
# two GPUs over maxGPUsPerPod: 1 (gpu-max-per-pod, a policy rule)
POLICY_RULE = FACT.replace("'0.5'", "2").replace("half", "two")

# (mode, manifest, rule, lint/audit severity and exit, webhook allowed)
CASES = [
    ("Enforce", FACT, "gpu-quantity-not-integer", "error", 1, False),
    ("Warn", FACT, "gpu-quantity-not-integer", "error", 1, True),
    ("Audit", FACT, "gpu-quantity-not-integer", "error", 1, True),
    ("Enforce", POLICY_RULE, "gpu-max-per-pod", "error", 1, False),
    ("Warn", POLICY_RULE, "gpu-max-per-pod", "warning", 0, True),
    ("Audit", POLICY_RULE, "gpu-max-per-pod", "warning", 0, True),
]


@pytest.mark.parametrize(("mode", "manifest", "rule", "severity", "code", "admitted"), CASES,
                         ids=[f"{c[0]}-{c[2]}" for c in CASES])
def test_facts_are_errors_in_every_mode(tmp_path: Path, mode: str, manifest: str, rule: str,
                                        severity: str, code: int, admitted: bool) -> None:
    (tmp_path / "policy.yaml").write_text(POLICY % mode)
    (tmp_path / "pod.yaml").write_text(manifest)
    policy, pod = str(tmp_path / "policy.yaml"), str(tmp_path / "pod.yaml")
    linted = gpupolicy("lint", "--policies", policy, "-o", "json", pod)
    assert linted.returncode == code, linted.stderr
    assert [(f["rule"], f["severity"]) for f in json.loads(linted.stdout)["findings"]] == [
        (rule, severity)]
    audited = gpupolicy("audit", "--policies", policy, "-o", "json", pod)
    assert audited.returncode == code, audited.stderr
    records = json.loads(audited.stdout)
    assert records["summary"]["findings"][severity] == 1, records["summary"]
    reviewed = gpupolicy("review", "--policies", policy, pod)
    (entry,) = json.loads(reviewed.stdout)
    assert entry["allowed"] is admitted
    assert [(v["rule"], v["severity"]) for v in entry["violations"]] == [(rule, severity)]
