"""The GPU catalog: data file consistency, lookups across label spellings, bad data."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.catalog import Catalog, GPUModel, models_equal

CATALOG_FILE = Path(__file__).resolve().parents[2] / "policies" / "data" / "catalog.yaml"
RAW: dict[str, Any] = yaml.safe_load(CATALOG_FILE.read_text(encoding="utf-8"))
CATALOG = Catalog.from_data(RAW)


@pytest.mark.parametrize(
    ("product", "model"),
    [
        ("NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB"),
        ("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", "NVIDIA-A100-SXM4-80GB"),
        ("A100-SXM4-80GB", "NVIDIA-A100-SXM4-80GB"),
        ("nvidia-a100-sxm4-80gb-SHARED", "NVIDIA-A100-SXM4-80GB"),
        ("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb-SHARED", "NVIDIA-A100-SXM4-80GB"),
        ("NVIDIA-A100-80GB-PCIe", "NVIDIA-A100-SXM4-80GB"),
        ("NVIDIA-A100-SXM4-40GB-MIG-INVALID", "NVIDIA-A100-SXM4-40GB"),
        ("A100-SXM4-40GB", "NVIDIA-A100-SXM4-40GB"),
        ("NVIDIA-A100-PCIE-40GB", "NVIDIA-A100-SXM4-40GB"),
        ("Tesla-T4", "Tesla-T4"),
        ("Tesla-T4-SHARED", "Tesla-T4"),
        ("Tesla-V100-SXM2-16GB", "Tesla-V100-SXM2-16GB"),
        ("Tesla-V100-PCIE-32GB", "Tesla-V100-SXM2-32GB"),
        ("NVIDIA-A10", "NVIDIA-A10"),
        ("NVIDIA-A10G", "NVIDIA-A10G"),
        ("NVIDIA-L4", "NVIDIA-L4"),
        ("NVIDIA-A30", "NVIDIA-A30"),
        ("NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-80GB-HBM3"),
        ("NVIDIA-H100-PCIe", "NVIDIA-H100-80GB-HBM3"),
        ("NVIDIA-H100-NVL", "NVIDIA-H100-NVL"),
        ("NVIDIA-H20", "NVIDIA-H20"),
        ("NVIDIA-H200", "NVIDIA-H200"),
        ("NVIDIA-H200-NVL", "NVIDIA-H200"),
        ("NVIDIA-B200", "NVIDIA-B200"),
        ("Tesla-P4", "Tesla-P4"),
        ("Tesla-P4-SHARED", "Tesla-P4"),
        ("Tesla-P40", "Tesla-P40"),
        ("Tesla-P100-PCIE-16GB", "Tesla-P100-PCIE-16GB"),
        ("NVIDIA-L20", "NVIDIA-L20"),
        ("NVIDIA-L40S", "NVIDIA-L40S"),
        ("NVIDIA-L40", "NVIDIA-L40"),
        ("NVIDIA-A40", "NVIDIA-A40"),
        ("NVIDIA-A2", "NVIDIA-A2"),
        ("NVIDIA-A800-SXM4-80GB", "NVIDIA-A800-SXM4-80GB"),
        ("NVIDIA-A800-80GB-PCIe-MIG-1g.10gb", "NVIDIA-A800-SXM4-80GB"),
        ("NVIDIA-H800", "NVIDIA-H800"),
        ("NVIDIA-GH200-480GB", "NVIDIA-GH200-480GB"),
        ("NVIDIA-GB200", "NVIDIA-GB200"),
    ],
)
def test_lookup_finds_model(product: str, model: str) -> None:
    found = CATALOG.lookup(product)
    assert found is not None and found.name == model


@pytest.mark.parametrize("product", ["", "NVIDIA-A100", "NVIDIA-GeForce-RTX-4090", "MIG-1g.10gb"])
def test_lookup_unknown(product: str) -> None:
    assert CATALOG.lookup(product) is None


@pytest.mark.parametrize(
    ("a", "b", "equal"),
    [
        ("NVIDIA-A100-SXM4-80GB", "A100-SXM4-80GB", True),
        ("NVIDIA-A100-SXM4-80GB-MIG-3g.40gb", "nvidia-a100-sxm4-80gb", True),
        ("Tesla-T4-SHARED", "Tesla-T4", True),
        ("NVIDIA-A100-SXM4-80GB", "NVIDIA-A100-SXM4-40GB", False),
        ("NVIDIA-H200", "NVIDIA-H200-NVL", False),
    ],
)
def test_models_equal(a: str, b: str, equal: bool) -> None:
    assert models_equal(a, b) is equal
    assert (Catalog.normalize(a) == Catalog.normalize(b)) is equal


EXPECTED_PROFILES = {
    "NVIDIA-A30": "1g.6gb 1g.6gb+me 2g.12gb 2g.12gb+me 4g.24gb",
    "NVIDIA-A100-SXM4-40GB": "1g.5gb 1g.5gb+me 1g.10gb 2g.10gb 3g.20gb 4g.20gb 7g.40gb",
    "NVIDIA-A100-SXM4-80GB": "1g.10gb 1g.10gb+me 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb",
    "NVIDIA-H100-80GB-HBM3": "1g.10gb 1g.10gb+me 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb",
    "NVIDIA-H100-NVL": "1g.12gb 1g.24gb 2g.24gb 3g.47gb 4g.47gb 7g.94gb",
    "NVIDIA-H20": "1g.12gb 1g.12gb+me 1g.24gb 2g.24gb 3g.48gb 4g.48gb 7g.96gb",
    "NVIDIA-H200": "1g.18gb 1g.18gb+me 1g.35gb 2g.35gb 3g.71gb 4g.71gb 7g.141gb",
    "NVIDIA-B200": "1g.23gb 1g.23gb+me 1g.45gb 2g.45gb 3g.90gb 4g.90gb 7g.180gb",
    "NVIDIA-A800-SXM4-80GB": "1g.10gb 1g.10gb+me 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb",
    "NVIDIA-H800": "1g.10gb 1g.10gb+me 1g.20gb 2g.20gb 3g.40gb 4g.40gb 7g.80gb",
    "NVIDIA-GH200-480GB": "1g.12gb 1g.12gb+me 1g.24gb 2g.24gb 3g.48gb 4g.48gb 7g.96gb",
    "NVIDIA-GB200": "1g.23gb 1g.23gb+me 1g.47gb 2g.47gb 3g.93gb 4g.93gb 7g.186gb",
}


@pytest.mark.parametrize("model", [m.name for m in CATALOG.models])
def test_profile_tables(model: str) -> None:
    found = CATALOG.lookup(model)
    assert found is not None
    assert found.profile_names == tuple(EXPECTED_PROFILES.get(model, "").split())
    assert found.mig_capable is (model in EXPECTED_PROFILES)
    assert found.memory_mib > (7_000 if model == "Tesla-P4" else 10_000)  # the P4 has 8 GB
    if found.mig_capable:
        assert (found.mig_slots, found.mig_compute) == (
            (4, 4) if model == "NVIDIA-A30" else (8, 7)
        )


def _a100_80() -> GPUModel:
    model = CATALOG.lookup("NVIDIA-A100-SXM4-80GB")
    assert model is not None
    return model


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("1g.10gb", "1g.10gb"),
        ("1g.10gb+me", "1g.10gb+me"),
        ("1g.10gb.me", "1g.10gb+me"),
        ("3G.40GB", "3g.40gb"),
        ("7g.79gb", None),
        ("1g.5gb", None),
        ("", None),
    ],
)
def test_profile_by_name(name: str, expected: str | None) -> None:
    profile = _a100_80().profile(name)
    assert (profile.name if profile else None) == expected


def test_profile_fields() -> None:
    me = _a100_80().profile("1g.10gb+me")
    assert me is not None and me.media and me.max_instances == 1
    assert me.resource_suffix == "1g.10gb.me"
    big = _a100_80().profile("3g.40gb")
    assert big is not None
    assert (big.compute, big.memory_gb, big.size, big.starts) == (3, 40, 4, (0, 4))
    assert not big.media


def _broken(path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(RAW)
    target: Any = data
    for step in path[:-1]:
        target = target[step]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return data


A100 = next(i for i, m in enumerate(RAW["models"]) if m["name"] == "NVIDIA-A100-SXM4-80GB")


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], "models"),
        ({"models": "x"}, "models"),
        ({"models": [42]}, "models[0]"),
        (_broken(("models", 0, "name"), KeyError), "models[0]: field `name`"),
        (_broken(("models", 0, "memoryMiB"), "15GB"), "Tesla-T4: field `memoryMiB`"),
        (_broken(("models", 0, "products"), []), "Tesla-T4: field `products`"),
        (_broken(("models", 0, "migCapable"), "yes"), "Tesla-T4: field `migCapable`"),
        (_broken(("models", A100, "mig"), KeyError), "NVIDIA-A100-SXM4-80GB: field `mig`"),
        (_broken(("models", A100, "mig", "profiles", 0, "starts"), [0, 9]),
         "NVIDIA-A100-SXM4-80GB profile 1g.10gb: field `starts`"),
        (_broken(("models", A100, "mig", "profiles", 2, "compute"), True),
         "profile 1g.20gb: field `compute`"),
        (_broken(("models", A100, "mig", "profiles", 3, "compute"), 3),
         "profile 2g.20gb: field `name`"),
        (_broken(("models", A100, "products"), ["NVIDIA-A100-SXM4-40GB"]),
         "also listed"),
    ],
)
def test_bad_data_names_model_and_field(data: Any, message: str) -> None:
    with pytest.raises(ValueError, match="catalog") as err:
        Catalog.from_data(data)
    assert message in str(err.value)


def test_empty_catalog() -> None:
    assert Catalog.empty().lookup("NVIDIA-A100-SXM4-80GB") is None
    assert Catalog.from_data({"models": []}).models == ()
