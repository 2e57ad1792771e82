"""What a platform engineer meets in the first minute: a table of invocations -> exit code and
the line that matters, the way kubectl, Checkov and gator users expect them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.test_review import gpupolicy
from webhook.output.findings import version

POD = ("apiVersion: v1\nkind: Pod\nmetadata: {name: \"evil\\e[31mred\"}\nspec:\n"
       "  containers: [{name: c, image: i, resources: {limits: {nvidia.com/gpu: \"1.5\"}}}]\n")


@pytest.fixture
def files(tmp_path: Path) -> Path:
    (tmp_path / "pod.yaml").write_text(POD)
    (tmp_path / "empty").mkdir()
    return tmp_path


# (arguments, exit code, a line of stdout or stderr that must be there)
CASES = [
    (["--version"], 0, f"gpupolicy {version()}"),
    (["--help"], 0, "GPU-aware admission control for Kubernetes: one engine behind the admission"),
    ([], 2, "gpupolicy: choose a command: serve, review, lint"),
    (["lint", "-o", "json", "pod.yaml"], 1, '  "findings": ['),
    (["lint", "--format", "json", "pod.yaml"], 1, '  "findings": ['),
    (["lint", "-o", "report.sarif", "pod.yaml"], 2,
     "-o report.sarif: did you mean --output-file report.sarif? (-o picks the format"),
    (["lint", "--output", "report.sarif", "pod.yaml"], 2,
     "--output report.sarif: did you mean --output-file report.sarif?"),
    (["lint", "--output=out/r.json", "pod.yaml"], 2,
     "--output out/r.json: did you mean --output-file out/r.json?"),
    (["lint", "--format", "yaml", "pod.yaml"], 2,
     "--format yaml: unknown format; choose one of text, json, sarif, junit, github"),
    (["lint", "--output", "json", "pod.yaml"], 1, '  "findings": ['),
    (["lint", "--output-file", "sarif", "pod.yaml"], 2,
     "--output-file sarif: did you mean -o sarif?"),
    (["lint", "-o", "json", "--output-file", "-", "pod.yaml"], 1, '  "findings": ['),
    (["lint", "-o", "json", "--output-file", "new/dir/r.json", "pod.yaml"], 1, ""),
    (["lint", "--output-file", "pod.yaml/r.json", "pod.yaml"], 2,
     "gpupolicy lint: pod.yaml/r.json: cannot write the report"),
    (["lint", "-f", "json", "pod.yaml"], 2, "'json' is a format: did you mean -o json"),
    (["lint", "-f", "pod.yaml"], 1, "pod.yaml"),
    (["lint", "empty"], 2, "gpupolicy lint: no manifests (*.yaml, *.yml, *.json) in empty"),
    (["lint", "missing.yaml"], 2, "gpupolicy lint: missing.yaml: no such file or directory"),
    (["audit", "-o", "json", "pod.yaml"], 1, '  "summary": {'),
    (["audit", "-o", "out.json", "pod.yaml"], 2, "-o out.json: did you mean --output-file out.json?"),
    (["audit", "--output", "json", "--output-file", "a/b.json", "pod.yaml"], 1, ""),
    (["audit", "-o", "table", "pod.yaml"], 1, ""),
    (["audit", "-o", "text", "pod.yaml"], 1, ""),
    (["review", "-o", "json", "--output-file", "-", "pod.yaml"], 1, '    "kind": "Pod",'),
    (["review", "pod.yaml", "pod.yaml"], 1, '    "file": "pod.yaml",'),
    (["review", "."], 1, '    "kind": "Pod",'),
    (["review", "empty"], 2, "gpupolicy review: no manifests (*.yaml, *.yml, *.json) in empty"),
    (["schema", "-o", "crd"], 0, "kind: CustomResourceDefinition"),
    (["schema", "--output", "schema.json"], 2, "did you mean --output-file schema.json?"),
    (["test", "-o", "json", "-f", "pod.yaml"], 2, '  "suites": ['),
    (["explain", "-o", "json", "pod.yaml"], 0, '    "kind": "Pod",'),
    (["explain", "-o", "yaml", "pod.yaml"], 2, "-o yaml: unknown format; choose one of text, json"),
    (["explain", "/nonexistent"], 2, "gpupolicy explain: /nonexistent: no such file"),
    (["explain", "--output-file", "e/x.txt", "pod.yaml"], 0, ""),
    (["explain", "--output", "e.json", "pod.yaml"], 2,
     "--output e.json: did you mean --output-file e.json?"),
    (["explain", "pod.yaml"], 0, "Pod default/evil\\x1b[31mred  (policies: gpu-defaults)"),
    (["completion", "bash"], 0, "complete -F _gpupolicy gpupolicy"),
    (["serve", "--help"], 0, "--service-namespace SERVICE_NAMESPACE, --namespace SERVICE_NAMESPACE"),
    (["serve", "--help"], 0, "least severe log line written, JSON on stderr"),
    (["audit", "--help"], 0, "an input file or directory (repeatable), as kubectl -f"),
]


@pytest.mark.parametrize(("args", "code", "line"), CASES, ids=[" ".join(c[0]) or "(none)"
                                                             for c in CASES])
def test_invocation(files: Path, args: list[str], code: int, line: str) -> None:
    done = subprocess.run([sys.executable, "-m", "webhook.cli", *args], cwd=files,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == code, done.stdout + done.stderr
    assert not line or line in (done.stdout + done.stderr).splitlines() or any(
        line in out_line for out_line in (done.stdout + done.stderr).splitlines()), (
        done.stdout + done.stderr)
    assert "Traceback" not in done.stderr


def test_text_report_escapes_terminal_control_characters(files: Path) -> None:
    done = gpupolicy("lint", str(files / "pod.yaml"))
    assert "\x1b" not in done.stdout
    assert "evil\\x1b[31mred" in done.stdout


def test_a_closed_pipe_ends_quietly(files: Path) -> None:
    many = files / "many.yaml"
    many.write_text("---\n".join(POD.replace("evil", f"p{i}") for i in range(2000)))
    done = subprocess.run(f"{sys.executable} -m webhook.cli lint {many} | head -1",
                          shell=True, capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == str(many)
    assert "Traceback" not in done.stderr and "BrokenPipe" not in done.stderr


def test_bash_completion_knows_every_command_and_option() -> None:
    script = gpupolicy("completion", "bash").stdout
    done = subprocess.run(
        ["bash", "-c", script + '\nCOMP_WORDS=(gpupolicy lint --fi); COMP_CWORD=2; _gpupolicy; '
         'echo "${COMPREPLY[@]}"; COMP_WORDS=(gpupolicy au); COMP_CWORD=1; _gpupolicy; '
         'echo "${COMPREPLY[@]}"'], capture_output=True, text=True, timeout=30)
    assert done.stdout.splitlines() == ["--filename --fix --fix-dry-run", "audit"]


@pytest.mark.parametrize("command", ["lint", "audit", "review"])
def test_output_file_makes_its_parent_directory(files: Path, command: str) -> None:
    done = gpupolicy(command, "-o", "json", "--output-file", str(files / "a" / "b" / "r.json"),
                     str(files / "pod.yaml"))
    assert done.returncode == 1 and done.stdout == "", done.stderr
    assert (files / "a" / "b" / "r.json").read_text().startswith(("{", "["))


WARNING = "findings on standard input are reported against <stdin>, which code scanning"


@pytest.mark.parametrize(("command", "extra", "warned"), [
    ("lint", [], True),
    ("lint", ["--stdin-filename", "k8s/pod.yaml"], False),
    ("audit", [], True),
    ("audit", ["--stdin-filename", "k8s/pod.yaml"], False),
])
def test_sarif_from_stdin_without_a_name_warns(command: str, extra: list[str],
                                                warned: bool) -> None:
    done = gpupolicy(command, "-o", "sarif", *extra, "-", stdin=POD)
    assert done.returncode == 1, done.stderr
    assert (WARNING in done.stderr) is warned, done.stderr
    uris = {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            for r in json.loads(done.stdout)["runs"][0]["results"]}
    assert len(uris) == 1


def test_audit_reads_standard_input_as_lint_does() -> None:
    done = gpupolicy("audit", "-o", "json", "-", stdin=POD)
    assert done.returncode == 1, done.stderr
    assert {f["rule"] for f in json.loads(done.stdout)["findings"]} >= {
        "gpu-quantity-not-integer"}


@pytest.mark.parametrize("command", ["lint", "review", "audit"])
def test_namespaces_file_without_a_namespace_is_an_error(files: Path, command: str) -> None:
    done = gpupolicy(command, "--namespaces", str(files / "pod.yaml"), str(files / "pod.yaml"))
    assert done.returncode == 2, done.stdout + done.stderr
    assert f"{files / 'pod.yaml'}: no Namespace objects" in done.stderr


def test_bidi_controls_are_escaped_before_the_terminal(files: Path) -> None:
    (files / "bidi.yaml").write_text(POD.replace("evil\\e[31mred", "ok\u202etxt.exe"),
                                     encoding="utf-8")
    done = gpupolicy("lint", str(files / "bidi.yaml"))
    assert "\u202e" not in done.stdout and "ok\\u202etxt.exe" in done.stdout
    assert done.stdout.splitlines()[-1] == "1 problem (1 error, 0 warnings) in 1 file"


RENDERED = ("---\n# Source: mychart/templates/job.yaml\n" + POD.replace("evil\\e[31mred", "job")
            + "---\n# Source: mychart/templates/ok.yaml\napiVersion: v1\nkind: ConfigMap\n"
              "metadata: {name: cm}\n")


@pytest.mark.parametrize(("chart_here", "suites"), [
    (True, ["mychart/templates/job.yaml", "mychart/templates/ok.yaml"]),
    (False, ["rendered.yaml"]),  # the chart is not here: findings stay at the rendered lines
])
def test_junit_of_helm_output_has_no_empty_suite_for_the_stream(
        tmp_path: Path, chart_here: bool, suites: list[str]) -> None:
    import xml.etree.ElementTree as ET

    if chart_here:
        templates = tmp_path / "mychart" / "templates"
        templates.mkdir(parents=True)
        (templates.parent / "Chart.yaml").write_text("apiVersion: v2\nname: mychart\nversion: 0.1.0\n")
        for part in RENDERED.split("---\n")[1:]:
            source, body = part.split("\n", 1)
            (tmp_path / source.removeprefix("# Source: ")).write_text(body)
    done = subprocess.run([sys.executable, "-m", "webhook.cli", "lint", "-o", "junit",
                           "--stdin-filename", "rendered.yaml", "-"], input=RENDERED,
                          capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert done.returncode == 1, done.stderr
    found = [s.get("name") for s in ET.fromstring(done.stdout).iter("testsuite")]
    assert found == suites
