"""Every patch op names the policy whose `inject` produced it, and carries its path as a tuple.

Issue 11: lint credited a mutation to every governing policy and the audit guessed; the engine
now says. For an item several policies inject, the credit goes to the winner: lowest
`spec.priority`, then name, the policy that would have added it on its own.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import jsonpatch
import pytest

from policies.catalog import Catalog
from policies.context import Context
from policies.decision import PatchOp
from policies.engine import review
from policies.model import GPUPolicy
from policies.patch import Patch
from policies.paths import to_pointer
from webhook.inputs.sources import load_catalog

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
TERMS = ("spec", "affinity", "nodeAffinity", REQUIRED, "nodeSelectorTerms")
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


@cache
def _catalog() -> Catalog:
    return load_catalog()


def policy(name: str, inject: dict[str, Any], priority: int = 0, **rules: Any) -> GPUPolicy:
    return GPUPolicy.model_validate({
        "apiVersion": "gpupolicy.io/v1alpha1", "kind": "GPUPolicy", "metadata": {"name": name},
        "spec": {"priority": priority, "inject": inject, "rules": rules}})


def gpu_pod(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
            "spec": {"containers": [{"name": "main", "image": "cuda", "resources": {
                "limits": {"nvidia.com/gpu": "1"}}}], **spec}}


def required(key: str) -> dict[str, Any]:
    return {"key": key, "operator": "Exists"}


def preferred(key: str, weight: int = 10) -> dict[str, Any]:
    return {"weight": weight, "preference": {"matchExpressions": [required(key)]}}


CASES: list[tuple[str, list[GPUPolicy], dict[str, Any], list[tuple[tuple[Any, ...], str]]]] = [
    ("one policy injects tolerations, the other the runtime class",
     [policy("tolerate", {"tolerations": [GPU_TOLERATION]}),
      policy("runtime", {"runtimeClassName": "nvidia"})],
     gpu_pod(),
     [(("spec", "tolerations"), "tolerate"), (("spec", "runtimeClassName"), "runtime")]),
    ("both inject the same toleration: one op, credited to the lower priority",
     [policy("zeta", {"tolerations": [GPU_TOLERATION]}, priority=-5),
      policy("alpha", {"tolerations": [GPU_TOLERATION]})],
     gpu_pod(),
     [(("spec", "tolerations"), "zeta")]),
    ("a priority tie is broken by name",
     [policy("beta", {"tolerations": [GPU_TOLERATION]}),
      policy("alpha", {"tolerations": [GPU_TOLERATION]})],
     gpu_pod(),
     [(("spec", "tolerations"), "alpha")]),
    ("each new toleration is credited to the policy that asked for it",
     [policy("a", {"tolerations": [GPU_TOLERATION]}),
      policy("b", {"tolerations": [GPU_TOLERATION, {"key": "dedicated", "operator": "Exists"}]})],
     gpu_pod(tolerations=[{"key": "other", "operator": "Exists"}]),
     [(("spec", "tolerations", "-"), "a"), (("spec", "tolerations", "-"), "b")]),
    ("a single value goes to the winner, and so does the credit",
     [policy("b", {"runtimeClassName": "kata"}), policy("a", {"runtimeClassName": "nvidia",
                                                              "priorityClassName": "batch"}),
      policy("c", {"priorityClassName": "urgent"}, priority=-1)],
     gpu_pod(),
     [(("spec", "priorityClassName"), "c"), (("spec", "runtimeClassName"), "a")]),
    ("nodeSelector keys from two policies",
     [policy("a", {"nodeSelector": {"pool": "gpu"}}), policy("b", {"nodeSelector": {
         "pool": "other", "zone": "z1"}})],
     gpu_pod(),
     [(("spec", "nodeSelector"), "a"), (("spec", "nodeSelector", "zone"), "b")]),
    ("a policy with rules only is never credited",
     [policy("rules-only", {}, maxGPUsPerPod=8), policy("inject", {"runtimeClassName": "nvidia"})],
     gpu_pod(),
     [(("spec", "runtimeClassName"), "inject")]),
    ("affinity from two policies on a bare pod: one op each, not one mixed op",
     [policy("a", {"nodeAffinity": {"required": [required("gpu")]}}),
      policy("b", {"nodeAffinity": {"required": [required("zone")],
                                    "preferred": [preferred("fast")]}})],
     gpu_pod(),
     [(("spec", "affinity"), "a"), ((*TERMS, 0, "matchExpressions", "-"), "b"),
      (("spec", "affinity", "nodeAffinity", PREFERRED), "b")]),
    ("one policy's whole affinity is still one op",
     [policy("a", {"nodeAffinity": {"required": [required("gpu")],
                                    "preferred": [preferred("fast")]}})],
     gpu_pod(),
     [(("spec", "affinity"), "a")]),
    ("required terms added where the pod has only preferred ones",
     [policy("a", {"nodeAffinity": {"required": [required("gpu")]}}),
      policy("b", {"nodeAffinity": {"required": [required("zone")]}})],
     gpu_pod(affinity={"nodeAffinity": {PREFERRED: [preferred("x")]}}),
     [(("spec", "affinity", "nodeAffinity", REQUIRED), "a"),
      ((*TERMS, 0, "matchExpressions", "-"), "b")]),
    ("a requirement both ask for, ANDed into each existing term, credited to the winner",
     [policy("b", {"nodeAffinity": {"required": [required("gpu")]}}),
      policy("a", {"nodeAffinity": {"required": [required("gpu")]}})],
     gpu_pod(affinity={"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [
         {"matchExpressions": [required("x")]}, {"matchExpressions": [required("y")]}]}}}),
     [((*TERMS, 0, "matchExpressions", "-"), "a"), ((*TERMS, 1, "matchExpressions", "-"), "a")]),
    ("limits from requests and hidden devices: the first policy that asks",
     [policy("b", {"gpuLimitsFromRequests": True, "hideGPUsFromNonGPUContainers": True}),
      policy("a", {"hideGPUsFromNonGPUContainers": True})],
     {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {"containers": [
         {"name": "main", "image": "cuda", "resources": {"requests": {"nvidia.com/gpu": "1"}}},
         {"name": "log", "image": "fluent"}]}},
     [(("spec", "containers", 1, "env"), "a"),
      (("spec", "containers", 0, "resources", "limits"), "b")]),
    ("a Deployment's template: paths start at the template",
     [policy("a", {"runtimeClassName": "nvidia"})],
     {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
      "spec": {"template": {"spec": gpu_pod()["spec"]}}},
     [(("spec", "template", "spec", "runtimeClassName"), "a")]),
]


@pytest.mark.parametrize(("policies", "obj", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_each_op_names_its_policy(
    policies: list[GPUPolicy], obj: dict[str, Any], expected: list[tuple[tuple[Any, ...], str]]
) -> None:
    decision = review(obj, Context(policies=policies, catalog=_catalog()))
    assert [(op.path, op.policy) for op in decision.ops] == expected
    # The structured ops are the RFC 6902 ones, one for one, and they give `mutated`.
    assert [op.as_dict() for op in decision.ops] == list(decision.patch)
    assert jsonpatch.apply_patch(obj, list(decision.patch)) == decision.mutated
    assert all(op.op == "add" for op in decision.ops)


def test_ops_credit_only_policies_that_inject_something() -> None:
    policies = [policy("rules-only", {}, maxGPUsPerPod=8),
                policy("inject", {"tolerations": [GPU_TOLERATION]})]
    decision = review(gpu_pod(), Context(policies=policies, catalog=_catalog()))
    assert decision.policies == ("inject", "rules-only")
    assert {op.policy for op in decision.ops} == {"inject"}


def test_no_ops_when_nothing_is_created() -> None:
    policies = [policy("a", {"runtimeClassName": "nvidia"})]
    context = Context(policies=policies, catalog=_catalog())
    assert review(gpu_pod(), context, operation="UPDATE").ops == ()
    once = review(gpu_pod(), context)
    assert review(once.mutated, context).ops == ()  # idempotent


@pytest.mark.parametrize(("path", "pointer"), [
    (("metadata", "annotations", "example.com/a~b"), "/metadata/annotations/example.com~1a~0b"),
    (("metadata", "annotations", "~1"), "/metadata/annotations/~01"),
    (("spec", "tolerations", "-"), "/spec/tolerations/-"),
    (("spec", "containers", 0, "env"), "/spec/containers/0/env"),
])
def test_the_tuple_path_and_the_pointer_say_the_same(path: tuple[Any, ...], pointer: str) -> None:
    assert to_pointer(path) == pointer
    assert PatchOp("add", path, 1, "p").as_dict() == {"op": "add", "path": pointer, "value": 1}


def test_patch_records_the_author_of_each_op() -> None:
    patch = Patch({"metadata": {}, "spec": {"tolerations": []}})
    patch.set(("metadata", "annotations", "example.com/a~b"), "v", by="one")
    patch.append(("spec", "tolerations"), {"operator": "Exists"}, by="two")
    assert patch.ops == [
        PatchOp("add", ("metadata", "annotations"), {"example.com/a~b": "v"}, "one"),
        PatchOp("add", ("spec", "tolerations", "-"), {"operator": "Exists"}, "two"),
    ]
    assert [op["path"] for op in patch.json_patch] == [
        "/metadata/annotations", "/spec/tolerations/-"]
