"""Property: whatever arrives, the webhook answers 200 with an AdmissionReview the apiserver
accepts (uid echoed, allowed a bool, a patch that is padded base64 of a JSON Patch that applies
to the object) or 400 with one line of JSON saying what is wrong. Never a 500, never a trace.

Envelopes are built from plausible AdmissionReviews (GPU pods and workloads in the namespaces
of tests/server/policies) and then broken: any field replaced by any JSON value, dropped, or
the whole body replaced by bytes. The bulk runs in-process; a handful go over real TLS."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from tests.server import contract
from tests.server.harness import Reply, Server, envelope, make_request
from webhook.http.server import create_app
from webhook.inputs import sources
from webhook.inputs.state import State

pytestmark = pytest.mark.fuzz

HERE = Path(__file__).resolve().parent
# Enforce, Warn, Audit (tests/server/policies) twice as often as ungoverned and excluded ones.
NAMESPACES = ["team-a", "team-a", "lab-1", "lab-1", "sandbox", "sandbox", "default",
              "kube-system", "gpupolicy", None]
OPERATIONS = ["CREATE"] * 5 + ["UPDATE", "DELETE", "CONNECT"]
FIELDS = ["uid", "kind", "resource", "requestKind", "requestResource", "subResource",
          "requestSubResource", "name", "namespace", "operation", "userInfo", "object",
          "oldObject", "dryRun", "options"]

scalars = (st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
           | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=12))
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12,
)
resource_names = st.sampled_from([
    "nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb", "nvidia.com/gpu.shared",
    "amd.com/gpu", "aliyun.com/gpu-mem", "cpu", "memory",
]) | st.text(max_size=16)
quantities = st.sampled_from(["1", "2", "3", "0", "8", "-1", "500m", "1.5", "1e3", "2Gi", "x", ""]) \
    | st.integers(-5, 10) | json_values


def _maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the plausible value, sometimes any JSON value in its place."""
    return st.one_of(strategy, strategy, strategy, json_values)


containers = st.fixed_dictionaries(
    {"name": _maybe(st.text(min_size=1, max_size=8)), "image": _maybe(st.just("img"))},
    optional={
        "resources": _maybe(st.fixed_dictionaries({}, optional={
            "limits": _maybe(st.dictionaries(resource_names, quantities, max_size=3)),
            "requests": _maybe(st.dictionaries(resource_names, quantities, max_size=3)),
        })),
        "env": _maybe(st.lists(st.fixed_dictionaries({
            "name": _maybe(st.sampled_from(["NVIDIA_VISIBLE_DEVICES", "CUDA_VISIBLE_DEVICES",
                                            "X"])),
            "value": _maybe(st.sampled_from(["all", "none", "0,1", "void", ""])),
        }), max_size=2)),
        "securityContext": _maybe(st.fixed_dictionaries({"privileged": _maybe(st.booleans())})),
    },
)
# Most pods ask for GPUs the plain way, so policies govern them and patch or refuse.
gpu_containers = st.fixed_dictionaries({
    "name": st.sampled_from(["train", "side"]), "image": st.just("img"),
    "resources": st.fixed_dictionaries({
        "limits": st.fixed_dictionaries({"nvidia.com/gpu": st.sampled_from(["1", "2", "3"])}),
    }, optional={
        "requests": st.fixed_dictionaries({"nvidia.com/gpu": st.sampled_from(["1", "2"])}),
    }) | st.fixed_dictionaries({
        "requests": st.fixed_dictionaries({"nvidia.com/gpu": st.sampled_from(["1", "2"])}),
    }),
}, optional={"env": st.just([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}])})
pod_specs = st.fixed_dictionaries(
    {"containers": _maybe(st.lists(st.one_of(gpu_containers, gpu_containers, _maybe(containers)),
                                   min_size=1, max_size=3))},
    optional={
        "initContainers": _maybe(st.lists(_maybe(containers), max_size=2)),
        "tolerations": _maybe(st.lists(st.fixed_dictionaries({
            "key": _maybe(st.just("nvidia.com/gpu")), "operator": _maybe(st.just("Exists")),
            "effect": _maybe(st.just("NoSchedule"))}), max_size=2)),
        "nodeSelector": _maybe(st.dictionaries(st.text(max_size=8), st.text(max_size=8),
                                               max_size=2)),
        "runtimeClassName": _maybe(st.just("nvidia")),
    },
)


