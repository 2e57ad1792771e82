"""The pure shaping of answers: warnings the apiserver keeps, audit keys it accepts, patches
it can decode."""

from __future__ import annotations

import base64
import json

import pytest

from policies.decision import Decision, Violation
from tests.server.contract import AUDIT_KEY, B64
from webhook.http.admission import (
    audit_annotations,
    audit_key,
    build_response,
    encode_patch,
    shape_warnings,
)


@pytest.mark.parametrize(("given", "want"), [
    (["plain"], ["plain"]),
    (["two\nlines\tand\x00nul"], ["two lines and nul"]),
    (["bell\x07", "zero\u200bwidth", "line\u2028sep"], ["bell", "zero width", "line sep"]),
    (["", "   ", "\n"], []),
    (["same", "same", "same "], ["same"]),
    (["x" * 200], ["x" * 119 + "…"]),
    (["é" * 130], ["é" * 119 + "…"]),  # characters (runes), not bytes
])
def test_shape_warnings(given: list[str], want: list[str]) -> None:
    assert shape_warnings(given) == want


def test_warning_budget() -> None:
    many = [f"warning number {i:04d} " + "y" * 100 for i in range(200)]
    shaped = shape_warnings(many)
    assert sum(len(w) for w in shaped) <= 4096
    assert len(shaped) == 4096 // 120  # every one is cut to 120
    assert all(len(w) <= 120 for w in shaped)


@pytest.mark.parametrize(("rule", "key"), [
    ("gpu-max-per-pod", "gpu-max-per-pod"),
    ("visible_devices.bypass", "visible_devices.bypass"),
    ("a/b c", "a-b-c"),
    ("-leading-and-trailing-", "leading-and-trailing"),
    ("x" * 80, "x" * 63),
    ("///", "violation"),
    ("ünïcode", "n-code"),
])
def test_audit_key(rule: str, key: str) -> None:
    assert audit_key(rule) == key
    assert AUDIT_KEY.match(key)


def _violation(rule: str, message: str, mode: str = "Audit") -> Violation:
    return Violation(rule=rule, message=message, path=("spec", "containers", 0),
                     policy="p", mode=mode)  # type: ignore[arg-type]


def test_audit_annotations_group_by_rule() -> None:
    found = audit_annotations([_violation("r", "one"), _violation("r", "two"),
                               _violation("r", "one"), _violation("s", "three\nlines")])
    assert found == {"r": "r at spec.containers[0]: one; r at spec.containers[0]: two",
                     "s": "s at spec.containers[0]: three lines"}


@pytest.mark.parametrize("ops", [[], [{"op": "add", "path": "/a", "value": 1}],
                                 [{"op": "add", "path": "/metadata/labels/a~1b", "value": "é"}]])
def test_encode_patch(ops: list[dict[str, object]]) -> None:
    text = encode_patch(ops)
    assert B64.match(text) and len(text) % 4 == 0
    assert json.loads(base64.b64decode(text, validate=True)) == ops


REQ = {"uid": "u-1", "object": {"kind": "Pod"}}


@pytest.mark.parametrize(("webhook", "decision", "want"), [
    ("mutate", Decision(allowed=True), {"uid": "u-1", "allowed": True}),
    ("mutate", Decision(allowed=False, patch=({"op": "add", "path": "/x", "value": 1},)),
     {"uid": "u-1", "allowed": True, "patchType": "JSONPatch",
      "patch": encode_patch([{"op": "add", "path": "/x", "value": 1}])}),
    ("validate", Decision(allowed=True, patch=({"op": "add", "path": "/x", "value": 1},)),
     {"uid": "u-1", "allowed": True}),
    ("validate", Decision(allowed=False, violations=(
        _violation("r1", "too many", "Enforce"), _violation("w1", "careful", "Warn"))),
     {"uid": "u-1", "allowed": False,
      "status": {"code": 403, "reason": "Forbidden", "status": "Failure",
                 "message": "r1 at spec.containers[0]: too many"},
      "warnings": ["w1 at spec.containers[0]: careful"]}),
])
def test_build_response(webhook: str, decision: Decision, want: dict[str, object]) -> None:
    answer = build_response(REQ, decision, webhook)
    assert answer == {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                      "response": want}


def test_no_patch_without_an_object() -> None:
    """DELETE: even if a patch came back, sending it would fail the user's request."""
    decision = Decision(allowed=True, patch=({"op": "add", "path": "/x", "value": 1},))
    assert "patch" not in build_response({"uid": "d", "object": None}, decision,
                                         "mutate")["response"]
