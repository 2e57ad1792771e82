"""One engine decides: lint gives the verdicts review() gives, on the engine's case table, on
the corpus, and through the two real commands."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies import yamlpos
from policies.context import Context
from policies.engine import namespace_of, review
from policies.paths import to_display
from tests.engine.casetable import Case, context_for, load_cases, pointer_get
from tests.lint.helpers import MANIFESTS, POLICIES, gpupolicy
from webhook.commands import lint
from webhook.inputs import reading, sources
from webhook.output.findings import UNRESOLVED
from webhook.output.fix import fix_text

CASES = load_cases()


def _lint_text(text: str, context: Any, namespace: str | None) -> lint.Result:
    result = lint.Result()
    lint.lint_stream("case.yaml", yamlpos.read_stream(text.encode()), context, result,
                     namespace=namespace, show_mutations=True)
    return result


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_case_table_through_lint(case: Case) -> None:
    context = context_for(case)
    decision = review(case.object, context, namespace=case.namespace)
    text = f"# case {case.id}\n" + yaml.safe_dump(case.object, sort_keys=False)
    result = _lint_text(text, context, case.namespace)
    verdicts = [f for f in result.findings if f.rule not in (lint.MUTATION, UNRESOLVED)]
    # the claims the decision could not judge are warnings at their resourceClaims entries
    unjudged = [f for f in result.findings if f.rule == UNRESOLVED]
    assert [(f.path, f.severity) for f in unjudged] == [
        (to_display(u.path), "warning") for u in decision.unresolved]
    assert {f.rule for f in verdicts} == case.rules
    # clean exactly when the webhook admits and no fact fires: a fact is an error in every mode
    facts = any(v.fact and v.level == "error" for v in decision.violations)
    assert (not any(f.severity == "error" for f in verdicts)) is (case.allowed and not facts)
    assert Counter((f.rule, f.severity, f.policy, f.path or "") for f in verdicts) == Counter(
        (v.rule, v.severity, v.policy, v.field) for v in decision.violations)
    lines = text.splitlines()
    doc = yamlpos.read_stream(text).documents[0]
    index = doc.positions()
    for finding, violation in zip(verdicts, decision.violations, strict=False):
        _assert_points_at(lines, index, violation.path, finding.line, finding.column)
    mutations = [f for f in result.findings if f.rule == lint.MUTATION]
    assert [f.path for f in mutations] == [op["path"] for op in decision.patch]
    if not decision.patch:
        assert result.edits == {}
        return
    fixed = fix_text(text, result.edits["case.yaml"])
    assert fixed.startswith(f"# case {case.id}\n")
    assert yaml.safe_load(fixed) == decision.mutated
    for pointer, value in case.mutated.items():
        assert pointer_get(yaml.safe_load(fixed), pointer) == value, pointer
    assert _lint_text(fixed, context, case.namespace).edits == {}


def _assert_points_at(
    lines: list[str], index: dict[Any, tuple[int, int]], path: tuple[Any, ...],
    line: int | None, column: int | None,
) -> None:
    """The finding sits on the deepest written part of the violation's path."""
    deepest = max((p for p in index if path[: len(p)] == p), key=len)
    assert (line, column) == index[deepest]
    if deepest and isinstance(deepest[-1], str):
        assert lines[line - 1][column - 1:].lstrip("'\"").startswith(deepest[-1])


def _review_file(path: Path, context: Any) -> Counter[tuple[str, str, str, str]]:
    """What `gpupolicy review` decides for a file: PyYAML's documents, Lists flattened."""
    out: Counter[tuple[str, str, str, str]] = Counter()
    for obj in reading.stream_objects(reading.read_stream(path)):
        if not lint.is_kubernetes_object(obj):
            continue
        decision = review(obj, context, namespace=namespace_of(obj, None))
        out.update((v.rule, v.severity, v.policy, v.field) for v in decision.violations)
        out.update((UNRESOLVED, "warning", "", to_display(u.path)) for u in decision.unresolved)
    return out


@pytest.mark.corpus
def test_lint_matches_review_on_the_corpus(corpus_dir: Path) -> None:
    context = Context(policies=sources.load_policies(), catalog=sources.load_catalog())
    files = sorted(p for p in corpus_dir.rglob("*") if p.suffix in reading.SUFFIXES)
    total = 0
    for path in files:
        result = lint.Result()
        lint.lint_stream(str(path), yamlpos.read_stream(path.read_bytes()), context, result)
        linted = Counter((f.rule, f.severity, f.policy or "", f.path or "")
                         for f in result.findings if not f.rule.startswith("yaml-"))
        assert linted == _review_file(path, context), path
        total += sum(linted.values())
    assert total > 0


@pytest.mark.parametrize("name", ["training.yaml", "team-list.yaml", "research.yml"])
def test_lint_and_review_commands_agree(name: str) -> None:
    """The real commands, end to end: the same violations and the same allowed/denied."""
    args = ("--policies", str(POLICIES), "--namespaces", "namespaces.yaml", name)
    reviewed = gpupolicy("review", *args, cwd=MANIFESTS)
    linted = gpupolicy("lint", "--format", "json", *args, cwd=MANIFESTS)
    expected = Counter((v["rule"], v["severity"], v["policy"], v["path"])
                       for doc in json.loads(reviewed.out) for v in doc["violations"])
    found = Counter((f["rule"], f["severity"], f["policy"], f.get("path", ""))
                    for f in json.loads(linted.out)["findings"])
    assert found == expected
    assert reviewed.code == linted.code
