"""`gpupolicy migrate`: the case table (workloads x current/target inventory -> outcome), the
derived target against a hand-written one, --write output re-reviewed on the target, the
cluster hazards through the audit, and the command over files and a live (fake) cluster."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.migrate.compare import judge
from policies.migrate.derive import to_dra
from policies.migrate.selector import SelectorError, parse_label_selector
from policies.selectors import label_selector_matches
from webhook.cli import run as cli
from webhook.inputs import sources

HERE = Path(__file__).parent
FIXTURES = HERE / "fixtures"
CASES = yaml.safe_load((HERE / "cases.yaml").read_text())
CURRENT = {"fleet": ["fleet.yaml"], "fleet-with-dra": ["fleet.yaml", "dra-node.yaml"]}


def gpupolicy(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def objects(*names: str) -> list[dict[str, Any]]:
    return [d for n in names for d in yaml.safe_load_all((FIXTURES / n).read_text()) if d]


def contexts(case: dict[str, Any]) -> tuple[Any, Any]:
    args = argparse.Namespace(policies=str(FIXTURES / "policies.yaml"), inventory=None,
                              namespaces=[], exclude_namespace=None, workload_kinds=None)
    found = sources.ClusterObjects()
    for obj in objects(*CURRENT[case.get("current", "fleet")]):
        found.add(obj)
    now, _ = sources.build_context(args, found)
    goal = sources.ClusterObjects()
    if "target" in case:
        for obj in objects(case["target"]):
            goal.add(obj)
    else:
        selector = parse_label_selector(case["to_dra"])
        derived = to_dra(found.nodes, lambda labels: label_selector_matches(selector, labels),
                         now.catalog, found.classes)
        for obj in [*derived.objects(), *found.slices]:
            goal.add(obj)
    from dataclasses import replace
    return now, replace(now, inventory=goal.inventory(now.catalog))


def workload(spec: dict[str, Any], namespace: str) -> dict[str, Any]:
    container: dict[str, Any] = {"name": "main", "image": "registry.example.com/app:1"}
    if "limits" in spec:
        container["resources"] = {"limits": spec["limits"]}
    pod: dict[str, Any] = {"containers": [container]}
    for key in ("nodeSelector", "schedulerName"):
        if key in spec:
            pod[key] = spec[key]
    if "claimTemplate" in spec:
        pod["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": spec["claimTemplate"]}]
        container["resources"] = {"claims": [{"name": "gpu"}]}
    meta = {"name": "w", "namespace": namespace, "annotations": spec.get("annotations", {})}
    if spec["kind"] == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta, "spec": {
        "selector": {"matchLabels": {"app": "w"}},
        "template": {"metadata": {"labels": {"app": "w"},
                                  "annotations": spec.get("annotations", {})}, "spec": pod}}}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_case(case: dict[str, Any]) -> None:
    now, target = contexts(case)
    obj = workload(case["workload"], case.get("namespace", "ml"))
    move = judge(obj, now, target)
    if case["outcome"] is None:
        assert move is None
        return
    assert move is not None
    assert move.outcome == case["outcome"], move.as_dict()
    if "pool" in case:
        assert move.pool == case["pool"], move.as_dict()
    if "reason" in case:
        assert any(case["reason"] in r for r in move.reasons), move.as_dict()


def test_derived_target_equals_the_hand_written_one() -> None:
    nodes = objects("fleet.yaml")
    catalog = sources.load_catalog()
    derived = to_dra(nodes, lambda labels: labels.get("cloud.google.com/gke-nodepool") == "h100",
                     catalog)
    expected = objects("fleet-dra.yaml")
    by_kind = {k: [o for o in expected if o["kind"] == k]
               for k in ("Node", "ResourceSlice", "DeviceClass")}
    [node] = [n for n in derived.nodes if n["metadata"]["name"] == "h100-1"]
    assert node == by_kind["Node"][0]
    assert derived.slices == by_kind["ResourceSlice"]
    assert derived.classes == by_kind["DeviceClass"]
    assert derived.moved == ["h100-1"]


def test_derivation_under_each_mig_strategy_and_sharing() -> None:
    derived = to_dra(objects("fleet.yaml"), lambda labels: True, sources.load_catalog())
    devices = {s["spec"]["nodeName"]: s["spec"]["devices"] for s in derived.slices}
    mixed = devices["a100-mig-1"]
    assert [d["attributes"]["type"]["string"] for d in mixed] == ["gpu"] + ["mig"] * 7
    assert {d["attributes"]["profile"]["string"] for d in mixed[1:]} == {"1g.10gb"}
    assert mixed[1]["capacity"]["memory"]["value"] == "9856Mi"
    single = devices["a100-single-1"]
    assert len(single) == 14 and {d["name"].split("-mig")[0] for d in single} == {"gpu-0", "gpu-1"}
    assert len(devices["l4-ts-1"]) == 2  # physical GPUs, not the 8 replicas
    assert len(devices["a10-share-1"]) == 1
    for node in derived.nodes:
        left = node.get("status", {}).get("allocatable", {})
        assert not [k for k in left if k.startswith(("nvidia.com/", "aliyun.com/"))]


@pytest.mark.parametrize(("text", "labels", "matches"), [
    ("", {"a": "b"}, True),
    ("pool=h100", {"pool": "h100"}, True),
    ("pool==h100", {"pool": "a100"}, False),
    ("pool!=h100", {"pool": "a100"}, True),
    ("pool in (h100, a100),gpu", {"pool": "a100", "gpu": "x"}, True),
    ("pool notin (h100)", {}, True),
    ("!gpu", {"gpu": "x"}, False),
])
def test_label_selector_strings(text: str, labels: dict[str, str], matches: bool) -> None:
    assert label_selector_matches(parse_label_selector(text), labels) is matches


@pytest.mark.parametrize("text", ["pool in (a", "a b c", "=x"])
def test_bad_selector_is_a_clear_error(text: str) -> None:
    with pytest.raises(SelectorError, match="selector"):
        parse_label_selector(text)
    code, _, err = gpupolicy("migrate", str(FIXTURES / "fleet.yaml"), "--to-dra", text)
    assert code == 2 and "selector" in err and "Traceback" not in err


WORKLOADS = """\
apiVersion: apps/v1
kind: Deployment
metadata:
  name: infer   # the serving tier
  namespace: ml
