"""`gpupolicy policy check`: every problem with file, line, column, document and field path."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lint.helpers import FIXTURES, ROOT, gpupolicy

BAD = "tests/lint/fixtures/bad-policies"


@pytest.mark.parametrize(("line", "expected"), [
    (0, f"{BAD}/broken.yaml:4:1: document 1: did not find expected ',' or '}}' (while parsing a flow mapping)"),
    (1, f"{BAD}/typos.yaml:8:20: document 1: spec.rules.maxGPUsPerPod: must be an integer, "
        'not string "lots"'),
    (2, f"{BAD}/typos.yaml:15:9: document 2: spec.mode: must be one of Enforce, Warn, Audit; "
        'not string "Sometimes"'),
    (3, f"{BAD}/typos.yaml:25:5: document 3: spec.inject.runtimeClass: unknown field; did you "
        "mean runtimeClassName?"),
    (4, "4 problems in 2 files"),
])
def test_problems_name_file_line_document_and_field(line: int, expected: str) -> None:
    run = gpupolicy("policy", "check", f"{BAD}/broken.yaml", f"{BAD}/typos.yaml", cwd=ROOT)
    assert run.code == 1
    assert run.out.splitlines()[line] == expected


@pytest.mark.parametrize(("argv", "code", "out"), [
    (("policies/defaults",), 0, "ok: 1 policy in 1 file (gpu-defaults)"),
    (("tests/lint/fixtures/policies",), 0, "ok: 3 policies in 2 files"),
    (("tests/lint/fixtures/policies", f"{BAD}/dup.yml"), 1,
     "metadata.name: policy 'training' is also defined in"),
    (("-q", "policies/defaults"), 0, ""),
    (("missing.yaml",), 2, ""),
])
def test_exit_codes(argv: tuple[str, ...], code: int, out: str) -> None:
    run = gpupolicy("policy", "check", *argv, cwd=ROOT)
    assert run.code == code, run.out + run.err
    assert out in run.out
    if code == 0 and not out:
        assert run.out == ""


def test_the_lint_fixture_policies_are_valid() -> None:
    assert gpupolicy("policy", "check", str(FIXTURES / "policies")).code == 0


def test_injections_the_apiserver_refuses_are_all_reported_in_one_run() -> None:
    """Issue 13 item 5: each of the four, at its line and column, before any pod is hit."""
    run = gpupolicy("policy", "check", f"{BAD}/apiserver.yaml", cwd=ROOT)
    assert run.code == 1
    where = [line.split(": ")[:3] for line in run.out.splitlines()[:-1]]
    assert where == [
        [f"{BAD}/apiserver.yaml:9:14", "document 1", "spec.inject.tolerations[0].key"],
        [f"{BAD}/apiserver.yaml:13:16", "document 1", "spec.inject.tolerations[1].value"],
        [f"{BAD}/apiserver.yaml:15:7", "document 1",
         "spec.inject.nodeSelector['bad key/with/slashes']"],
        [f"{BAD}/apiserver.yaml:16:23", "document 1", "spec.inject.runtimeClassName"],
    ]
    assert run.out.splitlines()[-1] == "4 problems in 1 file"


@pytest.mark.parametrize(("text", "message"), [
    ("apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicy\nkind: GPUPolicy\n", "duplicate key 'kind'"),
    ("a: &a [*a]\n", "an alias refers to a node that contains it"),
    ("spec: " + "[" * 300 + "]" * 300 + "\n", "nesting too deep"),
])
def test_policy_check_reads_through_the_hardened_reader(tmp_path, text: str, message: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(text)
    run = gpupolicy("policy", "check", str(path))
    assert run.code == 1 and message in run.out and "Traceback" not in run.err


HEAD = "apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: p}\nspec:\n"


# (spec text, the line policy check prints): as strict as the CRD's types at kubectl apply,
# in the user's terms with the field path
STRICT = [
    ("  rules: {maxGPUsPerPod: '8'}\n",
     'spec.rules.maxGPUsPerPod: must be an integer, not string "8"'),
    ("  rules: {maxGPUsPerPod: 8.5}\n",
     "spec.rules.maxGPUsPerPod: must be an integer, not number 8.5"),
    ("  rules: {maxGPUsPerPod: true}\n",
     "spec.rules.maxGPUsPerPod: must be an integer, not boolean true"),
    ("  rules: {requireHardwareMatch: 'yes'}\n",
     'spec.rules.requireHardwareMatch: must be a boolean (true or false), not string "yes"'),
    ("  rules: {denyPrivilegedGPUContainers: 1}\n",
     "spec.rules.denyPrivilegedGPUContainers: must be a boolean (true or false), not integer 1"),
    ("  priority: '3'\n", 'spec.priority: must be an integer, not string "3"'),
    ("  rules: {shared: {maxPodsPerGPU: '4'}}\n",
     'spec.rules.shared.maxPodsPerGPU: must be an integer, not string "4"'),
    ("  inject: {tolerations: [{key: a, operator: Exists, effect: NoExecute, "
     "tolerationSeconds: '3'}]}\n",
     'spec.inject.tolerations[0].tolerationSeconds: must be an integer, not string "3"'),
    ("  rules: {maxGpusPerPod: 8}\n",
     "spec.rules.maxGpusPerPod: unknown field; did you mean maxGPUsPerPod?"),
    ("  rules: {maxGPUPerPod: 8}\n",
     "spec.rules.maxGPUPerPod: unknown field; did you mean maxGPUsPerPod?"),
    ("  rulez: {}\n", "spec.rulez: unknown field; did you mean rules?"),
    ("  rules: {zzz: 1}\n", "spec.rules.zzz: unknown field; known fields: allowedResources, "
     "maxGPUsPerPod, maxGPUsPerContainer, allowedModels, requireHardwareMatch, mig, shared, "
     "dra, denyPrivilegedGPUContainers, denyVisibleDevicesBypass, requireGuaranteedQoS"),
    ("  namespaces: ml\n", 'spec.namespaces: must be a list, not string "ml"'),
    ("  rules: ['a']\n", "spec.rules: must be a mapping, not a list"),
    ("  namespaceSelector: team\n", 'spec.namespaceSelector: must be a mapping, not string '
     '"team"'),
    ("  mode: enforce\n", 'spec.mode: must be one of Enforce, Warn, Audit; not string "enforce"'),
    ("  inject: {nodeAffinity: {preferred: [{weight: 500, preference: {}}]}}\n",
     "spec.inject.nodeAffinity.preferred[0].weight: must be at most 100, not integer 500"),
    ("  inject: {runtimeClassName: 7}\n",
     "spec.inject.runtimeClassName: must be a string, not integer 7"),
]


@pytest.mark.parametrize(("spec", "line"), STRICT, ids=[s[1].split(":")[0] + "-" + str(i)
                                                        for i, s in enumerate(STRICT)])
def test_policy_check_is_as_strict_as_the_crd(tmp_path, spec: str, line: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(HEAD + spec)
    run = gpupolicy("policy", "check", str(path))
    assert run.code == 1, run.out
    (problem,) = run.out.splitlines()[:-1]
    assert problem.split(": ", 2)[2] == line
    for pydantic_words in ("valid tuple", "instance of", "Input should", "dictionary"):
        assert pydantic_words not in run.out


def test_an_empty_directory_is_an_error(tmp_path) -> None:
    run = gpupolicy("policy", "check", str(tmp_path))
    assert run.code == 2 and "no policy files" in run.err, run.out + run.err


ADVISED = """\
apiVersion: gpupolicy.io/v1alpha1
kind: GPUPolicy
metadata: {name: pinned}
spec:
  inject:
    tolerations: [{operator: Exists, effect: NoSchedule}, {key: nvidia.com/gpu, operator: Exists}]
    nodeSelector: {kubernetes.io/hostname: gpu-node-7, workload: inference, team: vision}
    nodeAffinity:
      required:
      - {key: nvidia.com/gpu.product, operator: In, values: [NVIDIA-H800]}
      - {key: nvidia.com/gpu.product, operator: NotIn, values: [Tesla-T4]}
      preferred:
      - weight: 10
        preference:
          matchExpressions: [{key: kubernetes.io/hostname, operator: In, values: [gpu-node-7]}]
