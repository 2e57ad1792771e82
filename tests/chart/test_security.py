"""The chart's security findings of issue 13, each rendered with the real helm: RBAC split
between the server and the audit, what each pod mounts of the TLS Secret, the NetworkPolicy,
metrics on their own port, anti-affinity, and graceful shutdown. (Debug containers:
test_match_conditions.py; the image: test_image.py.)"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from tests.chart.helm import CI_VALUES, named, one, render, template
from tests.chart.test_render import K8S_VERSION
from tests.chart.test_webhooks import KIND_RESOURCES
from webhook.cluster.kinds import AUDIT_ONLY, BUILT_IN, CUSTOM, PODS, WATCHED
from webhook.inputs.sources import load_workload_kinds

SERVER_SA = {"kind": "ServiceAccount", "name": "rel-gpupolicy", "namespace": "gpu-system"}


def _named(objects: tuple[dict[str, Any], ...], kind: str, name: str) -> dict[str, Any] | None:
    return next((o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name), None)


def _grants(role: dict[str, Any]) -> dict[tuple[str, str], list[str]]:
    return {(group, resource): sorted(rule["verbs"]) for rule in role["rules"]
            for group in rule["apiGroups"] for resource in rule["resources"]}


# --- RBAC: the server gets what `serve` watches; the audit has its own role ---------------

def test_server_role_is_only_what_serve_watches() -> None:
    role = _named(render(), "ClusterRole", "rel-gpupolicy")
    assert role is not None
    watch = ["get", "list", "watch"]
    assert _grants(role) == dict.fromkeys(WATCHED, watch)


WATCH, LIST = ["get", "list", "watch"], ["list"]


@pytest.mark.parametrize(
    ("role", "resource", "verbs"),
    [
        ("rel-gpupolicy", "resourceslices", WATCH),
        ("rel-gpupolicy", "deviceclasses", WATCH),
        ("rel-gpupolicy", "resourceclaims", WATCH),  # what pods' spec.resourceClaims name
        ("rel-gpupolicy", "resourceclaimtemplates", WATCH),
        ("rel-gpupolicy-audit", "resourceslices", LIST),
        ("rel-gpupolicy-audit", "deviceclasses", LIST),
        ("rel-gpupolicy-audit", "resourceclaims", LIST),
        ("rel-gpupolicy-audit", "resourceclaimtemplates", LIST),
    ],
)
def test_dra_objects_are_read_and_never_written(role: str, resource: str,
                                                verbs: list[str]) -> None:
    found = _named(render(), "ClusterRole", role)
    assert found is not None
    assert _grants(found)[("resource.k8s.io", resource)] == verbs


def _audit_reads(objects: tuple[dict[str, Any], ...], tmp: Path) -> set[tuple[str, str]]:
    """(group, resource) of every list `gpupolicy audit` makes (webhook/cluster/listing.py),
    given the kind table the chart renders for the server (the audit lists every kind of it)."""
    reads = {KIND_RESOURCES[f"{api.rpartition('/')[0]}/{kind}"] for kind, api, _, _ in BUILT_IN}
    reads |= {(group, plural) for _, group, _, plural in CUSTOM}
    [config] = [o for o in objects if o["kind"] == "ConfigMap"
                and o["metadata"]["name"].endswith("-workload-kinds")]
    table = tmp / "workload-kinds.yaml"
    table.write_text(config["data"]["workload-kinds.yaml"])
    reads |= {(k.group, k.resource) for k in load_workload_kinds(table).kinds if k.resource}
    assert PODS[0] == "Pod"
    return reads | {("", "pods"), *WATCHED, *AUDIT_ONLY}


@pytest.mark.parametrize("values", CI_VALUES)
def test_audit_role_lists_exactly_what_the_audit_reads(values: str, tmp_path: Path) -> None:
    objects = render(values)
    role = _named(objects, "ClusterRole", "rel-gpupolicy-audit")
    assert role is not None
    grants = _grants(role)
    assert set(grants) == _audit_reads(objects, tmp_path)
    assert all(verbs == ["list"] for verbs in grants.values())


@pytest.mark.parametrize(
    ("values", "extra", "subjects"),
    [
        ("default", (), None),  # no binding unless asked for
        ("full", (), [{"kind": "ServiceAccount", "name": "gpupolicy-audit",
                       "namespace": "gpu-system"},
                      {"kind": "Group", "name": "platform-auditors",
                       "apiGroup": "rbac.authorization.k8s.io"}]),
        ("default", ("--set", "rbac.audit.create=false"), None),
    ],
    ids=["default", "subjects", "off"],
)
def test_audit_binding_comes_from_values(
    values: str, extra: tuple[str, ...], subjects: list[dict[str, str]] | None,
) -> None:
    objects = render(values, extra)
    binding = _named(objects, "ClusterRoleBinding", "rel-gpupolicy-audit")
    assert (binding["subjects"] if binding else None) == subjects
    if binding:
        assert binding["roleRef"]["name"] == "rel-gpupolicy-audit"
    server = _named(objects, "ClusterRoleBinding", "rel-gpupolicy")
    assert server is not None and server["subjects"] == [SERVER_SA]
    if "rbac.audit.create=false" in extra:
        assert _named(objects, "ClusterRole", "rel-gpupolicy-audit") is None


@pytest.mark.parametrize(
    ("subject", "fails"),
    [
        ("{kind: ServiceAccount, name: rel-gpupolicy, namespace: gpu-system}", True),
        ("{kind: ServiceAccount, name: rel-gpupolicy}", True),
        ("{kind: ServiceAccount, name: rel-gpupolicy, namespace: other}", False),
        ("{kind: User, name: rel-gpupolicy}", False),
    ],
)
def test_audit_role_is_never_bound_to_the_server(subject: str, fails: bool) -> None:
    result = template("--set-json", "rbac.audit.subjects=[" + _json(subject) + "]")
    assert (result.returncode != 0) is fails, result.stderr
    if fails:
        assert "must not name the webhook's own ServiceAccount" in result.stderr


def _json(flow: str) -> str:
    return json.dumps(yaml.safe_load(flow))


# --- TLS Secret: each pod mounts only the keys it needs; ca.key never --------------------

def _pod_specs(objects: tuple[dict[str, Any], ...]) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for obj in objects:
        if obj["kind"] == "Pod":
            found.append((obj["metadata"]["name"], obj["spec"]))
        elif obj["kind"] == "Deployment":
            found.append((obj["metadata"]["name"], obj["spec"]["template"]["spec"]))
    return found


@pytest.mark.parametrize("values", CI_VALUES)
def test_no_pod_mounts_a_whole_secret_or_the_ca_key(values: str) -> None:
    for name, spec in _pod_specs(render(values)):
        for volume in spec.get("volumes") or []:
            if "secret" in volume:
                items = volume["secret"].get("items")
                assert items, f"{name} mounts all of Secret {volume['secret']['secretName']}"
                assert "ca.key" not in {i["key"] for i in items}


@pytest.mark.parametrize(
    ("values", "pod", "keys"),
    [
        ("default", "rel-gpupolicy", ["tls.crt", "tls.key"]),
        ("certmanager", "rel-gpupolicy", ["tls.crt", "tls.key"]),
        ("byo-secret", "rel-gpupolicy", ["tls.crt", "tls.key"]),
        ("default", "rel-gpupolicy-test", ["ca.crt"]),
        ("certmanager", "rel-gpupolicy-test", ["ca.crt"]),
        ("byo-secret", "rel-gpupolicy-test", None),  # its CA comes from certs.caBundle
    ],
)
def test_each_pod_gets_only_the_keys_it_needs(values: str, pod: str,
                                              keys: list[str] | None) -> None:
    spec = dict(_pod_specs(render(values)))[pod]
    volumes = {v["name"]: v for v in spec.get("volumes") or []}
    mounts = {m["name"] for c in spec["containers"] for m in c.get("volumeMounts") or []}
    if keys is None:
        assert "certs" not in volumes and "certs" not in mounts
        return
    assert [(i["key"], i["path"]) for i in volumes["certs"]["secret"]["items"]] == [
        (k, k) for k in keys]
    assert "certs" in mounts


def test_the_ca_key_is_in_a_secret_no_pod_mounts() -> None:
    """Re-signing on upgrade needs the CA's key: it lives in <fullname>-ca, apart from the
    serving Secret, and no pod of the chart (webhook, audit, helm test) mounts that one."""
    objects = render()
    assert "ca.key" not in named(objects, "Secret", "rel-gpupolicy-tls")["data"]
    assert "ca.key" in named(objects, "Secret", "rel-gpupolicy-ca")["data"]
    for _, spec in _pod_specs(objects):
        for volume in spec.get("volumes") or []:
            assert (volume.get("secret") or {}).get("secretName") != "rel-gpupolicy-ca"


# --- NetworkPolicy: opt-in; restricts what it can ----------------------------------------

MONITORING = [{"namespaceSelector": {"matchLabels": {
    "kubernetes.io/metadata.name": "monitoring"}}}]


def _ingress(extra: tuple[str, ...], values: str = "default") -> dict[str, Any]:
    """port name -> its `from` (None: any source)."""
    policy = one(render(values, ("--set", "networkPolicy.enabled=true", *extra)),
                 "NetworkPolicy")
    kubernetes_validate.validate(policy, K8S_VERSION, strict=True)
    return {rule["ports"][0]["port"]: rule.get("from") for rule in policy["spec"]["ingress"]}


@pytest.mark.parametrize(
    ("extra", "values", "expected"),
    [
        ((), "default", {"https": None, "metrics": MONITORING}),
        ((), "full", {"https": [{"ipBlock": {"cidr": "10.0.0.0/8"}}],
                      "metrics": [{"namespaceSelector": {"matchLabels": {
                          "kubernetes.io/metadata.name": "observability"}},
                          "podSelector": {"matchLabels": {
                              "app.kubernetes.io/name": "prometheus"}}}]}),
        (("--set-json", "networkPolicy.metricsFrom=[]"), "default", {"https": None}),
        (("--set", "networkPolicy.metricsFrom=any"), "default",
         {"https": None, "metrics": None}),
        (("--set-json", 'networkPolicy.admissionFrom=[{"ipBlock":{"cidr":"192.0.2.0/24"}}]'),
         "default", {"https": [{"ipBlock": {"cidr": "192.0.2.0/24"}}], "metrics": MONITORING}),
    ],
    ids=["default", "full", "metrics-nobody", "metrics-any", "admission-peers"],
)
def test_network_policy_ingress(extra: tuple[str, ...], values: str,
                                expected: dict[str, Any]) -> None:
    assert _ingress(extra, values) == expected


def test_network_policy_is_opt_in() -> None:
    assert not [o for o in render() if o["kind"] == "NetworkPolicy"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--set-json", "networkPolicy.admissionFrom=[]"),
         "networkPolicy.admissionFrom: [] would let no source reach the admission port"),
        (("--set", "networkPolicy.admissionFrom=all"),
         "value must be one of 'any', 'apiServer'"),
        (("--set", "networkPolicy.ingressFrom=any"), "'ingressFrom' not allowed"),
    ],
)
def test_network_policy_refuses_ambiguous_values(args: tuple[str, ...], message: str) -> None:
    result = template("--set", "networkPolicy.enabled=true", *args)
    assert result.returncode != 0
    assert message in result.stderr


# --- Metrics on their own port -----------------------------------------------------------

def test_metrics_have_their_own_service_port_and_scrape_config() -> None:
    objects = render("full")
    ports = {p["name"]: p for p in one(objects, "Service")["spec"]["ports"]}
    assert ports["https"]["targetPort"] == "https"
    assert (ports["metrics"]["port"], ports["metrics"]["targetPort"]) == (9090, "metrics")
    endpoint = one(objects, "ServiceMonitor")["spec"]["endpoints"]
    assert endpoint == [{"port": "metrics", "path": "/metrics", "scheme": "http",
                         "interval": "30s"}]


def test_metrics_port_value_moves_port_args_and_policy_together() -> None:
    objects = render("full", ("--set", "metrics.port=9191"))
    container = one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]
    assert "--metrics-port=9191" in container["args"]
    assert {"name": "metrics", "containerPort": 9191, "protocol": "TCP"} in container["ports"]
    # Service, probes and NetworkPolicy name the port, so they follow it.
    assert container["livenessProbe"]["httpGet"]["port"] == "metrics"
    ingress = one(objects, "NetworkPolicy")["spec"]["ingress"]
    assert {r["ports"][0]["port"] for r in ingress} == {"https", "metrics"}


# --- Anti-affinity: required across nodes by default; soft on request ---------------------

def _spread(values: str, extra: tuple[str, ...] = ()) -> tuple[dict[str, Any], dict[str, Any]]:
    deployment = one(render(values, extra), "Deployment")
    return deployment["spec"]["template"]["spec"], deployment["spec"]["strategy"]["rollingUpdate"]


@pytest.mark.parametrize(
    ("extra", "term", "rollout"),
    [
        ((), "required", {"maxUnavailable": 1, "maxSurge": 0}),
        (("--set", "podAntiAffinity=soft"), "preferred", {"maxUnavailable": 0, "maxSurge": 1}),
        (("--set", "podAntiAffinity=none"), None, {"maxUnavailable": 0, "maxSurge": 1}),
        # One replica: taking it down would be an outage, so it is surged even under "hard".
        (("--set", "replicaCount=1"), "required", {"maxUnavailable": 0, "maxSurge": 1}),
    ],
    ids=["default-hard", "soft", "none", "hard-one-replica"],
)
def test_anti_affinity_and_rollout(extra: tuple[str, ...], term: str | None,
                                   rollout: dict[str, int]) -> None:
    spec, strategy = _spread("default", extra)
    assert strategy == rollout
    anti = (spec.get("affinity") or {}).get("podAntiAffinity") or {}
    if term is None:
        assert anti == {}
    elif term == "required":
        [rule] = anti["requiredDuringSchedulingIgnoredDuringExecution"]
        assert rule["topologyKey"] == "kubernetes.io/hostname"
        assert rule["labelSelector"]["matchLabels"]["app.kubernetes.io/instance"] == "rel"
    else:
        [rule] = anti["preferredDuringSchedulingIgnoredDuringExecution"]
        assert rule["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    zone = [s for s in spec["topologySpreadConstraints"]
            if s["topologyKey"] == "topology.kubernetes.io/zone"]
    assert zone and zone[0]["whenUnsatisfiable"] == "ScheduleAnyway"


# --- Graceful shutdown ------------------------------------------------------------------

@pytest.mark.parametrize(
    ("kube", "values", "pre_stop", "grace"),
    [
        ("1.30.0", "default", {"sleep": {"seconds": 10}}, 30),
        ("1.33.0", "full", {"sleep": {"seconds": 15}}, 40),
        ("1.29.5", "default", {"exec": {"command": [
            "python", "-c", "import time; time.sleep(10)"]}}, 30),
        ("1.28.0", "full", {"exec": {"command": [
            "python", "-c", "import time; time.sleep(15)"]}}, 40),
    ],
)
def test_pre_stop_delay_before_gunicorn_stops(kube: str, values: str,
                                              pre_stop: dict[str, Any], grace: int) -> None:
    deployment = one(render(values, ("--kube-version", kube)), "Deployment")
    kubernetes_validate.validate(deployment, K8S_VERSION, strict=True)
    spec = deployment["spec"]["template"]["spec"]
    assert spec["containers"][0]["lifecycle"] == {"preStop": pre_stop}
    assert spec["terminationGracePeriodSeconds"] == grace
    delay = pre_stop.get("sleep", {}).get("seconds") or int(
        pre_stop["exec"]["command"][2].split("(")[1].rstrip(")"))
    assert grace > delay + 10  # gunicorn's graceful timeout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--set", "shutdown.terminationGracePeriodSeconds=20"),
         "shutdown.terminationGracePeriodSeconds=20 must exceed shutdown.preStopSeconds (10)"),
        (("--set", "shutdown.preStopSeconds=25"), "must exceed shutdown.preStopSeconds (25)"),
        (("--set", "shutdown.preStopSeconds=0"), "minimum"),
    ],
)
def test_shutdown_values_that_would_cut_admissions_fail(args: tuple[str, ...],
                                                        message: str) -> None:
    result = template(*args)
    assert result.returncode != 0
    assert message in result.stderr


CUSTOM_KIND = ('[{"name": "gpujobs", "apiGroups": ["example.com"], "resources": ["gpujobs"], '
               '"kinds": ["GPUJob"], "podSpecPaths": ["spec.template.spec"]}]')


def test_audit_role_follows_workload_kinds_the_values_add(tmp_path: Path) -> None:
    """A kind the chart's table adds is listed by the audit, so the role may list it; the
    bundled kinds stay listable even when the values replace the table."""
    objects = render("default", ("--set-json", f"webhooks.workloadKinds={CUSTOM_KIND}"))
    role = _named(objects, "ClusterRole", "rel-gpupolicy-audit")
    assert role is not None
    grants = _grants(role)
    assert ("example.com", "gpujobs") in grants
    assert set(grants) == _audit_reads(objects, tmp_path)
