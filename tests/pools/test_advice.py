"""Advice per pool, row by row of cases/advice.yaml: rows without utilisation through the
audit of a dump (`audit --pools -o json`), rows with it through the pool view fed the answers
a real Prometheus gave (data/prometheus/week.json) - the same core the audit calls."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.context import Context
from policies.engine import review
from policies.inventory import Inventory
from policies.pools.thresholds import Thresholds
from policies.pools.utilization import parse
from policies.pools.view import PoolView
from tests.pools import promcluster, shapes
from tests.pools.helpers import HERE, NOW, cli
from webhook.inputs.sources import load_catalog

ROWS = yaml.safe_load((HERE / "cases" / "advice.yaml").read_text(encoding="utf-8"))
WEEK = json.loads((HERE / "data" / "prometheus" / "week.json").read_text(encoding="utf-8"))


def _objects(row: dict[str, Any]) -> list[dict[str, Any]]:
    if row.get("cluster") == "prometheus":
        objects = promcluster.objects()
        for obj in objects:
            pool = obj["metadata"].get("labels", {}).get("karpenter.sh/nodepool")
            if obj["kind"] == "Node" and pool in row.get("label", {}):
                obj["metadata"]["labels"].update(row["label"][pool])
        return objects
    return [*(shapes.node(**n) for n in row["nodes"]), *(shapes.pod(**p) for p in row["pods"])]


def _report_offline(row: dict[str, Any], tmp_path: Path) -> dict[str, Any]:
    dump = tmp_path / "dump.yaml"
    dump.write_text(shapes.dump(_objects(row)), encoding="utf-8")
    extra = []
    if row.get("thresholds"):
        path = tmp_path / "thresholds.yaml"
        path.write_text(yaml.safe_dump({"apiVersion": "gpupolicy.io/v1alpha1",
                                        "kind": "GPUPoolThresholds",
                                        "spec": row["thresholds"]}))
        extra = ["--thresholds", str(path)]
    code, out, err = cli("audit", str(dump), "--pools", "-o", "json", "--now", NOW, *extra)
    assert code in (0, 1), err
    return json.loads(out)


def _report_with_utilisation(row: dict[str, Any]) -> dict[str, Any]:
    objects = _objects(row)
    catalog = load_catalog()
    nodes = [o for o in objects if o["kind"] == "Node"]
    context = Context(policies=[], catalog=catalog, inventory=Inventory.from_nodes(nodes, catalog))
    thresholds = Thresholds.model_validate(row.get("thresholds") or {})
    view = PoolView(nodes, context, WEEK["end"], thresholds)
    for obj in objects:
        if obj["kind"] == "Pod":
            meta = obj["metadata"]
            decision = review(obj, context)
            view.add_pod(obj, meta["namespace"], meta["name"],
                         decision.gpu if decision.policies else None)
    return view.report(parse(WEEK["window"], WEEK["range"], WEEK["instant"]))


@pytest.mark.parametrize("row", ROWS, ids=[r["name"] for r in ROWS])
def test_advice(row: dict[str, Any], tmp_path: Path) -> None:
    doc = _report_with_utilisation(row) if row.get("cluster") == "prometheus" \
        else _report_offline(row, tmp_path)
    pools = {p["name"]: p for p in doc["pools"]}
    for name, expect in row["expect"].items():
        pool = pools[name]
        assert [a["action"] for a in pool["advice"]] == expect["advice"], pool["advice"]
        words = " | ".join([*(a["because"] for a in pool["advice"]), *pool["notes"]])
        for says in expect.get("says", ()):
            assert says in words
        if "gpus" in expect:
            assert pool["gpus"] == expect["gpus"]
        if "failures" in expect:
            assert pool["failures"] == expect["failures"]
        if "pending" in expect:
            assert pool["pending"]["count"] == expect["pending"]


def test_every_action_has_a_row() -> None:
    actions = {a for r in ROWS for e in r["expect"].values() for a in e["advice"]}
    assert actions == {"share", "dedicate", "isolate", "automate", "grow"}