---
apiVersion: gpupolicy.io/v1alpha1
kind: GPUPolicy
metadata: {name: fine}
spec:
  inject:
    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
    nodeSelector: {workload: inference}
"""
OPERATOR_NODES = "tests/engine/fixtures/operator.yaml"


@pytest.mark.parametrize(("inventory", "expected"), [
    (False, [
        "7:44: warning: policy pinned: spec.inject.nodeSelector['kubernetes.io/hostname']: "
        "nodeSelector selects kubernetes.io/hostname",
        "15:36: warning: policy pinned: spec.inject.nodeAffinity.preferred[0].preference."
        "matchExpressions[0].key: preferred node affinity selects kubernetes.io/hostname",
        "6:19: warning: policy pinned: spec.inject.tolerations[0]: tolerates every NoSchedule "
        "taint",
    ]),
    (True, [
        "7:44: warning: policy pinned: spec.inject.nodeSelector['kubernetes.io/hostname']",
        "7:83: warning: policy pinned: spec.inject.nodeSelector.team: nodeSelector team=vision: "
        "no node of the inventory carries this label",
        "10:9: warning: policy pinned: spec.inject.nodeAffinity.required[0]: required node "
        "affinity nvidia.com/gpu.product In NVIDIA-H800: no node of the inventory matches",
        "15:36: warning: policy pinned: spec.inject.nodeAffinity.preferred[0]",
        "6:19: warning: policy pinned: spec.inject.tolerations[0]",
    ]),
])
def test_warnings_of_a_valid_policy(tmp_path: Path, inventory: bool, expected: list[str]) -> None:
    """Valid policies that work against their pools: warnings at file:line:column, exit 0;
    with --inventory, labels no node carries too (workload=inference is carried)."""
    path = tmp_path / "policies.yaml"
    path.write_text(ADVISED)
    argv = ("--inventory", str(ROOT / OPERATOR_NODES)) if inventory else ()
    run = gpupolicy("policy", "check", str(path), *argv, cwd=ROOT)
    assert run.code == 0, run.out + run.err
    lines = run.out.splitlines()
    assert len(lines) == len(expected) + 1
    for line, want in zip(lines, expected, strict=False):
        assert line.startswith(f"{path}:{want}"), line
    assert lines[-1] == (f"ok: 2 policies in 1 file (pinned, fine), {len(expected)} warnings")


def test_an_unreadable_inventory_is_a_usage_error(tmp_path: Path) -> None:
    run = gpupolicy("policy", "check", "policies/defaults", "--inventory",
                    str(tmp_path / "missing.yaml"), cwd=ROOT)
    assert run.code == 2 and "missing.yaml" in run.err
