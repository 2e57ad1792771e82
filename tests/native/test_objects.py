"""What `export` writes: objects the API server's admissionregistration schema takes, for the
Kubernetes versions each targets, for the bundled policies, every policy of the case tables and
of the documentation's examples; what it cannot say is noted with its path, never half-written.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from policies.dra.cel_cost import Node, checked_ast
from policies.loading import parse_policies
from policies.model import GPUPolicy
from policies.native import build, checks
from policies.native.evaluate import PER_CALL_LIMIT, compiled, estimated_cost
from policies.rules import RULES
from tests.engine.casetable import _named_policies
from webhook.inputs.sources import load_policies

ROOT = Path(__file__).resolve().parent.parent.parent
# (kind, apiVersion) -> the Kubernetes versions whose schema must take it
VAP_VERSIONS = ("1.32", "1.33", "1.34", "1.35", "1.36", "1.37")
TARGETS = {"v1": ("1.36", "1.37"), "v1beta1": ("1.34", "1.35", "1.36", "1.37")}


def _documented() -> list[GPUPolicy]:
    """Every GPUPolicy in a YAML block of README.md and docs/*.md."""
    found: list[GPUPolicy] = []
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        if not path.is_file():
            continue
        for block in re.findall(r"```yaml\n(.*?)```", path.read_text(encoding="utf-8"), re.S):
            if "kind: GPUPolicy\n" in block and "GPUPolicyTest" not in block:
                found += parse_policies(block, path.name)
    return found


SOURCES: dict[str, list[GPUPolicy]] = {
    "bundled": list(load_policies()),
    "documented": _documented(),
    "cases": [p for ps in _named_policies().values() for p in ps],
}


def _versions(obj: dict[str, Any]) -> tuple[str, ...]:
    version = obj["apiVersion"].rpartition("/")[2]
    if obj["kind"].startswith("Mutating"):
        return TARGETS[version]
    return VAP_VERSIONS


@pytest.mark.parametrize("map_version", ["v1", "v1beta1"])
@pytest.mark.parametrize("source", sorted(SOURCES))
def test_objects_are_schema_valid(source: str, map_version: build.MapVersion) -> None:
    exported = build.export(SOURCES[source], map_version=map_version)
    assert exported.objects
    for obj in exported.objects:
        for version in _versions(obj):
            kubernetes_validate.validate(obj, version, strict=True)


def test_documented_examples_are_found() -> None:
    assert SOURCES["documented"], "no GPUPolicy example in README.md or docs/"


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_every_expression_is_under_the_cost_limit(source: str) -> None:
    for obj in build.export(SOURCES[source]).objects:
        spec = obj["spec"]
        expressions = [v["expression"] for v in spec.get("variables", [])]
        expressions += [e for v in spec.get("validations", [])
                        for e in (v["expression"], v["messageExpression"])]
        expressions += [m["jsonPatch"]["expression"] for m in spec.get("mutations", [])]
        expressions += [c["expression"] for c in spec.get("matchConditions", [])]
        for expression in expressions:
            cost = estimated_cost(expression)
            assert cost is not None and cost <= PER_CALL_LIMIT, (obj["metadata"]["name"], cost)


def _policy(spec: str) -> GPUPolicy:
    doc = {"apiVersion": "gpupolicy.io/v1alpha1", "kind": "GPUPolicy",
           "metadata": {"name": "odd"}, "spec": yaml.safe_load(spec)}
    [policy] = parse_policies(yaml.safe_dump(doc), "odd.yaml")
    return policy


# (policy spec, the path noted, what is still exported)
UNSAYABLE = [
    ("{rules: {allowedResources: ['nvidia.com/[gm]pu'], maxGPUsPerContainer: 2}}",
     "spec.rules.allowedResources", {"gpu-max-per-container"}),
    ("{namespaces: ['team-[ab]'], rules: {maxGPUsPerContainer: 2}}", "spec.namespaces", set()),
    ("{rules: {mig: {maxInstancesPerPod: 2}, requireHardwareMatch: true}}",
     "spec.rules.mig.maxInstancesPerPod", set()),
    ("{rules: {dra: {allowedDeviceClasses: [gpu.nvidia.com]}, maxGPUsPerPod: 4}}",
     "spec.rules.dra.allowedDeviceClasses", {"gpu-max-per-pod"}),
]


# Facts every exported policy holds governed GPU pods to, whatever it sets.
FACTS = set(checks.FACT_TRANSLATORS)


def _rules(found: build.PolicyExport) -> set[str]:
    return {c.rule for c in found.checks} - FACTS


@pytest.mark.parametrize(("spec", "path", "kept"), UNSAYABLE)
def test_what_cannot_be_said_is_noted_and_left_out(spec: str, path: str, kept: set[str]) -> None:
    found = build.export([_policy(spec)]).policies[0]
    assert path in {n.path for n in found.notes}
    assert _rules(found) == kept
    validating = [o for o in found.objects if o["kind"] == "ValidatingAdmissionPolicy"]
    if path == "spec.namespaces":  # whom it governs cannot be said: nothing is written
        assert not found.objects
        return
    [vap] = validating
    assert len(vap["spec"]["validations"]) == len(found.checks)
    assert path in vap["metadata"]["annotations"]["gpupolicy.io/left-to-webhook"]


def test_every_rule_says_whether_it_is_exported() -> None:
    """A rule module without NATIVE (a new one) is not exported; this lists them for the lead."""
    missing = build.undescribed()
    assert not missing, f"rule modules without NATIVE: {missing}"
    for rule_id in RULES:
        reason = build.native_reason(rule_id)
        assert reason == "" or reason.endswith("."), (rule_id, reason)


def test_a_rule_without_native_is_not_exported(monkeypatch: pytest.MonkeyPatch) -> None:
    module = RULES["gpu-max-per-container"]
    monkeypatch.delattr(module, "NATIVE")
    found = build.export([_policy("{rules: {maxGPUsPerContainer: 2}}")]).policies[0]
    assert not _rules(found)
    assert [n.reason for n in found.notes] == [build.NOT_DESCRIBED]
    assert build.undescribed() == ["gpu-max-per-container"]


def test_modes_become_validation_actions() -> None:
    for mode, actions in build.MODE_ACTIONS.items():
        found = build.export([_policy(f"{{mode: {mode}, rules: {{maxGPUsPerPod: 1}}}}")])
        [binding] = [o for o in found.objects if o["kind"] == "ValidatingAdmissionPolicyBinding"]
        assert binding["spec"]["validationActions"] == actions


def test_excluded_namespaces_are_never_governed() -> None:
    found = build.export([_policy("{namespaceSelector: {matchLabels: {a: b}}, "
                                  "rules: {maxGPUsPerPod: 1}}")], release_namespace="gpu-sys")
    [binding] = [o for o in found.objects if o["kind"] == "ValidatingAdmissionPolicyBinding"]
    selector = binding["spec"]["matchResources"]["namespaceSelector"]
    assert selector["matchLabels"] == {"a": "b"}
    assert {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
            "values": ["gpu-sys", "kube-system"]} in selector["matchExpressions"]


def _literal_kind(node: Node) -> str:
    if node.kind == "const":
        return "string" if node.text is not None else "scalar"
    if node.kind in ("list", "struct"):
        return node.kind
    return ""  # an expression (dyn(...), a field...): any type the checker allows


def _mixed_literals(node: Node) -> list[str]:
    """List and map literals whose items are literals of different kinds: Kubernetes' CEL
    (HomogeneousAggregateLiterals, and its validator from 1.29) refuses them."""
    found = []
    if node.kind in ("list", "struct"):
        items = node.children if node.kind == "list" else [e.children[-1] for e in node.children
                                                           if e.children]
        keys = {e.children[0].text for e in node.children if node.kind == "struct"
                and e.children and e.children[0].kind == "const"}
        kinds = {_literal_kind(i) for i in items} - {""}
        if len(kinds) > 1 and keys != {"op", "path", "value"}:  # JSONPatch{...}, rewritten
            found.append(f"{node.kind} of {sorted(kinds)}")
    for child in (*node.children, *node.loop.values()):
        found += _mixed_literals(child)
    return found


@pytest.mark.parametrize("source", sorted(SOURCES))
def test_no_literal_mixes_types(source: str) -> None:
    for obj in build.export(SOURCES[source]).objects:
        spec = obj["spec"]
        expressions = [v["expression"] for v in spec.get("variables", [])]
        expressions += [e for v in spec.get("validations", [])
                        for e in (v["expression"], v["messageExpression"])]
        expressions += [m["jsonPatch"]["expression"] for m in spec.get("mutations", [])]
        for expression in expressions:
            ast = checked_ast(compiled(expression).serialize())
            assert not _mixed_literals(ast), (obj["metadata"]["name"], _mixed_literals(ast))


def test_the_literal_check_sees_a_mixed_map() -> None:
    ast = checked_ast(compiled('{"a": "x", "b": [1]} == {}').serialize())
    assert _mixed_literals(ast)


def test_a_rule_over_the_cost_limit_is_left_out(monkeypatch: pytest.MonkeyPatch) -> None:
    """Many globs make a dear check: with the limit between its cost and a cheap one's, the
    dear rule is noted and left out, the cheap one kept."""
    globs = ", ".join(f"'vendor{i}.example/gpu-?'" for i in range(300))
    policy = _policy(f"{{rules: {{allowedResources: [{globs}], maxGPUsPerContainer: 2}}}}")
    exported = build.export([policy])
    cheap = [e for c in exported.policies[0].checks if c.rule == "gpu-max-per-container"
             for e in (c.expression, c.message)]
    cheap += [v["expression"] for v in build._variables(exported.kinds)]
    limit = max(estimated_cost(e) or 0 for e in cheap)
    monkeypatch.setattr(build, "PER_CALL_LIMIT", limit)
    found = build.export([policy]).policies[0]
    assert _rules(found) == {"gpu-max-per-container"}
    [note] = [n for n in found.notes if n.path == "spec.rules.allowedResources"]
    assert "estimated CEL cost" in note.reason and f"{limit:,}" in note.reason


def test_namespaces_over_the_cost_limit_leave_the_whole_policy(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "PER_CALL_LIMIT", 10)
    found = build.export([_policy("{namespaces: ['team-?-*', 'ml-?'], "
                                  "rules: {maxGPUsPerContainer: 2}}")]).policies[0]
    assert not found.objects and not found.checks
    assert [n.path for n in found.notes] == ["spec.namespaces"]
