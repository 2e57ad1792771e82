"""DeviceTaintRules read from untrusted dicts, and applied to the devices they pick
(kubernetes/api resource v1alpha3/v1 DeviceTaintRule: an empty selector picks every device,
an absent one none; effects None, NoSchedule, NoExecute)."""

from __future__ import annotations

from typing import Any

import pytest

from policies.dra.pools import DraInventory
from policies.dra.taint_rules import parse_taint_rule

SLICE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
         "metadata": {"name": "n1-gpu"},
         "spec": {"driver": "gpu.example.com", "nodeName": "n1",
                  "pool": {"name": "n1", "generation": 1, "resourceSliceCount": 1},
                  "devices": [{"name": "gpu-0"}, {"name": "gpu-1"}]}}
TAINT = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}


def rule(selector: Any, taint: Any = None) -> dict[str, Any]:
    spec: dict[str, Any] = {"taint": TAINT if taint is None else taint}
    if selector is not ...:
        spec["deviceSelector"] = selector
    return {"apiVersion": "resource.k8s.io/v1alpha3", "kind": "DeviceTaintRule",
            "metadata": {"name": "r"}, "spec": spec}


@pytest.mark.parametrize(("selector", "tainted"), [
    ({"driver": "gpu.example.com", "pool": "n1", "device": "gpu-1"}, {"gpu-1"}),
    ({"device": "gpu-0"}, {"gpu-0"}),
    ({"pool": "n1"}, {"gpu-0", "gpu-1"}),
    ({}, {"gpu-0", "gpu-1"}),  # the empty selector picks every device
    (..., set()),  # no selector picks none
    ({"driver": "gpu.nvidia.com"}, set()),
    ({"pool": "n2"}, set()),
])
def test_the_devices_a_rule_picks_carry_its_taint(selector: Any, tainted: set[str]) -> None:
    inventory = DraInventory.build([SLICE], [], taint_rules=[rule(selector)])
    found = {d.name for g in inventory.groups for _p, d in g.devices() if d.taints}
    assert found == tainted


@pytest.mark.parametrize("raw", [
    None, "x", [], {"spec": "x"}, {"spec": {"deviceSelector": [], "taint": "x"}},
    {"spec": {"deviceSelector": {"driver": 3}, "taint": {"key": [], "effect": {}}}},
    rule({}, {"key": "k", "effect": "PreferNoSchedule"}),
    rule({"deviceClassName": "gpu.example.com"}),
])
def test_a_malformed_rule_is_a_problem_with_its_path_and_taints_nothing(raw: Any) -> None:
    parsed = parse_taint_rule(raw)
    assert parsed.taint is None
    inventory = DraInventory.build([SLICE], [], taint_rules=[raw])
    assert not any(d.taints for g in inventory.groups for _p, d in g.devices())
    if isinstance(raw, dict) and raw.get("spec") is not None:
        assert parsed.problems and all(p.path for p in parsed.problems)
