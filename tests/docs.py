"""The documentation as tests read it: README.md and the pages under docs/, and whether a
help URI (SARIF `helpUri`) lands on an anchor that exists."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def pages() -> list[Path]:
    return [README, *sorted(DOCS.glob("*.md"))]


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, punctuation dropped, spaces to dashes."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = page.read_text(encoding="utf-8")
    found = set(re.findall(r'<a id="([^"]+)"></a>', text))
    found |= {slug(h) for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}
    return found


def documented(uri: str) -> bool:
    """The page a help URI names (…/blob/main/PATH#ANCHOR) exists here and has the anchor."""
    path, _, anchor = uri.split("/blob/main/", 1)[1].partition("#")
    page = ROOT / path
    return page.is_file() and (not anchor or anchor in anchors(page))
