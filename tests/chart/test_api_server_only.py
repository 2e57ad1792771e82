"""Issue 27: the admission port open to the API server alone, two ways the chart offers.
NetworkPolicy mode `admissionFrom: apiServer` (ipBlocks of apiServerCIDRs, else of the
`kubernetes` Service's EndpointSlices, looked up through the real `helm` against a fake API
server) and the metrics port for the monitoring namespace only; and `clientAuth`, which
mounts a CA bundle and passes `serve --client-ca` (the server side: tests/server/
test_client_ca.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest

from tests.chart.fake_apiserver import FakeAPIServer
from tests.chart.helm import documents, one, render, template
from tests.chart.test_render import K8S_VERSION

MONITORING = [{"namespaceSelector": {"matchLabels": {
    "kubernetes.io/metadata.name": "monitoring"}}}]
API_SERVER_ONLY = ("--set", "networkPolicy.enabled=true",
                   "--set", "networkPolicy.admissionFrom=apiServer")


def _ingress(objects: Any) -> dict[str, Any]:
    policy = one(objects, "NetworkPolicy")
    kubernetes_validate.validate(policy, K8S_VERSION, strict=True)
    return {rule["ports"][0]["port"]: rule.get("from") for rule in policy["spec"]["ingress"]}


def test_api_server_cidrs_given() -> None:
    objects = render("default", (*API_SERVER_ONLY, "--set-json",
                                 'networkPolicy.apiServerCIDRs=["10.0.0.5/32","fd00::1/128"]'))
    assert _ingress(objects) == {
        "https": [{"ipBlock": {"cidr": "10.0.0.5/32"}}, {"ipBlock": {"cidr": "fd00::1/128"}}],
        "metrics": MONITORING}


def _slice(name: str, service: str, *addresses: str) -> dict[str, Any]:
    return {"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": name, "namespace": "default",
                         "labels": {"kubernetes.io/service-name": service}},
            "addressType": "IPv4",
            "endpoints": [{"addresses": [a]} for a in addresses],
            "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}


def test_api_server_addresses_looked_up(tmp_path: Path) -> None:
    """At install, the chart asks the cluster where the API servers are: the `kubernetes`
    Service's endpoints, never another Service's."""
    server = FakeAPIServer()
    server.lists["/apis/discovery.k8s.io/v1/namespaces/default/endpointslices"] = [
        _slice("kubernetes", "kubernetes", "172.18.0.2", "172.18.0.3"),
        _slice("web-x7k2", "web", "10.244.1.7")]
    with server.running():
        result = template("--dry-run=server", "--disable-openapi-validation",
                          "--kubeconfig", str(server.kubeconfig(tmp_path)), *API_SERVER_ONLY)
    assert result.returncode == 0, result.stderr
    assert _ingress(documents(result.stdout))["https"] == [
        {"ipBlock": {"cidr": "172.18.0.2/32"}}, {"ipBlock": {"cidr": "172.18.0.3/32"}}]


def test_no_api_server_address_fails_rather_than_opening_or_closing() -> None:
    result = template(*API_SERVER_ONLY)
    assert result.returncode != 0
    assert "networkPolicy.admissionFrom=apiServer: no API server address" in result.stderr


@pytest.mark.parametrize("cidr", ["10.0.0.5", "all", "10.0.0.0/8; x"])
def test_api_server_cidrs_are_cidrs(cidr: str) -> None:
    result = template(*API_SERVER_ONLY, "--set-json", f'networkPolicy.apiServerCIDRs=["{cidr}"]')
    assert result.returncode != 0 and "apiServerCIDRs" in result.stderr


# ---- clientAuth ------------------------------------------------------------------------------

def _webhook_pod(*extra: str) -> dict[str, Any]:
    spec: dict[str, Any] = one(render("default", extra), "Deployment")["spec"]["template"]["spec"]
    return spec


@pytest.mark.parametrize(
    ("extra", "source"),
    [
        (("--set", "clientAuth.caConfigMap=apiserver-client-ca"),
         {"configMap": {"name": "apiserver-client-ca",
                        "items": [{"key": "ca.crt", "path": "ca.crt"}]}}),
        (("--set", "clientAuth.caSecret=apiserver-client-ca", "--set", "clientAuth.key=ca.pem"),
         {"secret": {"secretName": "apiserver-client-ca",
                     "items": [{"key": "ca.pem", "path": "ca.crt"}]}}),
    ],
    ids=["configmap", "secret"],
)
def test_client_auth_mounts_the_ca_and_passes_it(extra: tuple[str, ...],
                                                 source: dict[str, Any]) -> None:
    spec = _webhook_pod("--set", "clientAuth.enabled=true", *extra)
    container = spec["containers"][0]
    assert "--client-ca=/client-ca/ca.crt" in container["args"]
    assert {"name": "client-ca", "mountPath": "/client-ca", "readOnly": True} in \
        container["volumeMounts"]
    assert {"name": "client-ca", **source} in spec["volumes"]
    assert container["readinessProbe"]["httpGet"]["port"] == "metrics"  # probes need no cert


def test_client_auth_is_off_by_default() -> None:
    spec = _webhook_pod()
    assert not any(a.startswith("--client-ca") for a in spec["containers"][0]["args"])
    assert all(v["name"] != "client-ca" for v in spec["volumes"])


@pytest.mark.parametrize(
    "extra",
    [(), ("--set", "clientAuth.caConfigMap=a", "--set", "clientAuth.caSecret=b")],
    ids=["no source", "two sources"],
)
def test_client_auth_needs_one_ca_source(extra: tuple[str, ...]) -> None:
    result = template("--set", "clientAuth.enabled=true", *extra)
    assert result.returncode != 0
    assert "clientAuth.enabled needs exactly one of" in result.stderr
