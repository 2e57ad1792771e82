"""Helm output names the template each document came from (`# Source: CHART/templates/x.yaml`);
findings on rendered text are moved there, so code scanning and annotations point at a file
that is in the repository rather than at a `rendered.yaml` nobody commits.

The template's line is found by reading the template beside the output: each rendered line is
matched, in order, to the template line that wrote it (its text, `{{ ... }}` standing for any
value). Lines that render to nothing (`{{- if }}`, `{{- end }}`, a first line helm trims away)
are thereby skipped, and lines a single action writes (`{{- toYaml .Values.x | nindent 8 }}`)
go to that action's line. The rendered position is kept beside it.

A chart that is not found under the working folder is said, and its findings stay at the
rendered lines: a path that does not exist is never invented.
"""

from __future__ import annotations

import bisect
import dataclasses
import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from webhook.output.findings import Finding

_SOURCE = re.compile(rb"^# Source: (\S[^\r\n]*)$", re.MULTILINE)
_MARK = b"# Source: "  # a substring test is far cheaper than the regex on a file without one
_NAME = re.compile(r"^name:\s*['\"]?([^'\"\s#]+)", re.MULTILINE)
_ACTION = re.compile(r"\{\{.*?\}\}")
# actions that write nothing: control structure, comments, variable assignments
_SILENT = re.compile(r"\{\{-?\s*(?:if|else|end|range|with|define|block|/\*|\$[\w.]*\s*:?=)"
                     r"(?:.*?)\}\}")
_MAX_TEMPLATE = 1024 * 1024  # bytes of a template file read to place findings
_MAX_LINE = 400  # characters of a line compared; longer lines are not matched by text
_WINDOW = 400  # template lines looked ahead for the next rendered line


class Sources:
    """Where each rendered line came from."""

    def __init__(self, raw: bytes, root: Path | None = None,
                 charts: Mapping[str, Path] | None = None) -> None:
        self.raw = raw
        rendered = _MARK in raw and _SOURCE.search(raw) is not None
        # the paths below are relative to it (only Helm output asks where it is)
        self.root = root or (Path.cwd() if rendered else Path())
        self.lines: list[int] = []  # the line of each `# Source:` comment, ascending
        self.paths: list[str | None] = []  # the template in the repository; None: not found
        self.named: list[str] = []  # the template as helm names it
        self.missing: set[str] = set()  # charts not found under the root
        self._offsets: list[int] = []
        self._maps: dict[int, list[int] | None] = {}
        found: Mapping[str, Path] | None = charts
        exists: dict[str, bool] = {}
        line, counted = 1, 0  # lines are counted on from the last comment: linear in `raw`
        for match in _SOURCE.finditer(raw) if rendered else ():
            path = match.group(1).decode("utf-8", "replace").strip()
            if found is None:
                found = chart_dirs(root or Path.cwd())
            line += raw.count(b"\n", counted, match.start())
            counted = match.start()
            self.lines.append(line)
            self._offsets.append(match.end())
            self.named.append(path)
            placed = _in_repository(path, found)
            if placed is None:
                self.missing.add(path.partition("/")[0])
            elif placed not in exists:  # a packaged subchart's templates are not files here
                exists[placed] = (self.root / placed).is_file()
            self.paths.append(placed if placed is not None and exists[placed] else None)

    def __bool__(self) -> bool:
        return bool(self.lines)

    def place(self, f: Finding) -> Finding:
        """The finding at its template, when its rendered line follows a `# Source:`."""
        if not f.line:
            return f
        i = bisect.bisect_left(self.lines, f.line) - 1
        if i < 0:
            return f
        path = self.paths[i]
        if path is None:
            chart = self.named[i].partition("/")[0]
            why = (f"chart {chart!r} not found here" if chart in self.missing
                   else "no such file in the chart here")
            return dataclasses.replace(f, message=f"{f.message} (from template {self.named[i]}; "
                                       f"{why})")
        rendered = f"{f.file}:{f.line}" + (f":{f.column}" if f.column else "")
        offset = f.line - self.lines[i]  # 1: the line after the comment
        mapping = self._mapping(i)
        known = mapping is not None and 0 < offset <= len(mapping)
        line = mapping[offset - 1] if mapping is not None and known else offset
        return dataclasses.replace(f, file=path, line=line, column=f.column, rendered=rendered)

    def _mapping(self, i: int) -> list[int] | None:
        """Template line (1-based) of each rendered line of source `i`; None when the
        template cannot be read."""
        if i in self._maps:
            return self._maps[i]
        path = self.paths[i]
        template: list[str] | None = None
        if path is not None:
            try:
                file = self.root / path
                if file.is_file() and file.stat().st_size <= _MAX_TEMPLATE:
                    template = file.read_text(encoding="utf-8", errors="replace").splitlines()
            except OSError:
                template = None
        if template is None:
            self._maps[i] = None
            return None
        end = (self._offsets[i + 1] if i + 1 < len(self._offsets) else len(self.raw))
        body = self.raw[self._offsets[i]:end].decode("utf-8", "replace").split("\n")[1:]
        self._maps[i] = align(template, body)
        return self._maps[i]


