"""The DRA parsers and the allocator never raise, whatever JSON-shaped value they are handed."""

from __future__ import annotations

import functools
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from policies.dra.allocate import check
from policies.dra.parse_claims import parse_claim
from policies.dra.parse_slices import parse_device_class, parse_slice
from policies.dra.pools import DraInventory
from tests.dra.casetable import fixture

KEYS = st.sampled_from([
    "spec", "devices", "requests", "exactly", "firstAvailable", "deviceClassName", "count",
    "allocationMode", "selectors", "cel", "expression", "attributes", "capacity", "value",
    "string", "int", "bool", "version", "name", "driver", "pool", "generation", "nodeName",
    "resourceSliceCount", "allNodes", "nodeSelector", "perDeviceNodeSelection", "taints",
    "tolerations", "constraints", "matchAttribute", "distinctAttribute", "consumesCounters",
    "sharedCounters", "counters", "counterSet", "metadata", "kind", "adminAccess", "effect",
    "key", "operator", "extendedResourceName", "nodeSelectorTerms", "matchExpressions",
])
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-2**70, 2**70), st.floats(),
                    st.text(max_size=20), st.sampled_from(["All", "ExactCount", "1Gi", "gpu",
                                                           "gpu.nvidia.com", "1.2.3", "Exists"]))
JSON = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(KEYS, inner, max_size=5)), max_leaves=30)

CLASSES = fixture("classes")


@pytest.mark.fuzz
@given(JSON)
def test_parsers_never_raise(value: Any) -> None:
    for parse in (parse_slice, parse_device_class, parse_claim):
        parse(value)
        parse({"kind": "ResourceClaimTemplate", "spec": {"spec": value}})
        parse({"spec": value})


@pytest.mark.fuzz
@given(st.lists(JSON, max_size=3), JSON)
def test_inventory_and_check_never_raise(slices: list[Any], claim: Any) -> None:
    base = [{"kind": "ResourceSlice", "spec": {"driver": "gpu.nvidia.com", "nodeName": "n",
             "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
             "devices": s}} for s in slices]
    inventory = DraInventory.build([*slices, *base], [*CLASSES, claim], {"n": {}})
    check([parse_claim({"spec": {"devices": claim}}), parse_claim(claim)], inventory)


REAL = [d for name in ("h100", "a100-mig", "tainted", "shared", "selection", "classes")
        for d in fixture(name)]
