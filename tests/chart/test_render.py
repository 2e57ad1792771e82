"""`helm lint --strict` and `helm template` over the values matrix in charts/gpupolicy/ci, with
every rendered object checked against the Kubernetes 1.33 OpenAPI schema (kubernetes-validate,
strict: unknown fields are errors), and the Deployment's safety settings asserted."""

from __future__ import annotations

import copy
from typing import Any

import kubernetes_validate
import pytest

from tests.chart.helm import CHART, CI_DIR, CI_VALUES, helm, one, render

K8S_VERSION = "1.33"
# Custom resources of other projects: no schema for them in kubernetes-validate.
FOREIGN_KINDS = {
    ("cert-manager.io/v1", "Issuer"),
    ("cert-manager.io/v1", "Certificate"),
    ("monitoring.coreos.com/v1", "ServiceMonitor"),
}


def test_values_matrix_is_not_empty() -> None:
    assert {"default", "certmanager", "failure-policy", "no-match-conditions",
            "templates-mutation"} <= set(CI_VALUES)


@pytest.mark.parametrize("values", CI_VALUES)
def test_lint_strict(values: str) -> None:
    result = helm("lint", "--strict", str(CHART), "-f", str(CI_DIR / f"{values}-values.yaml"))
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("values", CI_VALUES)
def test_every_object_is_valid_kubernetes_1_33(values: str) -> None:
    problems = []
    for obj in render(values):
        if (obj["apiVersion"], obj["kind"]) in FOREIGN_KINDS:
            continue
        try:
            kubernetes_validate.validate(obj, K8S_VERSION, strict=True)
        except (kubernetes_validate.ValidationError,
                kubernetes_validate.SchemaNotFoundError) as exc:
            problems.append(f"{obj['kind']}/{obj['metadata']['name']}: {exc}")
    assert problems == []


def test_the_validator_really_refuses_unknown_fields() -> None:
    """A control for the test above: strict validation must catch a misplaced field."""
    deployment = copy.deepcopy(one(render(), "Deployment"))
    deployment["spec"]["template"]["spec"]["containers"][0]["readOnlyRootFilesystem"] = True
    with pytest.raises(kubernetes_validate.ValidationError):
        kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)


@pytest.mark.parametrize(
    ("values", "kinds"),
    [
        ("default", {"Secret", "Deployment", "Service", "PodDisruptionBudget", "ConfigMap",
                     "ServiceAccount", "ClusterRole", "ClusterRoleBinding",
                     "CustomResourceDefinition", "MutatingWebhookConfiguration",
                     "ValidatingWebhookConfiguration", "Role", "RoleBinding", "Pod"}),
        ("certmanager", {"Issuer", "Certificate"}),
        ("certmanager-issuer", {"Certificate"}),
        ("full", {"ServiceMonitor", "NetworkPolicy"}),
    ],
)
def test_objects_present(values: str, kinds: set[str]) -> None:
    assert kinds <= {o["kind"] for o in render(values)}


@pytest.mark.parametrize(
    ("values", "absent"),
    [
        ("default", {"ServiceMonitor", "NetworkPolicy", "Issuer", "Certificate"}),
        ("certmanager", {"Secret"}),  # cert-manager writes it
        ("byo-secret", {"Secret", "Issuer", "Certificate"}),
        ("certmanager-issuer", {"Issuer"}),
    ],
)
def test_objects_absent(values: str, absent: set[str]) -> None:
    assert not absent & {o["kind"] for o in render(values)}


def _pod_spec(values: str = "default") -> dict[str, Any]:
    spec: dict[str, Any] = one(render(values), "Deployment")["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        (("securityContext", "runAsNonRoot"), True),
        (("securityContext", "seccompProfile", "type"), "RuntimeDefault"),
        (("containers", 0, "securityContext", "readOnlyRootFilesystem"), True),
        (("containers", 0, "securityContext", "allowPrivilegeEscalation"), False),
        (("containers", 0, "securityContext", "runAsNonRoot"), True),
        (("containers", 0, "securityContext", "capabilities", "drop"), ["ALL"]),
        (("containers", 0, "securityContext", "seccompProfile", "type"), "RuntimeDefault"),
        # Probes on the plain-HTTP metrics listener: never queued behind admissions.
        (("containers", 0, "livenessProbe", "httpGet", "path"), "/healthz"),
        (("containers", 0, "livenessProbe", "httpGet", "port"), "metrics"),
        (("containers", 0, "livenessProbe", "httpGet", "scheme"), "HTTP"),
        (("containers", 0, "readinessProbe", "httpGet", "path"), "/readyz"),
        (("containers", 0, "readinessProbe", "httpGet", "port"), "metrics"),
        (("containers", 0, "readinessProbe", "httpGet", "scheme"), "HTTP"),
        (("containers", 0, "resources", "requests", "cpu"), "100m"),
        (("containers", 0, "resources", "requests", "memory"), "448Mi"),
        (("containers", 0, "resources", "limits", "memory"), "640Mi"),
        (("containers", 0, "ports", 0, "containerPort"), 8443),
        (("containers", 0, "ports", 1), {"name": "metrics", "containerPort": 9090,
                                         "protocol": "TCP"}),
    ],
)
def test_deployment_security(path: tuple[str | int, ...], expected: object) -> None:
    node: Any = _pod_spec()
    for key in path:
        node = node[key]
    assert node == expected