def align(template: list[str], rendered: list[str]) -> list[int]:
    """For each rendered line, the 1-based template line that wrote it (see module doc)."""
    kinds = [_kind(t) for t in template]
    out: list[int] = []
    j, last = 0, 0  # the next template line to look at; the last one matched (0: none)
    for line in rendered:
        text = line.rstrip()
        hit = None
        if text.strip() and len(text) <= _MAX_LINE:
            for k in range(j, min(len(template), j + _WINDOW)):
                pattern = kinds[k]
                if isinstance(pattern, re.Pattern) and pattern.fullmatch(text):
                    hit = k
                    break
        if hit is not None:
            j, last = hit + 1, hit + 1
            out.append(hit + 1)
            continue
        # written by an action alone on its line (include, toYaml...) after the last match
        writer = next((k for k in range(j, min(len(template), j + _WINDOW))
                       if kinds[k] == "writes"), None)
        out.append(writer + 1 if writer is not None and text.strip() else max(last, 1))
    return out


def _kind(line: str) -> re.Pattern[str] | str:
    """"silent" (renders nothing), "writes" (only actions, some of which print), "blank",
    or the pattern of the text the line renders to."""
    if not line.strip():
        return "blank"
    if "{{" in line:
        rest = _SILENT.sub("", line)
        if not rest.strip():
            return "silent"
        if not _ACTION.sub("", rest).strip():
            return "writes"
    if len(line) > _MAX_LINE:
        return "long"
    parts = _ACTION.split(line.rstrip())
    return re.compile(".*?".join(re.escape(p) for p in parts))


def chart_dirs(root: Path, depth: int = 4) -> dict[str, Path]:
    """Chart name (Chart.yaml `name`) -> its folder, relative to `root`, a few levels deep."""
    found: dict[str, Path] = {}
    base = len(root.parts)
    for dirpath, dirnames, filenames in os.walk(root):
        here = Path(dirpath)
        dirnames[:] = [] if len(here.parts) - base >= depth else [
            d for d in dirnames if not d.startswith(".") and d not in ("node_modules",)]
        if "Chart.yaml" in filenames:
            name = chart_name(here)
            if name:
                found.setdefault(name, here.relative_to(root))
    return found


def chart_name(folder: Path) -> str | None:
    try:
        text = (folder / "Chart.yaml").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    match = _NAME.search(text)
    return match.group(1) if match else None


def _in_repository(path: str, charts: Mapping[str, Path]) -> str | None:
    """`trainer/templates/job.yaml` -> `charts/trainer/templates/job.yaml` when the chart
    named `trainer` lives there (subcharts: `trainer/charts/sub/templates/...` likewise);
    None when no such chart is found."""
    name, _, rest = path.partition("/")
    folder = charts.get(name)
    return str(folder / rest) if folder is not None and rest else None


def rendered(raw: bytes) -> Sources | None:
    """Where the lines of Helm output came from; None for a file that is not (most)."""
    return Sources(raw) if _MARK in raw else None


def place_all(findings: Iterable[Finding], sources: Sources) -> list[Finding]:
    return [sources.place(f) for f in findings]
