"""Runs the DRA case table (tests/dra/cases/*.yaml; the format is in casetable.py)."""

from __future__ import annotations

from typing import Any

import pytest

from policies.dra.allocate import check, problems_of
from policies.dra.extended import fits_extended, offered
from policies.dra.parse_claims import parse_claim
from policies.dra.parse_slices import parse_device_class, parse_slice
from policies.paths import to_display
from tests.dra.casetable import Case, claim_object, inventory, load_cases

CASES = load_cases()
PARSERS = {"slice": parse_slice, "class": parse_device_class, "claim": parse_claim}


def test_table_is_big_enough() -> None:
    assert len(CASES) >= 40


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_case(case: Case) -> None:
    raw, expect = case.raw, case.raw["expect"]
    if "parse" in raw:
        parsed = PARSERS[raw["parse"]](raw["object"])
        paths = sorted(to_display(p.path) for p in parsed.problems)
        assert paths == sorted(expect["problems"]), [p.message for p in parsed.problems]
        return
    inv = inventory(tuple(raw["inventory"]))
    if "extended" in raw:
        results = {g.name: fits_extended(inv, raw["extended"], g) for g in inv.groups}
        for group, count in expect.get("offered", {}).items():
            resource = next(iter(raw["extended"]))
            assert offered(inv, resource, inv.by_node[group]) == count
    else:
        claims = [parse_claim(claim_object(c)) for c in raw["claims"]]
        for claim in claims:
            assert not claim.problems, [p.message for p in claim.problems]
        verdicts = check(claims, inv)
        results = {v.group: v.reasons for v in verdicts}
        kinds = sorted({p.kind for p in problems_of(verdicts)})
        assert kinds == sorted(expect.get("problems", [])), problems_of(verdicts)
        for group, alternative in expect.get("chosen", {}).items():
            verdict = next(v for v in verdicts if v.group == group)
            assert alternative in verdict.chosen.values(), verdict.chosen
        for group, slots in expect.get("allocated", {}).items():
            verdict = next(v for v in verdicts if v.group == group)
            names = {k: [d.name for d in ds] for k, ds in verdict.allocated.items()}
            assert names == slots
    _check_fits(results, expect)


def _check_fits(results: dict[str, Any], expect: dict[str, Any]) -> None:
    fitting = sorted(g for g, reasons in results.items() if not reasons)
    assert fitting == sorted(expect.get("fits", [])), results
    for group, text in expect.get("reasons", {}).items():
        joined = "; ".join(results[group])
        assert text in joined, joined
