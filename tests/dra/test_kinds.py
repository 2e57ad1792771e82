"""What a request can be given, as the GPU rules count it: decided by what its class AND its
own selectors match among the inventory's devices, else by the drivers and device type those
selectors name; never by the class's name (issue 17, items 2 and 3)."""

from __future__ import annotations

from functools import cache

import pytest

from policies.dra.claims import request_kinds
from policies.dra.objects import Request, Selector
from policies.dra.pools import DraInventory
from tests.engine.casetable import _inventory


@cache
def dra() -> DraInventory:
    found = _inventory("dra-conformance").dra
    assert found is not None
    return found


def request(class_name: str, *selectors: str) -> Request:
    return Request(name="r", class_name=class_name,
                   selectors=tuple(Selector(s, ()) for s in selectors), mode="ExactCount",
                   count=1, admin_access=False, tolerations=(), capacity={}, path=())


TYPE = "device.attributes['gpu.nvidia.com'].type"


@pytest.mark.parametrize(("class_name", "selectors", "kinds", "matched"), [
    ("gpu.nvidia.com", (), {"gpu"}, True),
    ("mig.nvidia.com", (), {"mig"}, True),
    ("nvidia-any", (), {"gpu", "mig"}, True),  # a broad class: either
    ("nvidia-any", (f"{TYPE} == 'gpu'",), {"gpu"}, True),  # ...narrowed by the request
    ("nvidia-any", (f"{TYPE} == 'mig'",), {"mig"}, True),
    ("everything", (f"device.driver == 'gpu.nvidia.com' && {TYPE} == 'gpu'",), {"gpu"}, True),
    ("accelerators", (), {"gpu"}, True),  # the name says nothing; the devices do
    ("hbm-96g", (), {"gpu"}, False),  # nothing reaches the threshold: the driver says GPU
    ("gpu.nvidia.com", ("device.attributes['gpu.nvidia.com'].productName == 'NVIDIA B200'",),
     {"gpu"}, False),
    ("nvidia-any", (f"{TYPE} == 'mig' && device.attributes['gpu.nvidia.com'].profile == "
                    "'7g.80gb'",), {"mig"}, False),
    ("everything", ("device.attributes['fpga.example.com'].family == 'agilex'",), set(), False),
    ("gpu.nvidia.co", (), {"gpu"}, True),  # a class the inventory lacks: its name, unjudged
])
def test_request_kinds(class_name: str, selectors: tuple[str, ...], kinds: set[str],
                       matched: bool) -> None:
    assert request_kinds(request(class_name, *selectors), dra()) == (frozenset(kinds), matched)
