"""DRA ResourceClaims and ResourceClaimTemplates in cluster mode: watched by `serve` (and listed
by `audit`) from the fake API server through the real client, so a pod's spec.resourceClaims
resolve as they do offline, and follow the cluster without a restart."""

from __future__ import annotations

import time
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from policies.engine import review
from tests.cluster.conftest import FAST, namespace, node, wait_for
from tests.cluster.fakeapi import FakeAPIServer
from tests.cluster.test_audit import audit_json
from webhook.cluster.watch import ClusterSources
from webhook.http.metrics import Metrics, exposition
from webhook.inputs import sources
from webhook.inputs.state import State

NS = "ml"


def template(name: str, device_class: str = "gpu.nvidia.com", ns: str = NS,
             **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": ns, **meta},
            "spec": {"spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}}}


def claim(name: str, device_class: str = "gpu.nvidia.com", ns: str = NS,
          **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": name, "namespace": ns, **meta},
            "spec": {"devices": {"requests": [
                {"name": "gpu", "exactly": {"deviceClassName": device_class}}]}}}


def pod(ref: str, name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": NS},
            "spec": {"resourceClaims": [{"name": "gpu", ref: name}],
                     "containers": [{"name": "c", "image": "cuda",
                                     "resources": {"claims": [{"name": "gpu"}]}}]}}


# what the resource claim controller writes on the claim it makes from a template for pod p,
# and what any user who may create claims can write too
OWNED_BY_POD = {"annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p",
                                     "uid": "u", "controller": True}]}


METERS: dict[int, Metrics] = {}  # id(cluster) -> the Metrics it registered on


def _started(client: Any) -> tuple[State, ClusterSources]:
    state = State(sources.load_catalog(), expect=("policies",))
    cluster = ClusterSources(state, client, settings=FAST, debounce=0.01)
    METERS[id(cluster)] = meters = Metrics(None)
    cluster.register(meters)
    state.update(policies=sources.load_policies())  # the bundled defaults: GPU pods tolerate
    state.expect("namespaces", "inventory", "cluster_policies", "claims")
    cluster.start()
    return state, cluster


def _objects_metric(cluster: ClusterSources, resource: str) -> float | None:
    text, _ = exposition(METERS[id(cluster)])
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            if (sample.name == "gpupolicy_cluster_cache_objects"
                    and sample.labels == {"resource": resource}):
                return float(sample.value)
    return None


def _tolerated(state: State, obj: dict[str, Any]) -> bool:
    """The bundled policy injected its GPU toleration: the engine saw a GPU pod."""
    decision = review(obj, state.context, namespace=NS)
    return decision.gpu and any(op["path"] == "/spec/tolerations" for op in decision.patch)


@pytest.mark.parametrize(("ref", "make"), [("resourceClaimTemplateName", template),
                                          ("resourceClaimName", claim)],
                         ids=["template", "claim"])
def test_a_pods_claim_follows_the_cluster_without_restart(api_server: FakeAPIServer, client: Any,
                                                          ref: str, make: Any) -> None:
    api_server.add_all([namespace(NS), node("gpu-1")])
    api_server.add(make("other", ns="elsewhere"))  # the same name in another namespace
    state, cluster = _started(client)
    try:
        wait_for(lambda: state.ready)
        gpu_pod = pod(ref, "one-gpu")
        assert not _tolerated(state, gpu_pod)  # nothing named one-gpu in ml yet
        api_server.add(make("one-gpu"))
        wait_for(lambda: _tolerated(state, gpu_pod))  # appears: a GPU pod
        api_server.modify(make("one-gpu", device_class="rdma.example.com"))
        wait_for(lambda: not _tolerated(state, gpu_pod))  # changes to a NIC: not one
        api_server.modify(make("one-gpu", device_class="mig.nvidia.com"))
        wait_for(lambda: _tolerated(state, gpu_pod))
        api_server.delete(make("one-gpu"))
        wait_for(lambda: not _tolerated(state, gpu_pod))  # disappears
        assert not _tolerated(state, pod(ref, "other"))  # never across namespaces
    finally:
        cluster.stop()


