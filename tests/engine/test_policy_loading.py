"""Broken policy files and the exact message each must give: file, line, document, field path."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.loading import PolicyLoadError, parse_policies
from webhook.sources import BUNDLED_POLICIES, load_policies

HEAD = "apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: p}\n"

BROKEN = [
    (HEAD + "spec:\n  mode: Block\n",
     "x.yaml:5: document 1: spec.mode: Input should be 'Enforce', 'Warn' or 'Audit'"),
    (HEAD + "spec:\n  rules:\n    mig:\n      allowedProfiles: [1g.10gb, 3]\n",
     "x.yaml:7: document 1: spec.rules.mig.allowedProfiles[1]: Input should be a valid string"),
    (HEAD + "spec:\n  rules:\n    maxGpusPerPod: 8\n",
     "x.yaml:6: document 1: spec.rules.maxGpusPerPod: unknown field"),
    (HEAD + "spec:\n  rules:\n    maxGPUsPerPod: -1\n",
     "x.yaml:6: document 1: spec.rules.maxGPUsPerPod: Input should be greater than or equal to 0"),
    (HEAD + "spec:\n  inject:\n    tolerations:\n      - {key: a, operator: Maybe}\n",
     "x.yaml:7: document 1: spec.inject.tolerations[0].operator: "
     "Input should be 'Exists' or 'Equal'"),
    (HEAD + "spec:\n  inject:\n    nodeAffinity:\n      preferred:\n        - {weight: 500, "
     "preference: {}}\n",
     "x.yaml:8: document 1: spec.inject.nodeAffinity.preferred[0].weight: "
     "Input should be less than or equal to 100"),
    (HEAD, "x.yaml:1: document 1: spec: required field is missing"),
    ("apiVersion: gpupolicy.io/v1\nkind: GPUPolicy\nmetadata: {name: p}\nspec: {}\n",
     "x.yaml:1: document 1: apiVersion: expected apiVersion 'gpupolicy.io/v1alpha1', "
     "got 'gpupolicy.io/v1'"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: p}\n",
     "x.yaml:2: document 1: kind: expected kind 'GPUPolicy', got 'ConfigMap'"),
    ("apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: Bad_Name}\nspec: {}\n",
     "x.yaml:3: document 1: metadata.name: must be a lowercase DNS subdomain name"),
    (HEAD + "spec: {}\n---\n" + HEAD + "spec:\n  priority: high\n",
     "x.yaml:10: document 2: spec.priority: Input should be a valid integer, "
     "unable to parse string as an integer"),
    ("spec: [unclosed\n", "x.yaml:2: document 1: invalid YAML: did not find expected ',' or ']'"),
    ("- just\n- a list\n", "x.yaml:1: document 1: expected a GPUPolicy mapping, got list"),
    ("kind: List\nitems:\n  - " + HEAD.replace("\n", "\n    ") + "spec: {mode: x}\n",
     "x.yaml:6: document 1: items[0].spec.mode: Input should be 'Enforce', 'Warn' or 'Audit'"),
]


@pytest.mark.parametrize(("text", "message"), BROKEN)
def test_broken_policy_message(text: str, message: str) -> None:
    with pytest.raises(PolicyLoadError) as caught:
        parse_policies(text, "x.yaml")
    assert str(caught.value) == message


def test_every_problem_of_a_file_is_reported() -> None:
    text = HEAD + "spec: {mode: x}\n---\n" + HEAD + "spec: {priority: y}\n"
    with pytest.raises(PolicyLoadError) as caught:
        parse_policies(text, "x.yaml")
    assert [p.document for p in caught.value.problems] == [1, 2]


def test_duplicate_names_across_files(tmp_path: Path) -> None:
    for name in ("a.yaml", "b.yaml"):
        (tmp_path / name).write_text(HEAD + "spec: {}\n")
    with pytest.raises(PolicyLoadError, match=r"policy 'p' is also defined in .*a\.yaml"):
        load_policies(tmp_path)


def test_bundled_policies_load() -> None:
    names = [p.name for p in load_policies(BUNDLED_POLICIES)]
    assert names == ["gpu-defaults"]
