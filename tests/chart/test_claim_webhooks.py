"""DRA ResourceClaims and ResourceClaimTemplates in the chart's webhooks: validated, never
mutated, and only GPU ones sent (matchConditions on the requests' device classes, checked
against the engine's own reading of a class name). Every matchCondition the chart renders
also compiles, type-checked, in cel-cpp (cel-expr-python) with `object`, `oldObject` and
`request` dynamic as in kube-apiserver, besides evaluating in cel-python."""

from __future__ import annotations

import json
from typing import Any

import pytest
from cel_expr_python import cel

from policies.dra.claims import gpu_kind
from tests.chart.helm import CI_VALUES, render, webhooks
from tests.chart.test_match_conditions import evaluate

MUTATING = "MutatingWebhookConfiguration"
VALIDATING = "ValidatingWebhookConfiguration"
HOOK = "claims.validate.gpupolicy.io"
RULE = {"apiGroups": ["resource.k8s.io"], "apiVersions": ["*"],
        "resources": ["resourceclaims", "resourceclaimtemplates"],
        "operations": ["CREATE", "UPDATE"], "scope": "Namespaced"}


def _hook(values: str = "default", extra: tuple[str, ...] = ()) -> dict[str, Any]:
    return webhooks(render(values, extra), VALIDATING)[HOOK]


@pytest.mark.parametrize("values", CI_VALUES)
def test_claims_are_validated_and_never_mutated(values: str) -> None:
    objects = render(values)
    hook = webhooks(objects, VALIDATING)[HOOK]
    assert hook["rules"] == [RULE]
    assert hook["clientConfig"]["service"]["path"] == "/validate"
    for mutating in webhooks(objects, MUTATING).values():
        assert all("resource.k8s.io" not in r["apiGroups"] for r in mutating["rules"])


@pytest.mark.parametrize(
    ("extra", "present", "conditions"),
    [
        ((), True, ["gpu-related", "spec-changed", "not-from-a-claim-controller"]),
        (("--set-json", "webhooks.validate.claimControllers=[]"), True,
         ["gpu-related", "spec-changed"]),
        (("--set", "webhooks.validate.claims=false"), False, None),
        (("--set", "webhooks.validate.enabled=false"), False, None),
        (("--set", "webhooks.matchConditions=false"), True, None),
        (("--kube-version", "1.27.0"), True, None),  # no matchConditions before 1.28
    ],
    ids=["default", "no claim controllers", "claims off", "validation off", "match conditions off", "1.27"],
)
def test_claim_webhook_switches(extra: tuple[str, ...], present: bool,
                                conditions: list[str] | None) -> None:
    hooks = webhooks(render("default", extra), VALIDATING)
    assert (HOOK in hooks) is present
    if present:
        assert [c["name"] for c in hooks[HOOK].get("matchConditions", [])] == (conditions or [])


# ---- which claims are sent -------------------------------------------------------------------

def claim(*requests: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": meta if meta is not None else {"name": "c", "namespace": "ml"},
            "spec": {"devices": {"requests": list(requests)}}}


def template(*requests: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "t", "namespace": "ml"},
            "spec": {"spec": {"devices": {"requests": list(requests)}}}}


def exactly(device_class: str, **more: Any) -> dict[str, Any]:
    return {"name": "r", "exactly": {"deviceClassName": device_class, **more}}


def first_available(*classes: str) -> dict[str, Any]:
    return {"name": "r", "firstAvailable": [{"name": f"s{i}", "deviceClassName": c}
                                            for i, c in enumerate(classes)]}


GENERATED = {"name": "p-gpu-x7k2q", "namespace": "ml",
             "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
             "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u",
                                  "controller": True}]}

