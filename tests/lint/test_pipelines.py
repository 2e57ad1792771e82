"""Real pipelines: `helm template … | gpupolicy lint -` and `kubectl kustomize … | gpupolicy lint -`
with the real binaries, positions checked against the rendered text."""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from pathlib import Path

import pytest
import yaml

from tests.lint.helpers import FIXTURES, POLICIES, ROOT, gpupolicy, gpupolicy_process, tool


def _render(*argv: str) -> bytes:
    return subprocess.run(argv, capture_output=True, check=True, timeout=120).stdout


def _lint_stdin(
    text: bytes, *extra: str, policies: Path | None = POLICIES
) -> tuple[int, list[dict[str, object]]]:
    chosen = ("--policies", str(policies)) if policies else ()
    run = gpupolicy_process("lint", *chosen, "--format", "json", "--show-mutations", *extra,
                            "-", stdin=text)
    assert run.code in (0, 1), run.err
    return run.code, json.loads(run.out)["findings"]


def test_helm_template_output() -> None:
    rendered = _render(tool("helm"), "template", "rel", str(FIXTURES / "chart"),
                       "--namespace", "ml-train")
    code, findings = _lint_stdin(rendered, "--namespace", "ml-train",
                                 "--stdin-filename", "rendered.yaml")
    lines = rendered.decode().splitlines()
    errors = [(f["rule"], lines[int(str(f["rendered"]).split(":")[1]) - 1].strip())
              for f in findings if f["severity"] == "error"]
    assert code == 1
    assert errors == [("gpu-max-per-container", "nvidia.com/gpu: 3"),
                      ("visible-devices-bypass", "value: all")]
    # findings point at the chart's template, which is in the repository
    assert {f["file"] for f in findings} == {"tests/lint/fixtures/chart/templates/job.yaml"}
    assert {str(f["rendered"]).split(":")[0] for f in findings} == {"rendered.yaml"}
    assert {f["object"] for f in findings} == {"Job ml-train/rel-train"}
    template = (FIXTURES / "chart" / "templates" / "job.yaml").read_text().splitlines()
    first = next(f for f in findings if f["rule"] == "gpu-max-per-container")
    assert template[int(str(first["line"])) - 1].strip() == "nvidia.com/gpu: {{ .Values.gpus }}"
    # below the `{{- if .Values.sidecar.enabled }}` line, which renders to nothing
    bypass = next(f for f in findings if f["rule"] == "visible-devices-bypass")
    assert template[int(str(bypass["line"])) - 1].strip() == "value: all"


@pytest.mark.parametrize(("fmt", "expect"), [
    ("text", "tests/lint/fixtures/chart/templates/job.yaml"),
    ("json", '"file": "tests/lint/fixtures/chart/templates/job.yaml"'),
    ("sarif", '"uri": "tests/lint/fixtures/chart/templates/job.yaml"'),
    ("github", "::error file=tests/lint/fixtures/chart/templates/job.yaml,line=16,"),
    ("junit", '<testsuite name="tests/lint/fixtures/chart/templates/job.yaml"'),
])
def test_helm_findings_name_the_template_in_every_format(fmt: str, expect: str) -> None:
    rendered = _render(tool("helm"), "template", "rel", str(FIXTURES / "chart"),
                       "--namespace", "ml-train")
    run = gpupolicy_process("lint", "--policies", str(POLICIES), "--namespace", "ml-train",
                            "-o", fmt, "-", stdin=rendered, cwd=ROOT)
    assert run.code == 1, run.err
    assert expect in run.out


def test_helm_values_change_the_verdict() -> None:
    rendered = _render(tool("helm"), "template", "rel", str(FIXTURES / "chart"),
                       "--set", "gpus=2", "--set", "sidecar.enabled=false")
    code, findings = _lint_stdin(rendered, "--namespace", "ml-train")
    assert code == 0
    assert {f["rule"] for f in findings} == {"mutation"}


