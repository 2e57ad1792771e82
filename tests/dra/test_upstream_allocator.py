"""The allocator's shared scenario table (tests/dra/upstream/allocator.yaml, from
dynamic-resource-allocation structured/internal/allocatortesting) run through our allocator
(policies/dra/allocate.py check) for the scenario's node.

Row shorthands, all read into real v1 objects here:
- `classes`: name -> driver (a class selecting `device.driver == "<driver>"`), or name ->
  {selectors: [expression, ...]};
- `slices`: {node | all | selector | perDevice, pool, driver, generation (1), count (1),
  devices: [name | device (see _device)], counters: counter set -> counter -> quantity};
- `claims`: {name, requests: [{name, class, count, mode, selectors, admin, tolerations,
  capacity, first: [subrequests]}], constraints (v1 objects), tolerations (every request's)};
- `node`: the node allocated for (node-1 in region-1, node-2 in region-2, both on planet earth);
- `expect`: claim/request -> ["driver/pool/device", ...] when Kubernetes allocates, or
  `none` when it finds no allocation; `error`: the allocator's error (we must not fit either).
"""

from __future__ import annotations

from typing import Any

import pytest

from policies.dra.allocate import check
from policies.dra.parse_claims import parse_claim
from policies.dra.pools import DraInventory
from tests.dra.upstream.table import rows, verdict

ROWS = rows("allocator")
NODES = {"node-1": {"region": "region-1", "planet": "earth"},
         "node-2": {"region": "region-2", "planet": "earth"}}


def _class(name: str, spec: Any) -> dict[str, Any]:
    if isinstance(spec, str):
        exprs = [f'device.driver == "{spec}"']
    elif "multiple" in spec:  # upstream's class that also selects on allowMultipleAllocations
        exprs = [f'device.driver == "{spec["driver"]}" && '
                 f'device.allowMultipleAllocations == {str(spec["multiple"]).lower()}']
    else:
        exprs = list(spec.get("selectors", []))
    return {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {"name": name},
            "spec": {"selectors": [{"cel": {"expression": e}} for e in exprs]}}


def _device(raw: Any) -> dict[str, Any]:
    """A device shorthand: capacity name -> quantity, `consumes` counter set -> counters,
    `fromCounters` (capacity = the counters it consumes), other fields as the API has them."""
    if isinstance(raw, str):
        return {"name": raw}
    device = {k: v for k, v in raw.items()
              if k not in ("consumes", "fromCounters", "rangePolicy", "validValues")}
    if "consumes" in raw:
        device["consumesCounters"] = [
            {"counterSet": name, "counters": {k: {"value": v} for k, v in counters.items()}}
            for name, counters in raw["consumes"].items()]
    if raw.get("fromCounters"):
        device["capacity"] = {k: v for counters in raw.get("consumes", {}).values()
                              for k, v in counters.items()}
    if "capacity" in device:
        device["capacity"] = {k: v if isinstance(v, dict) else {"value": v}
                              for k, v in device["capacity"].items()}
    # upstream's two request policies: a range (default 2, min 2, step 2, max 4), or valid
    # values (`default` first, then `values`) for the capacities named
    for name, value in raw.get("rangePolicy", {}).items():
        device.setdefault("capacity", {})[name] = {"value": value, "requestPolicy": {
            "default": 2, "validRange": {"min": 2, "step": 2, "max": 4}}}
    if "validValues" in raw:
        policy = raw["validValues"]
        for name, value in policy["capacity"].items():
            device.setdefault("capacity", {})[name] = {"value": value, "requestPolicy": {
                "default": policy["default"],
                "validValues": [policy["default"], *policy.get("values", [])]}}
    return device


def _slice(index: int, raw: dict[str, Any]) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "driver": raw["driver"],
        "pool": {"name": raw["pool"], "generation": raw.get("generation", 1),
                 "resourceSliceCount": raw.get("count", 1)},
        "devices": [_device(d) for d in raw.get("devices", [])],
    }
    if "node" in raw:
        spec["nodeName"] = raw["node"]
    elif raw.get("all"):
        spec["allNodes"] = True
    elif raw.get("perDevice"):
        spec["perDeviceNodeSelection"] = True
    else:
        spec["nodeSelector"] = raw["selector"]
    if "counters" in raw:  # counter set -> counter -> quantity
        spec["sharedCounters"] = [
            {"name": name, "counters": {k: {"value": v} for k, v in counters.items()}}
            for name, counters in raw["counters"].items()]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice",
            "metadata": {"name": raw.get("name", f"slice-{index}")}, "spec": spec}


def _request(raw: dict[str, Any], tolerations: list[Any], sub: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {"deviceClassName": raw.get("class", "")}
    if "mode" in raw:
        body["allocationMode"] = raw["mode"]
    if raw.get("mode") != "All":
        body["count"] = raw.get("count", 1)
    if "selectors" in raw:  # an expression, or a selector object as written (`{}`: unknown)
        body["selectors"] = [{"cel": {"expression": e}} if isinstance(e, str) else e
                             for e in raw["selectors"]]
    if raw.get("admin"):
        body["adminAccess"] = True
    if raw.get("tolerations") or tolerations:
        body["tolerations"] = [*raw.get("tolerations", []), *tolerations]
    if "capacity" in raw:
        body["capacity"] = {"requests": raw["capacity"]}
    if sub:
        return {"name": raw["name"], **body}
    if "first" in raw:
        return {"name": raw["name"], "firstAvailable": [
            _request(s, tolerations, sub=True) for s in raw["first"]]}
    return {"name": raw["name"], "exactly": body}


def _claim(raw: dict[str, Any]) -> dict[str, Any]:
    tolerations = raw.get("tolerations", [])
    devices: dict[str, Any] = {"requests": [_request(r, tolerations) for r in raw["requests"]]}
    if "constraints" in raw:
        devices["constraints"] = raw["constraints"]
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": raw["name"], "namespace": "default"},
            "spec": {"devices": devices}}


def _judge(row: dict[str, Any]) -> str:
    """"" when we decide as the allocator does, else what differs."""
    inventory = DraInventory.build(
        [_slice(i, s) for i, s in enumerate(row.get("slices", []))],
        [_class(n, spec) for n, spec in (row.get("classes") or {}).items()], NODES)
    claims = [parse_claim(_claim(c)) for c in row.get("claims", [])]
    node = row.get("node", "node-1")
    verdict = next((v for v in check(claims, inventory) if node in v.nodes), None)
    expect = row.get("expect", "none")
    if "error" in row or expect == "none":
        if not claims:
            return ""
        if any(p.kind == "malformed" for c in claims for p in c.problems):
            return ""  # the apiserver refuses the claim itself: nothing to allocate
        if verdict is None or not verdict.fits:
            return ""
        return f"allocated {dict(verdict.placed)}"
    if verdict is None:
        return f"node {node} sees no devices"
    if not verdict.fits:
        return f"no allocation: {'; '.join(verdict.reasons)}"
    got: dict[str, list[str]] = {}
    for slot, devices in verdict.placed.items():
        claim = slot.partition("/")[0]
        got[f"{claim}/{verdict.chosen.get(slot, slot.partition('/')[2])}"] = sorted(devices)
    want = {k: sorted(v) for k, v in expect.items()}
    return "" if got == want else f"allocated {got}"


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_upstream_allocator_scenario(row: dict[str, Any]) -> None:
    verdict("allocator", row, _judge(row))
