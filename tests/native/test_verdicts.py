"""Exported policies decide as the engine does: every row of the engine's case tables whose
decision comes only from exported rules is admitted (tests/native/harness.py plays the API
server: bindings, match conditions, variables, validations, JSON patches applied with jsonpatch)
and must give the engine's verdict, the same rules, and the same object after mutation.

A row is eligible when the API server's schema takes the object, the engine's decision is the same without an inventory or claims (the
native policies see only the object and its namespace), every violation is of a rule exported
for its policy, the object's kind is matched natively, it is not a ResourceClaim judged on
its own, and it names no DeviceClass-served resource (DRA demand is counted by the webhook)
nor, for the GPU-count rules, a share of a GPU (the webhook counts it as its devices).
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

import kubernetes_validate
import pytest

from policies.context import Context
from policies.engine import is_claim, review
from policies.native.build import Export, export
from policies.resources import (
    DEVICE_CLASS_PREFIX,
    KAI_DEVICES,
    KAI_FRACTION,
    KAI_MEMORY,
    SHARED_FAMILIES,
    classify,
)
from policies.workloads import WORKLOAD_KINDS
from tests.engine.casetable import Case, context_for, load_cases
from tests.native.harness import admit

CASES = load_cases()
# The fewest eligible rows: fewer means the export (or this filter) lost its reach.
MIN_ELIGIBLE = 185


@cache
def _exported(names: tuple[str, ...]) -> Export:
    return export(context_for(next(c for c in CASES if c.policies == names)).policies)


def _names_dra(obj: Any) -> bool:
    text = repr(obj)
    return DEVICE_CLASS_PREFIX in text


def _keys(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(key, str):
                yield key
            yield from _keys(value)
    elif isinstance(node, list):
        for item in node:
            yield from _keys(item)


def _shares(obj: Any) -> bool:
    """The object asks for a share of a GPU (KAI annotations, a sharing family's resource),
    which the engine counts as the devices it sits on: the webhook's count, not the native
    policies' (they count whole devices)."""
    for key in _keys(obj):
        found = classify(key)
        if key in (KAI_FRACTION, KAI_MEMORY, KAI_DEVICES) or (
                found is not None and found.family in SHARED_FAMILIES):
            return True
    return False


def refused_by_schema(obj: Any) -> bool:
    """The API server's schema refuses a built-in object before any admission policy sees
    it (a custom resource's schema is its CRD's: not known here)."""
    if not isinstance(obj.get("kind"), str) or not isinstance(obj.get("apiVersion"), str):
        return True
    try:
        kubernetes_validate.validate(obj, "1.34", strict=False)
    except kubernetes_validate.ValidationError:
        return True
    except (kubernetes_validate.SchemaNotFoundError, kubernetes_validate.InvalidSchemaError):
        return False
    return False


def why_not(case: Case) -> str:
    """"" for an eligible row, else why it is not."""
    context = context_for(case)
    decision = review(case.object, context, namespace=case.namespace)
    bare = Context(policies=context.policies, catalog=context.catalog,
                   namespaces=context.namespaces)
    alone = review(case.object, bare, namespace=case.namespace)
    rules = {v.rule for v in decision.violations}
    exported = _exported(case.policies)
    done = {(pe.policy.name, c.rule) for pe in exported.policies for c in pe.checks}
    kind = WORKLOAD_KINDS.find(case.object) if isinstance(case.object, dict) else None
    if decision.skipped:
        return "not reviewed by the engine"
    if not isinstance(case.object, dict) or refused_by_schema(case.object):
        return "the API server's schema refuses it"
    if (decision.allowed, rules, decision.mutated) != (
            alone.allowed, {v.rule for v in alone.violations}, alone.mutated):
        return "the inventory or claims decide"
    if any((v.policy, v.rule) not in done for v in decision.violations):
        return "a rule not exported"
    if rules and isinstance(case.object, dict) and is_claim(case.object):
        return "a claim judged on its own"
    if rules and _names_dra(case.object):
        return "DRA demand"
    if rules & {"gpu-max-per-pod", "gpu-max-per-container"} and _shares(case.object):
        return "GPU shares counted as devices"
    if kind is not None and kind not in exported.kinds and rules:
        return "a kind left to the webhook"
    return ""


ELIGIBLE = [c for c in CASES if not why_not(c)]


def test_enough_rows_are_eligible() -> None:
    assert len(ELIGIBLE) >= MIN_ELIGIBLE, f"{len(ELIGIBLE)} of {len(CASES)} rows"


@pytest.mark.parametrize("case", ELIGIBLE, ids=lambda c: c.id)
def test_native_verdict_is_the_engines(case: Case) -> None:
    context = context_for(case)
    decision = review(case.object, context, namespace=case.namespace)
    exported = _exported(case.policies)
    order = [p.name for p in sorted(context.policies, key=lambda p: (p.spec.priority, p.name))]
    verdict = admit(case.object, case.namespace, dict(context.namespace_labels(case.namespace)),
                    exported, order)
    assert not verdict.errors, verdict.errors
    assert (verdict.allowed, verdict.rules) == \
        (decision.allowed, {v.rule for v in decision.violations}), verdict.messages
    governing = context.governing(case.namespace)
    injected = {pe.policy.name for pe in exported.policies if pe.injects_all}
    if all(p.name in injected for p in governing) \
            and WORKLOAD_KINDS.find(case.object) in exported.mutated_kinds:
        assert verdict.mutated == decision.mutated


# Rows whose native message says the same in other words, and why.
WORDED_OTHERWISE = {
    "hostile:exponent 1e99999999 costs what 1e9 costs": "a count past 2^53 is written as a double",
    "hostile:a 5000-digit quantity is capped, not computed": "a count past 2^53 as a double",
    "limits:model pinned by affinity, one value not allowed":
        "one requirement's values are named together (one regex over them: per value would "
        "cost ten times more)",
}


@pytest.mark.parametrize("case", [c for c in ELIGIBLE if c.rules], ids=lambda c: c.id)
def test_messages_are_the_engines(case: Case) -> None:
    """Each refusal's message starts with its rule and holds the engine's words."""
    context = context_for(case)
    exported = _exported(case.policies)
    order = [p.name for p in sorted(context.policies, key=lambda p: (p.spec.priority, p.name))]
    verdict = admit(case.object, case.namespace, dict(context.namespace_labels(case.namespace)),
                    exported, order)
    decision = review(case.object, context, namespace=case.namespace)
    for violation in decision.violations:
        said = [m for m in verdict.messages if m.startswith(violation.rule + ": ")]
        assert said, (violation.rule, verdict.messages)
        if case.id not in WORDED_OTHERWISE:
            assert any(violation.message in m for m in said), (violation.message, said)


# (operation, the spec changed): whether the validating policies judge it again
UPDATES = [("CREATE", True), ("UPDATE", True), ("UPDATE", False)]


@pytest.mark.parametrize(("operation", "changed"), UPDATES)
def test_an_update_that_leaves_the_spec_alone_is_not_judged(operation: str,
                                                             changed: bool) -> None:
    from policies.native.evaluate import run
    from tests.native.harness import request_for
    [case] = [c for c in ELIGIBLE if c.id == "limits:too many GPUs in one container"]
    exported = _exported(case.policies)
    [vap] = [o for o in exported.objects if o["kind"] == "ValidatingAdmissionPolicy"]
    old = dict(case.object, spec={**case.object["spec"], "nodeName": "n1"}) if changed \
        else case.object
    data = {"object": case.object, "oldObject": old if operation == "UPDATE" else None,
            "request": {**(request_for(case.object, case.namespace, operation) or {})},
            "namespaceObject": None}
    taken = all(run(c["expression"], data) is True for c in vap["spec"]["matchConditions"])
    assert taken is changed
