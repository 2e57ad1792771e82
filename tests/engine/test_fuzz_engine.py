"""Hostile pod specs and workloads through the engine: wrong types at every level (strings for
maps, lists of ints, int/null/bool keys), huge and odd numbers, deep nesting, unicode. With a
policy that injects everything and every rule on, and the fixture inventory:
review() and explain() never raise; every message is short and every path printable; each patch
applies with jsonpatch and gives `mutated`; a second review of `mutated` adds no patch."""

from __future__ import annotations

import copy
import json
from typing import Any

import jsonpatch
import pytest
from hypothesis import event, given
from hypothesis import strategies as st

from policies.context import Context
from policies.decision import Decision
from policies.engine import explain, review
from tests.engine import casetable

pytestmark = pytest.mark.fuzz

GPU_NAMES = ["nvidia.com/gpu", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb.me",
             "aliyun.com/gpu-mem", "aliyun.com/gpu-count", "nvidia.com/gpumem",
             "nvidia.com/gpucores", "nvidia.com/gpu.shared", "volcano.sh/vgpu-number",
             "amd.com/gpu", "cpu", "memory"]
LABEL_KEYS = ["nvidia.com/gpu.product", "nvidia.com/gpu.count", "workload", "gpu",
              "kubernetes.io/hostname", "nvidia.com/mig.strategy"]
QUANTITY_TEXT = st.text(alphabet="0123456789.+-eEinumkKMGTP ²\u0661", max_size=12)
QUANTITIES = st.one_of(
    st.sampled_from(["1", "2", "0", "-1", "1Ei", "8Ei", "1e9999999", "1e99999999", "1e-999999",
                     "²", " 1", "1 ", "0.5", "500m", "1" * 5000, "\u0661", "NaN", "Infinity"]),
    QUANTITY_TEXT, st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True), st.none(), st.booleans(),
)
KEYS = st.one_of(st.text(max_size=8), st.integers(), st.none(), st.booleans())
SCALARS = st.one_of(
    st.none(), st.booleans(), st.integers(min_value=-(10**30), max_value=10**30),
    st.integers(min_value=-(2**64), max_value=2**64), st.floats(allow_nan=True),
    st.text(max_size=12), st.sampled_from(["", "Always", "In", "Exists", "NoSchedule", "nvidia",
                                           "all", "0", "Equal", "metadata.name"]),
)
JUNK = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(KEYS, inner, max_size=3)),
    max_leaves=8,
)


def maybe(strategy: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    """Mostly the well-formed value (so that most pods get far enough to ask for GPUs),
    sometimes anything at all in its place."""
    return st.integers(0, 7).flatmap(lambda n: JUNK if n == 7 else strategy)


def obj(required: dict[str, Any] | None = None, **optional: Any) -> st.SearchStrategy[Any]:
    return maybe(st.fixed_dictionaries(
        {k: maybe(v) for k, v in (required or {}).items()},
        optional={k: maybe(v) for k, v in optional.items()}))


def listof(item: st.SearchStrategy[Any], size: int = 3, least: int = 0
           ) -> st.SearchStrategy[Any]:
    return maybe(st.lists(maybe(item), min_size=least, max_size=size))


LABEL_VALUES = st.one_of(st.text(max_size=10), st.integers(), st.booleans(), st.none(),
                         st.sampled_from(["NVIDIA-A100-SXM4-80GB", "8", "true", "1"]))
REQUIREMENT = obj({"key": st.sampled_from([*LABEL_KEYS, "metadata.name"])},
                  operator=st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt",
                                            "Bogus"]),
                  values=listof(LABEL_VALUES))
TERM = obj(matchExpressions=listof(REQUIREMENT), matchFields=listof(REQUIREMENT))
AFFINITY = obj(nodeAffinity=obj(
    requiredDuringSchedulingIgnoredDuringExecution=obj(nodeSelectorTerms=listof(TERM)),
    preferredDuringSchedulingIgnoredDuringExecution=listof(obj(
        {"weight": st.integers(-5, 200)}, preference=TERM)),
))
TOLERATION = obj(key=st.sampled_from(["nvidia.com/gpu", "", "dedicated"]),
                 operator=st.sampled_from(["Exists", "Equal", "x"]),
                 value=SCALARS, effect=st.sampled_from(["NoSchedule", "NoExecute", ""]),
                 tolerationSeconds=SCALARS)
