"""MIG placement: the consequences listed in gpu-ecosystem.md §3, on every 7-slice model and A30."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from policies import mig
from policies.catalog import Catalog, GPUModel

CATALOG_FILE = Path(__file__).resolve().parents[2] / "policies" / "data" / "catalog.yaml"
CATALOG = Catalog.from_data(yaml.safe_load(CATALOG_FILE.read_text(encoding="utf-8")))
SEVEN_SLICE = [m.name for m in CATALOG.models if m.mig_compute == 7]


def model(name: str) -> GPUModel:
    found = CATALOG.lookup(name)
    assert found is not None
    return found


def by_shape(m: GPUModel, shape: dict[str, int]) -> dict[str, int]:
    """Counts by shape: 'small' 1g, 'double' 1g of 2 slots, '2g', '3g', '4g', '7g', 'me'."""
    names: dict[str, str] = {}
    for p in m.profiles:
        if p.media:
            names.setdefault("me", p.name)
        elif p.compute == 1:
            names.setdefault("small" if p.size == 1 else "double", p.name)
        else:
            names[f"{p.compute}g"] = p.name
    return {names[k]: n for k, n in shape.items()}


SEVEN_CASES = [
    ({"7g": 1}, 1, True),
    ({"7g": 1, "small": 1}, 1, False),
    ({"7g": 2}, 1, False),
    ({"7g": 2}, 2, True),
    ({"4g": 1, "3g": 1}, 1, True),
    ({"4g": 2}, 1, False),
    ({"4g": 2}, 2, True),
    ({"3g": 2}, 1, True),
    ({"3g": 2, "small": 1}, 1, False),
    ({"3g": 1, "2g": 3}, 1, False),
    ({"3g": 1, "2g": 3}, 2, True),
    ({"2g": 3, "small": 1}, 1, True),
    ({"2g": 3, "small": 2}, 1, False),
    ({"small": 2, "2g": 1, "3g": 1}, 1, True),  # mig-parted all-balanced
    ({"small": 7}, 1, True),
    ({"small": 8}, 1, False),
    ({"small": 8}, 2, True),
    ({"small": 14}, 2, True),
    ({"small": 15}, 2, False),
    ({"double": 4}, 1, True),
    ({"double": 5}, 1, False),
    ({"double": 3, "small": 1}, 1, True),
    ({"4g": 1, "2g": 1, "small": 1}, 1, True),
    ({"4g": 1, "2g": 2}, 1, False),
    ({"3g": 1, "2g": 1, "small": 2}, 1, True),
    ({"small": 0}, 0, True),
    ({"4g": 1}, 0, False),
]


@pytest.mark.parametrize("name", SEVEN_SLICE)
@pytest.mark.parametrize(("shape", "gpus", "ok"), SEVEN_CASES)
def test_seven_slice_rules(name: str, shape: dict[str, int], gpus: int, ok: bool) -> None:
    m = model(name)
    assert mig.fits(m, by_shape(m, shape), gpus) is ok


@pytest.mark.parametrize(
    "name", [n for n in SEVEN_SLICE if any(p.media for p in model(n).profiles)]
)
@pytest.mark.parametrize(
    ("shape", "gpus", "ok"),
    [
        ({"me": 1}, 1, True),
        ({"me": 2}, 1, False),
        ({"me": 2}, 2, True),
        ({"me": 1, "small": 6}, 1, True),
        ({"me": 1, "small": 7}, 1, False),
    ],
)
def test_media_extension_once_per_gpu(
    name: str, shape: dict[str, int], gpus: int, ok: bool
) -> None:
    m = model(name)
    assert mig.fits(m, by_shape(m, shape), gpus) is ok


@pytest.mark.parametrize(
    ("counts", "gpus", "ok"),
    [
        ({"1g.6gb": 4}, 1, True),
        ({"1g.6gb": 5}, 1, False),
        ({"2g.12gb": 2}, 1, True),
        ({"2g.12gb": 1, "1g.6gb": 2}, 1, True),
        ({"2g.12gb": 1, "1g.6gb": 3}, 1, False),
        ({"4g.24gb": 1}, 1, True),
        ({"4g.24gb": 1, "1g.6gb": 1}, 1, False),
        ({"2g.12gb+me": 1, "1g.6gb+me": 1}, 1, False),
        ({"2g.12gb.me": 1, "1g.6gb": 2}, 1, True),
        ({"4g.24gb": 2, "2g.12gb": 2}, 3, True),
        ({"4g.24gb": 2, "2g.12gb": 3}, 3, False),
    ],
)
def test_a30_rules(counts: dict[str, int], gpus: int, ok: bool) -> None:
    assert mig.fits(model("NVIDIA-A30"), counts, gpus) is ok


@pytest.mark.parametrize(
    ("name", "counts"),
    [
        ("NVIDIA-A100-SXM4-40GB", {"3g.40gb": 1}),  # an A100-80 profile
        ("NVIDIA-H200", {"1g.10gb": 1}),
        ("NVIDIA-A100-SXM4-80GB", {"7g.79gb": 1}),  # HAMi's spelling
        ("Tesla-T4", {"1g.5gb": 1}),
    ],
)
def test_unknown_profile_never_fits(name: str, counts: dict[str, int]) -> None:
    assert not mig.fits(model(name), counts, 8)
    assert mig.min_gpus(model(name), counts) is None


def test_nothing_requested_fits_anything() -> None:
    assert mig.fits(model("Tesla-T4"), {}, 1)
    assert mig.fits(model("NVIDIA-A100-SXM4-80GB"), {"1g.10gb": 0}, 0)


@pytest.mark.parametrize(
    ("counts", "expected"),
    [
        ({"1g.10gb": 8}, 2),
        ({"1g.10gb": 21}, 3),
        ({"4g.40gb": 3, "3g.40gb": 3}, 3),
        ({"3g.40gb": 1, "2g.20gb": 3}, 2),
        ({"7g.80gb": 2, "1g.10gb": 7, "4g.40gb": 1}, 4),
        ({"1g.10gb+me": 3, "2g.20gb": 9}, 3),
        ({"1g.20gb": 5, "2g.20gb": 2}, 2),
    ],
)
def test_min_gpus(counts: dict[str, int], expected: int) -> None:
    m = model("NVIDIA-A100-SXM4-80GB")
    assert mig.min_gpus(m, counts) == expected
    assert mig.fits(m, counts, expected)
    assert not mig.fits(m, counts, expected - 1)


@pytest.mark.parametrize("name", [m.name for m in CATALOG.models if m.mig_capable])
def test_max_instances_match_table(name: str) -> None:
    """Derived from placements, the per-GPU maximum equals the catalog table for every profile."""
    m = model(name)
    for profile in m.profiles:
        assert mig.max_instances(m, profile.name) == profile.max_instances, profile.name
        assert mig.max_instances(m, profile.name, 3) == 3 * profile.max_instances
        assert mig.fits(m, {profile.name: profile.max_instances}, 1)
        assert not mig.fits(m, {profile.name: profile.max_instances + 1}, 1)


def test_max_instances_unknown() -> None:
    assert mig.max_instances(model("NVIDIA-H200"), "1g.10gb", 1) == 0
    assert mig.max_instances(model("NVIDIA-H200"), "1g.18gb", 0) == 0
