"""--workload-kinds and unlisted kinds through every command that reads manifests: review,
lint, explain and audit see the same table, and a kind they cannot see is reported as skipped,
never silently passed (DESIGN.md §2.5)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from webhook import cli

RUN = """\
apiVersion: example.com/v1
kind: TrainingRun
metadata: {name: run, namespace: ml}
spec:
  worker:
    template:
      spec:
        containers:
          - {name: w, image: cuda, resources: {limits: {nvidia.com/gpu: 1}}}
"""
KINDS = """\
- kind: TrainingRun
  apiGroup: example.com
  resource: trainingruns
  podSpecPaths: [spec.worker.template.spec]
"""
BAD_KINDS = """\
- kind: TrainingRun
  apiGroup: example.com
  podSpecPaths: ["spec..worker"]
"""


def gpupolicy(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(list(args), out, err)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    paths = {"run": RUN, "kinds": KINDS, "bad": BAD_KINDS}
    for name, text in paths.items():
        (tmp_path / f"{name}.yaml").write_text(text)
    return {name: str(tmp_path / f"{name}.yaml") for name in paths}


def test_review_reports_the_unlisted_kind_then_reviews_it_with_the_table(
        files: dict[str, str]) -> None:
    code, out, _ = gpupolicy("review", files["run"])
    [result] = json.loads(out)
    assert code == 0 and result["patch"] == []
    assert result["skipped"].startswith("kind example.com/TrainingRun is not in the workload-kinds")
    assert "spec.worker.template.spec" in result["skipped"]
    assert result["warnings"] == [f"not reviewed: {result['skipped']}"]
    code, out, _ = gpupolicy("review", "--workload-kinds", files["kinds"], files["run"])
    [result] = json.loads(out)
    assert result["skipped"] is None
    assert [op["path"] for op in result["patch"]] == ["/spec/worker/template/spec/tolerations"]


def test_lint_verbose_lists_the_skipped_document(files: dict[str, str]) -> None:
    code, _, err = gpupolicy("lint", "-v", files["run"])
    assert code == 0
    assert f"{files['run']}: document 1 (line 1): skipped, kind example.com/TrainingRun" in err
    code, _, err = gpupolicy("lint", "-v", "--workload-kinds", files["kinds"], files["run"])
    assert "skipped" not in err


def test_explain_says_skipped_and_is_not_a_usage_error(files: dict[str, str]) -> None:
    code, out, _ = gpupolicy("explain", files["run"])
    assert code == 0
    assert "TrainingRun ml/run" in out and "  skipped: kind example.com/TrainingRun" in out
    code, out, _ = gpupolicy("explain", "--workload-kinds", files["kinds"], files["run"])
    assert code == 0 and "pod spec spec.worker.template.spec: fits" in out


def test_audit_lists_the_unlisted_kind_as_not_audited(files: dict[str, str]) -> None:
    code, out, _ = gpupolicy("audit", "--format", "json", files["run"])
    assert code == 0
    report = json.loads(out)
    [(what, why)] = report["summary"]["unavailable"].items()
    assert what == f"{files['run']}: TrainingRun/run"
    assert why.startswith("kind example.com/TrainingRun is not in the workload-kinds table")


@pytest.mark.parametrize("command", ["review", "lint", "explain", "audit"])
def test_a_bad_kinds_file_is_a_usage_error_naming_the_field(
        files: dict[str, str], command: str) -> None:
    code, _, err = gpupolicy(command, "--workload-kinds", files["bad"], files["run"])
    assert code == 2
    assert f"{files['bad']}: [0].podSpecPaths[0]: 'spec..worker' is not a dot path" in err
