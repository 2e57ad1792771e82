"""Loading the upstream scenario tables (tests/dra/upstream/*.yaml) and keeping their tally.

A row with `skip: reason` is left out (only what an alpha gate of 1.37 brings, or what is no
fact about the inputs); one with `gap: reason` is expressed but known not to pass yet, run as
an expected failure so the tally stays honest. The tally is printed after the run
(tests/dra/conftest.py): "N/M pass" where M counts the rows expressed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

HERE = Path(__file__).parent


@dataclass
class Tally:
    passed: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)

    def line(self, name: str) -> str:
        expressed = len(self.passed) + len(self.failed)
        text = (f"{name}: {len(self.passed)}/{expressed} scenarios pass, "
                f"{len(self.skipped)} left out")
        if self.failed:
            text += f"; not passing: {', '.join(self.failed)}"
        return text


TALLIES: dict[str, Tally] = {}


def rows(name: str) -> list[dict[str, Any]]:
    with (HERE / f"{name}.yaml").open(encoding="utf-8") as f:
        cases = yaml.safe_load(f)["cases"]
    ids = [c["id"] for c in cases]
    assert len(ids) == len(set(ids)), f"{name}.yaml: ids must be unique"
    tally = TALLIES.setdefault(name, Tally())
    tally.skipped = {c["id"]: c["skip"] for c in cases if "skip" in c}
    return [c for c in cases if "skip" not in c]


def record(name: str, case_id: str, ok: bool) -> None:
    tally = TALLIES.setdefault(name, Tally())
    (tally.passed if ok else tally.failed).append(case_id)


def verdict(name: str, row: dict[str, Any], differs: str) -> None:
    """One row's verdict: counted in the tally, then asserted (`differs` says how the engine's
    answer differs from upstream's, "" when it does not)."""
    record(name, row["id"], not differs)
    if "gap" in row:
        pytest.xfail(row["gap"])
    assert not differs, differs
