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
