"""What CUDA an image needs and what CUDA a node's driver runs, for cuda-driver-too-old.

The tables are data (policies/data/cuda.yaml, with their sources), read by the edges and handed
to the engine inside the Catalog. An image is read only when its reference is one of the
shapes below; anything else (no tag, a digest alone, a tag that is not a version, an illegal
reference) says nothing: an image that cannot be read is not guessed at.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, NamedTuple

Version = tuple[int, ...]
# The distribution spec's grammar: a path of lowercase components, a tag, a digest.
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_PATH = re.compile(rf"^{_COMPONENT}(?:/{_COMPONENT})*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")
_DIGEST = re.compile(r"^[a-z0-9]+(?:[.+_-][a-z0-9]+)*:[0-9a-fA-F]{32,}$")
_REGISTRY = re.compile(r"^[A-Za-z0-9.-]+(?::[0-9]{1,5})?$")
_CUDA_TAG = re.compile(r"^(\d{1,2})\.(\d{1,2})(?:\.\d{1,3})?(?:-|$)")
_NGC_TAG = re.compile(r"^(\d\d\.\d\d)(?:-|$)")
MAX_REFERENCE = 512


def parse_version(text: Any) -> Version | None:
    """"535.104.05" -> (535, 104, 5); None for anything that is not dotted digits."""
    if not isinstance(text, str) or not 0 < len(text) <= 32:
        return None
    parts = text.strip().split(".")
    if not all(p.isascii() and p.isdigit() for p in parts):
        return None
    return tuple(int(p) for p in parts)


def shown(version: Version) -> str:
    return ".".join(f"{v:02d}" if i == 2 else str(v) for i, v in enumerate(version))


class ImageCuda(NamedTuple):
    cuda: Version  # (major, minor)
    ngc: bool  # an NGC framework container (it ships forward-compatibility packages)


class CudaTable:
    """NVIDIA's minimum driver per CUDA minor, and the CUDA of NGC framework releases."""

    __slots__ = ("drivers", "ngc", "ngc_images")

    def __init__(self, drivers: Mapping[Version, Version] | None = None,
                 ngc: Mapping[str, Version] | None = None,
                 ngc_images: frozenset[str] = frozenset()) -> None:
        self.drivers = dict(sorted((drivers or {}).items()))
        self.ngc = dict(ngc or {})
        self.ngc_images = ngc_images

    @classmethod
    def from_data(cls, data: Any) -> CudaTable:
        if not isinstance(data, Mapping):
            raise ValueError("cuda table: expected a mapping")
        drivers: dict[Version, Version] = {}
        for cuda, driver in (data.get("drivers") or {}).items():
            c, d = parse_version(str(cuda)), parse_version(str(driver))
            if c is None or d is None or len(c) != 2:
                raise ValueError(f"cuda table: bad entry {cuda}: {driver}")
            drivers[c] = d
        ngc: dict[str, Version] = {}
        for release, cuda in (data.get("ngc") or {}).items():
            c = parse_version(str(cuda))
            if c is None or len(c) != 2 or not _NGC_TAG.match(str(release)):
                raise ValueError(f"cuda table: bad NGC entry {release}: {cuda}")
            ngc[str(release)] = c
        return cls(drivers, ngc, frozenset(str(n) for n in data.get("ngcImages") or ()))

    def image(self, reference: Any) -> ImageCuda | None:
        """The CUDA an image needs, from its tag; None when the reference says nothing."""
        if not isinstance(reference, str) or len(reference) > MAX_REFERENCE:
            return None
        found = _path_and_tag(reference)
        if found is None:
            return None
        path, tag = found
        if path == "nvidia/cuda" or path.endswith("/nvidia/cuda"):
            cuda = _CUDA_TAG.match(tag)
            return ImageCuda((int(cuda[1]), int(cuda[2])), False) if cuda else None
        name = path.rsplit("/", 1)[-1]
        if name in self.ngc_images and (path == f"nvidia/{name}"
                                        or path.endswith(f"/nvidia/{name}")):
            release = _NGC_TAG.match(tag)
            version = self.ngc.get(release[1]) if release else None
            return ImageCuda(version, True) if version else None
        return None

    def minimum_driver(self, cuda: Version) -> Version | None:
        """The oldest driver that runs this CUDA minor; None past the table's end."""
        exact = self.drivers.get(cuda[:2])
        if exact is not None:
            return exact
        later = [d for c, d in self.drivers.items() if c > cuda[:2]]
        # a minor that was never released (12.7) needs what the next one needs
        return later[0] if later and cuda[:2] > min(self.drivers, default=cuda[:2]) else None

    def driver_cuda(self, driver: Version) -> Version | None:
        """The newest CUDA minor a driver runs."""
        runs = [c for c, d in self.drivers.items() if driver >= d]
        return runs[-1] if runs else None


def _path_and_tag(reference: str) -> tuple[str, str] | None:
    """The repository path (registry left out) and tag of a legal image reference that has a
    tag; None otherwise (no tag, a digest alone, an illegal reference)."""
    rest, at, digest = reference.partition("@")
    if at and not _DIGEST.match(digest):
        return None
    name, colon, tag = rest.rpartition(":")
    if not colon or "/" in tag:  # no tag (the colon was a registry port's, or absent)
        return None
    first, slash, remainder = name.partition("/")
    # the first component is a registry when it looks like a host, as the container runtimes
    # decide (docker.io/library is implied otherwise)
    if slash and ("." in first or ":" in first or first == "localhost"):
        if not _REGISTRY.match(first):
            return None
        name = remainder
    if not _PATH.match(name) or not _TAG.match(tag):
        return None
    return name, tag


DRIVER_FULL = ("nvidia.com/cuda.driver-version.full",)
DRIVER_PARTS = (("nvidia.com/cuda.driver-version.major", "nvidia.com/cuda.driver-version.minor",
                 "nvidia.com/cuda.driver-version.revision"),
                ("nvidia.com/cuda.driver.major", "nvidia.com/cuda.driver.minor",
                 "nvidia.com/cuda.driver.rev"))
RUNTIME_PARTS = (("nvidia.com/cuda.runtime-version.major", "nvidia.com/cuda.runtime-version.minor"),
                 ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor"))


def node_driver(labels: Mapping[str, str]) -> Version | None:
    """The driver version GPU feature discovery labels (new names, then the old ones)."""
    full = parse_version(labels.get(DRIVER_FULL[0]))
    if full is not None:
        return full
    for keys in DRIVER_PARTS:
        parts = [parse_version(labels.get(k)) for k in keys]
        if parts[0] is not None and parts[1] is not None:
            return tuple(p[0] for p in parts if p is not None and len(p) == 1)
    return None


def node_runtime(labels: Mapping[str, str]) -> Version | None:
    """The newest CUDA the node's driver runs, as GFD labels it."""
    full = parse_version(labels.get("nvidia.com/cuda.runtime-version.full"))
    if full is not None and len(full) >= 2:
        return full[:2]
    for major, minor in RUNTIME_PARTS:
        a, b = parse_version(labels.get(major)), parse_version(labels.get(minor))
        if a is not None and b is not None and len(a) == len(b) == 1:
            return (a[0], b[0])
    return None