spec:
  selector: {matchLabels: {app: infer}}
  template:
    metadata: {labels: {app: infer}}
    spec:
      containers:
      - name: server
        image: registry.example.com/llm:1
        resources:
          limits:
            nvidia.com/mig-1g.10gb: 2
            cpu: "2"
---
apiVersion: v1
kind: Pod
metadata: {name: shared, namespace: ml}
spec:
  containers:
  - {name: main, image: x, resources: {limits: {aliyun.com/gpu-mem: 8}}}
"""


def test_command_over_files_writes_rewrites_that_run(tmp_path: Path) -> None:
    (tmp_path / "in").mkdir()
    src = tmp_path / "in" / "apps.yaml"
    src.write_text(WORKLOADS)
    out = tmp_path / "out"
    code, stdout, err = gpupolicy("migrate", str(src), "--inventory", str(FIXTURES / "fleet.yaml"),
                                  "--to-dra", "--write", str(out), "-o", "json")
    assert code == 1, err  # the gpushare pod breaks
    report = json.loads(stdout)
    outcomes = {w["name"]: w["outcome"] for w in report["workloads"]}
    assert outcomes == {"infer": "needs-claim", "shared": "breaks"}
    assert report["summary"]["needs-claim"] == 1
    assert src.read_text() == WORKLOADS  # inputs are never changed
    rewritten = (out / "00-apps.yaml").read_text()
    assert "# the serving tier" in rewritten and "nvidia.com/mig-1g.10gb" not in rewritten
    assert "resourceClaimTemplateName: infer-server-gpu" in rewritten
    templates = list(yaml.safe_load_all((out / "resourceclaimtemplates.yaml").read_text()))
    request = templates[0]["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    assert request["deviceClassName"] == "mig.nvidia.com" and request["count"] == 2
    assert err == ""  # the rewrite fits: nothing "would still not run"
    # what was written, reviewed by the ordinary door against the target, is allowed
    (tmp_path / "target").mkdir()
    code, stdout, _ = gpupolicy("migrate", str(out), "--inventory", str(FIXTURES / "fleet.yaml"),
                                "--to-dra", "-o", "json")
    after = {w["name"]: w["outcome"] for w in json.loads(stdout)["workloads"]}
    assert after["infer"] in ("unchanged", "runs-via-extended-resource")


@pytest.mark.parametrize("fmt", ["text", "json", "markdown"])
def test_every_format_says_the_outcomes(tmp_path: Path, fmt: str) -> None:
    src = tmp_path / "apps.yaml"
    src.write_text(WORKLOADS)
    code, out, err = gpupolicy("migrate", str(src), "--inventory", str(FIXTURES / "fleet.yaml"),
                               "--to-dra", "-o", fmt)
    assert code == 1, err
    assert "needs-claim" in out and "breaks" in out
    if fmt == "markdown":
        assert out.startswith("## ") and "| `needs-claim` | 1 |" in out


def test_unreadable_input_exits_2(tmp_path: Path) -> None:
    code, _, err = gpupolicy("migrate", str(tmp_path / "nope.yaml"), "--to-dra")
    assert code == 2 and "no such file" in err
    src = tmp_path / "apps.yaml"
    src.write_text(WORKLOADS)
    code, _, err = gpupolicy("migrate", str(src), "--to-dra")
    assert code == 2 and "no GPU node" in err


HAZARDS = [
    ("double", ["gpu-double-advertised"]),
    ("twice", ["extended-resource-mixed", "extended-resource-served-twice"]),
    ("mixed", ["extended-resource-mixed"]),
]


def hazard_inventory(which: str) -> list[dict[str, Any]]:
    fleet = objects("fleet.yaml")
    dra = objects("dra-node.yaml")
    gpu_class = next(o for o in dra if o["kind"] == "DeviceClass")
    serving = {**gpu_class, "spec": {**gpu_class["spec"], "extendedResourceName": "nvidia.com/gpu"}}
    slices = [o for o in dra if o["kind"] == "ResourceSlice"]
    if which == "double":  # the DRA driver on a node whose device plugin still runs
        twin = json.loads(json.dumps(slices[0]).replace("h100-dra-1", "h100-1"))
        return [*fleet, twin, gpu_class]
    if which == "twice":
        other = {**serving, "metadata": {"name": "gpu-h100"}}
        return [*fleet, *dra[:2], serving, other]
    return [*fleet, *dra[:2], serving]


@pytest.mark.parametrize(("which", "rules"), HAZARDS, ids=[h[0] for h in HAZARDS])
def test_cluster_hazards_in_the_audit(tmp_path: Path, which: str, rules: list[str]) -> None:
    files = tmp_path / "cluster.yaml"
    files.write_text(yaml.safe_dump_all(hazard_inventory(which)))
    _, out, err = gpupolicy("audit", str(files), "--format", "json")
    report = json.loads(out)
    found = sorted({h["rule"] for h in report["cluster"]["hazards"]})
    assert found == rules, err
    severities = {f["rule"]: f["severity"] for f in report["findings"] if f["rule"] in rules}
    assert severities == {r: "error" if r == "gpu-double-advertised" else "warning"
                          for r in rules}


def test_policy_that_stops_matching_is_a_hazard(tmp_path: Path) -> None:
    src = tmp_path / "apps.yaml"
    src.write_text(WORKLOADS)
    _, out, _ = gpupolicy("migrate", str(src), "--inventory", str(FIXTURES / "fleet.yaml"),
                          "--policies", str(FIXTURES / "policies.yaml"), "--to-dra",
                          "-o", "json")
    messages = [h["message"] for h in json.loads(out)["hazards"]]
    assert any("mig-names" in m and "allowedResources" in m for m in messages), messages


def test_live_cluster(api_server: Any, kubeconfig: str) -> None:
    api_server.add_all([*objects("fleet.yaml"), *yaml.safe_load_all(WORKLOADS)])
    code, out, err = gpupolicy("migrate", "--kubeconfig", kubeconfig, "--to-dra", "-o", "json")
    assert code == 1, err
    outcomes = {w["name"]: w["outcome"] for w in json.loads(out)["workloads"]}
    assert outcomes == {"infer": "needs-claim", "shared": "breaks"}
