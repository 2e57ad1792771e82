"""`gpupolicy export`: the stream it prints, its options, and bad input."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from webhook import cli

KINDS = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
         "MutatingAdmissionPolicy", "MutatingAdmissionPolicyBinding"}


def _run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(["export", *args], out, err)
    return code, out.getvalue(), err.getvalue()


def test_the_bundled_policies_as_a_yaml_stream() -> None:
    code, out, _ = _run()
    assert code == 0
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert {d["kind"] for d in docs} == KINDS
    assert {d["apiVersion"] for d in docs if d["kind"].startswith("Mutating")} == \
        {"admissionregistration.k8s.io/v1"}
    # what stays with the webhook is said in the header, with the policy's path
    assert "# " in out.split("---", 1)[0]
    assert "gpu-defaults spec.rules.requireHardwareMatch: gpu-no-matching-hardware" in out


@pytest.mark.parametrize(("version", "kinds"), [
    ("v1beta1", KINDS), ("none", {"ValidatingAdmissionPolicy",
                                  "ValidatingAdmissionPolicyBinding"})])
def test_map_version(version: str, kinds: set[str]) -> None:
    code, out, _ = _run("--map-version", version)
    docs = [d for d in yaml.safe_load_all(out) if d]
    assert code == 0 and {d["kind"] for d in docs} == kinds
    if version == "v1beta1":
        assert "admissionregistration.k8s.io/v1beta1" in {d["apiVersion"] for d in docs}


def test_json_is_a_list(tmp_path: Path) -> None:
    target = tmp_path / "out" / "native.json"
    code, out, _ = _run("-o", "json", "--output-file", str(target))
    assert code == 0 and out == ""
    found = json.loads(target.read_text())
    assert found["kind"] == "List" and len(found["items"]) == 4


def test_own_policies_and_the_release_namespace(tmp_path: Path) -> None:
    (tmp_path / "p.yaml").write_text(
        "apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: team}\n"
        "spec: {namespaces: [team-*], mode: Warn, rules: {maxGPUsPerContainer: 2}}\n")
    code, out, _ = _run("--policies", str(tmp_path), "--release-namespace", "gp")
    docs = [d for d in yaml.safe_load_all(out) if d]
    [vap] = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicy"]
    [binding] = [d for d in docs if d["kind"] == "ValidatingAdmissionPolicyBinding"]
    assert code == 0 and vap["metadata"]["name"] == "gpupolicy-team"
    assert vap["spec"]["matchConditions"][0] == {
        "name": "namespaces", "expression": 'request.namespace.startsWith("team-")'}
    assert vap["spec"]["matchConditions"][1]["name"] == "spec-changed"
    assert binding["spec"]["validationActions"] == ["Warn"]
    assert "gp" in binding["spec"]["matchResources"]["namespaceSelector"][
        "matchExpressions"][-1]["values"]


@pytest.mark.parametrize("text", ["", "kind: GPUPolicy\n", "{not yaml"])
def test_unreadable_policies_are_a_usage_error(tmp_path: Path, text: str) -> None:
    (tmp_path / "p.yaml").write_text(text)
    code, out, err = _run("--policies", str(tmp_path / "p.yaml"))
    assert (code, out) == (2, "") and err.startswith("gpupolicy export: ")


def test_a_missing_path_is_a_usage_error(tmp_path: Path) -> None:
    code, _, err = _run("--policies", str(tmp_path / "absent"))
    assert code == 2 and "gpupolicy export" in err
