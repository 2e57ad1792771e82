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


# A template and a Deployment that name no namespace, as `kubectl apply -n ml -f` takes them:
# with --namespace both are in ml, so the Deployment finds its template (issue 17 item 13).
UNNAMESPACED = """apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata: {name: one-gpu}
spec:
  spec:
    devices:
      requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: train}
spec:
  selector: {matchLabels: {app: t}}
  template:
    metadata: {labels: {app: t}}
    spec:
      resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]
      containers: [{name: c, image: i, resources: {claims: [{name: gpu}]}}]
"""
TEMPLATE_TOLERATIONS = "/spec/template/spec/tolerations"


@pytest.mark.parametrize("door", ["review", "lint", "explain"])
def test_namespace_flag_places_the_claims_beside_the_workload(tmp_path: Path, door: str) -> None:
    path = tmp_path / "train.yaml"
    path.write_text(UNNAMESPACED)
    if door == "review":
        results = json.loads(gpupolicy("review", "--namespace", "ml", str(path)).stdout)
        (deployment,) = [r for r in results if r["kind"] == "Deployment"]
        assert deployment["namespace"] == "ml"
        assert [op["path"] for op in deployment["patch"]] == [TEMPLATE_TOLERATIONS]
        assert deployment["notes"] == []  # not "ResourceClaimTemplate ml/one-gpu is not known"
    elif door == "lint":
        out = gpupolicy("lint", "--namespace", "ml", "--show-mutations", "-o", "json",
                        str(path)).stdout
        assert [f["path"] for f in json.loads(out)["findings"]
                if f["rule"] == "mutation"] == [TEMPLATE_TOLERATIONS]
    else:
        done = gpupolicy("explain", "--namespace", "ml", "-o", "json", str(path))
        answers = json.loads(done.stdout)
        (deployment,) = [a for a in answers if a["kind"] == "Deployment"]
        assert deployment["namespace"] == "ml"
        assert len(deployment["podSpecs"]) == 1, done.stdout  # a GPU pod spec to explain


# A driver's class shipped in the same file as the template and the Deployment using it: read
# as the inventory's classes are, so the class is known (issue 17 item 9).
SHIPPED_CLASS = """apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata: {name: h100.gpu.example.com}
spec:
  selectors:
  - cel: {expression: "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('h100')"}
---
"""
FLEET = str(Path(__file__).parents[1] / "engine" / "fixtures" / "dra-fleet.yaml")


def _verdicts(door: str, path: Path) -> tuple[int, str]:
    """(exit code, everything the door said) with the fleet inventory."""
    args = {"review": ["review", "--namespace", "ml"], "lint": ["lint", "--namespace", "ml"],
            "audit": ["audit", "-o", "json"], "explain": ["explain", "--namespace", "ml"]}[door]
    done = gpupolicy(*args, "--inventory", FLEET, str(path))
    return done.returncode, done.stdout + done.stderr


@pytest.mark.parametrize("door", ["review", "lint", "audit", "explain"])
def test_a_class_shipped_with_its_workload_is_known(tmp_path: Path, door: str) -> None:
    path = tmp_path / "driver-and-workload.yaml"
    text = UNNAMESPACED.replace("gpu.nvidia.com", "h100.gpu.example.com")
    if door == "audit":  # the audit reads each object's own namespace
        text = text.replace("{name: one-gpu}", "{name: one-gpu, namespace: ml}").replace(
            "{name: train}", "{name: train, namespace: ml}")
    path.write_text(SHIPPED_CLASS + text)
    code, said = _verdicts(door, path)
    assert "does not exist" not in said
    assert code == 0, said
    # and without the class: admitted all the same (Kubernetes admits it; the pods wait),
    # while explain says why it fits no pool today
    path.write_text(text)
    code, said = _verdicts(door, path)
    assert "device class h100.gpu.example.com does not exist" in said
    assert code == (1 if door == "explain" else 0), said
