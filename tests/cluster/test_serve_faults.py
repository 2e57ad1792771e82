"""A real `gpupolicy serve --kubeconfig` (gunicorn, TLS) while the fake API server misbehaves:
/readyz on both ports says which cache fails and why, the metrics too, and the verdicts that
need the cluster's GPUPolicy objects do not change while their resource answers 404."""

from __future__ import annotations

import re
import time

from tests.cluster.conftest import gpupolicy, namespace, node, wait_for
from tests.cluster.fakeapi import FakeAPIServer, Fault
from tests.cluster.test_faults import gpu_pod
from tests.server import harness
from webhook import certs

CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
POLICIES = "/apis/gpupolicy.io/v1alpha1/gpupolicies"


def _metric(server: harness.Server, name: str, resource: str) -> float | None:
    text = server.plain("GET", "/metrics").body.decode()
    match = re.search(rf'{name}\{{resource="{resource}"\}} ([0-9.e+]+)', text)
    return float(match.group(1)) if match else None


def _errors(server: harness.Server) -> dict[str, str]:
    """Every worker's errors, as the probes' port shows them."""
    workers = server.plain("GET", "/readyz").json["workers"]
    return {k: v for detail in workers.values() for k, v in detail["errors"].items()}


def _denied(server: harness.Server) -> bool:
    reply = server.post("/validate", harness.envelope(
        harness.make_request(gpu_pod(4), namespace="team-a")))
    return reply.json["response"]["allowed"] is False


def test_serve_says_which_cache_fails_and_keeps_judging_with_the_last_state(tmp_path):
    api = FakeAPIServer().start()
    config = api.kubeconfig(str(tmp_path / "kubeconfig"))
    api.add_all([namespace("team-a"), node("gpu-1", gpus=8),
                 gpupolicy("max-two", namespaces=["team-a"], rules={"maxGPUsPerPod": 2})])
    api.install("resource.k8s.io/v1", "ResourceClaim")
    forbidden = api.inject(Fault(403, count=-1, path=CLAIMS))
    tls = tmp_path / "tls"
    certs.write_bundle(certs.build_serving_cert("gpupolicy", "gpupolicy", certs.build_ca()), tls)
    server = harness.start(["--kubeconfig", config, "--workers", "1",
                            "--tls-cert", str(tls / "tls.crt"), "--tls-key", str(tls / "tls.key")],
                           tmp_path, ca=tls / "ca.crt")
    try:
        # a 403 on one kind at start-up: not ready, and /readyz says which and why
        wait_for(lambda: "cluster/resourceclaims" in _errors(server), timeout=20)
        assert _errors(server) == {"cluster/resourceclaims": "403 Forbidden: injected Forbidden"}
        ready = server.request("GET", "/readyz")
        assert ready.status == 503
        assert ready.json["errors"] == {
            "cluster/resourceclaims": "403 Forbidden: injected Forbidden"}
        assert server.plain("GET", "/readyz").status == 503
        wait_for(lambda: _metric(server, "gpupolicy_cluster_cache_error", "resourceclaims") == 1,
                 timeout=5)  # the workers flush their samples every 0.25 s
        assert forbidden.taken >= 1
        api.clear_faults()
        wait_for(lambda: server.plain("GET", "/readyz").status == 200, timeout=40)
        assert _errors(server) == {}
        assert _denied(server)

        # a 404 burst on GPUPolicies after the first list: the policy stays in effect
        api.inject(Fault(404, count=-1, path=POLICIES))
        api.drop_watches()
        wait_for(lambda: "cluster/gpupolicies" in _errors(server), timeout=20)
        assert server.plain("GET", "/readyz").status == 200  # the last state serves
        wait_for(lambda: _metric(server, "gpupolicy_cluster_cache_error", "gpupolicies") == 1,
                 timeout=5)
        judged = 0
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            assert _denied(server)
            judged += 1
        assert judged > 5
        api.clear_faults()
        start = time.monotonic()
        api.modify(gpupolicy("max-two", namespaces=["team-a"], rules={"maxGPUsPerPod": 8}))
        wait_for(lambda: not _denied(server), timeout=20)
        print(f"\nserve, 404 burst: change applied {time.monotonic() - start:.2f}s after")
        wait_for(lambda: _errors(server) == {}, timeout=10)
    finally:
        server.stop()
        api.stop()
