"""`gpupolicy policy check`: every problem with file, line, document and field path."""

from __future__ import annotations

import pytest

from tests.lint.helpers import FIXTURES, ROOT, gpupolicy

BAD = "tests/lint/fixtures/bad-policies"


@pytest.mark.parametrize(("line", "expected"), [
    (0, f"{BAD}/broken.yaml:4: document 1: invalid YAML: did not find expected ',' or '}}'"),
    (1, f"{BAD}/typos.yaml:8: document 1: spec.rules.maxGPUsPerPod: Input should be a valid "
        "integer, unable to parse string as an integer"),
    (2, f"{BAD}/typos.yaml:15: document 2: spec.mode: Input should be 'Enforce', 'Warn' or "
        "'Audit'"),
    (3, f"{BAD}/typos.yaml:25: document 3: spec.inject.runtimeClass: unknown field"),
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
