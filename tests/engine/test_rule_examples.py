"""Every rule's EXAMPLES run through the engine: a FAIL example must produce the rule's id, a
PASS example must not. The examples are what `gpupolicy rules ID` and docs/rules.md show, so
an example that stops failing fails the build."""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
import yaml

from policies.catalog import Catalog
from policies.cluster import ClusterView
from policies.context import Context
from policies.engine import review, review_cluster
from policies.loading import parse_policies
from policies.rules import CLUSTER_RULES, RULES
from policies.rules.reference import Example, examples, rule_docs
from webhook.inputs.sources import ClusterObjects, load_catalog, load_policies


@cache
def _catalog() -> Catalog:
    return load_catalog()


def _context(example: Example) -> Context:
    if example.policy is None:
        policies = load_policies()
    else:
        doc = {"apiVersion": "gpupolicy.io/v1alpha1", "kind": "GPUPolicy",
               "metadata": {"name": "example"}, "spec": dict(example.policy)}
        policies = parse_policies(yaml.safe_dump(doc), "example")
    found = ClusterObjects()
    for obj in example.nodes:
        found.add(obj)
    inventory = found.inventory(_catalog()) \
        if found.nodes or found.slices or found.classes or found.templates else None
    return Context(policies=policies, catalog=_catalog(), inventory=inventory,
                   claims=dict(found.claims), api=found.api())


def found_rules(rule: str, example: Example) -> set[str]:
    context = _context(example)
    if RULES[rule] in CLUSTER_RULES:
        view = ClusterView(context, [n for n in example.nodes if n.get("kind") == "Node"])
        for pod in example.pods:
            meta: Any = pod.get("metadata") or {}
            namespace = str(meta.get("namespace", example.namespace))
            name = str(meta.get("name", ""))
            view.add_pod(pod, namespace, name)
        return {f.rule for f in review_cluster(view, context)}
    assert example.object is not None, "a pod-scope example names its `object`"
    meta = example.object.get("metadata") or {}
    namespace = meta.get("namespace") or example.namespace
    decision = review(dict(example.object), context, namespace=namespace)
    return {v.rule for v in decision.violations}


CASES = [pytest.param(module.ID, example, id=f"{module.ID}:{example.result}:{example.title}")
         for module in RULES.values() for example in examples(module)]


@pytest.mark.parametrize(("rule", "example"), CASES)
def test_example(rule: str, example: Example) -> None:
    got = found_rules(rule, example)
    if example.result == "FAIL":
        assert rule in got, f"{example.title}: expected {rule}, got {sorted(got)}"
    else:
        assert rule not in got, f"{example.title}: {rule} fired"


@pytest.mark.parametrize("rule", sorted(RULES))
def test_rule_has_pass_and_fail_examples(rule: str) -> None:
    results = {e.result for e in examples(RULES[rule])}
    assert results == {"PASS", "FAIL"}, f"{rule} needs a PASS and a FAIL example"


def test_every_rule_has_a_summary() -> None:
    for doc in rule_docs():
        assert doc.summary and "\n" not in doc.summary, doc.id
