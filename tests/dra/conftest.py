"""Prints the upstream tables' tally (tests/dra/upstream/table.py) after the run."""

from __future__ import annotations

from typing import Any

from tests.dra.upstream.table import TALLIES

TITLES = {
    "cel": "DRA CEL (dynamic-resource-allocation cel/compile_test.go)",
    "allocator": "DRA allocator (structured/internal/allocatortesting/allocator_testing.go)",
    "validation": "ResourceClaim validation (kubernetes validation_resourceclaim_test.go)",
}


def pytest_terminal_summary(terminalreporter: Any) -> None:
    for name, tally in sorted(TALLIES.items()):
        if tally.passed or tally.failed:
            terminalreporter.write_line(tally.line(TITLES.get(name, name)))
