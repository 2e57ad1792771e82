"""What `gpupolicy lint DIR` reads in a repository: manifests, and the Helm charts and Kustomize
overlays that make manifests only once rendered.

A folder holding `Chart.yaml` is a chart and one holding a kustomization is an overlay: each
is rendered whole and nothing under it is read raw (its templates and patches are not
objects). An overlay another overlay builds on (its `resources`, `bases` or `components`) is
a base: it is linted through each overlay that renders it, not alone as well.

`--exclude GLOB` and a `.gpupolicyignore` at the lint root leave paths out, with gitignore's
habits: `#` comments, `!` to take a path back, a pattern with a `/` is anchored at the root,
one without matches a name at any depth, a trailing `/` matches folders only, `**` any depth.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, NamedTuple

from policies import yamlpos
from webhook.inputs.reading import SUFFIXES, SourceError

CHART_FILE = "Chart.yaml"
KUSTOMIZATION_FILES = ("kustomization.yaml", "kustomization.yml", "Kustomization")
IGNORE_FILE = ".gpupolicyignore"


class Target(NamedTuple):
    """A chart or an overlay to render."""

    kind: Literal["helm", "kustomize"]
    path: Path


@dataclass(slots=True)
class Found:
    """What the paths given hold: files to read, charts and overlays to render."""

    files: list[Path] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what was left out, for -v


def kustomization_file(folder: Path) -> Path | None:
    for name in KUSTOMIZATION_FILES:
        if (folder / name).is_file():
            return folder / name
    return None


# ---- ignore patterns ------------------------------------------------------------------------

class _Pattern(NamedTuple):
    regex: re.Pattern[str]
    negate: bool
    folders_only: bool


class Ignore:
    """gitignore-like globs, each matched against a path relative to the folder of the
    `.gpupolicyignore` that holds it (`--exclude`: relative to the folder linted)."""

    def __init__(self, patterns: Iterable[str] = (), prefix: str = "") -> None:
        # (prefix, scope, pattern): a path under `scope` (relative to the lint root; "" for
        # all), made relative to it, is matched with `prefix` in front
        self.patterns: list[tuple[str, str, _Pattern]] = []
        self.last: list[_Pattern] = []  # --exclude: relative to the lint root, wins over files
        self.add(patterns, prefix)

    def add(self, patterns: Iterable[str], prefix: str = "", scope: str = "") -> None:
        self.patterns += [(prefix, scope, p) for p in map(_compile, patterns) if p is not None]

    def read(self, file: Path, prefix: str = "", scope: str = "") -> None:
        try:
            lines = file.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError as exc:
            raise SourceError(f"{file}: cannot read: {exc.strerror or exc}") from None
        self.add(lines, prefix, scope)

    @classmethod
    def at(cls, root: Path, extra: Sequence[str]) -> Ignore:
        """The `.gpupolicyignore` of `root` and of the folders above it up to the repository
        root (the nearer one wins), then `--exclude` (which wins over both)."""
        ignore = cls()
        for folder, prefix in reversed(_up_to_repository(root)):
            if (folder / IGNORE_FILE).is_file():
                ignore.read(folder / IGNORE_FILE, prefix)
        ignore.last = _compiled(extra)
        return ignore

    def excluded(self, relative: str, *, folder: bool) -> bool:
        out = False
        for prefix, scope, p in [*self.patterns, *(("", "", q) for q in self.last)]:
            if p.folders_only and not folder:
                continue
            if scope and not relative.startswith(scope + "/"):
                continue
            here = relative[len(scope) + 1:] if scope else relative
            if p.regex.fullmatch(f"{prefix}{here}"):  # the last match decides, as in git
                out = not p.negate
        return out


def _compiled(lines: Sequence[str]) -> list[_Pattern]:
    return [p for p in map(_compile, lines) if p is not None]


def _up_to_repository(root: Path, depth: int = 20) -> list[tuple[Path, str]]:
    """(folder, root's path from it + "/") from `root` up to the nearest folder holding
    `.git` (`root` alone when it is in no repository)."""
    out = [(root, "")]
    parts: list[str] = []
    try:
        here = root.resolve()
    except (OSError, RuntimeError):
        return out
    for _ in range(depth):
        if (here / ".git").exists():
            return out
        if here.parent == here:
            break
        parts.insert(0, here.name)
        here = here.parent
        out.append((here, "/".join(parts) + "/"))
    return [(root, "")]


def _compile(line: str) -> _Pattern | None:
    text = line.rstrip("\n").rstrip()
    if not text or text.startswith("#"):
        return None
    negate = text.startswith("!")
    text = text[1:] if negate else text
    folders_only = text.endswith("/")
    text = text.strip("/") if folders_only else text
    anchored = "/" in text.lstrip("/") or text.startswith("/")
    text = text.lstrip("/")
    if not text:
        return None
    body = _glob(text)
    regex = body if anchored else f"(?:.*/)?{body}"
    return _Pattern(re.compile(regex), negate, folders_only)


def _glob(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if text.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if text.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            end = text.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = text[i + 1:end].replace("\\", "\\\\")
                out.append("[^" + body[1:] + "]" if body.startswith("!") else "[" + body + "]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


# ---- the walk -------------------------------------------------------------------------------

def walk(root: Path, *, exclude: Sequence[str] = (), render: bool = True) -> Found:
    """The manifests under `root` (sorted) and, with `render`, its charts and overlays (bases
    other overlays here build on are left to them). Hidden files and folders are skipped, and
    symlinked folders are not followed."""
    ignore = Ignore.at(root, exclude)
    found = Found()
    overlays: list[Path] = []
    errors: list[OSError] = []
    for dirpath, dirnames, filenames in os.walk(root, onerror=errors.append):
        here = Path(dirpath)
        relative = here.relative_to(root).as_posix()
        if relative != "." and IGNORE_FILE in filenames:  # applies under its folder, as in git
            ignore.read(here / IGNORE_FILE, scope=relative)
        if render:
            kind = ("helm" if CHART_FILE in filenames else
                    "kustomize" if any(n in filenames for n in KUSTOMIZATION_FILES) else None)
            if kind is not None:
                dirnames[:] = []  # rendered whole: nothing under it is read raw
                if kind == "helm":
                    found.targets.append(Target("helm", here))
                else:
                    overlays.append(here)
                continue
        kept = []
        for d in sorted(dirnames):
            sub = f"{relative}/{d}" if relative != "." else d
            if d.startswith("."):
                continue
            if ignore.excluded(sub, folder=True):
                found.notes.append(f"{here / d}: skipped, excluded")
                continue
            kept.append(d)
        dirnames[:] = kept
        for name in sorted(filenames):
            if not name.endswith(SUFFIXES) or name.startswith("."):
                continue
            sub = f"{relative}/{name}" if relative != "." else name
            if ignore.excluded(sub, folder=False):
                found.notes.append(f"{here / name}: skipped, excluded")
                continue
            found.files.append(here / name)
    if errors:
        first = errors[0]
        raise SourceError(f"{first.filename}: cannot read: {first.strerror or first}")
    bases = {p.resolve() for overlay in overlays for p in builds_on(overlay)}
    for overlay in overlays:
        if overlay.resolve() in bases:
            found.notes.append(f"{overlay}: a Kustomize base, linted through the overlays "
                               "that render it")
        elif _is_component(overlay):
            found.notes.append(f"{overlay}: a Kustomize Component, rendered only through an "
                               "overlay that uses it")
        else:
            found.targets.append(Target("kustomize", overlay))
    found.files.sort()
    found.targets.sort(key=lambda t: t.path)
    return found


class Lookups:
    """What enclosing() found, kept across its calls: each folder's real path and the chart
    or overlay it lies in. A lint names hundreds of folders of one repository; looking up
    from each stat'ed the same folders above them hundreds of times, and resolving each path
    (os.path.realpath, an lstat of every part) cost more than the rest of the search."""

    def __init__(self) -> None:
        self.real: dict[str, str] = {}
        self.inside: dict[str, Target | None] = {}

    def realpath(self, folder: str) -> str:
        """os.path.realpath of an absolute, normalized folder: its parent's, plus its name
        unless it is a link (one lstat a folder, each folder once)."""
        found = self.real.get(folder)
        if found is not None:
            return found
        parent = os.path.dirname(folder)
        if parent == folder:
            found = folder
        elif os.path.islink(folder):
            found = os.path.realpath(folder)
        else:
            found = os.path.join(self.realpath(parent), os.path.basename(folder))
        self.real[folder] = found
        return found


def enclosing(path: Path, depth: int = 20, known: Lookups | None = None) -> Target | None:
    """The chart or overlay a path given on the command line lies in (a template or a patch
    named alone, as pre-commit names changed files): it is rendered whole instead. The search
    stops at the repository's root (a folder holding `.git`). `known`: what earlier calls
    found (Lookups), kept by a caller that asks for many paths."""
    known = Lookups() if known is None else known
    try:
        given = os.path.abspath(path)
        if os.path.islink(given):  # a link to a file may point into another chart
            given = os.path.realpath(given)
        if os.path.isdir(given):
            start = here = known.realpath(given)
        else:
            here = known.realpath(os.path.dirname(given))
            start = os.path.join(here, os.path.basename(given))
    except (OSError, ValueError):
        return None
    passed: list[str] = []
    found: Target | None = None
    for _ in range(depth):
        if here in known.inside:
            found = known.inside[here]
            break
        passed.append(here)
        found, stop = _folder(here)
        if found is not None or stop:
            break
        parent = os.path.dirname(here)
        if parent == here:
            break
        here = parent
    for folder in passed:
        known.inside[folder] = found
    if found is None:
        return None
    return Target(found.kind, _as_given(path, Path(start), found.path))


def _folder(folder: str) -> tuple[Target | None, bool]:
    """(the chart or overlay `folder` is, if it is one; whether the search stops here: the
    repository's root). One listing of the folder, not a stat of every name it may hold."""
    try:
        names = set(os.listdir(folder))
    except OSError:
        return None, False
    if CHART_FILE in names and os.path.isfile(os.path.join(folder, CHART_FILE)):
        return Target("helm", Path(folder)), False
    if not names.isdisjoint(KUSTOMIZATION_FILES) and kustomization_file(Path(folder)) \
            and not _is_component(Path(folder)):
        return Target("kustomize", Path(folder)), False
    return None, ".git" in names


def _as_given(path: Path, resolved: Path, folder: Path) -> Path:
    """`folder` spelled from the path the user gave (`charts/x/templates/a.yaml` ->
    `charts/x`), so reports name it as they name files."""
    up = len(resolved.relative_to(folder).parts)
    given = path
    for _ in range(up):
        given = given.parent
    return given if given.resolve() == folder else Path(os.path.relpath(folder))


def kustomization(folder: Path) -> dict[str, object]:
    """The kustomization of `folder` as data ({} when it cannot be read: kustomize says why)."""
    file = kustomization_file(folder)
    if file is None:
        return {}
    try:
        stream = yamlpos.read_stream(file.read_bytes())
    except OSError:
        return {}
    data = stream.documents[0].data if stream.documents else None
    return data if isinstance(data, dict) else {}


def builds_on(overlay: Path, depth: int = 0) -> list[Path]:
    """The local folders `overlay` builds on, however deep (remote bases are not followed)."""
    if depth > 20:
        return []
    out: list[Path] = []
    data = kustomization(overlay)
    for key in ("resources", "bases", "components"):
        entries = data.get(key)
        for entry in entries if isinstance(entries, list) else ():
            if not isinstance(entry, str) or "://" in entry or entry.startswith("github.com/"):
                continue
            sub = overlay / entry
            if sub.is_dir() and kustomization_file(sub) is not None:
                out += [sub, *builds_on(sub, depth + 1)]
    return out


def _is_component(folder: Path) -> bool:
    return kustomization(folder).get("kind") == "Component"
