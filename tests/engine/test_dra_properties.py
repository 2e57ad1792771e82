"""Properties over DRA input built from the dra-fleet fixture (tests/engine/fixtures/dra-fleet.yaml):
pods naming its ResourceClaims and templates in every combination, with extended GPUs,
tolerations, node selection and containers listing claims; and ResourceClaim / template objects
of every shape (classes known and not, GPU/MIG/NIC, counts, All, admin access, selectors that
match, read a missing attribute or do not compile, firstAvailable, constraints), in governed,
admin-labelled and ungoverned namespaces. For each: the patch applies and gives `mutated`, a
second review adds no patch and finds the same rules, a claim is never mutated, and the four
doors (review, lint, the webhook, the audit where it lists the kind) give one verdict.

The case rows themselves go through the same doors in tests/test_differential.py (claim rows
included: the webhook and lint review them; the audit lists only pod-carrying kinds)."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path
from typing import Any

import jsonpatch
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.context import Context
from policies.engine import review
from tests.engine.casetable import Case, context_for
from tests.test_differential import Doors, _agree

pytestmark = pytest.mark.fuzz
# A modest share of the profile's examples: every example runs lint, the webhook and the audit.
EXAMPLES = max(25, settings.default.max_examples // 6)

INVENTORY = "dra-fleet"
POLICY_SETS = [("defaults",), ("fleet-hw",), ("defaults", "fleet-limits"),
               ("defaults", "fleet-mig"), ("defaults", "fleet-models"),
               ("defaults", "fleet-gpu-class-only")]
# (kind, name) of what ml-train holds in the fixture, plus one it does not
NAMED = [("resourceClaimTemplateName", n) for n in (
    "one-gpu", "h100-x1", "h100-x8", "h100-x4-one-root", "two-gpus", "mig-3g40gb-x2",
    "mig-1g10gb", "mig-any", "h100-or-mig", "nic-only", "all-h100", "missing")] + [
    ("resourceClaimName", "l4-timesliced"), ("resourceClaimName", "absent")]
NODES = ["h100-a", "h100-b", "a100-mig-1", "l4-infer-1", "t4-dp-1", "gone"]
POOLS = ["h100-train", "a100-mig", "l4-infer", "t4-dp"]
TOLERATIONS = [
    {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
    {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
    {"key": "workload", "operator": "Exists"},
]
CLASSES = ["gpu.nvidia.com", "mig.nvidia.com", "nic.example.com", "gpu.nvidia.co",
           "vfio.gpu.nvidia.com"]
SELECTORS = [
    "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'",
    "device.attributes['gpu.nvidia.com'].productName.lowerAscii().contains('a100')",
    "device.attributes['gpu.nvidia.com'].profile == '1g.10gb'",
    "device.attributes['gpu.nvidia.com'].profile == '3g.40gb'",
    "device.attributes['gpu.nvidia.com'].architecture == 'Hopper'",
    "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0",
    "device.attributes['gpu.nvidia.com'].index == 0",  # no such attribute
    "device.attributes['gpu.nvidia.com'].productName ==",  # does not compile
]
NAMESPACES = ["ml-train", "ml-train", "dra-admin", "gpu-operator", "team-a"]


@cache
def _context(policies: tuple[str, ...]) -> Context:
    return context_for(Case("dra-properties", {}, policies, "ml-train", INVENTORY, True,
                            frozenset()))


@cache
def _doors(policies: tuple[str, ...]) -> Doors:
    return Doors(_context(policies))


def _container(claim_names: list[str], gpus: int, listing: list[tuple[int, str]]) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "cuda:12"}
    resources: dict[str, Any] = {}
    if gpus:
        resources["limits"] = {"nvidia.com/gpu": gpus}
    listed = [{"name": claim_names[i % len(claim_names)], **({"request": r} if r else {})}
              for i, r in listing] if claim_names else []
    if listed:
        resources["claims"] = listed
    if resources:
        container["resources"] = resources
    return container


@st.composite
def pods(draw: st.DrawFn) -> dict[str, Any]:
    named = draw(st.lists(st.sampled_from(NAMED), min_size=1, max_size=3))
    refs = [{"name": f"c{i}", key: value} for i, (key, value) in enumerate(named)]
    names = [r["name"] for r in refs]
    listing = draw(st.lists(st.tuples(st.integers(0, 2), st.sampled_from(["", "gpus", "nic"])),
                            max_size=2))
    spec: dict[str, Any] = {
        "containers": [_container(names, draw(st.sampled_from([0, 0, 1, 2, 7])), listing)],
        "resourceClaims": refs,
    }
    if draw(st.booleans()):
        spec["tolerations"] = draw(st.lists(st.sampled_from(TOLERATIONS), max_size=2,
                                            unique_by=lambda t: str(t)))
    if draw(st.integers(0, 3)) == 0:
        spec["nodeSelector"] = {"karpenter.sh/nodepool": draw(st.sampled_from(POOLS))}
    if draw(st.integers(0, 4)) == 0:
        spec["nodeName"] = draw(st.sampled_from(NODES))
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec}


@st.composite
def requests(draw: st.DrawFn, name: str, sub: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": draw(st.sampled_from(CLASSES))}
    mode = draw(st.sampled_from(["count", "count", "none", "All"]))
    if mode == "count":
        body["count"] = draw(st.sampled_from([1, 2, 4, 8, 9, 33]))
    elif mode == "All":
        body["allocationMode"] = "All"
    selectors = draw(st.lists(st.sampled_from(SELECTORS), max_size=2))
    if selectors:
        body["selectors"] = [{"cel": {"expression": s}} for s in selectors]
    if sub:
        return {"name": name, **body}
    if draw(st.integers(0, 4)) == 0:
        body["adminAccess"] = True
    return {"name": name, "exactly": body}


@st.composite
def claims(draw: st.DrawFn) -> dict[str, Any]:
    reqs = []
    for i in range(draw(st.integers(1, 3))):
        if draw(st.integers(0, 3)) == 0:
            subs = [draw(requests(f"alt{j}", sub=True)) for j in range(draw(st.integers(1, 2)))]
            reqs.append({"name": f"r{i}", "firstAvailable": subs})
        else:
            reqs.append(draw(requests(f"r{i}")))
    devices: dict[str, Any] = {"requests": reqs}
    if len(reqs) > 1 and draw(st.booleans()):
        devices["constraints"] = [{"matchAttribute": "resource.kubernetes.io/pcieRoot"}]
    kind = draw(st.sampled_from(["ResourceClaim", "ResourceClaimTemplate"]))
    spec = {"devices": devices}
    return {"apiVersion": "resource.k8s.io/v1", "kind": kind, "metadata": {"name": "c"},
            "spec": spec if kind == "ResourceClaim" else {"spec": spec}}


def _same_everywhere(obj: dict[str, Any], policies: tuple[str, ...], namespace: str) -> None:
    context = _context(policies)
    decision = review(obj, context, namespace=namespace)
    assert jsonpatch.apply_patch(obj, list(decision.patch)) == decision.mutated
    again = review(decision.mutated, context, namespace=namespace)
    assert again.patch == ()
    assert {v.rule for v in again.violations} == {v.rule for v in decision.violations}
    assert again.allowed is decision.allowed
    placed = {**obj, "metadata": {**obj["metadata"], "namespace": namespace}}
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "object.yaml"
        path.write_text(yaml.safe_dump(placed, sort_keys=False))
        assert list(_agree(_doors(policies), path, None)) == []


@settings(max_examples=EXAMPLES)
@given(pod=pods(), policies=st.sampled_from(POLICY_SETS))
def test_claim_pods(pod: dict[str, Any], policies: tuple[str, ...]) -> None:
    _same_everywhere(pod, policies, "ml-train")


@settings(max_examples=EXAMPLES)
@given(claim=claims(), policies=st.sampled_from(POLICY_SETS),
       namespace=st.sampled_from(NAMESPACES))
def test_claim_objects(claim: dict[str, Any], policies: tuple[str, ...], namespace: str) -> None:
    decision = review(claim, _context(policies), namespace=namespace)
    assert decision.patch == () and decision.mutated == claim  # claims are never mutated
    _same_everywhere(claim, policies, namespace)
