"""Kubernetes matching semantics: label selectors, node selector requirements, terms, taints."""

from __future__ import annotations

from typing import Any

import pytest

from policies.selectors import (
    Taint,
    label_selector_matches,
    node_affinity_matches,
    node_selector_matches,
    requirement_matches,
    term_matches,
    tolerates,
    untolerated,
)

LABELS = {
    "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB",
    "nvidia.com/gpu.memory": "81920",
    "nvidia.com/gpu.count": "8",
    "pool": "train",
    "odd": "12x",
}


def expr(key: str, op: str, *values: str) -> dict[str, Any]:
    out: dict[str, Any] = {"key": key, "operator": op}
    if values:
        out["values"] = list(values)
    return out


@pytest.mark.parametrize(
    ("selector", "ok"),
    [
        ({}, True),
        ({"matchLabels": {}}, True),
        ({"matchLabels": {"pool": "train"}}, True),
        ({"matchLabels": {"pool": "infer"}}, False),
        ({"matchLabels": {"missing": "x"}}, False),
        ({"matchExpressions": [expr("pool", "In", "train", "x")]}, True),
        ({"matchExpressions": [expr("pool", "In", "x")]}, False),
        ({"matchExpressions": [expr("missing", "In", "x")]}, False),
        ({"matchExpressions": [expr("pool", "NotIn", "train")]}, False),
        ({"matchExpressions": [expr("missing", "NotIn", "x")]}, True),
        ({"matchExpressions": [expr("pool", "Exists")]}, True),
        ({"matchExpressions": [expr("missing", "Exists")]}, False),
        ({"matchExpressions": [expr("missing", "DoesNotExist")]}, True),
        ({"matchExpressions": [expr("pool", "DoesNotExist")]}, False),
        ({"matchExpressions": [expr("pool", "Gt", "1")]}, False),  # not a LabelSelector op
        ({"matchLabels": {"pool": "train"}, "matchExpressions": [expr("odd", "Exists")]}, True),
        ({"matchLabels": {"pool": "train"}, "matchExpressions": [expr("x", "Exists")]}, False),
    ],
)
def test_label_selector(selector: dict[str, Any], ok: bool) -> None:
    assert label_selector_matches(selector, LABELS) is ok


@pytest.mark.parametrize(
    ("req", "ok"),
    [
        (expr("pool", "In", "train"), True),
        (expr("pool", "In", "a", "b"), False),
        (expr("pool", "NotIn", "train"), False),
        (expr("missing", "NotIn", "train"), True),
        (expr("pool", "Exists"), True),
        (expr("missing", "DoesNotExist"), True),
        (expr("nvidia.com/gpu.memory", "Gt", "40960"), True),
        (expr("nvidia.com/gpu.memory", "Gt", "81920"), False),
        (expr("nvidia.com/gpu.memory", "Lt", "81921"), True),
        (expr("nvidia.com/gpu.memory", "Lt", "81920"), False),
        (expr("nvidia.com/gpu.count", "Gt", "-1"), True),
        (expr("nvidia.com/gpu.count", "Gt", "+7"), True),
        (expr("missing", "Gt", "1"), False),
        (expr("missing", "Lt", "1"), False),
        (expr("odd", "Gt", "1"), False),  # label not an integer
        (expr("pool", "Lt", "1"), False),
        (expr("nvidia.com/gpu.count", "Gt", "1.5"), False),  # bound not an integer
        (expr("nvidia.com/gpu.count", "Gt", "1", "2"), False),  # exactly one value
        (expr("nvidia.com/gpu.count", "Gt"), False),
        (expr("pool", "Equals", "train"), False),
    ],
)
def test_requirement(req: dict[str, Any], ok: bool) -> None:
    assert requirement_matches(req, LABELS) is ok


@pytest.mark.parametrize(
    ("term", "node_name", "ok"),
    [
        ({}, "n1", False),  # an empty term matches nothing
        ({"matchExpressions": []}, "n1", False),
        ({"matchExpressions": [expr("pool", "In", "train")]}, "n1", True),
        ({"matchExpressions": [expr("pool", "In", "train"), expr("x", "Exists")]}, "n1", False),
        ({"matchFields": [expr("metadata.name", "In", "n1")]}, "n1", True),
        ({"matchFields": [expr("metadata.name", "In", "n1")]}, "n2", False),
        ({"matchFields": [expr("metadata.name", "NotIn", "n1")]}, "n2", True),
        ({"matchFields": [expr("metadata.uid", "In", "n1")]}, "n1", False),
        (
            {"matchExpressions": [expr("pool", "Exists")],
             "matchFields": [expr("metadata.name", "In", "n1")]},
            "n1",
            True,
        ),
    ],
)
def test_term(term: dict[str, Any], node_name: str, ok: bool) -> None:
    assert term_matches(term, LABELS, node_name=node_name) is ok


