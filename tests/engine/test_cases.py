"""Every row of the engine's case table through review(): verdict, rules and injected fields,
then the properties every decision must have (patch applies, mutation is idempotent)."""

from __future__ import annotations

import jsonpatch
import pytest

from policies.engine import review
from tests.engine.casetable import Case, context_for, load_cases, pointer_get

CASES = load_cases()


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case(case: Case) -> None:
    context = context_for(case)
    decision = review(case.object, context, namespace=case.namespace)
    rules = {v.rule for v in decision.violations}
    assert rules == case.rules, [v.describe() for v in decision.violations]
    assert decision.allowed is case.allowed, [v.describe() for v in decision.violations]
    assert bool(decision.skipped) is case.skipped, decision.skipped
    said = "\n".join(v.message for v in decision.violations)
    for part in case.messages:
        assert part in said, said
    noted = "\n".join(decision.notes)
    for part in case.notes:
        assert part in noted, noted
    for pointer, value in case.mutated.items():
        assert pointer_get(decision.mutated, pointer) == value, pointer
    # The patch is exactly the difference between the object and its mutated form...
    assert jsonpatch.apply_patch(case.object, list(decision.patch)) == decision.mutated
    # ...and mutation is idempotent: the webhook on its own output changes nothing.
    again = review(decision.mutated, context, namespace=case.namespace)
    assert again.patch == ()
    assert {v.rule for v in again.violations} == rules


def test_table_is_large_enough() -> None:
    assert len(CASES) >= 80


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_mutating_question_gives_the_same_patch(case: Case) -> None:
    """/mutate asks review() for the patch alone (judge=False): the same patch and mutated
    object as the full review, and no violation the rules would find, only injection's."""
    context = context_for(case)
    full = review(case.object, context, namespace=case.namespace)
    patch_only = review(case.object, context, namespace=case.namespace, judge=False)
    assert patch_only.patch == full.patch
    assert patch_only.mutated == full.mutated
    assert set(patch_only.violations) <= set(full.violations)
    assert {v.rule for v in patch_only.violations} <= INJECTION_RULES


# what injecting itself finds (policies/mutate.py), not a rule's verdict
INJECTION_RULES = {"pod-spec-malformed", "node-selector-conflict", "runtime-class-conflict"}
