"""Cluster-scope rules: pods the sharing schedulers placed together on one GPU, judged by the
core (policies/cluster.py, rules/shared_gpu_over_limit.py) the audit feeds."""

from __future__ import annotations

import json
from typing import Any

import pytest

from policies.cluster import ClusterView, shared_devices
from policies.context import Context
from policies.engine import review_cluster
from policies.loading import parse_policies
from webhook.inputs import sources

POLICY = """apiVersion: gpupolicy.io/v1alpha1
kind: GPUPolicy
metadata: {name: NAME}
spec: {namespaces: [NS], rules: {shared: {maxPodsPerGPU: LIMIT}}}
"""


def _context(*limits: tuple[str, str, int]) -> Context:
    policies = [p for name, ns, limit in limits for p in parse_policies(
        POLICY.replace("NAME", name).replace("NS", ns).replace("LIMIT", str(limit)))]
    return Context(policies=policies, catalog=sources.load_catalog())


def _pod(name: str, node: str | None, phase: str = "Running", **annotations: str) -> Any:
    return {"metadata": {"name": name, "annotations": annotations},
            "spec": {"nodeName": node} if node else {}, "status": {"phase": phase}}


IDX = "ALIYUN_COM_GPU_MEM_IDX"
HAMI = "hami.io/vgpu-devices-allocated"
ALLOC = "scheduler.framework.gpushare.allocation"


@pytest.mark.parametrize(
    ("annotations", "devices"),
    [
        ({IDX: "1"}, {"gpu1"}),
        ({IDX: "0,3"}, {"gpu0", "gpu3"}),
        ({IDX: "²"}, set()),  # not an ASCII index
        ({ALLOC: json.dumps({"0": {"2": 4}})}, {"gpu2"}),
        ({ALLOC: "{not json"}, set()),
        ({HAMI: "GPU-a,NVIDIA,2000,30:;GPU-b,NVIDIA,1000,0:;"}, {"GPU-a", "GPU-b"}),
        ({}, set()),
    ],
)
def test_devices_from_annotations(annotations: dict[str, str], devices: set[str]) -> None:
    assert shared_devices(_pod("p", "n", **annotations)) == devices


@pytest.mark.parametrize("annotations", [None, "x", ["a"], {IDX: 3}])
def test_malformed_metadata_gives_no_device(annotations: Any) -> None:
    assert shared_devices({"metadata": {"annotations": annotations}}) == set()
    assert shared_devices({"metadata": annotations}) == set()


# (pods as (namespace, node, phase, gpu index), policies, expected findings)
CASES = [
    ("three on one GPU over a limit of 2",
     [("a", "n1", "Running", "1")] * 3, [("p", "a", 2)],
     ["3 pods share GPU gpu1 on node n1, over maxPodsPerGPU 2 (p)"]),
    ("two on each of two GPUs", [("a", "n1", "Running", "1"), ("a", "n1", "Running", "1"),
                                 ("a", "n1", "Running", "0"), ("a", "n1", "Running", "0")],
     [("p", "a", 2)], []),
    ("finished pods hold no GPU", [("a", "n1", "Succeeded", "1")] * 3, [("p", "a", 2)], []),
    ("unplaced pods hold no GPU", [("a", None, "Pending", "1")] * 3, [("p", "a", 2)], []),
    ("the lowest limit of the policies governing any of the pods",
     [("a", "n1", "Running", "1")] * 2 + [("b", "n1", "Running", "1")],
     [("loose", "a", 10), ("strict", "b", 2)],
     ["3 pods share GPU gpu1 on node n1, over maxPodsPerGPU 2 (strict)"]),
    ("ungoverned pods count, but set no limit", [("z", "n1", "Running", "1")] * 5,
     [("p", "a", 2)], []),
]


@pytest.mark.parametrize(("pods", "limits", "expected"), [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_shared_gpu_over_limit(pods: list[tuple[str, str | None, str, str]],
                               limits: list[tuple[str, str, int]], expected: list[str]) -> None:
    context = _context(*limits)
    view = ClusterView(context)
    for i, (namespace, node, phase, index) in enumerate(pods):
        view.add_pod(_pod(f"p{i}", node, phase, **{IDX: index}), namespace, f"p{i}")
    found = review_cluster(view, context)
    assert [f"{f.message} ({f.policy})" for f in found] == expected
    assert all(f.rule == "shared-gpu-over-limit" for f in found)
