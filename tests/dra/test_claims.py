"""Claim facts that need no search: compile errors, unknown classes, GPU demand."""

from __future__ import annotations

from typing import Any

import pytest

from policies.dra.claims import gpu_demand, gpu_kind, selector_problems, unknown_classes
from policies.dra.parse_claims import parse_claim
from policies.paths import to_display
from tests.dra.casetable import claim_object, inventory

CLUSTER = ("classes", "h100", "a100-mig", "selection")


def _claim(*requests: dict[str, Any]) -> Any:
    return parse_claim(claim_object({"requests": list(requests)}))


def test_request_selector_that_does_not_compile() -> None:
    claim = _claim({"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "selectors": [
        {"cel": {"expression": "true"}}, {"cel": {"expression": "device.driver =="}}]}})
    problems = selector_problems(claim)
    assert [to_display(p.path) for p in problems] == [
        "spec.devices.requests[0].exactly.selectors[1].cel.expression"]
    assert problems[0].kind == "selector-invalid"
    assert "compilation failed: ERROR: <input>:1:17: Syntax error" in problems[0].message


def test_class_selector_that_does_not_compile_is_reported_on_the_request() -> None:
    inv = inventory(CLUSTER)
    claim = _claim({"name": "x", "exactly": {"deviceClassName": "broken.example.com"}})
    problems = selector_problems(claim, inv.classes)
    assert [to_display(p.path) for p in problems] == [
        "spec.devices.requests[0].exactly.deviceClassName"]
    assert problems[0].message.startswith("device class broken.example.com: selector")


def test_unknown_class_in_a_subrequest() -> None:
    inv = inventory(CLUSTER)
    claim = _claim({"name": "accel", "firstAvailable": [
        {"name": "a", "deviceClassName": "gpu.nvidia.com"},
        {"name": "b", "deviceClassName": "gpu.nvidia.co"}]})
    problems = unknown_classes(claim, inv.classes)
    assert [(to_display(p.path), p.message.split(": ", 1)[1]) for p in problems] == [
        ("spec.devices.requests[0].firstAvailable[1].deviceClassName",
         "device class gpu.nvidia.co does not exist")]


@pytest.mark.parametrize(("class_name", "with_inventory", "kind"), [
    ("gpu.nvidia.com", True, "gpu"),
    ("mig.nvidia.com", True, "mig"),
    ("nic.example.com", True, None),
    ("gpu.nvidia.com", False, "gpu"),
    ("mig.nvidia.com", False, "mig"),
    ("gpu.amd.com", False, "gpu"),
    ("nic.example.com", False, None),
])
def test_gpu_kind(class_name: str, with_inventory: bool, kind: str | None) -> None:
    assert gpu_kind(class_name, inventory(CLUSTER) if with_inventory else None) == kind


def test_all_counts_every_matching_device_of_the_best_group() -> None:
    claim = _claim({"name": "all", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                               "allocationMode": "All"}},
                   {"name": "two", "exactly": {"deviceClassName": "mig.nvidia.com", "count": 2}})
    demand = gpu_demand(claim, inventory(CLUSTER))
    assert [(d.request.name, d.kind, d.count) for d in demand] == [
        ("all", "gpu", 8), ("two", "mig", 2)]


def test_a_pod_with_thousands_of_claims_costs_what_its_size_does() -> None:
    """Anyone who can create a Pod writes its claims: the work grows with the pod's size, not
    with claims times containers."""
    import time

    from policies.engine import review
    from tests.engine.casetable import Case, context_for

    case = Case(id="x", object={}, policies=("defaults",), namespace="ml-train",
                inventory="dra-fleet", allowed=True, rules=frozenset())
    context = context_for(case)

    def pod(n: int) -> dict[str, object]:
        refs = [{"name": f"c{i}", "resourceClaimTemplateName": "one-gpu"} for i in range(n)]
        containers = [{"name": f"k{j}", "image": "x", "resources": {"claims": [
            {"name": f"c{(j * 7 + k) % n}"} for k in range(5)]}} for j in range(n // 3)]
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
                "spec": {"resourceClaims": refs, "containers": containers}}

    def cost(n: int) -> float:
        obj = pod(n)
        started = time.perf_counter()
        decision = review(obj, context, namespace="ml-train")
        assert not decision.allowed  # n one-GPU claims fit no node
        return time.perf_counter() - started

    # the collector's pauses (which the larger pod triggers more often) are not the engine's
    # work: measured without it, best of five, so a loaded machine does not decide the ratio
    import gc

    gc.collect()
    gc.disable()
    try:
        small, large = min(cost(400) for _ in range(5)), min(cost(1600) for _ in range(5))
    finally:
        gc.enable()
    # four times the claims and the containers (of five entries each): linear work is about
    # 4x; looking every container's claims up afresh (claims x containers) would be 16x
    assert large < small * 8, (small, large)


def test_what_claims_name_cannot_grow_the_inventory_memo_without_bound() -> None:
    """Class names, selectors and amounts come from pods and claims: the answers kept per
    inventory stay bounded however many distinct ones arrive."""
    from policies.dra.pools import MEMO_LIMIT
    from policies.engine import review
    from tests.engine.casetable import Case, context_for

    case = Case(id="x", object={}, policies=("defaults",), namespace="ml-train",
                inventory="dra-fleet", allowed=True, rules=frozenset())
    context = context_for(case)
    assert context.inventory is not None and context.inventory.dra is not None
    for i in range(MEMO_LIMIT + 500):
        review({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                "metadata": {"name": f"c{i}", "namespace": "ml-train"},
                "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                    "deviceClassName": f"gpu-{i}.example.com", "allocationMode": "All",
                    "selectors": [{"cel": {"expression":
                                           f"device.attributes['gpu.nvidia.com'].x{i} == 1"}}],
                }}]}}}, context)
    assert len(context.inventory.dra.memo) <= MEMO_LIMIT
