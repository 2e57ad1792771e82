"""Broken policy files and the exact message each must give: file, line, document, field path."""

from __future__ import annotations

from pathlib import Path

import pytest

from policies.loading import PolicyLoadError, parse_policies
from webhook.inputs.sources import BUNDLED_POLICIES, load_policies

HEAD = "apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: p}\n"

BROKEN = [
    (HEAD + "spec:\n  mode: Block\n",
     "x.yaml:5:9: document 1: spec.mode: must be one of Enforce, Warn, Audit; not string "
     '"Block"'),
    (HEAD + "spec:\n  rules:\n    mig:\n      allowedProfiles: [1g.10gb, 3]\n",
     "x.yaml:7:34: document 1: spec.rules.mig.allowedProfiles[1]: must be a string, not "
     "integer 3"),
    (HEAD + "spec:\n  rules:\n    maxGpusPerPod: 8\n",
     "x.yaml:6:5: document 1: spec.rules.maxGpusPerPod: unknown field; did you mean "
     "maxGPUsPerPod?"),
    (HEAD + "spec:\n  rules:\n    maxGPUsPerPod: -1\n",
     "x.yaml:6:20: document 1: spec.rules.maxGPUsPerPod: must be at least 0, not integer -1"),
    (HEAD + "spec:\n  inject:\n    tolerations:\n      - {key: a, operator: Maybe}\n",
     "x.yaml:7:28: document 1: spec.inject.tolerations[0].operator: "
     'must be one of Exists, Equal, ""; not string "Maybe"'),
    (HEAD + "spec:\n  inject:\n    nodeAffinity:\n      preferred:\n        - {weight: 500, "
     "preference: {}}\n",
     "x.yaml:8:20: document 1: spec.inject.nodeAffinity.preferred[0].weight: "
     "must be at most 100, not integer 500"),
    (HEAD, "x.yaml:1:1: document 1: spec: required field is missing"),
    ("apiVersion: gpupolicy.io/v1\nkind: GPUPolicy\nmetadata: {name: p}\nspec: {}\n",
     "x.yaml:1:13: document 1: apiVersion: expected apiVersion 'gpupolicy.io/v1alpha1', "
     "got 'gpupolicy.io/v1'"),
    ("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: p}\n",
     "x.yaml:2:7: document 1: kind: expected kind 'GPUPolicy', got 'ConfigMap'"),
    ("apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: Bad_Name}\nspec: {}\n",
     "x.yaml:3:18: document 1: metadata.name: 'Bad_Name' is not a valid name (a lowercase "
     "DNS subdomain): must be lowercase letters, digits, '-' or '.', starting and ending with a "
     "letter or digit"),
    (HEAD + "spec: {}\n---\n" + HEAD + "spec:\n  priority: high\n",
     'x.yaml:10:13: document 2: spec.priority: must be an integer, not string "high"'),
    ("spec: [unclosed\n", "x.yaml:2:1: document 1: did not find expected ',' or ']' (while parsing a flow sequence)"),
    ("- just\n- a list\n", "x.yaml:1:1: document 1: expected a GPUPolicy mapping, got list"),
    ("kind: List\nitems:\n  - " + HEAD.replace("\n", "\n    ") + "spec: {mode: x}\n",
     "x.yaml:6:18: document 1: items[0].spec.mode: must be one of Enforce, Warn, Audit; not "
     'string "x"'),
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


def _inject(fragment: str) -> str:
    return HEAD + "spec:\n  inject:\n" + "".join(f"    {line}\n" for line in fragment.splitlines())


# What the apiserver refuses in a pod spec (ValidateTolerations, ValidateNodeSelectorRequirement,
# ValidateLabels, the DNS-subdomain names): refused here first, at the field that is wrong.
NAME = "letters, digits, '-', '_' or '.', starting and ending with a letter or digit"
REFUSED = [
    ("tolerations: [{key: nvidia.com/gpu!, operator: Exists}]",
     "spec.inject.tolerations[0].key",
     f"'nvidia.com/gpu!' is not a valid taint key: the name part must be {NAME}"),
    ("tolerations: [{key: nvidia.com/gpu, operator: Exists, value: present}]",
     "spec.inject.tolerations[0].value",
     "must be empty when operator is Exists, not 'present'"),
    ("tolerations: [{operator: Equal, value: x}]",
     "spec.inject.tolerations[0].operator", "must be Exists when key is empty"),
    ("tolerations: [{effect: NoSchedule}]",
     "spec.inject.tolerations[0].operator", "must be Exists when key is empty"),
    ("tolerations: [{key: a, value: two words}]",
     "spec.inject.tolerations[0].value",
     f"'two words' is not a valid taint value: must be empty or {NAME}"),
    ("tolerations: [{key: a, operator: Exists, effect: NoSchedule, tolerationSeconds: 30}]",
     "spec.inject.tolerations[0].tolerationSeconds",
     "is only allowed with effect NoExecute (how long a NoExecute taint is tolerated before "
     "eviction); effect is 'NoSchedule'"),
    ("tolerations: [{key: a, operator: Exists, tolerationSeconds: 30}]",
     "spec.inject.tolerations[0].tolerationSeconds", "; no effect is set"),
    ("tolerations: [{key: a, operator: Exists, effect: NoEvict}]",
     "spec.inject.tolerations[0].effect", "must be one of NoSchedule, PreferNoSchedule"),
    ("tolerations: [{key: -a, operator: Exists}]",
     "spec.inject.tolerations[0].key", "'-a' is not a valid taint key: the name part must be"),
    ("tolerations: [{key: /gpu, operator: Exists}]",
     "spec.inject.tolerations[0].key", "the prefix before '/' is empty"),
    ("tolerations: [{key: NVIDIA.com/gpu, operator: Exists}]",
     "spec.inject.tolerations[0].key", "the prefix 'NVIDIA.com' must be lowercase letters"),
    (f"tolerations: [{{key: {'k' * 64}, operator: Exists}}]",
     "spec.inject.tolerations[0].key", "the name part is longer than 63 characters"),
    ("nodeSelector: {bad key/with/slashes: v}",
     "spec.inject.nodeSelector['bad key/with/slashes']",
     "'bad key/with/slashes' is not a valid label key: has more than one '/'"),
    ("nodeSelector: {'': v}", "spec.inject.nodeSelector['']", "the name part is empty"),
    ("nodeSelector: {workload: gpu training}", "spec.inject.nodeSelector.workload",
     f"'gpu training' is not a valid label value: must be empty or {NAME}"),
    (f"nodeSelector: {{workload: {'v' * 64}}}", "spec.inject.nodeSelector.workload",
     "is longer than 63 characters"),
    ("runtimeClassName: Not_A_Valid_Name", "spec.inject.runtimeClassName",
     "'Not_A_Valid_Name' is not a valid name (a lowercase DNS subdomain): must be lowercase "
     "letters, digits, '-' or '.', starting and ending with a letter or digit"),
    ("priorityClassName: gpu-batch-", "spec.inject.priorityClassName",
     "'gpu-batch-' is not a valid name"),
    (f"priorityClassName: {'a' * 254}", "spec.inject.priorityClassName",
     "is longer than 253 characters"),
    ("nodeAffinity: {required: [{key: gpu, operator: In}]}",
     "spec.inject.nodeAffinity.required[0].values",
     "must list at least one value when operator is In"),
    ("nodeAffinity: {required: [{key: gpu, operator: NotIn, values: []}]}",
     "spec.inject.nodeAffinity.required[0].values",
     "must list at least one value when operator is NotIn"),
    ("nodeAffinity: {required: [{key: gpu, operator: Exists, values: [a]}]}",
     "spec.inject.nodeAffinity.required[0].values", "must be empty when operator is Exists"),
    ("nodeAffinity: {required: [{key: gpu, operator: DoesNotExist, values: [a]}]}",
     "spec.inject.nodeAffinity.required[0].values",
     "must be empty when operator is DoesNotExist"),
    ("nodeAffinity: {required: [{key: gpu.count, operator: Gt}]}",
     "spec.inject.nodeAffinity.required[0].values",
     "must hold exactly one value when operator is Gt, not 0"),
    ("nodeAffinity: {required: [{key: gpu.count, operator: Lt, values: ['1', '2']}]}",
     "spec.inject.nodeAffinity.required[0].values",
     "must hold exactly one value when operator is Lt, not 2"),
    ("nodeAffinity: {required: [{key: gpu.count, operator: Gt, values: [many]}]}",
     "spec.inject.nodeAffinity.required[0].values",
     "'many' must be an integer (Gt and Lt compare numbers)"),
    ("nodeAffinity: {required: [{key: gpu.count, operator: Gt, values: ['99999999999999999999']}]}",
     "spec.inject.nodeAffinity.required[0].values", "must be an integer"),
    # Every value must be a label value, Gt/Lt ones too: a negative number is refused.
    ("nodeAffinity: {required: [{key: gpu.count, operator: Gt, values: ['-1']}]}",
     "spec.inject.nodeAffinity.required[0].values[0]", "'-1' is not a valid label value"),
    ("nodeAffinity: {required: [{key: a b, operator: Exists}]}",
     "spec.inject.nodeAffinity.required[0].key", "'a b' is not a valid label key"),
    ("nodeAffinity: {required: [{key: gpu, operator: In, values: [A100 80GB]}]}",
     "spec.inject.nodeAffinity.required[0].values[0]", "'A100 80GB' is not a valid label value"),
    ("nodeAffinity: {preferred: [{weight: 0, preference: {}}]}",
     "spec.inject.nodeAffinity.preferred[0].weight", "must be at least 1, not integer 0"),
    ("nodeAffinity: {preferred: [{weight: 101, preference: {}}]}",
     "spec.inject.nodeAffinity.preferred[0].weight", "must be at most 100, not integer 101"),
    ("nodeAffinity: {preferred: [{weight: 1, preference: {matchExpressions: "
     "[{key: gpu, operator: In}]}}]}",
     "spec.inject.nodeAffinity.preferred[0].preference.matchExpressions[0].values",
     "must list at least one value when operator is In"),
    ("nodeAffinity: {preferred: [{weight: 1, preference: {matchFields: "
     "[{key: spec.nodeName, operator: In, values: [n1]}]}}]}",
     "spec.inject.nodeAffinity.preferred[0].preference.matchFields[0].key",
     'must be one of metadata.name; not string "spec.nodeName"'),
    ("nodeAffinity: {preferred: [{weight: 1, preference: {matchFields: "
     "[{key: metadata.name, operator: In, values: [n1, n2]}]}}]}",
     "spec.inject.nodeAffinity.preferred[0].preference.matchFields[0].values",
     "at most 1 item"),
    ("nodeAffinity: {preferred: [{weight: 1, preference: {matchFields: "
     "[{key: metadata.name, operator: Exists, values: [n1]}]}}]}",
     "spec.inject.nodeAffinity.preferred[0].preference.matchFields[0].operator",
     'must be one of In, NotIn; not string "Exists"'),
]


@pytest.mark.parametrize(("fragment", "path", "message"), REFUSED)
def test_what_the_apiserver_refuses_is_refused(fragment: str, path: str, message: str) -> None:
    with pytest.raises(PolicyLoadError) as caught:
        parse_policies(_inject(fragment), "x.yaml")
    assert [(p.path, message in p.message) for p in caught.value.problems] == [(path, True)], (
        str(caught.value))


ACCEPTED = [
    "tolerations: [{operator: Exists}]",  # tolerate everything
    "tolerations: [{key: '', operator: Exists, effect: NoExecute, tolerationSeconds: 60}]",
    "tolerations: [{key: nvidia.com/gpu, operator: '', value: present, effect: ''}]",
    "tolerations: [{key: nvidia.com/gpu, value: '', effect: PreferNoSchedule}]",
    f"tolerations: [{{key: {'a' * 253}/{'k' * 63}, operator: Exists}}]",
    "nodeSelector: {kubernetes.io/os: linux, empty-value: '', A_b.c-9: Z}",
    "runtimeClassName: nvidia.cdi",
    "priorityClassName: gpu-batch",
    "nodeAffinity: {required: [{key: gpu.count, operator: Gt, values: ['0']}]}",
    "nodeAffinity: {required: [{key: gpu.count, operator: Lt, values: ['8']}]}",
    "nodeAffinity: {required: [{key: nvidia.com/mig.capable, operator: DoesNotExist}]}",
    "nodeAffinity: {preferred: [{weight: 100, preference: {matchFields: "
    "[{key: metadata.name, operator: NotIn, values: [node-1]}]}}]}",
]


@pytest.mark.parametrize("fragment", ACCEPTED)
def test_what_the_apiserver_accepts_is_accepted(fragment: str) -> None:
    (policy,) = parse_policies(_inject(fragment), "x.yaml")
    assert policy.name == "p"


CLASS_GLOBS = [
    ("[gpu.nvidia.com, mig.nvidia.com]", None),
    ("['*.nvidia.com', 'gpu.?.example.com', '*']", None),
    ("[GPU.nvidia.com]", "'GPU.nvidia.com' is not a valid DeviceClass name glob"),
    ("['gpu nvidia']", "'gpu nvidia' is not a valid DeviceClass name glob"),
    ("['']", "is empty"),
    ("gpu.nvidia.com", 'must be a list, not string "gpu.nvidia.com"'),
]


@pytest.mark.parametrize(("globs", "problem"), CLASS_GLOBS)
def test_allowed_device_class_globs(globs: str, problem: str | None) -> None:
    text = HEAD + f"spec:\n  rules:\n    dra: {{allowedDeviceClasses: {globs}}}\n"
    if problem is None:
        (policy,) = parse_policies(text, "x.yaml")
        assert policy.spec.rules.dra is not None
        return
    with pytest.raises(PolicyLoadError) as caught:
        parse_policies(text, "x.yaml")
    [found] = caught.value.problems
    assert found.path.startswith("spec.rules.dra.allowedDeviceClasses"), found.path
    assert problem in found.message, found.message


def test_the_issue_file_reports_every_problem_in_one_run() -> None:
    """Issue 13 item 5: four injections the apiserver refuses, all reported at once, in file
    order, each with line, column and field path."""
    text = _inject(
        "tolerations:\n"
        "  - {key: 'nvidia.com/gpu!', operator: Exists}\n"
        "  - {key: nvidia.com/gpu, operator: Exists, value: present}\n"
        "nodeSelector: {bad key/with/slashes: x}\n"
        "runtimeClassName: Not_A_Valid_Name"
    ) + "---\n" + HEAD + "spec:\n  namespaceSelector: {matchLabels: {tier: a b}}\n"
    with pytest.raises(PolicyLoadError) as caught:
        parse_policies(text, "x.yaml")
    assert [(p.document, p.line, p.column, p.path) for p in caught.value.problems] == [
        (1, 7, 15, "spec.inject.tolerations[0].key"),
        (1, 8, 56, "spec.inject.tolerations[1].value"),
        (1, 9, 20, "spec.inject.nodeSelector['bad key/with/slashes']"),
        (1, 10, 23, "spec.inject.runtimeClassName"),
        (2, 16, 43, "spec.namespaceSelector.matchLabels.tier"),
    ]


@pytest.mark.parametrize(("selector", "path", "message"), [
    ("{matchLabels: {'a/b/c': x}}", "spec.namespaceSelector.matchLabels['a/b/c']",
     "not a valid label key"),
    ("{matchExpressions: [{key: tier, operator: In}]}",
     "spec.namespaceSelector.matchExpressions[0].values", "must list at least one value"),
    ("{matchExpressions: [{key: tier, operator: Exists, values: [a]}]}",
     "spec.namespaceSelector.matchExpressions[0].values", "must be empty when operator is Exists"),
    ("{matchExpressions: [{key: tier, operator: In, values: ['-x']}]}",
     "spec.namespaceSelector.matchExpressions[0].values[0]", "not a valid label value"),
])
def test_namespace_selectors_follow_label_selector_rules(
    selector: str, path: str, message: str
) -> None:
    with pytest.raises(PolicyLoadError) as caught:
        parse_policies(HEAD + f"spec:\n  namespaceSelector: {selector}\n", "x.yaml")
    (problem,) = caught.value.problems
    assert (problem.path, message in problem.message) == (path, True), str(caught.value)


def test_custom_resources_go_through_the_same_checks() -> None:
    """A GPUPolicy object from the cluster (JSON, no positions that mean anything to a user)."""
    from webhook.cluster.watch import Invalid, gpupolicy

    checked = gpupolicy({"metadata": {"name": "cr"}, "spec": {"inject": {
        "tolerations": [{"key": "nvidia.com/gpu!", "operator": "Exists"}],
        "runtimeClassName": "Not_A_Valid_Name"}}})
    assert isinstance(checked, Invalid)
    assert "spec.inject.tolerations[0].key: 'nvidia.com/gpu!' is not a valid taint key" in (
        checked.message)
    assert "spec.inject.runtimeClassName: 'Not_A_Valid_Name' is not a valid name" in (
        checked.message)


POLICY_ITEM = ("{apiVersion: gpupolicy.io/v1alpha1, kind: GPUPolicy, metadata: {name: NAME}, "
               "spec: {mode: Audit}}")


@pytest.mark.parametrize(("text", "names", "problem"), [
    (f"apiVersion: v1\nkind: GPUPolicyList\nitems: [{POLICY_ITEM.replace('NAME', 'a')}, "
     f"{POLICY_ITEM.replace('NAME', 'b')}]\n", ["a", "b"], None),  # kubectl get -o yaml
    (f"kind: List\nitems: [{POLICY_ITEM.replace('NAME', 'a')}]\n", ["a"], None),
    ("apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicy\nkind: GPUPolicy\n", [],
     "duplicate key 'kind'"),
    ("a: &a [*a]\n", [], "an alias refers to a node that contains it"),
])
def test_policies_are_read_by_the_one_hardened_reader(text: str, names: list[str],
                                                      problem: str | None) -> None:
    if problem is None:
        assert [p.name for p in parse_policies(text, "x.yaml")] == names
        return
    with pytest.raises(PolicyLoadError) as caught:
        parse_policies(text, "x.yaml")
    assert problem in str(caught.value)
