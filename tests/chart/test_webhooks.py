"""The rendered webhook configurations, rule by rule (issue 5 item 2, DESIGN.md §4)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from policies.workloads import WORKLOAD_KINDS, parse_kind_table
from tests.chart.helm import CHART, CI_VALUES, named, one, render, webhooks

MUTATING = "MutatingWebhookConfiguration"
VALIDATING = "ValidatingWebhookConfiguration"

# Kind (as keyed in policies/workloads.py) -> (API group, resource) the webhook rules must cover.
# Every kind of the engine's bundled table but Pod (which has its own webhook), by group/kind.
KIND_RESOURCES = {k.key: (k.group, k.resource) for k in WORKLOAD_KINDS.kinds if k.kind != "Pod"}


def _all_hooks(values: str) -> list[tuple[str, dict[str, Any]]]:
    objects = render(values)
    return [(kind, hook) for kind in (MUTATING, VALIDATING)
            for hook in webhooks(objects, kind).values()]


@pytest.mark.parametrize("values", CI_VALUES)
def test_every_webhook_has_the_safe_basics(values: str) -> None:
    hooks = _all_hooks(values)
    assert hooks
    for _, hook in hooks:
        assert hook["admissionReviewVersions"] == ["v1"]
        assert hook["sideEffects"] == "None"
        assert hook["matchPolicy"] == "Equivalent"
        assert 1 <= hook["timeoutSeconds"] <= 5
        service = hook["clientConfig"]["service"]
        assert (service["name"], service["namespace"], service["port"]) == (
            "rel-gpupolicy", "gpu-system", 443)
        for rule in hook["rules"]:
            assert rule["scope"] == "Namespaced"
            assert "DELETE" not in rule["operations"] and "*" not in rule["operations"]


@pytest.mark.parametrize(
    ("values", "mutate", "validate", "timeout"),
    [("default", "Ignore", "Fail", 5), ("failure-policy", "Fail", "Ignore", 2)],
)
def test_failure_policy_and_timeout(values: str, mutate: str, validate: str, timeout: int) -> None:
    for kind, hook in _all_hooks(values):
        assert hook["failurePolicy"] == (mutate if kind == MUTATING else validate)
        assert hook["timeoutSeconds"] == timeout


@pytest.mark.parametrize("values", ["default", "templates-mutation"])
def test_mutation_is_create_only_and_reinvoked(values: str) -> None:
    hooks = webhooks(render(values), MUTATING)
    assert hooks
    for hook in hooks.values():
        assert hook["reinvocationPolicy"] == "IfNeeded"
        assert hook["clientConfig"]["service"]["path"] == "/mutate"
        assert all(rule["operations"] == ["CREATE"] for rule in hook["rules"])


def test_default_mutates_pods_only() -> None:
    hooks = webhooks(render(), MUTATING)
    assert list(hooks) == ["pods.mutate.gpupolicy.io"]
    assert hooks["pods.mutate.gpupolicy.io"]["rules"] == [{
        "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"],
        "operations": ["CREATE"], "scope": "Namespaced"}]


def _covered(hooks: dict[str, dict[str, Any]], operations: list[str]) -> set[tuple[str, str]]:
    return {(group, resource) for hook in hooks.values() for rule in hook["rules"]
            if rule["operations"] == operations
            for group in rule["apiGroups"] for resource in rule["resources"]}


def test_validation_covers_pods_and_every_workload_kind_of_the_engine() -> None:
    covered = _covered(webhooks(render(), VALIDATING), ["CREATE", "UPDATE"])
    assert ("", "pods") in covered
    assert set(KIND_RESOURCES.values()) <= covered


def test_template_mutation_covers_every_workload_kind() -> None:
    covered = _covered(webhooks(render("templates-mutation"), MUTATING), ["CREATE"])
    assert set(KIND_RESOURCES.values()) | {("", "pods")} <= covered
    assert list(webhooks(render("templates-mutation"), VALIDATING)) == [
        "pods.validate.gpupolicy.io", "pods-ephemeral.validate.gpupolicy.io",
        "claims.validate.gpupolicy.io"]


def _dot(location: tuple[str, ...]) -> str:
    out: list[str] = []
    for part in location:
        if part == "[]":
            out[-1] += "[]"
        else:
            out.append(part)
    return ".".join(out)


@pytest.mark.parametrize("kind", sorted(KIND_RESOURCES))
def test_match_condition_paths_follow_the_engine_table(kind: str) -> None:
    """Each kind's webhook looks for GPUs exactly where policies/workloads.py says its pods live
    (values.webhooks.workloadKinds mirrors the engine's table)."""
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    group, resource = KIND_RESOURCES[kind]
    entry = next(e for e in values["webhooks"]["workloadKinds"]
                 if group in e["apiGroups"] and resource in e["resources"])
    table = next(k for k in WORKLOAD_KINDS.kinds if k.key == kind)
    for location in table.locations:
        assert _dot(location) in entry["podSpecPaths"], (kind, location)
    # The chart's list, read as the server reads it, gives the kind what the engine has.
    [read] = [k for k in parse_kind_table([entry], "values", base=WORKLOAD_KINDS).kinds
              if k.key == kind]
    assert read.containers == table.containers and read.pod_fields == table.pod_fields, kind
    hook = webhooks(render(), VALIDATING)[f"{entry['name']}.workloads.validate.gpupolicy.io"]
    expression = hook["matchConditions"][0]["expression"]
    for path in entry["podSpecPaths"]:
        first = path.split(".*")[0].split("[]")[0]
        assert f"has(object.{first})" in expression, (kind, path)


@pytest.mark.parametrize(
    ("values", "excluded", "extra_expressions"),
    [
        ("default", ["kube-system", "kube-node-lease", "gpu-system"], 0),
        ("full", ["kube-system", "kube-node-lease", "gpu-system", "monitoring", "cert-manager"], 1),
    ],
)
def test_namespace_selector(values: str, excluded: list[str], extra_expressions: int) -> None:
    for _, hook in _all_hooks(values):
        expressions = hook["namespaceSelector"]["matchExpressions"]
        assert expressions[0] == {"key": "kubernetes.io/metadata.name", "operator": "NotIn",
                                  "values": excluded}
        assert len(expressions) == 1 + extra_expressions


def test_object_selector_from_values() -> None:
    for _, hook in _all_hooks("full"):
        assert hook["objectSelector"] == {
            "matchExpressions": [{"key": "gpupolicy.io/skip", "operator": "DoesNotExist"}]}


@pytest.mark.parametrize(
    ("values", "extra", "present"),
    [
        ("default", (), True),
        ("no-match-conditions", (), False),
        ("default", ("--kube-version", "1.27.0"), False),  # not served before 1.28
        ("default", ("--kube-version", "1.28.0"), True),
    ],
)
def test_match_conditions_switch(values: str, extra: tuple[str, ...], present: bool) -> None:
    for kind, hook in _all_hooks_with(values, extra):
        assert ("matchConditions" in hook) is present
        if present:
            expected = (["gpu-related"] if kind == MUTATING
                        else ["gpu-related-debug-container"] if "ephemeral" in hook["name"]
                        else ["gpu-related", "spec-changed", "not-from-a-claim-controller"]
                        if hook["name"] == "claims.validate.gpupolicy.io"
                        else ["gpu-related", "spec-or-scheduling-changed"]
                        if hook["name"] == "pods.validate.gpupolicy.io"
                        else ["gpu-related", "spec-changed"])
            assert [c["name"] for c in hook["matchConditions"]] == expected


def test_hiding_gpus_sends_every_pod_to_the_mutation() -> None:
    """hideGPUsFromNonGPUContainers changes pods without a GPU: the pod mutation must see them
    all (it fails open), while validation still only sees GPU-related objects."""
    policy = "policies.hide.inject.hideGPUsFromNonGPUContainers=true"
    objects = render("default", ("--set", policy))
    mutating, validating = webhooks(objects, MUTATING), webhooks(objects, VALIDATING)
    assert "matchConditions" not in mutating["pods.mutate.gpupolicy.io"]
    assert mutating["pods.mutate.gpupolicy.io"]["failurePolicy"] == "Ignore"
    assert all("matchConditions" in hook for hook in validating.values())


def _all_hooks_with(values: str, extra: tuple[str, ...]) -> list[tuple[str, dict[str, Any]]]:
    objects = render(values, extra)
    return [(k, h) for k in (MUTATING, VALIDATING) for h in webhooks(objects, k).values()]


def test_self_signed_ca_bundle_is_the_secrets_ca() -> None:
    objects = render()
    secret_ca = named(objects, "Secret", "rel-gpupolicy-tls")["data"]["ca.crt"]
    for _, hook in _all_hooks("default"):
        assert hook["clientConfig"]["caBundle"] == secret_ca


def test_cert_manager_injects_the_ca_by_annotation() -> None:
    objects = render("certmanager")
    for kind in (MUTATING, VALIDATING):
        annotations = one(objects, kind)["metadata"]["annotations"]
        assert annotations == {"cert-manager.io/inject-ca-from": "gpu-system/rel-gpupolicy"}
    for _, hook in _all_hooks("certmanager"):
        assert "caBundle" not in hook["clientConfig"]
    certificate = next(o for o in objects if o["kind"] == "Certificate"
                       and o["metadata"]["name"] == "rel-gpupolicy")
    assert certificate["spec"]["secretName"] == "rel-gpupolicy-tls"
    assert "rel-gpupolicy.gpu-system.svc" in certificate["spec"]["dnsNames"]


def test_bring_your_own_secret() -> None:
    objects = render("byo-secret")
    for _, hook in _all_hooks("byo-secret"):
        assert hook["clientConfig"]["caBundle"] == "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg=="
    volumes = one(objects, "Deployment")["spec"]["template"]["spec"]["volumes"]
    certs = next(v for v in volumes if v["name"] == "certs")
    assert certs["secret"]["secretName"] == "my-webhook-tls"
