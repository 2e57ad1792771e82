"""What a platform engineer meets in the first minute: a table of invocations -> exit code and
the line that matters, the way kubectl, Checkov and gator users expect them."""

from __future__ import annotations

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
     "did you mean --output report.sarif? (-o picks the format"),
    (["lint", "-f", "json", "pod.yaml"], 2, "'json' is a format: did you mean -o json"),
    (["lint", "-f", "pod.yaml"], 1, "pod.yaml"),
    (["lint", "empty"], 2, "gpupolicy lint: no manifests (*.yaml, *.yml, *.json) in empty"),
    (["lint", "missing.yaml"], 2, "gpupolicy lint: missing.yaml: no such file or directory"),
    (["audit", "-o", "json", "pod.yaml"], 1, '  "summary": {'),
    (["audit", "-o", "out.json", "pod.yaml"], 2, "did you mean --output out.json?"),
    (["explain", "-o", "json", "pod.yaml"], 0, '    "kind": "Pod",'),
    (["explain", "-o", "yaml", "pod.yaml"], 2, "unknown format 'yaml'; choose one of text, json"),
    (["explain", "/nonexistent"], 2, "gpupolicy explain: /nonexistent: no such file"),
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
    assert line in (done.stdout + done.stderr).splitlines() or any(
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
