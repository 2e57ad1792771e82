"""`gpupolicy policy check`: every problem with file, line, column, document and field path."""

from __future__ import annotations

import pytest

from tests.lint.helpers import FIXTURES, ROOT, gpupolicy

BAD = "tests/lint/fixtures/bad-policies"


@pytest.mark.parametrize(("line", "expected"), [
    (0, f"{BAD}/broken.yaml:4:1: document 1: did not find expected ',' or '}}' (while parsing a flow mapping)"),
    (1, f"{BAD}/typos.yaml:8:20: document 1: spec.rules.maxGPUsPerPod: Input should be a valid "
        "integer, unable to parse string as an integer"),
    (2, f"{BAD}/typos.yaml:15:9: document 2: spec.mode: Input should be 'Enforce', 'Warn' or "
        "'Audit'"),
    (3, f"{BAD}/typos.yaml:25:5: document 3: spec.inject.runtimeClass: unknown field"),
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
