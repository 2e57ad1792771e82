"""Answers stay small whatever the object holds: 10,000 broken containers give a denial
message, warnings and audit annotations of a few kilobytes, each saying how many were left out
(the apiserver keeps 4096 runes of warnings; a Status message is printed, logged and audited)."""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path
from typing import Any

import pytest

from policies.decision import Violation
from tests.server.harness import Server, envelope, make_request
from webhook.http import admission
from webhook.http.server import create_app
from webhook.inputs import sources
from webhook.inputs.state import State

MANY = 10_000
POLICIES = """\
apiVersion: gpupolicy.io/v1alpha1
kind: GPUPolicy
metadata: {name: warn-many}
spec: {namespaces: [warn], mode: Warn, rules: {maxGPUsPerContainer: 1}}
---
apiVersion: gpupolicy.io/v1alpha1
kind: GPUPolicy
metadata: {name: audit-many}
spec: {namespaces: [audit], mode: Audit, rules: {maxGPUsPerContainer: 1}}
"""


def many_containers(gpus: int, count: int = MANY) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": str(gpus)}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "many"},
            "spec": {"containers": [
                {"name": f"c{i}", "image": "i", "resources": {"limits": limits, "requests": limits}}
                for i in range(count)]}}


def _printable_line(text: str) -> bool:
    return all(unicodedata.category(c) not in ("Cc", "Cf", "Zl", "Zp") for c in text)


def test_denial_of_10000_containers_over_tls(server: Server) -> None:
    """tests/server/policies: team-* allows at most 2 GPUs per container and per pod."""
    req = make_request(many_containers(3), namespace="team-a", uid="many-deny")
    reply = server.post("/validate", envelope(req))
    assert reply.status == 200
    assert len(reply.body) < 8 * 1024
    response = reply.json["response"]
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert len(message) <= admission.DENIAL_BUDGET + 40 and _printable_line(message)
    shown = re.findall(r"gpu-max-per-(?:pod|container) at ", message)
    rest = int(re.search(r"; … and (\d+) more$", message).group(1))  # type: ignore[union-attr]
    assert 1 <= len(shown) <= admission.DENIAL_SHOWN
    assert len(shown) + rest == MANY + 1  # every container, and the pod's total
    assert "gpu-max-per-container at spec.containers[0]" in message


@pytest.fixture(scope="module")
def many_app(tmp_path_factory: pytest.TempPathFactory) -> Any:
    folder: Path = tmp_path_factory.mktemp("many-policies")
    (folder / "many.yaml").write_text(POLICIES)
    state = State(sources.load_catalog())
    state.update(policies=sources.load_policies(folder))
    return create_app(state).test_client()


def test_warnings_of_10000_containers(many_app: Any) -> None:
    req = make_request(many_containers(2), namespace="warn", uid="many-warn")
    response = many_app.post("/validate", json=envelope(req)).get_json()["response"]
    warnings = response["warnings"]
    assert response["allowed"] is True
    assert sum(len(w) for w in warnings) <= admission.WARNING_BUDGET
    assert all(0 < len(w) <= admission.WARNING_MAX and _printable_line(w) for w in warnings)
    assert len(set(warnings)) == len(warnings)
    rest = int(re.fullmatch(r"… and (\d+) more warnings not shown", warnings[-1]).group(1))  # type: ignore[union-attr]
    assert len(warnings) - 1 + rest == MANY


def test_audit_annotations_of_10000_containers(many_app: Any) -> None:
    req = make_request(many_containers(2), namespace="audit", uid="many-audit")
    response = many_app.post("/validate", json=envelope(req)).get_json()["response"]
    value = response["auditAnnotations"]["gpu-max-per-container"]
    assert len(value) <= admission.AUDIT_VALUE_BUDGET + 40 and _printable_line(value)
    shown = re.findall(r"gpu-max-per-container at ", value)
    rest = int(re.search(r"; … and (\d+) more$", value).group(1))  # type: ignore[union-attr]
    assert len(shown) + rest == MANY


def _violation(message: str, rule: str = "r") -> Violation:
    return Violation(rule=rule, message=message, path=("spec",), policy="p", mode="Enforce")


# (case, violation messages, what the denial must be)
DENIALS: list[tuple[str, list[str], str]] = [
    ("none", [], "denied by GPU policy"),
    ("one", ["bad"], "r at spec: bad"),
    ("duplicates-once", ["bad", "bad"], "r at spec: bad"),
    ("newlines-and-tabs", ["a\nb\tc\u2028d\u200be"], "r at spec: a b c d e"),
    ("twenty-one", [f"m{i}" for i in range(21)],
     "; ".join(f"r at spec: m{i}" for i in range(20)) + "; … and 1 more"),
]


@pytest.mark.parametrize(("case", "messages", "want"), DENIALS, ids=[d[0] for d in DENIALS])
def test_denial_message(case: str, messages: list[str], want: str) -> None:
    assert admission.denial_message([_violation(m) for m in messages]) == want


def test_one_huge_violation_is_cut() -> None:
    """A message may quote a value the user wrote, at any length."""
    message = admission.denial_message([_violation("x" * 3_000_000), _violation("small")])
    assert len(message) <= admission.ITEM_MAX * 2 + 10
    assert message.endswith("…; r at spec: small")


# (case, warnings in, warnings out)
WARNINGS: list[tuple[str, list[str], list[str]]] = [
    ("empty-dropped", ["", " \n "], []),
    ("control-chars", ["a\x00b\x1bc"], ["a b c"]),
    ("long-cut", ["w" * 500], ["w" * 119 + "…"]),
    ("duplicates", ["same", "same", "other"], ["same", "other"]),
    ("over-budget", [f"{i:04d}" + "x" * 96 for i in range(100)],
     [f"{i:04d}" + "x" * 96 for i in range(40)] + ["… and 60 more warnings not shown"]),
]


@pytest.mark.parametrize(("case", "texts", "want"), WARNINGS, ids=[w[0] for w in WARNINGS])
def test_shape_warnings(case: str, texts: list[str], want: list[str]) -> None:
    assert admission.shape_warnings(texts) == want
