"""A real `gpupolicy serve --kubeconfig` (gunicorn, TLS) fed by the fake API server."""

from __future__ import annotations

import re

from tests.cluster.conftest import gpupolicy, namespace, node, wait_for
from tests.cluster.fakeapi import FakeAPIServer
from tests.server import harness
from webhook import certs


def _pod(gpus: int) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "cuda",
                                     "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def _stale(server: harness.Server, resource: str) -> float:
    text = server.plain("GET", "/metrics").body.decode()
    match = re.search(
        rf'gpupolicy_cluster_cache_stale_seconds\{{resource="{resource}"\}} ([0-9.e+]+)', text)
    return float(match.group(1)) if match else -1.0


def test_serve_waits_for_the_cluster_then_judges_with_its_policies(tmp_path):
    port = harness.free_port()
    api = FakeAPIServer(port=port)  # not started yet: the API server is down at first
    config = api.kubeconfig(str(tmp_path / "kubeconfig"))
    api.add(namespace("team-a", tier="gpu"))
    api.add(node("gpu-1", gpus=8))
    api.add(gpupolicy("max-two", namespaces=["team-a"], rules={"maxGPUsPerPod": 2}))
    tls = tmp_path / "tls"
    certs.write_bundle(certs.build_serving_cert("gpupolicy", "gpupolicy", certs.build_ca()), tls)
    server = harness.start(["--kubeconfig", config, "--workers", "1",
                            "--tls-cert", str(tls / "tls.crt"), "--tls-key", str(tls / "tls.key")],
                           tmp_path, ca=tls / "ca.crt")
    try:
        ready = server.request("GET", "/readyz")
        assert ready.status == 503
        assert {"namespaces", "inventory"} <= set(ready.json["waiting_for"])
        assert server.plain("GET", "/readyz").status == 503  # the probes' port says the same
        api.start()
        wait_for(lambda: server.request("GET", "/readyz").status == 200, timeout=30)
        wait_for(lambda: server.plain("GET", "/readyz").status == 200, timeout=5)
        assert "max-two" in server.request("GET", "/readyz").json["policies"]

        denied = server.post("/validate", harness.envelope(harness.make_request(_pod(4), namespace="team-a")))
        assert denied.json["response"]["allowed"] is False
        assert "gpu-max-per-pod" in denied.json["response"]["status"]["message"]
        allowed = server.post("/validate", harness.envelope(harness.make_request(_pod(4), namespace="team-b")))
        assert allowed.json["response"]["allowed"] is True

        api.stop()  # the last good state keeps serving, and says how stale it is
        wait_for(lambda: _stale(server, "nodes") >= 1.0, timeout=30)
        assert server.request("GET", "/readyz").status == 200
        again = server.post("/validate", harness.envelope(harness.make_request(_pod(4), namespace="team-a")))
        assert again.json["response"]["allowed"] is False
    finally:
        server.stop()
        api.stop()


def _claims_pod() -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                     "containers": [{"name": "c", "image": "cuda",
                                     "resources": {"claims": [{"name": "gpu"}]}}]}}


def test_serve_resolves_a_pods_claim_template_from_the_cluster(tmp_path):
    """The bundled policy tolerates GPU pods: a pod whose template asks for a GPU is one, as
    soon as the template is in the cluster and no longer once it is gone."""
    import base64
    import json

    from tests.cluster.test_claims import template

    api = FakeAPIServer().start()
    config = api.kubeconfig(str(tmp_path / "kubeconfig"))
    api.add(namespace("ml"))
    api.add(node("gpu-1", gpus=8))
    # A 1.34+ cluster serves resource.k8s.io/v1 even with no claim yet (without it, the
    # caches are empty and look again only every 30 s).
    api.install("resource.k8s.io/v1", "ResourceClaim")
    api.install("resource.k8s.io/v1", "ResourceClaimTemplate")
    server = harness.start(["--kubeconfig", config, "--workers", "1"], tmp_path)

    def tolerated() -> bool:
        reply = server.post("/mutate", harness.envelope(
            harness.make_request(_claims_pod(), namespace="ml")))
        patch = reply.json["response"].get("patch")
        ops = json.loads(base64.b64decode(patch)) if patch else []
        return any(op["path"] == "/spec/tolerations" for op in ops)

    try:
        wait_for(lambda: server.request("GET", "/readyz").status == 200, timeout=30)
        assert not tolerated()
        api.add(template("one-gpu"))
        wait_for(tolerated, timeout=15)
        api.delete(template("one-gpu"))
        wait_for(lambda: not tolerated(), timeout=15)
    finally:
        server.stop()
        api.stop()