SENT = [
    ("v1 exactly gpu", claim(exactly("gpu.nvidia.com")), True),
    ("v1 exactly mig", claim(exactly("mig.nvidia.com", count=2)), True),
    ("amd", claim(exactly("gpu.amd.com")), True),
    ("intel gaudi", claim(exactly("gaudi.intel.com")), True),
    ("template", template(exactly("gpu.nvidia.com")), True),
    ("template nic", template(exactly("rdma.example.com")), False),
    ("nic", claim(exactly("rdma.example.com")), False),
    ("nic then gpu", claim(exactly("rdma.example.com"), exactly("vgpu.example.com")), True),
    ("first available, gpu second", claim(first_available("fpga.example.com",
                                                          "gpu.nvidia.com")), True),
    ("first available, none gpu", claim(first_available("fpga.example.com")), False),
    ("v1beta1 flat", {**claim({"name": "r", "deviceClassName": "gpu.nvidia.com"}),
                      "apiVersion": "resource.k8s.io/v1beta1"}, True),
    ("v1beta1 flat nic", {**claim({"name": "r", "deviceClassName": "nic.example.com"}),
                          "apiVersion": "resource.k8s.io/v1beta1"}, False),
    ("class name only contains gpu-ish", claim(exactly("gp.example.com")), False),
    # hostile or half-written: never a CEL error, simply not sent
    ("no spec", {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim"}, False),
    ("no devices", {**claim(), "spec": {}}, False),
    ("no requests", {**claim(), "spec": {"devices": {}}}, False),
    ("empty requests", claim(), False),
    ("request without exactly", claim({"name": "r"}), False),
    ("exactly without class", claim({"name": "r", "exactly": {"count": 1}}), False),
    ("first available without classes", claim({"name": "r", "firstAvailable": [{"name": "a"}]}),
     False),
    ("template without inner spec", {**template(), "spec": {}}, False),
    ("no metadata", claim(exactly("gpu.nvidia.com"), meta={}), True),
    # a user's claim that says it was made for a pod (both fields are the writer's): sent
    ("forged: generated for a pod", claim(exactly("gpu.nvidia.com"), meta=GENERATED), True),
    ("annotation, no pod owner", claim(exactly("gpu.nvidia.com"), meta={
        "name": "c", "annotations": GENERATED["annotations"]}), True),
    ("pod owner, not controller", claim(exactly("gpu.nvidia.com"), meta={
        **GENERATED, "ownerReferences": [{"kind": "Pod", "name": "p", "uid": "u"}]}), True),
]


def sent(hook: dict[str, Any], obj: dict[str, Any], operation: str = "CREATE",
         old: dict[str, Any] | None = None, user: str | None = "alice") -> bool:
    """Whether the API server would call the webhook: every matchCondition true."""
    return all(evaluate(c["expression"], obj, operation=operation, old=old, user=user)
               for c in hook["matchConditions"])


@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in SENT], ids=[c[0] for c in SENT])
def test_only_gpu_claims_are_sent(obj: dict[str, Any], expected: bool) -> None:
    assert sent(_hook(), obj) is expected


CONTROLLER = "system:serviceaccount:kube-system:resource-claim-controller"
SENDERS = [
    # (request.userInfo.username, the claim's metadata, sent)
    ("system:serviceaccount:ml:trainer", GENERATED, True),  # the forged claim: judged
    ("alice", GENERATED, True),
    ("system:serviceaccount:kube-system:default", GENERATED, True),
    ("system:serviceaccount:kube-system:resource-claim-controller-x", GENERATED, True),
    (CONTROLLER, GENERATED, False),  # the controller making a pod's claim from its template
    ("system:kube-controller-manager", GENERATED, False),  # without per-controller accounts
    ("system:kube-scheduler", {**GENERATED, "annotations": {
        "resource.kubernetes.io/extended-resource-name": "true"}}, False),
    (None, GENERATED, True),  # no userInfo at all: sent, not trusted
]


@pytest.mark.parametrize(("user", "meta", "expected"), SENDERS,
                         ids=[f"{u}" for u, _m, _e in SENDERS])
