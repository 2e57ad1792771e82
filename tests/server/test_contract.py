"""Every answer of a real `gpupolicy serve` against webhook-contract.md §7, and every decision
against the engine run in-process on the same object with the same inputs."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.context import Context
from policies.engine import review
from policies.workloads import WORKLOAD_KINDS
from tests.conftest import CORPUS
from tests.server import contract
from tests.server.harness import Server, envelope, make_request
from webhook.http.admission import audit_annotations, shape_warnings

REVIEWS = CORPUS / "admissionreview"
# Namespaces of tests/server/namespaces.yaml and policies/: Enforce, Warn, Audit, ungoverned,
# excluded by default (kube-system and the server's own).
NAMESPACES = ["team-a", "lab-1", "sandbox", "default", "kube-system", "gpupolicy"]


def _corpus_reviews() -> list[Path]:
    if not REVIEWS.is_dir():
        return []
    return sorted(p for p in REVIEWS.rglob("*") if p.suffix in (".json", ".yaml") and p.is_file()
                  and p.name != "SOURCES.md")


def _corpus_workloads() -> list[tuple[str, dict[str, Any]]]:
    """GPU workloads among the corpus manifests (not the reviews)."""
    found: list[tuple[str, dict[str, Any]]] = []
    if not CORPUS.is_dir():
        return found
    for path in sorted(CORPUS.rglob("*")):
        if REVIEWS in path.parents or path.suffix not in (".yaml", ".yml", ".json"):
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if "nvidia.com/gpu" not in text and "amd.com/gpu" not in text:
            continue
        try:
            docs = list(yaml.safe_load_all(text))
        except yaml.YAMLError:
            continue  # Helm templates and the like: not objects
        for index, doc in enumerate(docs):
            if isinstance(doc, dict) and doc.get("kind") in WORKLOAD_KINDS:
                found.append((f"{path.relative_to(CORPUS)}#{index}", doc))
    return found


def _load(path: Path) -> dict[str, Any]:
    text = path.read_text(encoding="utf-8")
    data = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    assert isinstance(data, dict)
    return data if "request" in data else envelope(data)


# Reviews the server must refuse with 400, and why (the rest must be answered 200).
CORPUS_REFUSED = {
    "gatekeeper-library": "admission.k8s.io/v1beta1",  # gator inputs: v1beta1, no uid
    "admission.k8s.io.v1beta1.AdmissionReview": "admission.k8s.io/v1beta1",
    "admission.k8s.io.v1.AdmissionReview": "operationValue",  # fuzzed round-trip fixture
}


def expect_engine(server: Server, context: Context, req: dict[str, Any]) -> dict[str, Any]:
    """Post to both webhooks; check the contract and that each answer is the engine's."""
    obj = req.get("object")
    decision = review(copy.deepcopy(obj), context, namespace=req.get("namespace"),
                      operation=req["operation"], subresource=req.get("subResource", ""))
    answers = {}
    for webhook in ("mutate", "validate"):
        reply = server.post(f"/{webhook}?timeout=10s", envelope(req))
        assert contract.problems(req, reply, webhook) == [], webhook
        answers[webhook] = response = reply.json["response"]
        if webhook == "mutate":
            assert response["allowed"] is True
            want = list(decision.patch) if obj is not None else []
            got = contract.decode_patch(response["patch"]) if "patch" in response else []
            assert got == want
        else:
            assert response["allowed"] == decision.allowed
            assert response.get("warnings", []) == shape_warnings(decision.warnings)
            assert response.get("auditAnnotations", {}) == audit_annotations(decision.audited)
            if not decision.allowed:
                assert response["status"]["code"] == 403
                for v in decision.denials:  # every violation named: rule, field path, reason
                    assert v.rule in response["status"]["message"]
                    assert v.message.split("\n")[0][:40] in response["status"]["message"]
    return answers


