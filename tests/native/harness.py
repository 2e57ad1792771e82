"""What the API server would do with an object under exported policies, played here: bindings
matched on the namespace's labels, match conditions, then each mutating policy's variables and
JSON patch (applied with jsonpatch, in the engine's order of policies), then each validating
policy's variables and validations on the patched object. A runtime error is a failure, as
`failurePolicy: Fail` makes it.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

import jsonpatch

from policies.native.build import Export, PolicyExport
from policies.native.evaluate import CelFailure, run
from policies.selectors import label_selector_matches
from policies.workloads import WORKLOAD_KINDS


@dataclass
class Verdict:
    allowed: bool = True
    rules: set[str] = field(default_factory=set)
    messages: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    mutated: Any = None
    matched: bool = False  # some policy's binding and resources took the object


def request_for(obj: dict[str, Any], namespace: str,
                operation: str = "CREATE") -> dict[str, Any] | None:
    kind = WORKLOAD_KINDS.find(obj)
    if kind is None:
        return None
    return {"operation": operation, "namespace": namespace,
            "resource": {"group": kind.group, "resource": kind.resource, "version": ""},
            "kind": {"group": kind.group, "kind": kind.kind, "version": ""}}


def _rules_take(spec: dict[str, Any], request: dict[str, Any]) -> bool:
    for rule in spec["matchConstraints"]["resourceRules"]:
        if request["resource"]["group"] in rule["apiGroups"] and \
                request["resource"]["resource"] in rule["resources"] and \
                request["operation"] in rule["operations"]:
            return True
    return False


def _bound(objects: list[dict[str, Any]], kind: str) -> list[tuple[dict[str, Any],
                                                                    dict[str, Any]]]:
    by_name = {o["metadata"]["name"]: o for o in objects if o["kind"] == kind}
    return [(by_name[b["spec"]["policyName"]], b) for b in objects
            if b["kind"] == kind + "Binding"]


def _variables(spec: dict[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for variable in spec.get("variables", []):
        values[variable["name"]] = run(variable["expression"], {**data, "variables": values})
    return values


def _takes(policy: dict[str, Any], binding: dict[str, Any], request: dict[str, Any],
           labels: dict[str, str], data: dict[str, Any]) -> bool:
    selector = binding["spec"]["matchResources"].get("namespaceSelector", {})
    if not label_selector_matches(selector, labels) or not _rules_take(policy["spec"], request):
        return False
    return all(run(c["expression"], data) is True
               for c in policy["spec"].get("matchConditions", []))


def admit(obj: dict[str, Any], namespace: str, labels: dict[str, str],
          exported: Export, order: list[str]) -> Verdict:
    """The verdict of the exported policies on `obj` created in `namespace`. `order`: the
    policy names in the engine's order (priority, then name) for the mutating policies."""
    verdict = Verdict(mutated=copy.deepcopy(obj))
    request = request_for(obj, namespace)
    if request is None:
        return verdict
    objects = exported.objects
    namespace_object = {"metadata": {"name": namespace, "labels": labels}}
    rank = {name: i for i, name in enumerate(order)}
    mutating = sorted(_bound(objects, "MutatingAdmissionPolicy"),
                      key=lambda pb: rank.get(pb[0]["metadata"]["annotations"]
                                              ["gpupolicy.io/policy"], 0))
    for policy, binding in mutating:
        data = {"object": verdict.mutated, "oldObject": None, "request": request,
                "namespaceObject": namespace_object}
        try:
            if not _takes(policy, binding, request, labels, data):
                continue
            verdict.matched = True
            data["variables"] = _variables(policy["spec"], data)
            for mutation in policy["spec"]["mutations"]:
                ops = run(mutation["jsonPatch"]["expression"], data)
                if ops:
                    verdict.mutated = jsonpatch.apply_patch(verdict.mutated, ops)
        except CelFailure as exc:
            verdict.errors.append(f"{policy['metadata']['name']}: {exc}")
            verdict.allowed = False
    for policy, binding in _bound(objects, "ValidatingAdmissionPolicy"):
        data = {"object": verdict.mutated, "oldObject": None, "request": request,
                "namespaceObject": namespace_object}
        rules = _checks(exported, policy)
        denies = "Deny" in binding["spec"]["validationActions"]
        try:
            if not _takes(policy, binding, request, labels, data):
                continue
            verdict.matched = True
            data["variables"] = _variables(policy["spec"], data)
        except CelFailure as exc:
            verdict.errors.append(f"{policy['metadata']['name']}: {exc}")
            verdict.allowed = verdict.allowed and not denies
            continue
        for validation, rule in zip(policy["spec"]["validations"], rules, strict=True):
            try:
                passed = run(validation["expression"], data) is True
                message = "" if passed else str(run(validation["messageExpression"], data))
            except CelFailure as exc:
                verdict.errors.append(f"{rule}: {exc}")
                passed, message = False, str(exc)
            if not passed:
                verdict.rules.add(rule)
                verdict.messages.append(message)
                verdict.allowed = verdict.allowed and not denies
    return verdict


def _checks(exported: Export, policy: dict[str, Any]) -> list[str]:
    name = policy["metadata"]["annotations"]["gpupolicy.io/policy"]
    found: PolicyExport = next(pe for pe in exported.policies if pe.policy.name == name)
    return [c.rule for c in found.checks]
