"""The webhooks' CEL matchConditions, evaluated with cel-python over cases and the corpus.

They decide which objects can ever be refused while the webhook is down, so two things must
hold: every object the engine would treat as GPU-related reaches the webhook (no GPU pod slips
past), and no object makes the expression fail (an error under failurePolicy Fail is a 403).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import celpy
import pytest
import yaml
from celpy.adapter import json_to_cel
from celpy.evaluation import CELEvalError

from policies.context import Context
from policies.engine import review
from policies.loading import parse_policies
from policies.resources import (  # _FIXED: the engine's table of known names
    _FIXED,
    classify,
    iter_containers,
)
from policies.workloads import WORKLOAD_KINDS, carriers
from tests.chart.helm import render, webhooks
from tests.chart.test_webhooks import KIND_RESOURCES
from webhook.inputs.sources import load_catalog, load_policies

_ENV = celpy.Environment()
_PROGRAMS: dict[str, Any] = {}


def _hook_for(obj: dict[str, Any], values: str = "default") -> dict[str, Any]:
    kind = obj["kind"]
    found = WORKLOAD_KINDS.find(obj)
    assert found is not None, kind
    group, resource = ("", "pods") if kind == "Pod" else KIND_RESOURCES[found.key]
    hooks = webhooks(render(values), "ValidatingWebhookConfiguration")
    return next(h for h in hooks.values() for r in h["rules"]
                if group in r["apiGroups"] and resource in r["resources"])


def evaluate(expression: str, obj: dict[str, Any], *, operation: str = "CREATE",
             old: dict[str, Any] | None = None, user: str | None = "alice") -> bool:
    """`user` is request.userInfo.username (None: a request without userInfo)."""
    if expression not in _PROGRAMS:
        _PROGRAMS[expression] = _ENV.program(_ENV.compile(expression))
    request: dict[str, Any] = {"operation": operation}
    if user is not None:
        request["userInfo"] = {"username": user, "groups": ["system:authenticated"]}
    result = _PROGRAMS[expression].evaluate({
        "object": json_to_cel(obj), "oldObject": json_to_cel(old),
        "request": json_to_cel(request),
    })
    if isinstance(result, CELEvalError):
        raise AssertionError(f"CEL error on {obj['kind']}: {result}")
    return bool(result)


def matches(obj: dict[str, Any]) -> bool:
    """The validating webhook's matchCondition on `obj`, as the API server would evaluate it."""
    return evaluate(_hook_for(obj)["matchConditions"][0]["expression"], obj)


def gpu_related(obj: dict[str, Any]) -> bool:
    """The engine's view: a known accelerator resource, or NVIDIA_VISIBLE_DEVICES, anywhere."""
    for carrier in carriers(obj, WORKLOAD_KINDS):
        fields = {s.location: s for s in carrier.kind.containers}
        for path, role, container in iter_containers(carrier.spec, (), carrier.kind.containers):
            if role == "ephemeral":
                continue
            slot = fields.get(tuple(str(p) for p in path))
            if slot is not None and slot.gpu_field:
                gpu = container.get(slot.gpu_field)
                if isinstance(gpu, dict) and classify(str(gpu.get("name"))) is not None:
                    return True
            resources = container.get(slot.resources_field if slot else "resources") or {}
            names = [*(resources.get("requests") or {}), *(resources.get("limits") or {})]
            if any(classify(n) is not None for n in names):
                return True
            if any(isinstance(e, dict) and e.get("name") == "NVIDIA_VISIBLE_DEVICES"
                   for e in container.get("env") or []):
                return True
    return False


def _container(
    resources: dict[str, Any] | None = None, env: list[Any] | None = None
) -> dict[str, Any]:
    c: dict[str, Any] = {"name": "c", "image": "busybox"}
    if resources is not None:
        c["resources"] = resources
    if env is not None:
        c["env"] = env
    return c


def _pod_spec(*containers: dict[str, Any], init: tuple[dict[str, Any], ...] = ()) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": list(containers)}
    if init:
        spec["initContainers"] = list(init)
    return spec


