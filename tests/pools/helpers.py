"""Running the CLI in-process for the pool tests."""

from __future__ import annotations

import io
from pathlib import Path

from webhook.cli import run

HERE = Path(__file__).parent
DUMP = HERE / "data" / "cluster.yaml"
NOW = "2026-05-01T12:00:00Z"


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = run(list(args), out, err)
    return code, out.getvalue(), err.getvalue()
