"""One engine decides, so every front door gives the same verdict: review(), lint, the webhook
(in-process, the Flask app the server runs) and the offline audit, on every case row, every
corpus document and input that Kubernetes would refuse to read."""

from __future__ import annotations

import argparse
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies import yamlpos
from policies.context import Context
from policies.engine import namespace_of, review
from policies.rules import NOT_AT_ADMISSION
from tests.engine.casetable import Case, context_for, load_cases
from tests.server.harness import envelope, make_request
from webhook.cluster.files import FileSource
from webhook.cluster.kinds import audited_kind
from webhook.commands import audit, lint
from webhook.http.admission import shape_warnings
from webhook.http.server import create_app
from webhook.inputs import reading, sources
from webhook.inputs.state import State
from webhook.output.findings import MUTATION, UNRESOLVED
from webhook.output.progress import Progress

CASES = load_cases()


class Doors:
    """The four doors over one Context."""

    def __init__(self, context: Context) -> None:
        self.context = context
        state = State(context.catalog, excluded_namespaces=context.excluded_namespaces)
        state.update(policies=context.policies, namespaces=context.namespaces,
                     inventory=context.inventory, claims=context.claims, api=context.api)
        # what the webhook judges with: no ResourceQuotas (the API server's quota admission
        # runs after it), the rest alike
        self.admission = state.context
        self.client = create_app(state).test_client()

    def review(self, obj: dict[str, Any], namespace: str,
               admission: bool = False) -> tuple[bool, set[str]]:
        decision = review(obj, self.admission if admission else self.context,
                          namespace=namespace)
        return decision.allowed, {v.rule for v in decision.violations}

    def report(self, obj: dict[str, Any], namespace: str) -> bool:
        """What lint and audit say: clean unless an error, a fact under any mode included."""
        decision = review(obj, self.context, namespace=namespace)
        return not any(v.severity == "error" for v in decision.violations)

    def lint(self, path: Path, namespace: str | None) -> dict[int, tuple[bool, set[str]]]:
        """Verdict per document index."""
        result = lint.Result()
        lint.lint_stream(str(path), reading.read_stream(path), self.context, result,
                         namespace=namespace)
        out: dict[int, tuple[bool, set[str]]] = {}
        for f in result.findings:
            if f.rule == MUTATION or f.document is None:
                continue
            allowed, rules = out.get(f.document, (True, set()))
            out[f.document] = (allowed and f.severity != "error", rules | {f.rule})
        return out

    def webhook(self, obj: dict[str, Any], namespace: str) -> tuple[bool, str]:
        req = make_request(obj, namespace=namespace, uid="differential")
        resp = self.client.post("/validate", data=json.dumps(envelope(req)),
                                content_type="application/json")
        assert resp.status_code == 200, resp.data
        answer = resp.get_json()["response"]
        said = [answer.get("status", {}).get("message", ""), *answer.get("warnings", []),
                *answer.get("auditAnnotations", {}), *answer.get("auditAnnotations", {}).values()]
        return bool(answer["allowed"]), "\n".join(said)

    def warnings(self, obj: dict[str, Any], namespace: str) -> tuple[list[str], list[str]]:
        """(the /validate answer's warnings, the decision's warnings as the webhook shapes
        them): advice, Warn mode, objects not reviewed and what the decision could not do."""
        req = make_request(obj, namespace=namespace, uid="differential")
        resp = self.client.post("/validate", data=json.dumps(envelope(req)),
                                content_type="application/json")
        decision = review(obj, self.admission, namespace=namespace)
        return resp.get_json()["response"].get("warnings", []), shape_warnings(
            decision.warnings)

    def audit(self, path: Path) -> dict[str, tuple[bool, set[str]]]:
        """Verdict per object label ("Kind ns/name"); "" for the file's unreadable documents."""
        collector = audit.audit(FileSource([str(path)]), self.context,
                                Progress(io.StringIO(), enabled=False))
        out: dict[str, tuple[bool, set[str]]] = {}
        for record in collector.records():
            if record["rule"] == MUTATION:
                continue
            label = record.get("object", "")  # "": a document the reader refused
            allowed, rules = out.get(label, (True, set()))
            out[label] = (allowed and record["severity"] != "error", rules | {record["rule"]})
        return out


