"""policies/ is the pure core: no I/O, no web framework, no Kubernetes client, no printing."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CORE = sorted((ROOT / "policies").rglob("*.py"))
FORBIDDEN_IMPORTS = ("flask", "gunicorn", "kubernetes", "webhook", "requests", "socket",
                     "subprocess", "urllib", "http", "logging", "os", "pathlib", "io", "shutil")
FORBIDDEN_CALLS = ("open", "print", "input", "exec", "eval")


@pytest.mark.parametrize("path", CORE, ids=lambda p: str(p.relative_to(ROOT)))
def test_core_module_is_pure(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            names = []
        for name in names:
            assert name.split(".")[0] not in FORBIDDEN_IMPORTS, f"{path.name} imports {name}"
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            assert node.func.id not in FORBIDDEN_CALLS, f"{path.name} calls {node.func.id}()"