def required(*terms: dict[str, Any]) -> dict[str, Any]:
    return {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}


A100 = {"matchExpressions": [expr("nvidia.com/gpu.product", "In", "NVIDIA-A100-SXM4-80GB")]}
H100 = {"matchExpressions": [expr("nvidia.com/gpu.product", "In", "NVIDIA-H100-80GB-HBM3")]}


@pytest.mark.parametrize(
    ("affinity", "ok"),
    [
        (None, True),
        ({}, True),
        ({"nodeAffinity": {}}, True),
        ({"preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "preference": H100}]},
         True),
        (required(), False),  # an empty term list matches nothing
        (required({}), False),
        (required(A100), True),
        (required(H100), False),
        (required(H100, A100), True),  # terms are ORed
        (required(H100, {}), False),
        ({"nodeAffinity": required(A100)}, True),  # a whole pod affinity is accepted too
        ({"nodeAffinity": required(H100)}, False),
    ],
)
def test_node_affinity(affinity: dict[str, Any] | None, ok: bool) -> None:
    assert node_affinity_matches(affinity, LABELS) is ok


def test_node_affinity_by_name() -> None:
    affinity = required({"matchFields": [expr("metadata.name", "In", "gpu-7")]})
    assert node_affinity_matches(affinity, LABELS, node_name="gpu-7")
    assert not node_affinity_matches(affinity, LABELS, node_name="gpu-8")
    assert not node_affinity_matches(affinity, LABELS)


@pytest.mark.parametrize(
    ("selector", "ok"),
    [
        (None, True),
        ({}, True),
        ({"pool": "train"}, True),
        ({"pool": "train", "nvidia.com/gpu.count": "8"}, True),
        ({"pool": "Train"}, False),
        ({"missing": ""}, False),
    ],
)
def test_node_selector(selector: dict[str, str] | None, ok: bool) -> None:
    assert node_selector_matches(selector, LABELS) is ok


GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}


@pytest.mark.parametrize(
    ("toleration", "taint", "ok"),
    [
        ({"operator": "Exists"}, GPU_TAINT, True),  # empty key + Exists: everything
        ({"operator": "Exists", "effect": "NoExecute"}, GPU_TAINT, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "value": "present"}, GPU_TAINT, True),  # default Equal
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present",
          "effect": "NoSchedule"}, GPU_TAINT, True),
        ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "true"}, GPU_TAINT, False),
        ({"key": "nvidia.com/gpu", "operator": "Equal"}, GPU_TAINT, False),
        ({"key": "nvidia.com/gpu", "operator": "Equal"},
         {"key": "nvidia.com/gpu", "effect": "NoSchedule"}, True),
        ({"key": "other", "operator": "Exists"}, GPU_TAINT, False),
        ({"key": "nvidia.com/gpu", "operator": "Bogus"}, GPU_TAINT, False),
        ({"key": "nvidia.com/gpu", "operator": "Exists"}, Taint("nvidia.com/gpu", "", "NoExecute"),
         True),
    ],
)
def test_tolerates(toleration: dict[str, Any], taint: Any, ok: bool) -> None:
    assert tolerates(toleration, taint) is ok


TAINTS = (
    Taint("nvidia.com/gpu", "present", "NoSchedule"),
    Taint("dedicated", "training", "NoExecute"),
    Taint("spot", "true", "PreferNoSchedule"),
)


@pytest.mark.parametrize(
    ("tolerations", "left"),
    [
        (None, ["nvidia.com/gpu", "dedicated"]),
        ([], ["nvidia.com/gpu", "dedicated"]),
        ([{"key": "nvidia.com/gpu", "operator": "Exists"}], ["dedicated"]),
        ([{"key": "nvidia.com/gpu", "operator": "Exists"},
          {"key": "dedicated", "value": "training", "effect": "NoExecute"}], []),
        ([{"operator": "Exists"}], []),
        ([{"key": "dedicated", "value": "training", "effect": "NoSchedule"}],
         ["nvidia.com/gpu", "dedicated"]),
    ],
)
def test_untolerated(tolerations: list[dict[str, Any]] | None, left: list[str]) -> None:
    assert [t.key for t in untolerated(tolerations, TAINTS)] == left
    as_dicts = [t.as_dict() for t in TAINTS]
    assert [t["key"] for t in untolerated(tolerations, as_dicts)] == left
