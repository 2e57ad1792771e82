"""Who serves an extended resource on a node: the device plugin, DRA, or nobody."""

from __future__ import annotations

import pytest

from policies.dra.extended import served_by, serving_class
from tests.dra.casetable import inventory


@pytest.mark.parametrize(("resource", "allocatable", "expected"), [
    ("nvidia.com/gpu", {"nvidia.com/gpu": 8}, "device-plugin"),
    ("nvidia.com/gpu", {}, "dra"),
    ("nvidia.com/gpu", {"nvidia.com/gpu": 0}, "dra"),
    ("deviceclass.resource.kubernetes.io/mig.nvidia.com", {}, "dra"),
    ("amd.com/gpu", {}, None),
    ("amd.com/gpu", {"amd.com/gpu": 2}, "device-plugin"),
])
def test_served_by(resource: str, allocatable: dict[str, int], expected: str | None) -> None:
    assert served_by(inventory(("classes", "l4")), resource, allocatable) == expected


def test_newest_class_wins_a_shared_name_then_the_lowest_name() -> None:
    from policies.dra.pools import DraInventory

    def cls(name: str, stamp: str) -> dict[str, object]:
        return {"kind": "DeviceClass", "metadata": {"name": name, "creationTimestamp": stamp},
                "spec": {"extendedResourceName": "example.com/gpu"}}
    inv = DraInventory.build([], [cls("b", "2026-01-01T00:00:00Z"), cls("c", "2026-03-01T00:00:00Z"),
                                  cls("a", "2026-03-01T00:00:00Z")])
    assert serving_class(inv, "example.com/gpu") == "a"
