"""The hardware-match messages, word for word (tests/engine/fixtures/hardware-messages.yaml):
the refusal names the closest pools and counts the rest, so it stays short enough to read in a
403; `explain` keeps every pool with every reason."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.engine import review
from policies.hardware import PoolVerdict, closest
from tests.engine.casetable import Case, context_for, expand
from webhook.commands.explain import answer, render

ROWS = yaml.safe_load((Path(__file__).parent / "fixtures" / "hardware-messages.yaml")
                      .read_text(encoding="utf-8"))["rows"]


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_admission_message_and_explain_output(row: dict[str, Any]) -> None:
    obj = expand(row["pod"])
    if row.get("labels"):
        obj["metadata"]["labels"] = row["labels"]
    case = Case(row["name"], obj, tuple(row["policies"]), "ml-train", row["inventory"], False,
                frozenset())
    context = context_for(case)
    decision = review(obj, context, namespace="ml-train")
    assert not decision.allowed
    [message] = [v.message for v in decision.violations if v.rule == "gpu-no-matching-hardware"]
    assert message == row["admission"]
    assert len(message) < 1000
    assert render([answer(obj, context, "ml-train", "")], pools_known=True) == row["explain"]


def _v(name: str, reasons: int, relevant: bool = True) -> PoolVerdict:
    return PoolVerdict(name, 1, "", tuple(f"r{i}" for i in range(reasons)), relevant)


@pytest.mark.parametrize(("verdicts", "shown", "rest"), [
    ([], [], 0),
    ([_v("a", 0)], [], 0),
    ([_v("a", 2), _v("b", 1), _v("c", 3), _v("d", 1), _v("e", 1)], ["b", "d", "e"], 2),
    # among equals, a pool with none of the asked resources comes last
    ([_v("cpu", 1, False), _v("a", 1), _v("b", 1), _v("c", 1)], ["a", "b", "c"], 1),
    ([_v("a", 2), _v("fits", 0), _v("b", 1)], ["b", "a"], 0),  # closest first
])
def test_closest(verdicts: list[PoolVerdict], shown: list[str], rest: int) -> None:
    picked, others = closest(verdicts)
    assert ([v.pool for v in picked], others) == (shown, rest)