REAL_CLAIMS = [
    {"kind": "ResourceClaim", "metadata": {"name": "c"}, "spec": {"devices": {
        "requests": [
            {"name": "a", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2,
                                      "selectors": [{"cel": {"expression": "device.attributes"
                                                             "['gpu.nvidia.com'].type == 'gpu'"}}],
                                      "tolerations": [{"key": "k", "operator": "Exists"}],
                                      "capacity": {"requests": {"memory": "1Gi"}}}},
            {"name": "b", "firstAvailable": [{"name": "x", "deviceClassName": "mig.nvidia.com"},
                                             {"name": "y", "deviceClassName": "gpu.nvidia.com",
                                              "allocationMode": "All"}]},
        ],
        "constraints": [{"requests": ["a", "b/x"],
                         "matchAttribute": "gpu.nvidia.com/productName"}],
    }}},
]


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out.extend(_paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out.extend(_paths(item, (*prefix, i)))
    return out


def _mutate(doc: Any, index: int, new: Any) -> Any:
    import copy
    doc = copy.deepcopy(doc)
    paths = _paths(doc)
    path = paths[index % len(paths)]
    if not path:
        return new
    target = doc
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = new
    return doc


@pytest.mark.fuzz
@given(st.integers(0, len(REAL) - 1), st.lists(st.tuples(st.integers(0, 10_000), JSON),
                                               min_size=1, max_size=3),
       st.integers(0, 10_000), JSON)
def test_mutated_real_objects_never_raise(which: int, edits: list[tuple[int, Any]],
                                          claim_edit: int, claim_value: Any) -> None:
    docs = list(REAL)
    for index, value in edits:
        docs[which] = _mutate(docs[which], index, value)
    claim = _mutate(REAL_CLAIMS[0], claim_edit, claim_value)
    slices = [d for d in docs if isinstance(d, dict) and d.get("kind") == "ResourceSlice"]
    classes = [d for d in docs if not (isinstance(d, dict) and d.get("kind") == "ResourceSlice")]
    inventory = DraInventory.build(slices, classes, {"rack1-node-a": {"rack": "r1"}})
    check([parse_claim(claim), parse_claim(REAL_CLAIMS[0])], inventory)


ENGINE_POLICY = """
apiVersion: gpupolicy.io/v1alpha1
kind: GPUPolicy
metadata: {name: every-dra-rule}
spec:
  inject: {tolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]}
  rules:
    requireHardwareMatch: true
    maxGPUsPerPod: 4
    maxGPUsPerContainer: 2
    allowedModels: [NVIDIA-H100-80GB-HBM3]
    mig: {allowedProfiles: [1g.5gb], maxInstancesPerPod: 2}
    dra: {allowedDeviceClasses: ["gpu.*"]}
"""


@functools.cache
def _engine_context() -> Any:
    from policies.context import Context
    from policies.inventory import Inventory
    from policies.loading import parse_policies
    from webhook.inputs.sources import load_catalog

    catalog = load_catalog()
    nodes = [{"kind": "Node", "metadata": {"name": n, "labels": {"rack": "r1"}}}
             for n in ("h100-node-1", "a100-node-2", "h100-node-8", "rack1-node-a")]
    slices = [d for d in REAL if d.get("kind") == "ResourceSlice"]
    classes = [d for d in REAL if d.get("kind") == "DeviceClass"]
    dra = DraInventory.build(slices, classes, {n["metadata"]["name"]: {} for n in nodes})
    return Context(parse_policies(ENGINE_POLICY, "fuzz"), catalog,
                   Inventory.from_nodes(nodes, catalog, dra))


@pytest.mark.fuzz
@given(st.integers(0, 10_000), JSON, st.sampled_from(["ResourceClaim", "ResourceClaimTemplate"]),
       JSON)
def test_review_of_hostile_claims_and_their_pods(edit: int, value: Any, kind: str,
                                                 container_claims: Any) -> None:
    """A claim object with junk anywhere, reviewed on its own and as the claim of a pod whose
    containers list anything in resources.claims: review() and explain() never raise, and a
    violation always has a message and a printable path."""
    from dataclasses import replace

    from policies.engine import explain, review

    claim = _mutate(REAL_CLAIMS[0], edit, value)
    if kind == "ResourceClaimTemplate":
        claim = {"kind": kind, "metadata": {"name": "c"}, "spec": {"spec": claim.get("spec")
                                                                   if isinstance(claim, dict)
                                                                   else claim}}
    obj = {**claim, "apiVersion": "resource.k8s.io/v1", "kind": kind} if isinstance(claim, dict) \
        else {"apiVersion": "resource.k8s.io/v1", "kind": kind, "spec": claim}
    context = _engine_context()
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {
        "resourceClaims": [{"name": "c", ("resourceClaimName" if kind == "ResourceClaim" else
                                          "resourceClaimTemplateName"): "c"}],
        "containers": [{"name": "m", "resources": {"claims": container_claims}}]}}
    with_claim = replace(context, claims={(kind, "default", "c"): parse_claim(obj)})
    for target, ctx in ((obj, context), (pod, with_claim)):
        decision = review(target, ctx)
        for v in decision.violations:
            assert v.message and isinstance(v.field, str)
        explain(target, ctx)


# The Kubernetes functions of the selector environment with hostile arguments: every call is
# a match, a runtime error or a compile error, never an exception, and each is quick.
CALLS = st.sampled_from([
    "isURL({s})", "url({s}).getHost() == ''", "url({s}).getQuery().size() > 0",
    "url({s}).getPort() == '1'", "url({s}).getHostname() == ''", "isIP({s})",
    "ip({s}).family() == 4", "ip({s}).isGlobalUnicast()", "ip.isCanonical({s})",
    "isCIDR({s})", "cidr({s}).containsIP({s})", "cidr({s}).containsCIDR({s})",
    "cidr({s}).masked().prefixLength() > 0", "{s}.find({s}) == ''", "{s}.findAll({s}).size() > 1",
    "[{s}, {s}].isSorted()", "[{s}].max() == ''", "sets.contains([{s}], [{s}])",
    "semver({s}).major() > 0", "quantity({s}).isInteger()", "{s}.matches({s})",
])
ARGS = st.text(alphabet=st.sampled_from(list("0123456789abcdef.:/[]%?&=*+()-_ \\'\"")),
               max_size=40)


@pytest.mark.fuzz
@given(CALLS, st.lists(ARGS, min_size=4, max_size=4))
def test_selector_functions_never_raise(template: str, args: list[str]) -> None:
    import time

    from policies.dra import cel

    expression = template
    for arg in args:  # Python's repr of these strings is a valid CEL string literal
        expression = expression.replace("{s}", repr(arg), 1)
    started = time.perf_counter()
    program = cel.compile_selector(expression)
    if program.compiled is not None:
        outcome = cel.evaluate(program, DEVICE)
        assert isinstance(outcome.matches, bool)
    assert time.perf_counter() - started < 2.0


DEVICE = parse_slice({"spec": {"driver": "gpu.nvidia.com", "nodeName": "n", "pool": {"name": "n"},
                               "devices": [{"name": "gpu-0"}]}}).devices[0]
