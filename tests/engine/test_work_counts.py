"""The work one admission does, counted (issue 19): what a review needs once is done once.
Counts of calls to the real functions, not times, so they hold on any machine."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

import policies.engine
import policies.rules._common
import policies.shape
from policies.context import Context
from policies.engine import review
from policies.loading import parse_policies
from webhook.inputs.sources import load_catalog, load_policies

HIDING = """
apiVersion: gpupolicy.io/v1alpha1
kind: GPUPolicy
metadata: {name: hiding}
spec:
  inject:
    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
    hideGPUsFromNonGPUContainers: true
"""


def pod(*containers: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
            "spec": {"containers": list(containers)}}


GPU = {"name": "main", "image": "cuda",
       "resources": {"requests": {"cpu": "1", "nvidia.com/gpu": "1"},
                     "limits": {"cpu": "1", "nvidia.com/gpu": "1"}}}
LOG = {"name": "log", "image": "fluent", "resources": {"limits": {"memory": "1Gi"}}}
PLAIN = {"name": "web", "image": "nginx"}


@pytest.fixture(scope="module")
def contexts() -> dict[str, Context]:
    catalog = load_catalog()
    return {"defaults": Context(policies=load_policies(), catalog=catalog),
            "hiding": Context(policies=parse_policies(HIDING), catalog=catalog)}


def counted(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    """Count the calls to module.name (the real function still runs)."""
    calls = [0]
    real: Callable[..., Any] = getattr(module, name)

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counting)
    return calls


# (case, policies, pod, demand readings per review)
DEMAND_READINGS = [
    # injection writes pod-level fields only: the containers, and their demand, are as read
    ("toleration only", "defaults", pod(GPU, LOG), 1),
    # an env var written into the log container: its container is read again (amounts lent)
    ("env into a container", "hiding", pod(GPU, LOG), 2),
    ("no GPU, nothing injected", "defaults", pod(PLAIN), 1),
]


@pytest.mark.parametrize(("case", "policy", "obj", "readings"), DEMAND_READINGS,
                         ids=[c[0] for c in DEMAND_READINGS])
def test_demand_is_read_again_only_when_a_container_changed(
        monkeypatch: pytest.MonkeyPatch, contexts: dict[str, Context], case: str,
        policy: str, obj: dict[str, Any], readings: int) -> None:
    calls = counted(monkeypatch, policies.engine, "demand")
    decision = review(copy.deepcopy(obj), contexts[policy])
    assert decision.allowed
    assert calls[0] == readings


def test_accelerator_names_are_picked_once_per_container(
        monkeypatch: pytest.MonkeyPatch, contexts: dict[str, Context]) -> None:
    """Three rules read the containers' accelerator names; they are picked out of the
    resources once per container, whatever the number of rules."""
    calls = counted(monkeypatch, policies.rules._common, "sections")
    decision = review(pod(GPU, LOG), contexts["defaults"])
    assert decision.gpu and decision.allowed
    assert calls[0] == 2


def test_the_pod_spec_schema_is_compiled_once(
        monkeypatch: pytest.MonkeyPatch, contexts: dict[str, Context]) -> None:
    review(pod(GPU, LOG), contexts["defaults"])  # compiled here, or before
    calls = counted(monkeypatch, policies.shape, "_compile")
    for _ in range(10):
        review(pod(GPU, LOG), contexts["defaults"])
    assert calls[0] == 0


ALLOWED = """
apiVersion: gpupolicy.io/v1alpha1
kind: GPUPolicy
metadata: {name: allowed}
spec:
  inject:
    tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]
  rules:
    allowedModels: [NVIDIA-A100-SXM4-80GB, NVIDIA-H100-80GB-HBM3]
"""


def _nodes(count: int, arches: tuple[str, ...]) -> list[dict[str, Any]]:
    """`count` GPU nodes in 3 models x len(arches) pools."""
    products = ("NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "NVIDIA-L4")
    return [{"apiVersion": "v1", "kind": "Node", "metadata": {"name": f"n{i}", "labels": {
        "kubernetes.io/hostname": f"n{i}", "nvidia.com/gpu.product": products[i % 3],
        "kubernetes.io/arch": arches[i // 3 % len(arches)]}},
        "spec": {"taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
        "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}}}
        for i in range(count)]


@pytest.mark.parametrize("arches", [("amd64",), ("amd64", "arm64")])
def test_a_review_does_the_same_work_for_ten_times_the_nodes(arches: tuple[str, ...]) -> None:
    """Nodes are grouped into pools once; a review looks at the pools (each at its first
    failed check where only fitting matters), never node by node (1,000 nodes once cost
    3.5x the review of one pool each)."""
    import cProfile
    import pstats

    from policies.inventory import Inventory

    catalog = load_catalog()
    work = []
    for count in (30 * len(arches), 300 * len(arches)):
        inventory = Inventory.from_nodes(_nodes(count, arches), catalog)
        context = Context(policies=parse_policies(ALLOWED), catalog=catalog,
                          inventory=inventory)
        review(pod(GPU), context)  # what is worked out once per process
        profile = cProfile.Profile()
        profile.runcall(review, pod(GPU), context)
        work.append(pstats.Stats(profile).total_calls)  # type: ignore[attr-defined]
    assert work[0] == work[1], work