def _label(obj: dict[str, Any], namespace: str) -> str:
    meta = obj.get("metadata") or {}
    return f"{obj.get('kind')} {namespace}/{meta.get('name') or '?'}"


def _agree(doors: Doors, path: Path, namespace: str | None) -> Iterator[str]:
    """Every disagreement between the doors on one file, as a line."""
    stream = reading.read_stream(path)
    linted = doors.lint(path, namespace)
    audited = doors.audit(path) if namespace is None else {}
    # what the reader refuses (a repeated key...) is refused by the doors that read files
    unreadable: dict[int, set[str]] = {}
    for problem in stream.problems:
        unreadable.setdefault(problem.document, set()).add(problem.rule)
    if namespace is None and unreadable:
        refused = set().union(*unreadable.values())
        if not refused <= audited.get("", (True, set()))[1]:
            yield f"audit did not refuse {refused}"
    for doc in stream.documents:
        for _, obj in doc.objects():
            if not lint.is_kubernetes_object(obj):
                continue
            ns = namespace_of(obj, namespace)
            allowed, rules = doors.review(obj, ns)
            clean = doors.report(obj, ns)
            if clean and not allowed:
                yield f"review refuses {rules} but reports no error"
            read = unreadable.get(doc.index, set())
            # a claim the decision could not judge: a lint warning (and an admission warning,
            # as test_the_webhook_warns_what_the_decision_says checks)
            unresolved = review(obj, doors.context, namespace=ns).unresolved
            judged = {UNRESOLVED} if unresolved else set()
            if linted.get(doc.index, (True, set())) != (clean and not read,
                                                       rules | read | judged):
                yield f"lint {linted.get(doc.index)} != review {(clean, rules | read)}"
            hooked, said = doors.webhook(obj, ns)
            admitted, judged_rules = doors.review(obj, ns, admission=True)
            if judged_rules != rules - NOT_AT_ADMISSION:
                yield f"admission review {judged_rules} != review {rules} less quota"
            if hooked != admitted or any(r not in said and _key(r) not in said
                                         for r in judged_rules):
                yield f"webhook {hooked} {said!r} != review {(admitted, judged_rules)}"
            if namespace is None and audited_kind(obj):
                got = audited.get(_label(obj, ns), (True, set()))
                if got != (clean, rules):
                    yield f"audit {got} != review {(clean, rules)} for {_label(obj, ns)}"


def _key(rule: str) -> str:
    from webhook.http.admission import audit_key

    return audit_key(rule)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_every_door_agrees_on_the_case_table(case: Case, tmp_path: Path) -> None:
    obj = {**case.object, "metadata": {**case.object.get("metadata", {}),
                                       "namespace": case.namespace}}
    path = tmp_path / "case.yaml"
    path.write_text(yaml.safe_dump(obj, sort_keys=False))
    doors = Doors(context_for(case))
    assert list(_agree(doors, path, None)) == []
    assert doors.review(obj, case.namespace) == (case.allowed, set(case.rules))


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_the_webhook_warns_what_the_decision_says(case: Case) -> None:
    obj = {**case.object, "metadata": {**case.object.get("metadata", {}),
                                       "namespace": case.namespace}}
    got, want = Doors(context_for(case)).warnings(obj, case.namespace)
    assert got == want


@pytest.mark.corpus
def test_every_door_agrees_on_the_corpus(corpus_dir: Path) -> None:
    doors = Doors(sources.build_context(_Args(), None)[0])
    files = [p for p in sorted(corpus_dir.rglob("*")) if p.suffix in reading.SUFFIXES]
    problems = [f"{path}: {line}" for path in files for line in _agree(doors, path, None)]
    assert problems == [], "\n".join(problems[:20])


