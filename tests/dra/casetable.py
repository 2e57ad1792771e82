"""The DRA case table: YAML files under tests/dra/cases/.

A case names its `inventory` (fixture files under fixtures/, without .yaml: slices, classes
and nodes in one stream, as `kubectl get nodes,resourceslices,deviceclasses -o yaml` gives) and
asks one question:
- `claims`: claim objects, or shorthands `{name, requests, constraints}` made into
  ResourceClaims; expect `fits` (node groups, by first node, that can take all claims at once),
  `reasons` (group -> a text every reason list must contain), `problems` (problem kinds raised),
  `chosen` (group -> the firstAvailable alternative taken), `allocated` (group -> claim/request
  -> device names of the first solution);
- `extended`: resource -> amount served through a class's extendedResourceName; expect `fits`,
  `reasons`, and `offered` (group -> devices offered for the first resource);
- `parse` (slice | class | claim) with `object`: expect `problems` as display paths.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from policies.dra.pools import DraInventory

HERE = Path(__file__).parent
CASES = HERE / "cases"
FIXTURES = HERE / "fixtures"


@dataclass(frozen=True)
class Case:
    id: str
    raw: dict[str, Any]
    source: str


@cache
def fixture(name: str) -> tuple[dict[str, Any], ...]:
    with (FIXTURES / f"{name}.yaml").open(encoding="utf-8") as f:
        return tuple(d for d in yaml.safe_load_all(f) if isinstance(d, dict))


@cache
def inventory(names: tuple[str, ...]) -> DraInventory:
    docs = [d for n in names for d in fixture(n)]
    nodes = {d["metadata"]["name"]: d["metadata"].get("labels") or {}
             for d in docs if d.get("kind") == "Node"}
    return DraInventory.build(
        [d for d in docs if d.get("kind") == "ResourceSlice"],
        [d for d in docs if d.get("kind") == "DeviceClass"],
        nodes,
    )


def claim_object(raw: dict[str, Any]) -> dict[str, Any]:
    if "kind" in raw:
        return raw
    devices = {k: raw[k] for k in ("requests", "constraints") if k in raw}
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": raw.get("name", "claim"), "namespace": "ml-train"},
            "spec": {"devices": devices}}


def load_cases() -> list[Case]:
    out = []
    for path in sorted(CASES.glob("*.yaml")):
        with path.open(encoding="utf-8") as f:
            doc = yaml.safe_load(f)
        for raw in doc["cases"]:
            out.append(Case(raw["id"], raw, path.name))
    ids = [c.id for c in out]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    return out
