"""NodeResourcesFit's reasons, row by row (fits.yaml)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.quantity import parse_quantity
from policies.scheduling.fit import shortfalls

ROWS = yaml.safe_load((Path(__file__).parent / "fits.yaml").read_text(encoding="utf-8"))


def _amounts(raw: dict[str, Any] | None) -> dict[str, Any]:
    return {k: parse_quantity(v) for k, v in (raw or {}).items()}


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r["name"])
def test_fit(row: dict[str, Any]) -> None:
    found = shortfalls(_amounts(row["request"]), _amounts(row["allocatable"]),
                       _amounts(row.get("used")))
    assert [s.words for s in found] == row["want"]