def mutate_then_validate(server: Server, context: Context, req: dict[str, Any]) -> None:
    """The apiserver's order: the mutated object goes to /validate; a second /mutate of it
    changes nothing (idempotency, contract §4)."""
    answers = expect_engine(server, context, req)
    if req.get("object") is None:
        return
    mutated = contract.apply(req, answers["mutate"])
    again = {**req, "object": mutated, "uid": req["uid"] + "-2"}
    second = expect_engine(server, context, again)
    assert "patch" not in second["mutate"], "mutation is not idempotent"


@pytest.mark.corpus
@pytest.mark.parametrize("path", [
    pytest.param(p, id=str(p.relative_to(REVIEWS))) for p in _corpus_reviews()
] or [pytest.param(None, id="no-corpus")])  # corpus_dir then skips, saying why
def test_corpus_review(corpus_dir: Path, server: Server, context: Context, path: Path) -> None:
    review_doc = _load(path)
    refused = next((why for key, why in CORPUS_REFUSED.items() if key in str(path)), None)
    for webhook in ("mutate", "validate"):
        reply = server.post(f"/{webhook}", review_doc)
        if refused:
            assert reply.status == 400, reply.body
            assert refused in reply.json["error"]
            assert "\n" not in reply.json["error"]
    if not refused:
        mutate_then_validate(server, context, review_doc["request"])


@pytest.mark.corpus
@pytest.mark.parametrize(("name", "obj"), [
    pytest.param(n, o, id=n) for n, o in _corpus_workloads()
] or [pytest.param("", {}, id="no-corpus")])  # corpus_dir then skips, saying why
def test_corpus_workload(corpus_dir: Path, server: Server, context: Context, name: str,
                         obj: dict[str, Any]) -> None:
    for ns in NAMESPACES:
        mutate_then_validate(server, context, make_request(obj, namespace=ns, uid=f"{name}@{ns}"))


def _pod(gpus: str | None = "1", *, requests: str | None = None, env: dict[str, str] | None = None,
         containers: int = 1) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if gpus is not None:
        resources["limits"] = {"nvidia.com/gpu": gpus}
    if requests is not None:
        resources["requests"] = {"nvidia.com/gpu": requests}
    container: dict[str, Any] = {"name": "main", "image": "cuda:12", "resources": resources}
    if env:
        container["env"] = [{"name": k, "value": v} for k, v in env.items()]
    spec = {"containers": [{**copy.deepcopy(container), "name": f"c{i}"}
                           for i in range(containers)]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "x"},
            "spec": spec}


def _ephemeral(env: dict[str, str]) -> dict[str, Any]:
    pod = _pod(None)
    pod["spec"]["ephemeralContainers"] = [{
        "name": "debug", "image": "busybox", "targetContainerName": "c0",
        "env": [{"name": k, "value": v} for k, v in env.items()],
    }]
    return pod


GENERATED: list[tuple[str, dict[str, Any]]] = [
    ("gpu-pod", {"object": _pod("1")}),
    ("three-gpus", {"object": _pod("3")}),
    ("two-containers-two-gpus", {"object": _pod("2", containers=2)}),
    ("requests-only", {"object": _pod(None, requests="1")}),
    ("fractional", {"object": _pod("500m")}),
    ("non-gpu", {"object": _pod(None)}),
    ("visible-devices", {"object": _pod(None, env={"NVIDIA_VISIBLE_DEVICES": "all"})}),
    ("update", {"object": _pod("3"), "operation": "UPDATE", "old": _pod("3")}),
    ("delete", {"object": None, "operation": "DELETE", "old": _pod("3")}),
    ("connect-exec", {"object": {"kind": "PodExecOptions", "apiVersion": "v1",
                                 "command": ["sh"]}, "operation": "CONNECT",
                      "subresource": "exec", "kind": "PodExecOptions"}),
    ("ephemeral-bypass", {"object": _ephemeral({"NVIDIA_VISIBLE_DEVICES": "all"}),
                          "operation": "UPDATE", "subresource": "ephemeralcontainers",
                          "old": _pod(None)}),
    ("ephemeral-plain", {"object": _ephemeral({"A": "b"}), "operation": "UPDATE",
                         "subresource": "ephemeralcontainers", "old": _pod(None)}),
    ("status-update", {"object": _pod("3"), "operation": "UPDATE", "subresource": "status",
                       "old": _pod("3")}),
    ("dry-run", {"object": _pod("3"), "dry_run": True}),
]