def test_fix_a_rendered_file_keeps_helm_source_comments(tmp_path: Path) -> None:
    rendered = _render(tool("helm"), "template", "rel", str(FIXTURES / "chart"),
                       "--set", "gpus=2", "--set", "sidecar.enabled=false")
    path = tmp_path / "rendered.yaml"
    path.write_bytes(rendered)
    gpupolicy("lint", "--policies", str(POLICIES), "--namespace", "ml-train", "--fix", str(path))
    fixed = path.read_text()
    assert fixed.count("# Source: trainer/templates/") == 2
    job = next(d for d in yaml.safe_load_all(fixed) if d["kind"] == "Job")
    assert job["spec"]["template"]["spec"]["runtimeClassName"] == "nvidia"


def test_kustomize_build_output() -> None:
    rendered = _render(tool("kubectl"), "kustomize", str(FIXTURES / "kustomize" / "overlay"))
    code, findings = _lint_stdin(rendered)
    assert code == 0
    lines = rendered.decode().splitlines()
    pointer = "/spec/template/spec/containers/0/resources/limits"
    limits = [f for f in findings if f["path"] == pointer]
    assert len(limits) == 1
    assert lines[int(limits[0]["line"]) - 1].strip() == "resources:"  # type: ignore[call-overload]


def test_the_projects_own_chart_lints_clean() -> None:
    rendered = _render(tool("helm"), "template", "gp", str(ROOT / "charts" / "gpupolicy"),
                       "--namespace", "gpupolicy")
    run = gpupolicy_process("lint", "--format", "json", "-", stdin=rendered)
    assert run.code == 0, run.out + run.err
    assert json.loads(run.out)["findings"] == []


def _verdicts(findings: list[dict[str, object]]) -> Counter[tuple[object, ...]]:
    return Counter((f.get("object"), f["rule"], f["severity"], f.get("path"))
                   for f in findings)


@pytest.mark.corpus
def test_corpus_manifests_as_a_helm_chart_lint_the_same(corpus_dir: Path, tmp_path: Path) -> None:
    """The corpus's GPU workloads packed into a chart: `helm template | lint -` finds, object for
    object, what linting the files directly finds (helm re-orders and re-formats documents)."""
    # the corpus is a heap of files, not a repository: its partial kustomizations stay files
    direct = gpupolicy("lint", "--no-render", "--format", "json", "--show-mutations",
                       str(corpus_dir))
    findings = [f for f in json.loads(direct.out)["findings"]
                if not str(f["rule"]).startswith("yaml-")]
    sources = sorted({str(f["file"]) for f in findings})
    assert len(sources) >= 30
    chart = tmp_path / "corpus-chart"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: corpus\nversion: 0.1.0\n")
    for i, source in enumerate(sources):
        (chart / "templates" / f"{i:03d}-{Path(source).name}").write_bytes(
            Path(source).read_bytes())
    rendered = _render(tool("helm"), "template", "corpus", str(chart))
    code, piped = _lint_stdin(rendered, policies=None)  # the bundled ones, as above
    assert code == int(any(f["severity"] == "error" for f in findings))
    assert _verdicts(piped) == _verdicts(findings)


def test_source_comments_are_found_in_one_pass(tmp_path: Path) -> None:
    from webhook.output.helm import Sources

    doc = b"---\n# Source: c/templates/t.yaml\napiVersion: v1\nkind: ConfigMap\n"
    raw = doc * 50_000  # counted on from the previous comment, not from the start each time
    (tmp_path / "deploy" / "c").mkdir(parents=True)
    (tmp_path / "deploy" / "c" / "Chart.yaml").write_text("apiVersion: v2\nname: c\n")
    (tmp_path / "deploy" / "c" / "templates").mkdir()
    (tmp_path / "deploy" / "c" / "templates" / "t.yaml").write_text("kind: ConfigMap\n")
    found = Sources(raw, root=tmp_path)
    assert found.lines[:3] == [2, 6, 10] and found.lines[-1] == 4 * 50_000 - 2
    assert set(found.paths) == {"deploy/c/templates/t.yaml"}
    assert not found.missing
    # no chart `c` under the root: the path is not invented, the chart is said missing
    (tmp_path / "deploy" / "c" / "Chart.yaml").unlink()
    lost = Sources(doc, root=tmp_path)
    assert lost.paths == [None] and lost.missing == {"c"}