def _Args() -> argparse.Namespace:
    return argparse.Namespace(policies=None, inventory=None, namespaces=[],
                              exclude_namespace=None)


# Input Kubernetes would refuse to read: every door that reads files refuses it the same way.
HOSTILE = {
    "duplicate-key": ("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nmetadata: {name: q}\n",
                      "yaml-duplicate-key"),
    "alias-cycle": ("apiVersion: v1\nkind: Pod\nmetadata: &m {name: [*m]}\n", "yaml-alias"),
    "billion-laughs": ("a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n"
        for p, c in zip("abcdefgh", "bcdefghi", strict=True)), "yaml-alias"),
    "deep-nesting": ("apiVersion: v1\nkind: Pod\nspec: " + "[" * 300 + "]" * 300 + "\n",
                     "yaml-syntax"),
    "tab-indent": ("apiVersion: v1\nkind: Pod\nspec:\n\tcontainers: []\n", "yaml-tab"),
    # a JSON text of more values than a document may hold, counted before any is built
    "json-value-bomb": ("[" + "{}," * (yamlpos.MAX_EXPANDED_NODES // 2) + "{}]", "yaml-syntax"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_every_door_refuses_unreadable_input_alike(name: str, tmp_path: Path) -> None:
    text, rule = HOSTILE[name]
    path = tmp_path / f"{name}.yaml"
    path.write_text(text)
    doors = Doors(sources.build_context(_Args(), None)[0])
    result = lint.Result()
    lint.lint_stream(str(path), yamlpos.read_stream(path.read_bytes()), doors.context, result)
    assert rule in {f.rule for f in result.findings if f.severity == "error"}
    collector = audit.audit(FileSource([str(path)]), doors.context,
                            Progress(io.StringIO(), enabled=False))
    assert collector.refused_objects >= 1
    assert rule in {r["rule"] for r in collector.records()}
    from webhook.commands import review as cmd_review

    out = io.StringIO()
    args = _Args()
    args.paths, args.paths_f, args.namespace = [str(path)], [], None
    args.format, args.output_file = "json", None
    assert cmd_review.run(args, out, io.StringIO()) == 1
    assert rule in {v["rule"] for r in json.loads(out.getvalue()) for v in r["violations"]}


def _review_command(path: Path) -> list[dict[str, Any]]:
    from webhook.commands import review as cmd_review

    out = io.StringIO()
    args = _Args()
    args.paths, args.paths_f, args.namespace = [str(path)], [], None
    args.format, args.output_file = "json", None
    cmd_review.run(args, out, io.StringIO())
    entries: list[dict[str, Any]] = json.loads(out.getvalue())
    return entries


READ_BUT_REFUSED = {
    # the reader keeps the last value of a repeated key, so the object is read and reviewed
    "duplicate-key": "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nmetadata: {name: q}\n"
                     "spec: {containers: [{name: a, image: x}]}\n",
    "duplicate-key-in-a-container": "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
                                    "  containers:\n  - {name: a, image: x, image: y}\n",
    "unresolved-claim": "apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n"
                        "  resourceClaims: [{name: g, resourceClaimName: missing}]\n"
                        "  containers: [{name: a, image: x, resources: {claims: [{name: g}]}}]\n",
}


@pytest.mark.parametrize("name", sorted(READ_BUT_REFUSED))
def test_review_command_and_lint_agree_per_document(name: str, tmp_path: Path) -> None:
    """One entry per document, with the rules lint finds in it and lint's verdict."""
    path = tmp_path / f"{name}.yaml"
    path.write_text(READ_BUT_REFUSED[name])
    doors = Doors(sources.build_context(_Args(), None)[0])
    result = lint.Result()
    lint.lint_stream(str(path), yamlpos.read_stream(path.read_bytes()), doors.context, result)
    linted = {f.rule for f in result.findings}
    lint_clean = not any(f.severity == "error" for f in result.findings)
    [entry] = _review_command(path)
    assert {v["rule"] for v in entry["violations"]} == linted
    assert entry["allowed"] is lint_clean