RESOURCE_MAP = maybe(st.one_of(
    st.fixed_dictionaries({"nvidia.com/gpu": st.sampled_from([1, "1", 2, "2"])}, optional={
        "cpu": QUANTITIES, "nvidia.com/mig-1g.10gb": QUANTITIES}),
    st.dictionaries(st.one_of(st.sampled_from(GPU_NAMES), KEYS), QUANTITIES, max_size=4),
))
CONTAINER = obj(
    {"name": st.text(max_size=6), "resources": obj({"limits": RESOURCE_MAP},
                                                    requests=RESOURCE_MAP)},
    image=st.text(max_size=6),
    env=listof(obj({"name": st.sampled_from(["NVIDIA_VISIBLE_DEVICES", "X"])},
                   value=st.one_of(st.sampled_from(["all", "none", "0,1"]), SCALARS))),
    securityContext=obj(privileged=st.one_of(st.booleans(), SCALARS)),
    restartPolicy=st.sampled_from(["Always", "Never"]),
)
POD_SPEC = st.fixed_dictionaries({"containers": listof(CONTAINER, least=1)}, optional={
    "initContainers": listof(CONTAINER, 2),
    "nodeSelector": maybe(st.dictionaries(st.one_of(st.sampled_from(LABEL_KEYS), KEYS),
                                          LABEL_VALUES, max_size=3)),
    "affinity": AFFINITY,
    "tolerations": listof(TOLERATION),
    "runtimeClassName": SCALARS,
    "priorityClassName": SCALARS,
    "schedulerName": st.one_of(st.sampled_from(["volcano", "hami-scheduler"]), SCALARS),
    "nodeName": SCALARS,
})


def _template(spec: Any) -> st.SearchStrategy[Any]:
    # A copy each time: JSON has no shared parts (YAML anchors aside), and jsonpatch's
    # deepcopy would otherwise write through both.
    return maybe(st.builds(lambda: {"metadata": {"labels": {"app": "x"}},
                                    "spec": copy.deepcopy(spec)}))


@st.composite
def workloads(draw: st.DrawFn) -> dict[str, Any]:
    spec = draw(POD_SPEC)
    kind = draw(st.sampled_from(["Pod", "Deployment", "PyTorchJob", "RayCluster", "Job"]))
    meta = draw(maybe(st.fixed_dictionaries({"name": st.just("fuzz")}, optional={
        "namespace": st.sampled_from(["ml-train", "team-a", "default", ""])})))
    if kind == "Pod":
        body: Any = spec
        api = "v1"
    elif kind == "PyTorchJob":
        api = "kubeflow.org/v1"
        body = {"pytorchReplicaSpecs": draw(maybe(st.dictionaries(
            st.sampled_from(["Master", "Worker"]),
            maybe(st.fixed_dictionaries({"template": _template(spec)})), max_size=2)))}
    elif kind == "RayCluster":
        api = "ray.io/v1"
        body = {"headGroupSpec": draw(maybe(st.fixed_dictionaries({"template": _template(spec)}))),
                "workerGroupSpecs": draw(listof(st.fixed_dictionaries(
                    {"template": _template(spec)}), 2))}
    else:
        api = "apps/v1" if kind == "Deployment" else "batch/v1"
        body = {"template": draw(_template(spec))}
    return {"apiVersion": api, "kind": kind, "metadata": meta, "spec": draw(maybe(st.just(body)))}


@pytest.fixture(scope="module")
def context() -> Context:
    case = casetable.Case(id="fuzz", object={}, policies=("defaults", "hostile-full"),
                          namespace="ml-train", inventory="cluster", allowed=True,
                          rules=frozenset())
    return casetable.context_for(case)


def _check_decision(obj: dict[str, Any], context: Context) -> Decision:
    before = copy.deepcopy(obj)  # leaves (NaN too) are shared, so == compares them by identity
    decision = review(obj, context, namespace="ml-train")
    assert obj == before, "review changed its input"
    for violation in decision.violations:
        line = violation.describe()
        assert len(line) < 20000, line[:200]  # the hardware rule lists every pool
        json.dumps(violation.as_dict())
    patched = jsonpatch.apply_patch(obj, list(decision.patch))
    assert patched == decision.mutated
    again = review(decision.mutated, context, namespace="ml-train")
    assert again.patch == (), again.patch
    for _, pools in explain(obj, context, namespace="ml-train"):
        for verdict in pools:
            assert len(verdict.describe()) < 4000
    return decision


def _events(decision: Decision) -> None:
    event("GPU pod" if decision.gpu else "no GPU pod")
    event("patched" if decision.patch else "no patch")
    for rule in sorted({v.rule for v in decision.violations}):
        event(rule)


@given(workloads())
def test_hostile_workloads_never_break_the_engine(context: Context, obj: dict[str, Any]) -> None:
    _events(_check_decision(obj, context))


@given(JUNK, st.sampled_from(["Pod", "Deployment", "PyTorchJob", "RayCluster"]))
def test_anything_as_the_spec(context: Context, junk: Any, kind: str) -> None:
    _events(_check_decision({"apiVersion": "v1", "kind": kind, "metadata": {"name": "x"},
                             "spec": junk}, context))


def test_deep_nesting(context: Context) -> None:
    def deep() -> Any:
        value: Any = {"nvidia.com/gpu": 1}
        for _ in range(150):  # deeper than any real spec; copy.deepcopy in the test caps it
            value = [value]
        return value

    spec = {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": 1}},
                            "env": deep()}], "affinity": {"nodeAffinity": deep()},
            "tolerations": deep(), "nodeSelector": {"gpu": deep()}}
    _check_decision({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"},
                     "spec": spec}, context)