GPU = _container({"limits": {"nvidia.com/gpu": 1}})
CPU = _container({"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}})
TEMPLATE = {"template": {"spec": _pod_spec(GPU)}}

CASES = [
    ("gpu limit", {"apiVersion": "v1", "kind": "Pod", "spec": _pod_spec(GPU)}, True),
    ("mig request only", {"apiVersion": "v1", "kind": "Pod", "spec": _pod_spec(
        _container({"requests": {"nvidia.com/mig-1g.10gb": 1}}))}, True),
    ("gpu in init container", {"apiVersion": "v1", "kind": "Pod",
                               "spec": _pod_spec(CPU, init=(_container(
                                   {"limits": {"amd.com/gpu": 1}}),))}, True),
    ("gpushare memory", {"apiVersion": "v1", "kind": "Pod", "spec": _pod_spec(
        _container({"limits": {"aliyun.com/gpu-mem": 4}}))}, True),
    ("visible devices, no gpu", {"apiVersion": "v1", "kind": "Pod", "spec": _pod_spec(
        _container(env=[{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]))}, True),
    ("cpu only", {"apiVersion": "v1", "kind": "Pod", "spec": _pod_spec(CPU)}, False),
    ("bare container", {"apiVersion": "v1", "kind": "Pod", "spec": _pod_spec(_container())},
     False),
    ("other env", {"apiVersion": "v1", "kind": "Pod", "spec": _pod_spec(
        _container(env=[{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}]))}, False),
    ("empty resources", {"apiVersion": "v1", "kind": "Pod", "spec": _pod_spec(
        _container({}))}, False),
    ("no spec", {"apiVersion": "v1", "kind": "Pod"}, False),
    ("deployment", {"apiVersion": "apps/v1", "kind": "Deployment", "spec": TEMPLATE}, True),
    ("deployment cpu", {"apiVersion": "apps/v1", "kind": "Deployment",
                        "spec": {"template": {"spec": _pod_spec(CPU)}}}, False),
    ("cronjob", {"apiVersion": "batch/v1", "kind": "CronJob",
                 "spec": {"jobTemplate": {"spec": TEMPLATE}}}, True),
    ("job without template", {"apiVersion": "batch/v1", "kind": "Job", "spec": {}}, False),
    ("podtemplate", {"apiVersion": "v1", "kind": "PodTemplate", **TEMPLATE}, True),
    ("pytorchjob worker", {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "spec": {
        "pytorchReplicaSpecs": {"Master": {"template": {"spec": _pod_spec(CPU)}},
                                "Worker": {"replicas": 2, **TEMPLATE}}}}, True),
    ("pytorchjob cpu", {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "spec": {
        "pytorchReplicaSpecs": {"Master": {"template": {"spec": _pod_spec(CPU)}},
                                "Worker": {"replicas": 1}}}}, False),
    ("raycluster worker", {"apiVersion": "ray.io/v1", "kind": "RayCluster", "spec": {
        "headGroupSpec": {"template": {"spec": _pod_spec(CPU)}},
        "workerGroupSpecs": [{"groupName": "cpu"}, {"groupName": "gpu", **TEMPLATE}]}}, True),
    ("rayjob nested", {"apiVersion": "ray.io/v1", "kind": "RayJob", "spec": {
        "rayClusterSpec": {"workerGroupSpecs": [TEMPLATE]}}}, True),
    ("rayjob empty", {"apiVersion": "ray.io/v1", "kind": "RayJob", "spec": {
        "entrypoint": "python x.py"}}, False),
    ("jobset", {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "spec": {
        "replicatedJobs": [{"name": "w", "template": {"spec": TEMPLATE}}]}}, True),
    ("leaderworkerset", {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                         "spec": {"leaderWorkerTemplate": {"workerTemplate": {
                             "spec": _pod_spec(GPU)}}}}, True),
    ("volcano job", {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "spec": {
        "tasks": [{"name": "t", **TEMPLATE}]}}, True),
    ("kserve predictor", {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                          "spec": {"predictor": {"containers": [GPU]}}}, True),
    ("kserve model", {"apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
                      "spec": {"predictor": {"model": {"modelFormat": {"name": "sklearn"}}}}},
     False),
]


@pytest.mark.parametrize(("obj", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_match_condition(obj: dict[str, Any], expected: bool) -> None:
    assert matches(obj) is expected
    assert gpu_related(obj) is expected  # the oracle agrees on the table


def _gpu_cases() -> list[Any]:
    from policies.engine import review
    from tests.engine.casetable import context_for, load_cases

    return [c for c in load_cases() if not c.skipped and WORKLOAD_KINDS.find(c.object)
            and review(c.object, context_for(c), namespace=c.namespace).gpu]


@pytest.mark.parametrize("case", _gpu_cases(), ids=lambda c: c.id)
def test_every_gpu_object_of_the_engine_case_table_is_sent(case: Any) -> None:
    """Carriers whose GPU is not in a pod spec's containers (KServe `model`, TrainJob
    `resourcesPerNode`, Argo `container`, Spark `gpu`, NIMService `spec.resources`) and KAI
    share annotations reach the webhook too."""
    assert matches(case.object), case.id


def test_every_known_accelerator_resource_is_matched() -> None:
    names = [*_FIXED, "nvidia.com/mig-3g.40gb", "amd.com/cpx_nps4",
             "deviceclass.resource.kubernetes.io/gpu.nvidia.com"]
    missed = [n for n in names if not matches({"apiVersion": "v1", "kind": "Pod", "spec":
                                              _pod_spec(_container({"limits": {n: 1}}))})]
    assert missed == []


def _corpus_objects(corpus: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(corpus.rglob("*.y*ml")):
        if "admissionreview" in path.parts:
            continue
        try:
            docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
        except (yaml.YAMLError, UnicodeDecodeError):
            continue
        for doc in docs:
            items = doc.get("items") if isinstance(doc, dict) and doc.get("kind") == "List" else [doc]
            for item in items or []:
                if (isinstance(item, dict) and isinstance(item.get("apiVersion"), str)
                        and WORKLOAD_KINDS.find(item) is not None):
                    yield str(path.relative_to(corpus)), item


@pytest.mark.corpus
def test_no_gpu_object_of_the_corpus_slips_past(corpus_dir: Path) -> None:
    checked = gpu = sent = 0
    slipped = []
    for where, obj in _corpus_objects(corpus_dir):
        checked += 1
        expected = gpu_related(obj)
        matched = matches(obj)  # raises on a CEL error
        gpu += expected
        sent += matched
        if expected and not matched:
            slipped.append(f"{where}: {obj['kind']}/{obj.get('metadata', {}).get('name')}")
    assert slipped == []
    print(f"corpus: {checked} workload objects, {gpu} GPU-related, {sent} sent to the webhook")
    assert checked > 200 and gpu > 50, (checked, gpu)


def _replicaset(owner: dict[str, Any] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "web-5d8f"}
    if owner is not None:
        meta["ownerReferences"] = [owner]
    return {"apiVersion": "apps/v1", "kind": "ReplicaSet", "metadata": meta, "spec": TEMPLATE}


@pytest.mark.parametrize(
    ("obj", "sent"),
    [
        (_replicaset(None), True),
        (_replicaset({"apiVersion": "apps/v1", "kind": "Deployment", "name": "web",
                      "uid": "u", "controller": True}), False),
        (_replicaset({"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u"}), True),
        (_replicaset({"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "u",
                      "controller": False}), True),
        ({"apiVersion": "apps/v1", "kind": "Deployment", "spec": TEMPLATE}, True),
    ],
    ids=["standalone", "owned by a deployment", "owner not controller", "controller false",
         "no metadata"],
)
def test_template_mutation_skips_controller_owned_objects(obj: dict[str, Any], sent: bool) -> None:
    hooks = webhooks(render("templates-mutation"), "MutatingWebhookConfiguration")
    hook = hooks["apps.workloads.mutate.gpupolicy.io"]
    assert [c["name"] for c in hook["matchConditions"]] == ["gpu-related", "not-controlled"]
    assert all(evaluate(c["expression"], obj) for c in hook["matchConditions"]) is sent


_GPU_POD = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": _pod_spec(GPU)}
_RELABELLED = {**_GPU_POD, "metadata": {"name": "p", "labels": {"a": "b"}, "finalizers": []}}
_NEW_IMAGE = {**_GPU_POD, "spec": _pod_spec({**GPU, "image": "cuda:2"})}


@pytest.mark.parametrize(
    ("operation", "obj", "old", "sent"),
    [
        ("CREATE", _GPU_POD, None, True),
        ("UPDATE", _RELABELLED, _GPU_POD, False),  # finalizer/label changes never wait on it
        ("UPDATE", _NEW_IMAGE, _GPU_POD, True),
        ("UPDATE", {"apiVersion": "v1", "kind": "Pod", "metadata": {}}, _GPU_POD, False),
    ],
    ids=["create", "metadata only", "spec changed", "no spec"],
)
def test_validation_skips_updates_that_leave_the_spec_alone(
    operation: str, obj: dict[str, Any], old: dict[str, Any] | None, sent: bool,
) -> None:
    hook = _hook_for(_GPU_POD)
    assert [c["name"] for c in hook["matchConditions"]] == ["gpu-related",
                                                             "spec-or-scheduling-changed"]
    results = [evaluate(c["expression"], obj, operation=operation, old=old)
               for c in hook["matchConditions"]]
    assert all(results) is sent


# `kubectl debug`: an UPDATE of pods/ephemeralcontainers sends the whole Pod. The engine checks
# only its ephemeral containers (visible-devices-bypass), so the webhook must see every request
# whose ephemeral containers set NVIDIA_VISIBLE_DEVICES, and may skip the rest.
_ENGINE = Context(policies=load_policies(), catalog=load_catalog())


def _debugged(base: dict[str, Any], *debug: dict[str, Any]) -> dict[str, Any]:
    spec = {**base["spec"], "ephemeralContainers": [
        {"name": f"debugger-{i}", "image": "busybox", "stdin": True, "tty": True, **d}
        for i, d in enumerate(debug)]}
    return {**base, "metadata": {"name": "p", "namespace": "ml"}, "spec": spec}


_CPU_POD = {"apiVersion": "v1", "kind": "Pod", "spec": _pod_spec(CPU)}
_ALL = {"env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}

EPHEMERAL = [
    ("cpu pod, debug sees all gpus", _debugged(_CPU_POD, _ALL), True, False),
    ("gpu pod, debug sees all gpus", _debugged(_GPU_POD, _ALL), True, False),
    ("debug lists gpu indexes", _debugged(_CPU_POD, {"env": [
        {"name": "TERM", "value": "xterm"},
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "0,1"}]}), True, False),
    ("second debug container", _debugged(_CPU_POD, {}, _ALL), True, False),
    ("debug sets none", _debugged(_CPU_POD, {"env": [
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "none"}]}), True, True),
    ("plain debug container", _debugged(_GPU_POD, {}), False, True),
    ("other env", _debugged(_CPU_POD, {"env": [{"name": "CUDA_VISIBLE_DEVICES",
                                                "value": "0"}]}), False, True),
    ("no ephemeral containers", {**_GPU_POD, "metadata": {"name": "p", "namespace": "ml"}},
     False, True),
]


@pytest.mark.parametrize(("pod", "sent", "allowed"), [c[1:] for c in EPHEMERAL],
                         ids=[c[0] for c in EPHEMERAL])
def test_debug_containers_reach_the_webhook(pod: dict[str, Any], sent: bool,
                                            allowed: bool) -> None:
    hook = webhooks(render(), "ValidatingWebhookConfiguration")[
        "pods-ephemeral.validate.gpupolicy.io"]
    assert hook["rules"] == [{"apiGroups": [""], "apiVersions": ["v1"],
                              "resources": ["pods/ephemeralcontainers"],
                              "operations": ["UPDATE"], "scope": "Namespaced"}]
    results = [evaluate(c["expression"], pod, operation="UPDATE", old=_CPU_POD)
               for c in hook["matchConditions"]]
    assert all(results) is sent
    decision = review(pod, _ENGINE, operation="UPDATE", subresource="ephemeralcontainers")
    assert decision.allowed is allowed
    assert sent or decision.allowed, "the engine would refuse what the webhook never sees"


# Issue 27: an UPDATE that only adds what a GPU scheduler reads (a KAI share, gpushare's card
# count, HAMi's GPU choice) to a pending pod must reach /validate, and be judged there.
_TWO = Context(policies=parse_policies(
    "apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: two}\n"
    "spec: {rules: {maxGPUsPerPod: 2}}\n", "two"), catalog=load_catalog())


def _pending(annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
             spec: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "p", "namespace": "ml"}
    if annotations is not None:
        meta["annotations"] = annotations
    if labels is not None:
        meta["labels"] = labels
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": spec or {"schedulerName": "kai-scheduler", **_pod_spec(CPU)}}


_SIXTEEN = {"gpu-fraction": "1", "gpu-fraction-num-devices": "16"}
_GPUSHARE = {"schedulerName": "default-scheduler",
             **_pod_spec(_container({"limits": {"aliyun.com/gpu-mem": 8}}))}
ANNOTATION_UPDATES = [
    # (old pod, new pod, sent to /validate, allowed by the engine under maxGPUsPerPod: 2)
    ("KAI share of 16 GPUs added", _pending(), _pending(_SIXTEEN), True, False),
    ("KAI device count raised", _pending({"gpu-fraction": "1"}), _pending(_SIXTEEN), True,
     False),
    ("KAI share of 16 added beside other annotations", _pending({"team": "a"}),
     _pending({"team": "a", **_SIXTEEN}), True, False),
    ("small KAI share added", _pending(), _pending({"gpu-fraction": "0.5"}), True, True),
    ("KAI memory added", _pending(), _pending({"gpu-memory": "4000"}), True, True),
    ("gpushare spread over 4 cards", _pending(spec=_GPUSHARE),
     _pending(labels={"aliyun.com/gpu-count": "4"}, spec=_GPUSHARE), True, False),
    ("HAMi GPU type chosen", _pending(spec=_pod_spec(GPU)),
     _pending({"nvidia.com/use-gputype": "H100"}, spec=_pod_spec(GPU)), True, True),
    ("other annotation on a KAI pod", _pending(_SIXTEEN), _pending({**_SIXTEEN, "x": "y"}),
     False, False),  # unchanged share: judged when it was written
    ("other label on a GPU pod", _pending(spec=_pod_spec(GPU)),
     _pending(labels={"app": "x"}, spec=_pod_spec(GPU)), False, True),
    ("KAI share removed", _pending(_SIXTEEN), _pending(), False, True),
]


@pytest.mark.parametrize(("old", "new", "sent", "allowed"), [r[1:] for r in ANNOTATION_UPDATES],
                         ids=[r[0] for r in ANNOTATION_UPDATES])
def test_updates_that_change_what_the_scheduler_reads_are_sent_and_judged(
        old: dict[str, Any], new: dict[str, Any], sent: bool, allowed: bool) -> None:
    hook = _hook_for(_GPU_POD)
    results = [evaluate(c["expression"], new, operation="UPDATE", old=old)
               for c in hook["matchConditions"]]
    assert all(results) is sent
    decision = review(new, _TWO, namespace="ml", operation="UPDATE")
    assert decision.allowed is allowed, decision.violations
    if not sent:  # what goes unjudged is what was judged before: the old pod's verdict
        before = review(old, _TWO, namespace="ml", operation="UPDATE")
        assert before.allowed is allowed or allowed, "an unsent update would escape a refusal"


def test_the_chart_sends_every_scheduling_key_the_engine_reads() -> None:
    from policies.resources import ACK_CARDS, KAI_DEVICES, KAI_FRACTION, KAI_MEMORY
    values = yaml.safe_load((Path(__file__).parents[2] / "charts" / "gpupolicy" /
                             "values.yaml").read_text())["webhooks"]["schedulingMetadata"]
    assert {KAI_FRACTION, KAI_MEMORY, KAI_DEVICES} <= set(values["annotations"])
    assert ACK_CARDS in values["labels"]


# Issue 27: a user's ResourceClaim dressed as the resource claim controller's (its annotation
# and a Pod controller reference) is sent to /validate; only the controller's own requests are
# not. (More senders and values: test_claim_webhooks.py.)
_FORGED = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
           "metadata": {"name": "p-gpu-x7k2q", "namespace": "ml",
                        "annotations": {"resource.kubernetes.io/pod-claim-name": "gpu"},
                        "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "p",
                                             "uid": "u", "controller": True}]},
           "spec": {"devices": {"requests": [{"name": "gpus", "exactly": {
               "deviceClassName": "gpu.nvidia.com", "count": 4}}]}}}


@pytest.mark.parametrize(("user", "sent"), [
    ("system:serviceaccount:ml:trainer", True),
    ("system:serviceaccount:kube-system:resource-claim-controller", False),
])
def test_forged_generated_claim_is_sent(user: str, sent: bool) -> None:
    hook = webhooks(render(), "ValidatingWebhookConfiguration")["claims.validate.gpupolicy.io"]
    assert all(evaluate(c["expression"], _FORGED, user=user)
               for c in hook["matchConditions"]) is sent
