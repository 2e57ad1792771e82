"""PriorityClasses, RuntimeClasses and ResourceQuotas are input like any other: a part of the
wrong type reads as absent, a quantity that does not parse is left out and said, never an
exception; and what can be resolved is resolved as the API server does."""

from __future__ import annotations

from typing import Any

import pytest

from policies.apiserver import PREEMPT_LOWER, ApiObjects

HOSTILE: list[dict[str, Any]] = [
    {"kind": "PriorityClass", "metadata": {"name": "text"}, "value": "1000"},
    {"kind": "PriorityClass", "metadata": {"name": "flag"}, "value": True},
    {"kind": "PriorityClass", "metadata": ["not", "a", "map"], "value": 1},
    {"kind": "PriorityClass", "metadata": {"name": "odd"}, "value": 7, "preemptionPolicy": [1]},
    {"kind": "RuntimeClass", "metadata": {"name": "rt"}, "overhead": ["x"],
     "scheduling": {"nodeSelector": {"a": 1, "b": "c"}, "tolerations": "all"}},
    {"kind": "RuntimeClass", "metadata": {"name": "rt2"}, "overhead": {"podFixed": "x"},
     "scheduling": "none"},
    {"kind": "ResourceQuota", "metadata": {"name": "q", "namespace": "ns"},
     "spec": {"hard": {"requests.nvidia.com/gpu": "lots", "pods": "10"},
              "scopes": "BestEffort", "scopeSelector": {"matchExpressions": [
                  "x", {"scopeName": 3}, {"scopeName": "PriorityClass", "values": "a"}]}},
     "status": {"used": ["x"]}},
    {"kind": "ResourceQuota", "metadata": {"name": "q2"}, "spec": "x", "status": 1},
]


def test_hostile_objects_read_as_far_as_they_go() -> None:
    api = ApiObjects.read(HOSTILE)
    assert api.priority_classes is not None and set(api.priority_classes) == {"odd"}
    assert api.priority_classes["odd"].preemption_policy == PREEMPT_LOWER
    # listed with a value no API server would store: a pod may name it, nothing resolves it
    assert api.defines("text") and api.priority_class("text") is None
    assert not api.defines("missing")
    assert api.runtime_classes is not None
    assert api.runtime_classes["rt"].node_selector == {"b": "c"}
    assert api.runtime_classes["rt"].tolerations == () and api.runtime_classes["rt"].overhead is None
    assert api.runtime_classes["rt2"].overhead is None
    [q] = api.quotas["ns"]
    assert q.hard == {"pods": 10} and q.used == {}
    assert [s.name for s in q.scopes] == ["PriorityClass"]
    assert api.quotas["default"][0].hard == {}
    assert any("lots" in p for p in api.problems)


def test_the_system_classes_are_always_defined_and_the_lowest_default_wins() -> None:
    api = ApiObjects.read([
        {"kind": "PriorityClass", "metadata": {"name": "d1"}, "value": 50, "globalDefault": True},
        {"kind": "PriorityClass", "metadata": {"name": "d2"}, "value": 10, "globalDefault": True},
    ])
    assert api.priority_class("system-node-critical") is not None
    default = api.global_default()
    assert default is not None and default.name == "d2"
    # nothing listed: nothing is known, nothing is judged unknown
    assert ApiObjects().defines("anything") and ApiObjects().priority_class("x") is None


@pytest.mark.parametrize("count", [10_000])
def test_many_quotas_read_in_linear_time(count: int) -> None:
    objects = [{"kind": "ResourceQuota", "metadata": {"name": f"q{i}", "namespace": "ns"},
                "spec": {"hard": {"requests.nvidia.com/gpu": str(i)}}} for i in range(count)]
    api = ApiObjects.read(objects)
    assert len(api.quotas["ns"]) == count
