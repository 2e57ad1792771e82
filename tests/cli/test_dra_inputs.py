"""A pod's ResourceClaimTemplate in the same input stream makes it a GPU pod in every door
that reads files, not only in the engine's case table."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_review import gpupolicy

TEMPLATE = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu, namespace: ml}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: CLASS}}]
"""
POD = """apiVersion: v1
kind: Pod
metadata: {name: p, namespace: ml}
spec:
  resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
  containers: [{name: c, image: i, resources: {claims: [{name: gpu}]}}]
"""


def _toleration_added(door: str, path: Path) -> bool:
    if door == "review":
        results = json.loads(gpupolicy("review", str(path)).stdout)
        return any(op["path"] == "/spec/tolerations" for r in results for op in r["patch"])
    if door == "lint":
        out = gpupolicy("lint", "--show-mutations", "-o", "json", str(path)).stdout
        return any(f["rule"] == "mutation" and f["path"] == "/spec/tolerations"
                   for f in json.loads(out)["findings"])
    out = gpupolicy("audit", "-o", "json", str(path)).stdout
    return any(f["rule"] == "mutation" and f.get("path") == "/spec/tolerations"
               for f in json.loads(out)["findings"])


@pytest.mark.parametrize("door", ["review", "lint", "audit"])
@pytest.mark.parametrize(("device_class", "gpu"), [("gpu.nvidia.com", True),
                                                   ("rdma.example.com", False)])
def test_a_claimed_gpu_is_gpu_demand_in_every_door(tmp_path: Path, door: str,
                                                   device_class: str, gpu: bool) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text(TEMPLATE.replace("CLASS", device_class) + "---\n" + POD)
    assert _toleration_added(door, path) is gpu


BETA_INVENTORY = Path(__file__).parent.parent / "engine" / "fixtures" / "dra-beta.yaml"
BETA_CLAIM = """apiVersion: resource.k8s.io/v1beta1
kind: ResourceClaim
metadata: {name: want, namespace: ml}
spec:
  devices:
    requests:
    - name: gpu
      deviceClassName: gpu.nvidia.com
      selectors: [{cel: {expression: "EXPR"}}]
"""


@pytest.mark.parametrize(("expression", "allowed"), [
    # attributes and capacity read from a v1beta1 slice's `basic`
    ("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA A100-SXM4-80GB' && "
     "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('80Gi')) == 0", True),
    ("device.attributes['gpu.nvidia.com'].cudaDriverVersion.isLessThan(semver('12.5.0'))", True),
    ("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'", False),
])
def test_review_reads_a_v1beta1_inventory(tmp_path: Path, expression: str,
                                          allowed: bool) -> None:
    path = tmp_path / "claim.yaml"
    path.write_text(BETA_CLAIM.replace("EXPR", expression))
    done = gpupolicy("review", str(path), "--inventory", str(BETA_INVENTORY))
    assert "Traceback" not in done.stderr
    [entry] = json.loads(done.stdout)
    assert entry["allowed"] is allowed, entry["violations"]
    rules = {v["rule"] for v in entry["violations"]}
    assert rules == (set() if allowed else {"dra-no-matching-device"})


def test_review_refuses_an_inventory_slice_of_an_unserved_version(tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text(BETA_INVENTORY.read_text().replace(
        "resource.k8s.io/v1beta2", "resource.k8s.io/v1alpha9"))
    path = tmp_path / "claim.yaml"
    path.write_text(BETA_CLAIM.replace("EXPR", "true"))
    done = gpupolicy("review", str(path), "--inventory", str(inventory))
    assert "Traceback" not in done.stderr
    assert "resource.k8s.io/v1alpha9" in done.stdout + done.stderr
