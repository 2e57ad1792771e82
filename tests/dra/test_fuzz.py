"""The DRA parsers and the allocator never raise, whatever JSON-shaped value they are handed."""

from __future__ import annotations

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
