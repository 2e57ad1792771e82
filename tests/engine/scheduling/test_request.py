"""The effective request, row by row (requests.yaml), and bounded on a hostile pod."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.quantity import parse_quantity
from policies.scheduling.request import limit_range_defaults, pod_requests

ROWS = yaml.safe_load((Path(__file__).parent / "requests.yaml").read_text(encoding="utf-8"))


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["name"])
def test_effective_request(row: dict[str, Any]) -> None:
    defaults = limit_range_defaults(row.get("limitRanges", []))
    want = {k: parse_quantity(v) for k, v in row["want"].items()}
    assert pod_requests(row["spec"], defaults) == want


def test_ten_thousand_containers_stay_linear() -> None:
    spec = {"containers": [{"name": f"c{i}", "resources": {"requests": {"cpu": "1m"}}}
                           for i in range(10_000)],
            "initContainers": [{"name": f"i{i}", "restartPolicy": "Always",
                                "resources": {"requests": {"memory": "1Ki"}}}
                               for i in range(10_000)]}
    started = time.perf_counter()
    found = pod_requests(spec)
    assert time.perf_counter() - started < 2.0
    assert found == {"cpu": 10, "memory": 10_000 * 1024, "pods": 1}


def test_a_pod_of_ten_thousand_containers_is_judged_in_time_linear_in_its_size() -> None:
    """The whole fit through review(): 4x the containers costs about 4x, not 16x."""
    from policies.engine import review
    from tests.engine.casetable import Case, context_for

    def pod(n: int) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
            "containers": [{"name": f"c{i}", "image": "i", "resources": {
                "requests": {"cpu": "1m", "memory": "1Mi", f"example.com/r{i % 50}": "1"},
                "limits": {"nvidia.com/gpu": "1"} if i == 0 else {}}} for i in range(n)],
            "initContainers": [{"name": f"i{i}", "image": "i", "restartPolicy": "Always",
                                "resources": {"requests": {"cpu": "1m"}}} for i in range(n)]}}

    context = context_for(Case("hostile", {}, ("defaults",), "ml-train", "scale-from-zero",
                               False, frozenset()))

    def cost(n: int) -> float:
        obj = pod(n)
        started = time.perf_counter()
        decision = review(obj, context, namespace="ml-train")
        elapsed = time.perf_counter() - started
        assert not decision.allowed  # example.com/r* is served by no node and no template
        return elapsed

    small = min(cost(2_500) for _ in range(2))
    large = min(cost(10_000) for _ in range(2))
    assert large < max(small * 8, 0.05), (small, large)
    assert large < 10