@st.composite
def objects(draw: st.DrawFn) -> Any:
    meta = draw(_maybe(st.fixed_dictionaries({"name": _maybe(st.text(max_size=8))})))
    spec = draw(_maybe(pod_specs))
    kind = draw(st.sampled_from(["Pod", "Pod", "Deployment", "Job"]))
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
    api = "apps/v1" if kind == "Deployment" else "batch/v1"
    return {"apiVersion": api, "kind": kind, "metadata": meta,
            "spec": {"template": {"metadata": {}, "spec": spec}}}


@st.composite
def requests(draw: st.DrawFn) -> dict[str, Any]:
    operation = draw(st.sampled_from(OPERATIONS))
    obj = draw(objects()) if operation in ("CREATE", "UPDATE") else None
    old = draw(objects()) if operation in ("UPDATE", "DELETE") else None
    req = make_request(
        obj, namespace=draw(st.sampled_from(NAMESPACES)), operation=operation,
        uid=draw(st.sampled_from(["705ab4f5-6393-11e8-b7cc-42010a800002", "u"])
                 | st.text(min_size=1, max_size=36)), dry_run=draw(st.booleans()), old=old,
        subresource=draw(st.sampled_from([""] * 6 + ["status", "ephemeralcontainers"])),
        kind=None if obj is not None else "Pod",
    )
    # A third of the requests get one or two fields dropped or replaced. (A wide integer
    # spreads the choice of field: a small sampled_from is drawn mostly at its first item.)
    picks = draw(st.sampled_from([0, 0, 1, 2]))
    for _ in range(picks):
        field = FIELDS[draw(st.integers(0, 10**6)) % len(FIELDS)]
        if draw(st.booleans()):
            req.pop(field, None)
        else:
            req[field] = draw(json_values)
    return req


@st.composite
def bodies(draw: st.DrawFn) -> tuple[bytes, dict[str, Any] | None]:
    """(the body, the request it carries when it is an AdmissionReview)."""
    choice = draw(st.sampled_from(["review"] * 7 + ["bytes", "json", "envelope"]))
    if choice == "bytes":
        return draw(st.binary(max_size=64)), None
    if choice == "json":
        return json.dumps(draw(json_values)).encode(), None
    req = draw(requests())
    review: dict[str, Any] = envelope(req)
    if choice == "envelope":  # the envelope itself broken
        review[draw(st.sampled_from(["apiVersion", "kind", "request"]))] = draw(json_values)
    return json.dumps(review).encode(), req


def check(reply: Reply, request: dict[str, Any] | None, webhook: str) -> None:
    assert reply.status in (200, 400), (reply.status, reply.body[:300])
    assert reply.headers.get("content-type", "").startswith("application/json")
    event(f"HTTP {reply.status}")
    if reply.status == 400:
        text = reply.body.decode()
        assert "\n" not in text.strip() and "Traceback" not in text
        error = json.loads(text)
        assert list(error) == ["error"] and isinstance(error["error"], str) and error["error"]
        return
    assert request is not None, reply.body[:300]
    assert contract.problems(request, reply, webhook) == []
    response = json.loads(reply.body)["response"]
    # --hypothesis-show-statistics: how many answers were patches, denials, warnings.
    event("allowed" if response["allowed"] else "denied")
    for key in ("patch", "warnings", "auditAnnotations"):
        if key in response:
            event(key)


@pytest.fixture(scope="module")
def client() -> Any:
    state = State(sources.load_catalog(), excluded_namespaces=frozenset({"kube-system",
                                                                         "gpupolicy"}))
    state.update(policies=sources.load_policies(HERE / "policies"),
                 namespaces=sources.load_namespaces([HERE / "namespaces.yaml"]))
    return create_app(state).test_client()


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=bodies(), webhook=st.sampled_from(["mutate", "validate"]))
def test_every_input_gets_a_valid_answer_or_a_400(client: Any, case: Any, webhook: str) -> None:
    body, request = case
    got = client.post(f"/{webhook}", data=body, content_type="application/json")
    check(Reply(got.status_code, {k.lower(): v for k, v in got.headers.items()}, got.data),
          request, webhook)


@settings(max_examples=max(8, settings.default.max_examples // 20),
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(case=bodies(), webhook=st.sampled_from(["mutate", "validate"]))
def test_over_tls(server: Server, case: Any, webhook: str) -> None:
    body, request = case
    check(server.request("POST", f"/{webhook}", body, {"Content-Type": "application/json"}),
          request, webhook)
