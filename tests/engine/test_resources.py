"""Quantities, resource names and the GPU demand of a pod spec, as tables."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import pytest

from policies.quantity import QuantityError, parse_quantity
from policies.resources import classify, demand, mig_profile


@pytest.mark.parametrize(
    ("raw", "value"),
    [("1", 1), (1, 1), ("1000m", 1), ("500m", Fraction(1, 2)), ("0.5", Fraction(1, 2)),
     (5.5, Fraction(11, 2)), ("2Gi", 2 * 2**30), ("1e3", 1000), ("1.5k", 1500), ("+2", 2),
     ("0", 0), ("-1", -1), (".5", Fraction(1, 2)), ("1E2", 100), ("100u", Fraction(1, 10**4))],
)
def test_quantity(raw: Any, value: Fraction) -> None:
    assert parse_quantity(raw) == value


@pytest.mark.parametrize("raw", ["abc", "", "1.2.3", "1Qi", True, None, [1], "1 Gi"])
def test_bad_quantity(raw: Any) -> None:
    with pytest.raises(QuantityError):
        parse_quantity(raw)


@pytest.mark.parametrize(
    ("name", "family", "profile"),
    [("nvidia.com/gpu", "whole", None), ("nvidia.com/gpu.shared", "whole", None),
     ("nvidia.com/mig-1g.10gb", "mig", "1g.10gb"), ("nvidia.com/mig-1g.10gb.me", "mig", "1g.10gb+me"),
     ("amd.com/gpu", "whole", None), ("amd.com/cpx_nps4", "whole", None),
     ("aliyun.com/gpu-mem", "gpushare", None), ("nvidia.com/gpumem", "hami", None),
     ("volcano.sh/vgpu-memory", "volcano-vgpu", None), ("volcano.sh/gpu-number", "volcano-gpushare", None),
     ("cpu", None, None), ("memory", None, None), ("example.com/fpga", None, None)],
)
def test_classify(name: str, family: str | None, profile: str | None) -> None:
    found = classify(name)
    assert (found.family if found else None) == family
    assert mig_profile(name) == profile


def c(name: str, gpus: Any = None, **extra: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, **extra}
    if gpus is not None:
        out["resources"] = {"limits": {"nvidia.com/gpu": gpus}}
    return out


@pytest.mark.parametrize(
    ("spec", "total", "gpu"),
    [
        ({"containers": [c("a", 1), c("b", 2)]}, 3, True),
        ({"initContainers": [c("i", 4)], "containers": [c("a", 1)]}, 4, True),
        ({"initContainers": [c("i", 1)], "containers": [c("a", 2)]}, 2, True),
        # a sidecar keeps its device while the next init container runs, and beside the app
        ({"initContainers": [c("s", 1, restartPolicy="Always"), c("i", 2)],
          "containers": [c("a", 1)]}, 3, True),
        ({"initContainers": [c("s", 2, restartPolicy="Always")], "containers": [c("a", 2)]}, 4,
         True),
        ({"containers": [c("a", 0)]}, 0, False),
        ({"containers": [c("a", "lots")]}, None, False),
        ({"containers": [c("a")]}, None, False),
        ({"containers": [{"name": "a", "resources": {"requests": {"nvidia.com/gpu": "2"}}}]}, 2,
         True),
        ({"ephemeralContainers": [c("e", 1)], "containers": []}, 0, True),
    ],
)
def test_pod_demand(spec: dict[str, Any], total: int | None, gpu: bool) -> None:
    found = demand(spec, ("spec",))
    assert found.totals.get("nvidia.com/gpu") == total
    assert found.gpu is gpu


def test_demand_paths_point_at_the_value_read() -> None:
    spec = {"containers": [{"name": "a", "resources": {"requests": {"nvidia.com/gpu": 1},
                                                       "limits": {"nvidia.com/gpu": 1}}}]}
    [container] = demand(spec, ("spec", "template", "spec")).containers
    assert container.amounts["nvidia.com/gpu"].path == (
        "spec", "template", "spec", "containers", 0, "resources", "limits", "nvidia.com/gpu")


@pytest.mark.parametrize(
    "change",
    ["env", "limits", "new-container", "nothing"],
)
def test_demand_from_a_previous_version_equals_a_fresh_one(change: str) -> None:
    resources = {"limits": {"nvidia.com/gpu": 2}}
    before = {"containers": [c("a", 1), {"name": "b", "resources": resources}]}
    after = {"containers": [before["containers"][0], dict(before["containers"][1])]}
    if change == "env":
        after["containers"][1]["env"] = [{"name": "X", "value": "1"}]
    elif change == "limits":
        after["containers"][1]["resources"] = {"limits": {"nvidia.com/gpu": 3}}
    elif change == "new-container":
        after["containers"].append(c("z", 4))
    previous = demand(before, ("spec",))
    reused, fresh = demand(after, ("spec",), previous), demand(after, ("spec",))
    assert reused.totals == fresh.totals and reused.present == fresh.present
    assert [(x.path, x.spec, dict(x.amounts), x.gpu) for x in reused.containers] == [
        (x.path, x.spec, dict(x.amounts), x.gpu) for x in fresh.containers]
