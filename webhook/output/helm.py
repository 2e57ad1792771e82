"""Helm output names the template each document came from (`# Source: CHART/templates/x.yaml`);
findings on rendered text are moved there, so code scanning and annotations point at a file
that is in the repository rather than at a `rendered.yaml` nobody commits.

The line is the one in the rendered document counted from its `# Source:` comment: exact for
a template without control blocks above the finding, close otherwise; the rendered position is
kept beside it.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import re
from collections.abc import Iterable
from pathlib import Path

from webhook.output.findings import Finding

_SOURCE = re.compile(rb"^# Source: (\S[^\r\n]*)$", re.MULTILINE)
_NAME = re.compile(r"^name:\s*['\"]?([^'\"\s#]+)", re.MULTILINE)


class Sources:
    """Where each rendered line came from."""

    def __init__(self, raw: bytes, root: Path | None = None) -> None:
        self.lines: list[int] = []  # the line of each `# Source:` comment, ascending
        self.paths: list[str] = []
        charts: dict[str, Path] | None = None
        line, counted = 1, 0  # lines are counted on from the last comment: linear in `raw`
        for match in _SOURCE.finditer(raw):
            path = match.group(1).decode("utf-8", "replace").strip()
            if charts is None:
                charts = chart_dirs(root or Path.cwd())
            line += raw.count(b"\n", counted, match.start())
            counted = match.start()
            self.lines.append(line)
            self.paths.append(_in_repository(path, charts))

    def __bool__(self) -> bool:
        return bool(self.lines)

    def place(self, f: Finding) -> Finding:
        """The finding at its template, when its rendered line follows a `# Source:`."""
        if not f.line:
            return f
        i = bisect.bisect_left(self.lines, f.line) - 1
        if i < 0:
            return f
        rendered = f"{f.file}:{f.line}" + (f":{f.column}" if f.column else "")
        return dataclasses.replace(f, file=self.paths[i], line=f.line - self.lines[i],
                                   column=f.column, rendered=rendered)


def chart_dirs(root: Path, depth: int = 4) -> dict[str, Path]:
    """Chart name (Chart.yaml `name`) -> its folder, relative to `root`, a few levels deep."""
    found: dict[str, Path] = {}
    base = len(root.parts)
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [] if len(here.parts) - base >= depth else [
            d for d in dirnames if not d.startswith(".") and d not in ("node_modules",)]
        if "Chart.yaml" in filenames:
            try:
                text = (here / "Chart.yaml").read_text(encoding="utf-8", errors="replace")
            except OSError:
                continue
            match = _NAME.search(text)
            if match:
                found.setdefault(match.group(1), here.relative_to(root))
    return found


def _in_repository(path: str, charts: dict[str, Path]) -> str:
    """`trainer/templates/job.yaml` -> `charts/trainer/templates/job.yaml` when the chart
    named `trainer` lives there (subcharts: `trainer/charts/sub/templates/...` likewise)."""
    name, _, rest = path.partition("/")
    folder = charts.get(name)
    return str(folder / rest) if folder is not None and rest else path


def place_all(findings: Iterable[Finding], sources: Sources) -> list[Finding]:
    return [sources.place(f) for f in findings]