# (object as the API server holds it, kept in the cache)
ENTRIES = [
    ("template", template("t"), True),
    ("claim", claim("c"), True),
    # kept: a pod naming one by resourceClaimName is judged on it (forged or not)
    ("generated for a pod", claim("p-gpu-x7k2q", **OWNED_BY_POD), True),
    ("extended-resource claim", claim("p-extended-resources-abcde", annotations={
        "resource.kubernetes.io/extended-resource-name": "nvidia.com/gpu"},
        ownerReferences=OWNED_BY_POD["ownerReferences"]), True),
    ("annotation, no pod owner", claim("a", annotations=OWNED_BY_POD["annotations"]), True),
    ("pod owner, no annotation", claim("b", ownerReferences=OWNED_BY_POD["ownerReferences"]),
     True),
    ("owner not controller", claim("d", annotations=OWNED_BY_POD["annotations"],
                                   ownerReferences=[{"kind": "Pod", "name": "p", "uid": "u"}]),
     True),
    ("template with the annotation", template("e", **OWNED_BY_POD), True),
    ("spec not an object", {**claim("f"), "spec": "gpu please"}, True),
    ("requests not a list", {**claim("g"), "spec": {"devices": {"requests": 7}}}, True),
    ("request without a class", {**claim("h"), "spec": {"devices": {"requests": [
        {"name": "gpu", "exactly": {"count": "two"}}]}}}, True),
    ("annotations not a map", claim("i", annotations=["x"], ownerReferences="pod"), True),
    ("template spec missing", {**template("j"), "spec": None}, True),
]


def test_what_the_claim_caches_keep(api_server: FakeAPIServer, client: Any) -> None:
    """Hostile claims are kept (parsed, their problems recorded) and never stop the cache;
    so are claims that say they were made for one pod. Status updates change nothing."""
    api_server.add_all([namespace(NS), node("gpu-1")])
    api_server.add_all(obj for _, obj, _ in ENTRIES)
    state, cluster = _started(client)
    try:
        wait_for(lambda: state.ready)
        kept = {(o["kind"], NS, o["metadata"]["name"]) for _, o, keep in ENTRIES if keep}
        assert set(state.context.claims) == kept
        assert state.context.claims[("ResourceClaim", NS, "f")].problems
        assert (_objects_metric(cluster, "resourceclaims"),
                _objects_metric(cluster, "resourceclaimtemplates")) == (
            sum(k[0] == "ResourceClaim" for k in kept),
            sum(k[0] == "ResourceClaimTemplate" for k in kept))
        # an allocation written into the status: the same parsed claim, nothing republished
        context = state.context
        allocated = {**claim("c"), "status": {"allocation": {"devices": {"results": [
            {"request": "gpu", "driver": "gpu.nvidia.com", "pool": "n", "device": "gpu-0"}]}}}}
        api_server.modify(allocated)
        wait_for(lambda: cluster.claims[0].resource_version == str(api_server.rv))
        time.sleep(0.2)  # several debounce periods
        assert state.context is context
        api_server.add(claim("p-gpu-zz9", **OWNED_BY_POD))  # another pod's claim: kept
        wait_for(lambda: ("ResourceClaim", NS, "p-gpu-zz9") in state.context.claims)
        api_server.add(claim("new"))  # and the cache is still live after all that
        wait_for(lambda: ("ResourceClaim", NS, "new") in state.context.claims)
    finally:
        cluster.stop()


@pytest.mark.parametrize(
    ("obj", "kind", "key"),
    [
        ({"metadata": {"name": "t", "namespace": "a"}, "spec": {}}, "ResourceClaimTemplate",
         ("ResourceClaimTemplate", "a", "t")),  # a list item: no kind of its own
        ({"kind": "ResourceClaim", "metadata": {"name": "c"}}, None,
         ("ResourceClaim", "default", "c")),  # a file's claim without a namespace
        ({"kind": "ResourceClaim", "metadata": "c"}, None, None),
        ({"kind": "ResourceClaim", "metadata": {"name": 3}}, None, None),
        ({"kind": "ResourceClaim", "metadata": {"name": "c", "namespace": ["x"]}}, None, None),
        ({"kind": "Pod", "metadata": {"name": "c"}}, None, None),
        ({"kind": "ResourceClaim", "metadata": {"name": "c", **OWNED_BY_POD}}, None,
         ("ResourceClaim", "default", "c")),  # its annotation and owner prove nothing
    ],
    ids=["list item", "no namespace", "metadata a string", "name a number",
         "namespace a list", "not a claim", "generated"],
)
def test_claim_entry(obj: dict[str, Any], kind: str | None,
                     key: tuple[str, str, str] | None) -> None:
    entry = sources.claim_entry(obj, kind)
    assert (entry[0] if entry else None) == key
    if entry and key:
        assert (entry[1].kind, entry[1].name) == (key[0], key[2])


@pytest.mark.parametrize(("device_class", "tolerated"), [("gpu.nvidia.com", True),
                                                         ("rdma.example.com", False)])
def test_live_audit_resolves_a_pods_template(api_server: FakeAPIServer, kubeconfig: str,
                                             device_class: str, tolerated: bool) -> None:
    api_server.add_all([namespace(NS), node("gpu-1"), template("one-gpu", device_class),
                        claim("p-gpu-x7k2q", **OWNED_BY_POD),
                        pod("resourceClaimTemplateName", "one-gpu")])
    report = audit_json("--kubeconfig", kubeconfig)
    found = any(f["rule"] == "mutation" and f.get("path") == "/spec/tolerations"
                for f in report["findings"])
    assert found is tolerated
