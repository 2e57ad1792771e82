"""`gpupolicy review` on DRA claims: an entry per ResourceClaim and ResourceClaimTemplate (kind,
name, namespace, allowed, violations at the claim's paths), never a patch, and malformed claims
as findings, never a traceback. A real process on real files."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.test_review import gpupolicy

ROOT = Path(__file__).resolve().parents[2]
FIXTURE = ROOT / "tests" / "lint" / "fixtures" / "dra"  # claims.yaml, policy.yaml
INVENTORY = ROOT / "tests" / "cluster" / "data" / "dra.yaml"  # h100-1 (8 GPUs), 2 x L4 (2)

MORE = """\
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: too-many, namespace: ml}
spec: {devices: {requests: [{name: g, exactly: {deviceClassName: mig.nvidia.com, count: 99}}]}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaim
metadata: {name: bad-cel, namespace: ml}
spec:
  devices:
    requests:
    - {name: g, exactly: {deviceClassName: mig.nvidia.com, selectors: [{cel: {expression: "device.driver =="}}]}}
---
apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-mig, namespace: ml}
spec: {spec: {devices: {requests: [{name: g, exactly: {deviceClassName: mig.nvidia.com}}]}}}
---
apiVersion: v1
kind: Pod
metadata: {name: train, namespace: ml}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: sixteen-gpus}]
  containers: [{name: c, image: cuda, resources: {claims: [{name: gpu}]}}]
"""

# kind, name, allowed, rule -> path (every violation of the document)
EXPECTED = [
    ("ResourceClaimTemplate", "sixteen-gpus", False, {
        "gpu-max-per-pod": "spec.spec.devices.requests",
        "dra-no-matching-device": "spec.spec.devices.requests",
        "dra-device-class-not-allowed": "spec.spec.devices.requests[0].exactly.deviceClassName"}),
    ("ResourceClaim", "malformed", False, {
        "dra-claim-invalid": "spec.devices.requests[0].exactly.count",
        "dra-device-class-not-allowed": "spec.devices.requests[0].exactly.deviceClassName"}),
    ("ResourceClaim", "nic", True, {}),  # no GPU class: not the policies' business
    ("ResourceClaim", "too-many", False, {  # refused by the API server: nothing to allocate
        "dra-claim-invalid": "spec.devices.requests[0].exactly.count"}),
    ("ResourceClaim", "bad-cel", False, {
        "dra-selector-invalid": "spec.devices.requests[0].exactly.selectors[0].cel.expression"}),
    ("ResourceClaimTemplate", "one-mig", False, {  # no MIG device anywhere
        "dra-no-matching-device": "spec.spec.devices.requests"}),
    ("Pod", "train", False, {  # its template resolves beside it
        "gpu-max-per-pod": "spec.resourceClaims",
        "dra-device-class-not-allowed": "spec.resourceClaims[0]",  # its template's class
        "dra-no-matching-device": "spec.resourceClaims"}),
]


def test_review_gives_an_entry_per_claim(tmp_path: Path) -> None:
    manifest = tmp_path / "claims.yaml"
    manifest.write_text((FIXTURE / "claims.yaml").read_text(encoding="utf-8") + "---\n" + MORE,
                        encoding="utf-8")
    done = gpupolicy("review", str(manifest), "--policies", str(FIXTURE / "policy.yaml"),
                     "--inventory", str(INVENTORY))
    assert done.returncode == 1, done.stderr
    assert "Traceback" not in done.stderr
    entries = json.loads(done.stdout)
    got = [(e["kind"], e["name"], e["allowed"],
            {v["rule"]: v["path"] for v in e["violations"]}) for e in entries]
    assert got == EXPECTED
    for entry in entries:  # a claim is judged, never mutated (and policy.yaml injects nothing)
        assert entry["namespace"] == "ml" and entry["skipped"] is None
        assert entry["patch"] == [] and entry["notes"] == []
