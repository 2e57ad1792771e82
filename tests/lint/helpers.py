"""Running `gpupolicy` in-process or as a real process, from a chosen directory."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from webhook import cli

ROOT = Path(__file__).resolve().parents[2]
HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
MANIFESTS = FIXTURES / "manifests"
POLICIES = FIXTURES / "policies"
GOLDEN = HERE / "golden"


@dataclass
class Run:
    code: int
    out: str
    err: str


def gpupolicy(*argv: str, cwd: Path | None = None) -> Run:
    """The CLI in this process (fast); `cwd` matters for relative names in reports."""
    out, err = io.StringIO(), io.StringIO()
    old = Path.cwd()
    try:
        if cwd is not None:
            os.chdir(cwd)
        code = cli.run(list(argv), out, err)
    finally:
        os.chdir(old)
    return Run(code, out.getvalue(), err.getvalue())


def gpupolicy_process(*argv: str, stdin: bytes = b"", cwd: Path | None = None) -> Run:
    """The CLI as a real process: stdin, exit status and start-up cost are real."""
    code = "import sys; from webhook.cli import main; sys.argv[0] = 'gpupolicy'; main()"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", code, *argv], input=stdin, capture_output=True,
        cwd=cwd or ROOT, env=env, timeout=120, check=False,
    )
    return Run(done.returncode, done.stdout.decode(), done.stderr.decode())


def tool(name: str) -> str:
    """Real helm/kubectl from tools/bin (installed by `make test`)."""
    path = ROOT / "tools" / "bin" / name
    if not path.is_file():
        pytest.fail(f"{path} not installed: `make test` installs it (tools/install_k8s_tools.py)")
    return str(path)
