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


EDGES = ROOT / "webhook"
COMMANDS = sorted((EDGES / "commands").glob("*.py"))
COMMAND_MODULES = {f"webhook.commands.{p.stem}" for p in COMMANDS if p.stem != "__init__"}
SHARED = {"webhook.commands.options"}  # flags several commands share: not a command


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{a.name}" for a in node.names)
    return found


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: p.stem)
def test_commands_do_not_import_commands(path: Path) -> None:
    own = f"webhook.commands.{path.stem}"
    others = (_imports(path) & COMMAND_MODULES) - SHARED - {own}
    assert not others, f"{path.name} imports {sorted(others)}"


@pytest.mark.parametrize(
    "path", sorted(p for p in EDGES.rglob("*.py") if "commands" not in p.parts
                   and p.name != "cli.py"), ids=lambda p: str(p.relative_to(EDGES)))
def test_the_edges_below_the_commands_import_none(path: Path) -> None:
    assert not {i for i in _imports(path) if i.startswith("webhook.commands")}


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_two_edge_modules_import_each_other() -> None:
    """No circle among webhook/ modules, imports inside functions included (metrics and
    metrics_port were one)."""
    paths = sorted(EDGES.rglob("*.py"))
    modules = {_module(p) for p in paths}
    graph = {_module(p): {i for i in _imports(p) if i in modules} - {_module(p)} for p in paths}
    state: dict[str, int] = {}  # 1 visiting, 2 done

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph[node]):
            assert state.get(nxt) != 1, "import circle: " + " -> ".join([*trail, node, nxt])
            if nxt not in state:
                visit(nxt, [*trail, node])
        state[node] = 2

    for module in sorted(graph):
        if module not in state:
            visit(module, [])


def test_inputs_do_not_reach_up_into_the_http_edge() -> None:
    for path in sorted((EDGES / "inputs").glob("*.py")):
        assert not {i for i in _imports(path) if i.startswith("webhook.http")}, path.name
