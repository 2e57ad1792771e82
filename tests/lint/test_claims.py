"""`gpupolicy lint` on DRA claims: findings at the line and column of the claim's own fields,
in every format, with the same verdicts as `review`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.lint import sarif_rules
from tests.lint.helpers import FIXTURES, ROOT, gpupolicy

DRA = FIXTURES / "dra"
INVENTORY = ROOT / "tests" / "cluster" / "data" / "dra.yaml"  # h100-1 (8 GPUs), 2 x L4 (2)
BASE = ("lint", "--policies", str(DRA / "policy.yaml"), "--inventory", str(INVENTORY))

# line, column, rule, object, path: every finding of claims.yaml (the NIC claim has none)
EXPECTED = [
    (11, 7, "gpu-max-per-pod", "ResourceClaimTemplate ml/sixteen-gpus",
     "spec.spec.devices.requests"),
    (11, 7, "dra-no-matching-device", "ResourceClaimTemplate ml/sixteen-gpus",
     "spec.spec.devices.requests"),
    (14, 11, "dra-device-class-not-allowed", "ResourceClaimTemplate ml/sixteen-gpus",
     "spec.spec.devices.requests[0].exactly.deviceClassName"),
    (27, 9, "dra-device-class-not-allowed", "ResourceClaim ml/malformed",
     "spec.devices.requests[0].exactly.deviceClassName"),
    (28, 9, "dra-claim-invalid", "ResourceClaim ml/malformed",
     "spec.devices.requests[0].exactly.count"),
]


def test_claim_findings_land_on_the_claims_fields() -> None:
    run = gpupolicy(*BASE, "-o", "json", str(DRA / "claims.yaml"))
    assert run.code == 1, run.err
    found = sorted((f["line"], f["column"], f["rule"], f["object"], f["path"])
                   for f in json.loads(run.out)["findings"])
    assert found == sorted(EXPECTED)


@pytest.mark.parametrize(
    ("fmt", "expect"),
    [
        ("text", "14:11    error   device class gpu.nvidia.com is not allowed here"),
        ("github", "::error file=claims.yaml,line=28,col=9,title=dra-claim-invalid (dra)::"),
    ],
)
def test_claim_findings_in_text_formats(fmt: str, expect: str) -> None:
    run = gpupolicy(*BASE, "-o", fmt, "claims.yaml", cwd=DRA)
    assert run.code == 1, run.err
    assert expect in run.out


def test_sarif_locates_claim_findings_as_json_does() -> None:
    run = gpupolicy(*BASE, "-o", "sarif", "claims.yaml", cwd=DRA)
    assert run.code == 1, run.err
    assert sarif_rules.problems(json.loads(run.out)) == []
    results = json.loads(run.out)["runs"][0]["results"]
    regions = sorted((r["locations"][0]["physicalLocation"]["region"]["startLine"],
                      r["locations"][0]["physicalLocation"]["region"]["startColumn"],
                      r["ruleId"]) for r in results)
    assert regions == sorted((line, col, rule) for line, col, rule, _, _ in EXPECTED)


def test_fix_leaves_claims_alone(tmp_path: Path) -> None:
    copy = tmp_path / "claims.yaml"
    text = (DRA / "claims.yaml").read_text(encoding="utf-8")
    copy.write_text(text, encoding="utf-8")
    run = gpupolicy(*BASE, "--fix-dry-run", str(copy))
    assert run.out == "" and run.code in (0, 1), run.err
    assert copy.read_text(encoding="utf-8") == text