def test_who_sent_the_claim_decides_not_its_fields(user: str | None, meta: dict[str, Any],
                                                   expected: bool) -> None:
    """The rendered matchConditions on a claim that says it was made for a pod: the sender's
    identity alone keeps it from /validate."""
    assert sent(_hook(), claim(exactly("mig.nvidia.com"), meta=meta), user=user) is expected


def test_claim_controllers_come_from_values() -> None:
    hook = _hook("default", ("--set-json",
                             'webhooks.validate.claimControllers=["system:serviceaccount:x:y"]'))
    forged = claim(exactly("gpu.nvidia.com"), meta=GENERATED)
    assert sent(hook, forged, user=CONTROLLER)
    assert not sent(hook, forged, user="system:serviceaccount:x:y")


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (claim(exactly("gpu.nvidia.com")), {**claim(exactly("gpu.nvidia.com")), "metadata": {
            "name": "c", "finalizers": ["resource.kubernetes.io/delete-protection"]}}, False),
        (claim(exactly("gpu.nvidia.com")), claim(exactly("gpu.nvidia.com", count=2)), True),
        (claim(exactly("rdma.example.com")), claim(exactly("gpu.nvidia.com")), True),
    ],
    ids=["finalizer added", "spec changed", "now a gpu claim"],
)
def test_updates_are_sent_only_when_the_spec_changes(old: dict[str, Any], new: dict[str, Any],
                                                     expected: bool) -> None:
    assert sent(_hook(), new, operation="UPDATE", old=old) is expected


CLASS_NAMES = ["gpu.nvidia.com", "mig.nvidia.com", "gpu.amd.com", "gpu.intel.com",
               "gaudi.intel.com", "gpu.example.com", "vgpu.example.com", "a100-mig.example.com",
               "team.mig.example.com", "mig.example.com", "gpu", "rdma.example.com",
               "nic.mellanox.com", "fpga.example.com", "neuron.aws.com", "tpu.example.com",
               "migration.example.com", "example.com", "gpumig"]


@pytest.mark.parametrize("name", CLASS_NAMES)
def test_default_classes_are_the_engines_reading_of_a_name(name: str) -> None:
    """Without an inventory the engine calls a class GPU or MIG by its name: the default
    gpuDeviceClasses send exactly those claims."""
    assert sent(_hook(), claim(exactly(name))) is (gpu_kind(name) is not None)


@pytest.mark.parametrize(
    ("classes", "name", "expected"),
    [
        (["accelerators.example.com"], "accelerators.example.com", True),
        (["accelerators.example.com"], "acceleratorsXexample.com", False),  # dots are dots
        (["accel*"], "accelerators.example.com", True),
        (["accel*"], "gpu.nvidia.com", False),  # the list replaces the default
        (["*.example.com"], "a.b.example.com", True),
        (["*.example.com"], "example.com", False),
    ],
)
def test_device_classes_from_values(classes: list[str], name: str, expected: bool) -> None:
    hook = _hook("default", ("--set-json", "webhooks.gpuDeviceClasses=" + json.dumps(classes)))
    assert sent(hook, claim(exactly(name))) is expected


# ---- every rendered CEL expression compiles in cel-cpp -----------------------------------------

_ENV = cel.NewEnv(variables={"object": cel.Type.DYN, "oldObject": cel.Type.DYN,
                             "request": cel.Type.DYN})


@pytest.mark.parametrize("values", CI_VALUES)
def test_every_match_condition_type_checks(values: str) -> None:
    objects = render(values)
    checked = 0
    for kind in (MUTATING, VALIDATING):
        for name, hook in webhooks(objects, kind).items():
            for condition in hook.get("matchConditions", []):
                compiled = _ENV.compile(condition["expression"])  # raises on any error
                assert compiled.return_type().name() in ("bool", "BOOL"), (name, condition)
                checked += 1
    assert checked > 0 or values == "no-match-conditions"
