"""GPUPolicies -> admissionregistration.k8s.io objects, and what stays with the webhook.

Per policy: a ValidatingAdmissionPolicy holding a validation per exported rule the policy sets,
bound with the policy's mode as validationActions; a MutatingAdmissionPolicy for its `inject`,
bound likewise (no actions: it patches). Parameters are written into the CEL (no paramKind: a
param CRD not yet served makes the API server fail closed). `namespaceSelector` is the
binding's, `namespaces` globs a match condition on the request's namespace (a selector cannot
glob names), kube-system and the release namespace are excluded as the webhook excludes them.

Each expression is compiled in the admission CEL environment and its estimated cost held to
the API server's per-expression limit: a rule over it, or one CEL cannot say here, is left
to the webhook and noted with its policy's path. An object is written whole or not at all.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Literal

from policies.model import GPUPolicy
from policies.native import cel_parts as p
from policies.native import checks, mutations
from policies.native.evaluate import PER_CALL_LIMIT, RUNTIME_BUDGET, estimated_cost
from policies.rules import FACTS, RULES
from policies.workloads import WORKLOAD_KINDS, KindTable, WorkloadKind

GROUP = "admissionregistration.k8s.io"
PREFIX = "gpupolicy-"
MapVersion = Literal["v1", "v1beta1", "none"]
MODE_ACTIONS = {"Enforce": ["Deny"], "Warn": ["Warn"], "Audit": ["Audit"]}
NOT_DESCRIBED = "not exported: not yet described (the rule module has no NATIVE)"

# A policy rule is in play for a policy when it sets the rule's field.
SETTINGS: dict[str, Callable[[GPUPolicy], bool]] = {
    "gpu-resource-not-allowed": lambda q: q.spec.rules.allowed_resources is not None,
    "gpu-max-per-pod": lambda q: q.spec.rules.max_gpus_per_pod is not None,
    "gpu-max-per-container": lambda q: q.spec.rules.max_gpus_per_container is not None,
    "gpu-model-not-allowed": lambda q: q.spec.rules.allowed_models is not None,
    "gpu-no-matching-hardware": lambda q: q.spec.rules.require_hardware_match,
    "mig-profile-not-allowed": lambda q: q.spec.rules.mig is not None
    and q.spec.rules.mig.allowed_profiles is not None,
    "mig-instances-over-policy": lambda q: q.spec.rules.mig is not None
    and q.spec.rules.mig.max_instances_per_pod is not None,
    "shared-memory-over-policy": lambda q: q.spec.rules.shared is not None
    and q.spec.rules.shared.max_memory_gib_per_container is not None,
    "shared-gpu-over-limit": lambda q: q.spec.rules.shared is not None
    and q.spec.rules.shared.max_pods_per_gpu is not None,
    "dra-device-class-not-allowed": lambda q: q.spec.rules.dra is not None
    and q.spec.rules.dra.allowed_device_classes is not None,
    "dra-no-matching-device": lambda q: q.spec.rules.require_hardware_match,
    "visible-devices-bypass": lambda q: q.spec.rules.deny_visible_devices_bypass,
    "privileged-gpu-container": lambda q: q.spec.rules.deny_privileged_gpu_containers,
    "node-selector-conflict": lambda q: bool(q.spec.inject.node_selector),
}
# Rules of injection, not modules: node-selector-conflict comes with the nodeSelector patch.
NATIVE_OTHER = {"node-selector-conflict": "", "pod-spec-malformed":
                "a part of the pod spec of the wrong type: the API server's schema refuses it"}


def native_reason(rule_id: str) -> str:
    """"" when the rule is exported; else why it stays in the webhook."""
    if rule_id in NATIVE_OTHER:
        return NATIVE_OTHER[rule_id]
    module: ModuleType | None = RULES.get(rule_id)
    reason = getattr(module, "NATIVE", None) if module is not None else None
    if not isinstance(reason, str):
        return NOT_DESCRIBED
    if reason == "" and rule_id not in checks.TRANSLATORS \
            and rule_id not in checks.FACT_TRANSLATORS:
        return "not exported: no translation (the module says it could be)"
    return reason


def undescribed() -> list[str]:
    """Rule modules without a NATIVE attribute (new ones): the lead should look at them."""
    return sorted(rid for rid, m in RULES.items() if not isinstance(getattr(m, "NATIVE", None),
                                                                     str))


@dataclass(frozen=True)
class Note:
    policy: str
    path: str  # in the GPUPolicy, e.g. spec.rules.allowedResources
    rule: str
    reason: str


@dataclass
class PolicyExport:
    policy: GPUPolicy
    checks: list[checks.Check] = field(default_factory=list)
    patches: list[str] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    objects: list[dict[str, Any]] = field(default_factory=list)

    @property
    def injects_all(self) -> bool:
        """Everything the policy injects is in its patches (or it injects nothing)."""
        return not any(n.rule == "inject" for n in self.notes)


@dataclass
class Export:
    policies: list[PolicyExport]
    kinds: tuple[WorkloadKind, ...]  # matched by the validating policies
    mutated_kinds: tuple[WorkloadKind, ...]
    kind_notes: list[str]
    facts: list[tuple[str, str]]  # (rule id, why the webhook keeps it) for every fact rule

    @property
    def objects(self) -> list[dict[str, Any]]:
        return [o for pe in self.policies for o in pe.objects]

    @property
    def notes(self) -> list[Note]:
        return [n for pe in self.policies for n in pe.notes]


_PATHS = {
    "gpu-resource-not-allowed": "spec.rules.allowedResources",
    "gpu-max-per-pod": "spec.rules.maxGPUsPerPod",
    "gpu-max-per-container": "spec.rules.maxGPUsPerContainer",
    "gpu-model-not-allowed": "spec.rules.allowedModels",
    "gpu-no-matching-hardware": "spec.rules.requireHardwareMatch",
    "dra-no-matching-device": "spec.rules.requireHardwareMatch",
    "mig-profile-not-allowed": "spec.rules.mig.allowedProfiles",
    "mig-instances-over-policy": "spec.rules.mig.maxInstancesPerPod",
    "shared-memory-over-policy": "spec.rules.shared.maxMemoryGiBPerContainer",
    "shared-gpu-over-limit": "spec.rules.shared.maxPodsPerGPU",
    "dra-device-class-not-allowed": "spec.rules.dra.allowedDeviceClasses",
    "visible-devices-bypass": "spec.rules.denyVisibleDevicesBypass",
    "privileged-gpu-container": "spec.rules.denyPrivilegedGPUContainers",
    "node-selector-conflict": "spec.inject.nodeSelector",
    "gpu-sharing-modes-mixed": "(a fact: every governed GPU pod)",
}


def export(policies: Sequence[GPUPolicy], *, kinds: KindTable = WORKLOAD_KINDS,
           release_namespace: str = "gpupolicy-system", map_version: MapVersion = "v1",
           excluded: Iterable[str] = ("kube-system",)) -> Export:
    matched, kind_notes = [], []
    for kind in kinds.kinds:
        why = p.kind_supported(kind)
        if why:
            kind_notes.append(f"{why}: left to the webhook")
        else:
            matched.append(kind)
    mutated = tuple(k for k in matched if not mutations.supported(k))
    kind_notes += [f"{mutations.supported(k)}: nothing injected natively"
                   for k in matched if mutations.supported(k)]
    skip = sorted({*excluded, release_namespace})
    ordered = sorted(policies, key=lambda q: (q.spec.priority, q.name))
    earlier = {q.name: tuple((k, v) for before in ordered[:i]
                             for k, v in before.spec.inject.node_selector.items())
               for i, q in enumerate(ordered)}
    out = [_policy(policy, tuple(matched), mutated, skip, map_version, earlier[policy.name])
           for policy in policies]
    facts = [(rid, native_reason(rid)) for rid in sorted(FACTS)]
    return Export(out, tuple(matched), mutated, kind_notes, facts)


def _policy(policy: GPUPolicy, kinds: tuple[WorkloadKind, ...],
            mutated: tuple[WorkloadKind, ...], skip: list[str],
            map_version: MapVersion, earlier: tuple[tuple[str, str], ...]) -> PolicyExport:
    found = PolicyExport(policy)
    try:
        over = _over_limit(*(c["expression"] for c in _match_conditions(policy)))
    except p.Unsupported as exc:  # whom it governs cannot be said: nothing is exported
        over = f"cannot be said in CEL: {exc}"
    if over:
        found.notes.append(Note(policy.name, "spec.namespaces", "*",
                                f"{over}; the whole policy stays in the webhook"))
        return found
    slots = p.slots_of(kinds, "s")
    where = checks.Where(slots=slots, containers=p.containers("s", slots), earlier=earlier)
    if map_version != "none" and mutated:
        try:
            patches = mutations.patch_expressions(policy)
        except p.Unsupported as exc:
            found.notes.append(Note(policy.name, "spec.inject", "inject",
                                    f"cannot be said in CEL: {exc}; the webhook injects"))
            patches = []
        over = _over_limit(*patches, *(v["expression"] for v in _map_variables(mutated))) \
            if patches else ""
        if over:
            found.notes.append(Note(policy.name, "spec.inject", "inject", over))
            patches = []
        found.patches = patches
    elif _injects(policy):
        found.notes.append(Note(policy.name, "spec.inject", "inject",
                                "no mutating admission policy asked for (--map-version none)"))
    if policy.spec.rules.allowed_models is not None:
        found.notes.append(Note(policy.name, "spec.rules.allowedModels", "inject",
                                "the node affinity it injects (each allowed model's product "
                                "label spellings) is the webhook's"))
    wanted = [r for r, setting in SETTINGS.items() if setting(policy)]
    wanted += [r for r in checks.FACT_TRANSLATORS if not native_reason(r)]
    for rule_id in wanted:
        path = _PATHS[rule_id]
        reason = native_reason(rule_id)
        if rule_id == "node-selector-conflict" and not reason and not found.patches:
            reason = "its nodeSelector injection is not exported: the webhook judges it too"
        if reason:
            found.notes.append(Note(policy.name, path, rule_id, reason))
            continue
        try:
            translate = checks.TRANSLATORS.get(rule_id) or checks.FACT_TRANSLATORS[rule_id]
            made = translate(policy, where)
        except p.Unsupported as exc:
            found.notes.append(Note(policy.name, path, rule_id, f"cannot be said in CEL: {exc}"))
            continue
        if made is None:
            continue
        made = made if isinstance(made, list) else [made]
        over = _over_limit(*(e for c in made for e in (c.expression, c.message)))
        if over:
            found.notes.append(Note(policy.name, path, rule_id, over))
            continue
        found.checks += made
    variables = _variables(kinds)
    if found.checks:
        over = _over_limit(*(v["expression"] for v in variables))
        if over:
            found.notes += [Note(policy.name, _PATHS[c.rule], c.rule, over) for c in found.checks]
            found.checks = []
    # every expression of one binding shares the runtime budget: the last checks give way
    spent = sum(estimated_cost(v["expression"]) or 0 for v in variables)
    kept: list[checks.Check] = []
    for rule_id in dict.fromkeys(c.rule for c in found.checks):
        made = [c for c in found.checks if c.rule == rule_id]
        cost = sum((estimated_cost(c.expression) or 0) + (estimated_cost(c.message) or 0)
                   for c in made)
        if spent + cost > RUNTIME_BUDGET:
            found.notes.append(Note(policy.name, _PATHS[rule_id], rule_id,
                                    "the policy's expressions together would exceed the API "
                                    f"server's runtime budget of {RUNTIME_BUDGET:,} per binding"))
            continue
        spent += cost
        kept += made
    found.checks = kept
    found.objects = _objects(found, kinds, mutated, skip, map_version)
    return found


def _injects(policy: GPUPolicy) -> bool:
    return policy.spec.inject.model_dump(exclude_defaults=True) != {}


def _over_limit(*expressions: str) -> str:
    for expression in expressions:
        cost = estimated_cost(expression)
        if cost is None:
            return "its CEL does not compile in the admission environment"
        if cost > PER_CALL_LIMIT:
            return (f"estimated CEL cost {cost:,} is over the API server's per-expression "
                    f"limit of {PER_CALL_LIMIT:,}")
    return ""


def _variables(kinds: tuple[WorkloadKind, ...]) -> list[dict[str, str]]:
    slots = p.slots_of(kinds, "s")
    where = checks.Where(slots=slots, containers=p.containers("s", slots))
    return [{"name": "resource", "expression": p.RESOURCE_EXPRESSION},
            {"name": "specs", "expression": p.specs(kinds)},
            {"name": "kai", "expression": p.kai(p.metadata(kinds))},
            {"name": "gpu", "expression": checks.gpu_specs(where)},
            {"name": "families", "expression": checks.families(where)}]


def _map_variables(kinds: tuple[WorkloadKind, ...]) -> list[dict[str, str]]:
    return [{"name": "resource", "expression": p.RESOURCE_EXPRESSION},
            {"name": "kai", "expression": p.kai(p.metadata(kinds))},
            {"name": "found", "expression": mutations.found(kinds)},
            {"name": "targets", "expression": mutations.targets()}]


def _rules(kinds: tuple[WorkloadKind, ...], operations: list[str]) -> list[dict[str, Any]]:
    by_group: dict[str, list[str]] = {}
    for kind in kinds:
        by_group.setdefault(kind.group, []).append(kind.resource)
    return [{"apiGroups": [group], "apiVersions": ["*"], "operations": operations,
             "resources": sorted(set(resources)), "scope": "Namespaced"}
            for group, resources in sorted(by_group.items())]


# As the chart's webhooks: an UPDATE that leaves the spec alone (labels, annotations,
# finalizers) is not judged again.
SPEC_CHANGED = {"name": "spec-changed", "expression":
                "request.operation != 'UPDATE' || !has(object.spec) || !has(oldObject.spec) "
                "|| object.spec != oldObject.spec"}


def _match_conditions(policy: GPUPolicy) -> list[dict[str, str]]:
    globs = policy.spec.namespaces
    if globs is None:
        return []
    test = " || ".join(p.glob(g, "request.namespace") for g in globs) or "false"
    return [{"name": "namespaces", "expression": test}]


def _namespace_selector(policy: GPUPolicy, skip: list[str]) -> dict[str, Any]:
    own = policy.spec.namespace_selector
    selector = own.model_dump(by_alias=True, exclude_defaults=True,
                              mode="json") if own is not None else {}
    expressions = [{k: v for k, v in e.items() if v != []}
                   for e in selector.get("matchExpressions", [])]
    expressions.append({"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                        "values": skip})
    out: dict[str, Any] = {}
    if selector.get("matchLabels"):
        out["matchLabels"] = selector["matchLabels"]
    out["matchExpressions"] = expressions
    return out


def _annotations(found: PolicyExport) -> dict[str, str]:
    kept = "; ".join(f"{n.rule} ({n.path}): {n.reason}" for n in found.notes)
    out = {"gpupolicy.io/policy": found.policy.name,
           "gpupolicy.io/exported-rules": ", ".join(dict.fromkeys(c.rule for c in found.checks))}
    if kept:
        out["gpupolicy.io/left-to-webhook"] = kept
    return out


def _objects(found: PolicyExport, kinds: tuple[WorkloadKind, ...],
             mutated: tuple[WorkloadKind, ...], skip: list[str],
             map_version: MapVersion) -> list[dict[str, Any]]:
    policy = found.policy
    name = PREFIX + policy.name
    labels = {"app.kubernetes.io/managed-by": "gpupolicy-export"}
    meta = {"name": name, "labels": labels, "annotations": _annotations(found)}
    binding_meta = {"name": name, "labels": labels}
    selector = _namespace_selector(policy, skip)
    out: list[dict[str, Any]] = []
    if found.checks:
        spec: dict[str, Any] = {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _rules(kinds, ["CREATE", "UPDATE"])},
        }
        spec["matchConditions"] = [*_match_conditions(policy), SPEC_CHANGED]
        spec["variables"] = _variables(kinds)
        spec["validations"] = [
            {"expression": c.expression, "messageExpression": f"'{c.rule}: ' + {c.message}",
             "message": f"{c.rule}: refused by GPUPolicy {policy.name}", "reason": "Forbidden"}
            for c in found.checks]
        out.append({"apiVersion": f"{GROUP}/v1", "kind": "ValidatingAdmissionPolicy",
                    "metadata": meta, "spec": spec})
        out.append({"apiVersion": f"{GROUP}/v1", "kind": "ValidatingAdmissionPolicyBinding",
                    "metadata": binding_meta, "spec": {
                        "policyName": name,
                        "validationActions": MODE_ACTIONS[policy.spec.mode],
                        "matchResources": {"namespaceSelector": selector}}})
    if found.patches and map_version != "none":
        spec = {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": _rules(mutated, ["CREATE"])},
        }
        conditions = _match_conditions(policy)
        if conditions:
            spec["matchConditions"] = conditions
        spec["variables"] = _map_variables(mutated)
        spec["mutations"] = [{"patchType": "JSONPatch", "jsonPatch": {"expression": patch}}
                             for patch in found.patches]
        spec["reinvocationPolicy"] = "IfNeeded"
        api = f"{GROUP}/{map_version}"
        out.append({"apiVersion": api, "kind": "MutatingAdmissionPolicy",
                    "metadata": {**meta, "annotations": {
                        "gpupolicy.io/policy": policy.name}}, "spec": spec})
        out.append({"apiVersion": api, "kind": "MutatingAdmissionPolicyBinding",
                    "metadata": binding_meta, "spec": {
                        "policyName": name,
                        "matchResources": {"namespaceSelector": selector}}})
    return out
