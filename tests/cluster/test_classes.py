"""PriorityClasses and RuntimeClasses in cluster mode: watched by `serve` from the fake API
server through the real client, so an injected class name brings the priority and runtime the
API server's plugins would have written, and follows the cluster without a restart; the live
audit lists ResourceQuotas too and judges GPUs against them."""

from __future__ import annotations

from typing import Any

from policies.engine import review
from policies.loading import parse_policies
from tests.cluster.conftest import FAST, namespace, node, wait_for
from tests.cluster.fakeapi import FakeAPIServer
from tests.cluster.test_audit import audit_json
from webhook.cluster.watch import ClusterSources
from webhook.inputs import sources
from webhook.inputs.state import State

NS = "ml"
POLICY = """
apiVersion: gpupolicy.io/v1alpha1
kind: GPUPolicy
metadata: {name: batch}
spec:
  inject: {priorityClassName: gpu-batch, runtimeClassName: nvidia}
"""


def priority_class(name: str, value: int, policy: str = "PreemptLowerPriority",
                   default: bool = False) -> dict[str, Any]:
    return {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
            "metadata": {"name": name}, "value": value, "preemptionPolicy": policy,
            "globalDefault": default}


RUNTIME = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": "nvidia"},
           "handler": "nvidia", "overhead": {"podFixed": {"cpu": "250m"}},
           "scheduling": {"nodeSelector": {"nvidia.com/gpu.present": "true"}}}
POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NS},
       "spec": {"containers": [{"name": "c", "image": "cuda",
                                "resources": {"limits": {"nvidia.com/gpu": 1}}}]}}


def _started(client: Any) -> tuple[State, ClusterSources]:
    state = State(sources.load_catalog(), expect=("policies",))
    cluster = ClusterSources(state, client, settings=FAST, debounce=0.01)
    state.update(policies=parse_policies(POLICY, "test"))
    state.expect("namespaces", "inventory", "cluster_policies", "claims", "api")
    cluster.start()
    return state, cluster


def _spec(state: State) -> dict[str, Any]:
    return review(POD, state.context, namespace=NS).mutated["spec"]  # type: ignore[no-any-return]


def test_injected_classes_follow_the_cluster(api_server: FakeAPIServer, client: Any) -> None:
    api_server.add_all([namespace(NS), node("gpu-1"),
                        priority_class("system-cluster-critical", 2000000000),
                        priority_class("batch-default", 1000, default=True)])
    state, cluster = _started(client)
    try:
        wait_for(lambda: state.ready)
        # no gpu-batch yet: not injected (a note says so); no RuntimeClass listed: the name
        spec = _spec(state)
        assert "priorityClassName" not in spec and spec["runtimeClassName"] == "nvidia"
        assert any("no PriorityClass with name gpu-batch" in n
                   for n in review(POD, state.context, namespace=NS).notes)
        api_server.add(priority_class("gpu-batch", 500, "Never"))
        api_server.add(RUNTIME)
        wait_for(lambda: _spec(state).get("priority") == 500)
        wait_for(lambda: _spec(state).get("overhead") == {"cpu": "250m"})
        spec = _spec(state)
        assert (spec["priorityClassName"], spec["preemptionPolicy"]) == ("gpu-batch", "Never")
        assert spec["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
        api_server.modify(priority_class("gpu-batch", 700, "Never"))
        wait_for(lambda: _spec(state).get("priority") == 700)
    finally:
        cluster.stop()


def test_the_live_audit_judges_gpus_against_the_namespaces_quota(
        api_server: FakeAPIServer, kubeconfig: str) -> None:
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"name": "train", "namespace": NS},
                  "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {
                      "metadata": {"labels": {"a": "b"}}, "spec": POD["spec"]}}}
    quota = {"apiVersion": "v1", "kind": "ResourceQuota",
             "metadata": {"name": "gpus", "namespace": NS},
             "spec": {"hard": {"requests.nvidia.com/gpu": "4"}},
             "status": {"hard": {"requests.nvidia.com/gpu": "4"},
                        "used": {"requests.nvidia.com/gpu": "4"}}}
    api_server.add_all([namespace(NS), node("gpu-1"), deployment, quota])
    found = audit_json("--kubeconfig", kubeconfig)
    said = [f for f in found["findings"] if f["rule"] == "resource-quota-exceeded"]
    assert [f["message"] for f in said] == [
        "exceeded quota: gpus, requested: requests.nvidia.com/gpu=1, used: "
        "requests.nvidia.com/gpu=4, limited: requests.nvidia.com/gpu=4"]
