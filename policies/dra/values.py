"""Attribute values and semantic versions, as DRA devices publish them."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

# semver.org 2.0.0; build metadata is kept out of comparisons, as the spec says.
_SEMVER = re.compile(
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-((?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*)(?:\.(?:0|[1-9]\d*|\d*[A-Za-z-][0-9A-Za-z-]*))*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)
_LOOSE = re.compile(r"^v?(\d+)(?:\.(\d+))?(?:\.(\d+))?(.*)$")


@dataclass(frozen=True, slots=True, order=False)
class Version:
    major: int
    minor: int
    patch: int
    pre: tuple[int | str, ...] = ()

    def key(self) -> tuple[int, int, int, int, tuple[tuple[int, int | str], ...]]:
        # A release sorts after its pre-releases; numeric identifiers before alphanumeric ones.
        pre = tuple((0, p) if isinstance(p, int) else (1, p) for p in self.pre)
        return (self.major, self.minor, self.patch, 0 if self.pre else 1, pre)

    def compare(self, other: Version) -> int:
        a, b = self.key(), other.key()
        return (a > b) - (a < b)

    def __str__(self) -> str:
        core = f"{self.major}.{self.minor}.{self.patch}"
        return core + ("-" + ".".join(str(p) for p in self.pre) if self.pre else "")


@lru_cache(maxsize=4096)
def parse_version(text: str, normalize: bool = False) -> Version | None:
    """A semver 2.0.0 version, or None. `normalize` accepts what Kubernetes' semver(s, true)
    does: a leading v, missing minor/patch, leading zeros."""
    if len(text) > 256:
        return None
    match = _SEMVER.match(text)
    if match is None and normalize:
        loose = _LOOSE.match(text)
        if loose is None:
            return None
        major, minor, patch, rest = loose.groups()
        text = f"{int(major)}.{int(minor or 0)}.{int(patch or 0)}{rest}"
        match = _SEMVER.match(text)
    if match is None:
        return None
    major, minor, patch, pre, _build = match.groups()
    parts: tuple[int | str, ...] = ()
    if pre:
        parts = tuple(int(p) if p.isdigit() else p for p in pre.split("."))
    return Version(int(major), int(minor), int(patch), parts)


AttributeValue = int | bool | str | Version