def test_deployment_runs_the_server_with_mounted_certs_and_policies() -> None:
    spec = _pod_spec()
    container = spec["containers"][0]
    args = container["args"]
    assert container["command"] == ["gpupolicy"]
    for arg in ("serve", "--port=8443", "--metrics-port=9090", "--tls-cert=/certs/tls.crt",
                "--tls-key=/certs/tls.key", "--policies=/policies", "--workers=2"):
        assert arg in args
    mounts = {m["mountPath"]: m for m in container["volumeMounts"]}
    assert mounts["/certs"]["readOnly"] and mounts["/policies"]["readOnly"]
    assert "/tmp" in mounts  # writable scratch beside the read-only root filesystem
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["certs"]["secret"]["secretName"] == "rel-gpupolicy-tls"
    assert volumes["policies"]["configMap"]["name"] == "rel-gpupolicy-policies"


def test_high_availability_defaults() -> None:
    objects = render()
    deployment = one(objects, "Deployment")
    assert deployment["spec"]["replicas"] == 2
    assert one(objects, "PodDisruptionBudget")["spec"]["minAvailable"] == 1
    spec = deployment["spec"]["template"]["spec"]
    selector = deployment["spec"]["selector"]["matchLabels"]
    spreads = spec["topologySpreadConstraints"]
    assert {s["topologyKey"] for s in spreads} == {"topology.kubernetes.io/zone",
                                                  "kubernetes.io/hostname"}
    assert all(s["labelSelector"]["matchLabels"] == selector for s in spreads)


def test_hard_anti_affinity_and_full_values() -> None:
    spec = _pod_spec("full")
    hard = spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert hard[0]["topologyKey"] == "kubernetes.io/hostname"
    assert spec["priorityClassName"] == "system-cluster-critical"
    assert spec["containers"][0]["image"].endswith("@sha256:" + "0123456789abcdef" * 4)


def test_crd_is_kept_on_uninstall_and_webhooks_are_not() -> None:
    objects = render()
    crd = one(objects, "CustomResourceDefinition")
    assert crd["metadata"]["annotations"] == {"helm.sh/resource-policy": "keep"}
    for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        annotations = one(objects, kind)["metadata"].get("annotations") or {}
        assert "helm.sh/resource-policy" not in annotations  # deleted by `helm uninstall`
        assert not any(k.startswith("helm.sh/hook") for k in annotations)


def test_helm_test_pod_dry_runs_a_gpu_pod() -> None:
    pod = one(render(), "Pod")
    assert pod["metadata"]["annotations"]["helm.sh/hook"] == "test"
    env = {e["name"]: e.get("value") for e in pod["spec"]["containers"][0]["env"]}
    assert env["TEST_NAMESPACE"] == "default"
    assert env["WEBHOOK_URL"] == "https://rel-gpupolicy.gpu-system.svc:443"
    role = one(render(), "Role")
    assert role["metadata"]["namespace"] == "default"
    assert role["rules"] == [{"apiGroups": [""], "resources": ["pods"], "verbs": ["create"]}]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        ((), "system-cluster-critical"),  # a Fail-closed webhook is not the first evicted
        (("--set", "priorityClassName=gpu-infra"), "gpu-infra"),
        (("--set", "priorityClassName="), None),  # the cluster's default priority
    ],
    ids=["default", "own class", "none"],
)
def test_priority_class_of_the_webhook_pods(extra: tuple[str, ...], expected: str | None) -> None:
    spec = one(render("default", extra), "Deployment")["spec"]["template"]["spec"]
    assert spec.get("priorityClassName") == expected


def test_a_priority_class_that_is_no_name_is_refused_by_the_schema() -> None:
    with pytest.raises(Exception, match="priorityClassName"):
        render("default", ("--set", "priorityClassName=Not A Name"))
