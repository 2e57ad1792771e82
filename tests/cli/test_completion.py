"""`gpupolicy completion bash`: the script the user sources, run by a real bash with the
words a user has typed (COMP_WORDS/COMP_CWORD), in a folder with a space in a name."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_review import gpupolicy

pytestmark = pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")


@pytest.fixture(scope="module")
def script() -> str:
    done = gpupolicy("completion", "bash")
    assert done.returncode == 0
    return done.stdout


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "dir with space" / "sub").mkdir(parents=True)
    (tmp_path / "dir with space" / "pod.yaml").write_text("")
    (tmp_path / "my file.yaml").write_text("")
    (tmp_path / "manifests").mkdir()
    return tmp_path


# (the words typed, the last one being completed) -> the completions offered
CASES = [
    (["gpupolicy", "po"], ["policy"]),
    (["gpupolicy", "ce"], ["certs"]),
    (["gpupolicy", "comp"], ["completion"]),
    (["gpupolicy", "--v"], ["--version"]),
    (["gpupolicy", "policy", ""], ["check", "--help"]),
    (["gpupolicy", "policy", "check", "--q"], ["--quiet"]),
    (["gpupolicy", "certs", ""], ["generate", "--help"]),
    (["gpupolicy", "certs", "generate", "--o"], ["--out"]),
    (["gpupolicy", "completion", ""], ["bash", "zsh"]),
    (["gpupolicy", "lint", "--fi"], ["--filename", "--fix", "--fix-dry-run"]),
    (["gpupolicy", "lint", "--output"], ["--output", "--output-file"]),
    (["gpupolicy", "lint", "-o", ""], ["text", "json", "sarif", "junit", "github"]),
    (["gpupolicy", "lint", "--format", "s"], ["sarif"]),
    (["gpupolicy", "lint", "--color", "a"], ["auto", "always"]),
    (["gpupolicy", "audit", "-o", "p"], ["policyreport"]),
    (["gpupolicy", "audit", "--progress", "n"], ["never"]),
    (["gpupolicy", "serve", "--log-level", "w"], ["warning"]),
    (["gpupolicy", "schema", "-o", ""], ["json", "crd"]),
    (["gpupolicy", "test", "-o", "j"], ["json", "junit"]),
    (["gpupolicy", "explain", "-o", ""], ["text", "json"]),
    (["gpupolicy", "audit", "--namespace", ""], []),  # a name of the user's: nothing offered
    # paths: spaces escaped, directories with their `/`
    (["gpupolicy", "lint", "di"], ["dir\\ with\\ space/"]),
    (["gpupolicy", "lint", "dir\\ with\\ space/"],
     ["dir\\ with\\ space/pod.yaml", "dir\\ with\\ space/sub/"]),
    (["gpupolicy", "lint", "my"], ["my\\ file.yaml"]),
    (["gpupolicy", "lint", "ma"], ["manifests/"]),
    (["gpupolicy", "lint", "--policies", "ma"], ["manifests/"]),
    (["gpupolicy", "audit", "--output-file", "my"], ["my\\ file.yaml"]),
    (["gpupolicy", "certs", "generate", "--out", "ma"], ["manifests/"]),
    (["gpupolicy", "review", "-f", "my"], ["my\\ file.yaml"]),
]


@pytest.mark.parametrize(("words", "offered"), CASES, ids=[" ".join(c[0]) for c in CASES])
def test_bash_completes(script: str, tree: Path, words: list[str], offered: list[str]) -> None:
    typed = " ".join(f"'{w}'" for w in words)
    done = subprocess.run(
        ["bash", "-c", script + f"\nCOMP_WORDS=({typed}); COMP_CWORD={len(words) - 1}; "
         '_gpupolicy; printf "%s\\n" "${COMPREPLY[@]}"'],
        cwd=tree, capture_output=True, text=True, timeout=30)
    assert done.stderr == ""
    assert [line for line in done.stdout.splitlines() if line] == offered


def test_zsh_script_loads_bashcompinit(script: str) -> None:
    zsh = gpupolicy("completion", "zsh").stdout
    assert "autoload -U +X bashcompinit && bashcompinit" in zsh
    assert zsh.replace("autoload -U +X bashcompinit && bashcompinit\n", "").replace(
        "zsh completion: source <(gpupolicy completion zsh)",
        "bash completion: source <(gpupolicy completion bash)") == script