@pytest.mark.parametrize(("name", "spec"), GENERATED, ids=[n for n, _ in GENERATED])
@pytest.mark.parametrize("namespace", NAMESPACES)
def test_generated(server: Server, context: Context, name: str, spec: dict[str, Any],
                   namespace: str) -> None:
    spec = copy.deepcopy(spec)
    obj = spec.pop("object")
    old = spec.pop("old", None)
    req = make_request(obj, namespace=namespace, uid=f"{name}@{namespace}", old=old, **spec)
    mutate_then_validate(server, context, req)


@pytest.mark.parametrize("webhook", ["mutate", "validate"])
@pytest.mark.parametrize("namespace", NAMESPACES)
@pytest.mark.parametrize(
    ("name", "operation", "obj", "subresource"),
    [
        ("delete", "DELETE", None, ""),
        ("connect", "CONNECT", {"kind": "PodExecOptions", "apiVersion": "v1"}, "exec"),
        ("connect-null", "CONNECT", None, "attach"),
    ],
)
def test_no_object_operations_are_allowed_without_patch(
    server: Server, webhook: str, namespace: str, name: str, operation: str, obj: Any,
    subresource: str,
) -> None:
    req = make_request(obj, namespace=namespace, operation=operation, subresource=subresource,
                       old=_pod("3"), kind="Pod")
    reply = server.post(f"/{webhook}", envelope(req))
    assert contract.problems(req, reply, webhook) == []
    response = reply.json["response"]
    assert response["allowed"] is True
    assert "patch" not in response


@pytest.mark.parametrize("webhook", ["mutate", "validate"])
@pytest.mark.parametrize("name", [n for n, _ in GENERATED])
def test_dry_run_answers_like_a_real_request(server: Server, webhook: str, name: str) -> None:
    spec = copy.deepcopy(dict(GENERATED)[name])
    obj, old = spec.pop("object"), spec.pop("old", None)
    spec.pop("dry_run", None)
    answers = []
    for dry in (False, True):
        req = make_request(obj, namespace="team-a", uid="same", old=old, dry_run=dry, **spec)
        answers.append(server.post(f"/{webhook}", envelope(req)).json)
    assert answers[0] == answers[1]


def _resources(kind: str, **resources: dict[str, str]) -> dict[str, Any]:
    container = {"name": "c", "image": "i", "resources": resources}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "spec": {"containers": [container]}}
    return {"apiVersion": "apps/v1", "kind": kind,
            "spec": {"template": {"spec": {"containers": [container]}}}}


GPU = "nvidia.com/gpu"


@pytest.mark.parametrize(("obj", "problems"), [
    (_resources("Pod", limits={GPU: "1"}), []),  # requests defaulted from limits
    (_resources("Pod", requests={GPU: "1"}), ["limits[nvidia.com/gpu] required"]),
    (_resources("Pod", limits={GPU: "2"}, requests={GPU: "1"}), ["must equal the limit"]),
    (_resources("Pod", limits={GPU: "500m"}),  # the defaulted request fails as well
     ["limits[nvidia.com/gpu] must be an integer", "requests[nvidia.com/gpu] must be an integer"]),
    (_resources("Pod", limits={GPU: "-1"}),
     ["limits[nvidia.com/gpu] must be an integer >= 0",
      "requests[nvidia.com/gpu] must be an integer >= 0"]),
    (_resources("Pod", limits={"cpu": "500m", "memory": "1Gi"}), []),  # native: not checked
    (_resources("Deployment", limits={GPU: "1"}), []),
    (_resources("Deployment", requests={GPU: "1"}), ["limits[nvidia.com/gpu] required"]),
], ids=["limits-only", "requests-only", "unequal", "fractional", "negative", "native",
        "template-limits", "template-requests"])
def test_builtin_checker(obj: dict[str, Any], problems: list[str]) -> None:
    """The §6 checker the patch is held to, checked itself."""
    found = contract.builtin_problems(obj)
    assert len(found) == len(problems) and all(
        any(p in f for f in found) for p in problems), found
