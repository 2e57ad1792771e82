"""Running the real `helm` binary on charts/gpupolicy, with each render cached per session.

helm comes from PATH (`make test` puts tools/bin first) or tools/bin itself (DESIGN.md §6).
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
CHART = ROOT / "charts" / "gpupolicy"
CI_DIR = CHART / "ci"
CI_VALUES = sorted(p.stem.removesuffix("-values") for p in CI_DIR.glob("*-values.yaml"))
RELEASE = "rel"
NAMESPACE = "gpu-system"


def helm_binary() -> str:
    found = shutil.which("helm") or str(ROOT / "tools" / "bin" / "helm")
    if not os.access(found, os.X_OK):
        raise RuntimeError("helm not found on PATH or in tools/bin: `make test` installs it")
    return found


def helm(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [helm_binary(), *args], capture_output=True, text=True, timeout=120,
        env={**os.environ, **(env or {})}, check=False,
    )


def template(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return helm("template", RELEASE, str(CHART), "--namespace", NAMESPACE, *args, env=env)


def documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def render(values: str = "default", extra: tuple[str, ...] = ()) -> tuple[dict[str, Any], ...]:
    """Objects rendered with ci/<values>-values.yaml (and `helm template` args in `extra`).

    Cached per session: every call with the same arguments sees the same render (and so the
    same generated certificates)."""
    return _render(values, extra)


@functools.cache
def _render(values: str, extra: tuple[str, ...]) -> tuple[dict[str, Any], ...]:
    result = template("-f", str(CI_DIR / f"{values}-values.yaml"), *extra)
    if result.returncode != 0:
        raise AssertionError(f"helm template with {values}-values.yaml failed:\n{result.stderr}")
    return tuple(documents(result.stdout))


def one(objects: Iterable[dict[str, Any]], kind: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind]
    assert len(found) == 1, f"expected one {kind}, found {len(found)}"
    return found[0]


def named(objects: Iterable[dict[str, Any]], kind: str, name: str) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    assert len(found) == 1, f"expected one {kind} {name}, found {len(found)}"
    return found[0]


def webhooks(objects: Sequence[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    """name -> webhook entry of the (Mutating|Validating)WebhookConfiguration; {} when absent."""
    configs = [o for o in objects if o["kind"] == kind]
    return {hook["name"]: hook for config in configs for hook in config["webhooks"]}
