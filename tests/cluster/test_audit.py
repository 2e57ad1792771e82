"""`gpupolicy audit` against the fake API server, against files, and against `lint`."""

from __future__ import annotations

import io
import json
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from policies.engine import namespace_of
from policies.rules import CLUSTER_RULES
from tests.cluster.conftest import gpupolicy, namespace
from tests.cluster.fakeapi import FakeAPIServer
from tests.lint import sarif_rules
from webhook.cli import run as cli
from webhook.cluster.kinds import BUILT_IN, CUSTOM, audited_kind
from webhook.inputs import reading

DATA = Path(__file__).parent / "data"
NODES = DATA / "nodes.yaml"
# the version a cluster serves each kind under (old manifests say extensions/v1beta1 & co.)
FIRST_VERSION = {
    **{(group, kind): f"{group}/{versions[0]}" for kind, group, versions, _ in CUSTOM},
    **{(group, kind): api_version for kind, api_version, _ in BUILT_IN
       for group in ("apps", "extensions", "batch")},
}


def gpupolicy_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def audit_json(*argv: str) -> dict[str, Any]:
    code, out, err = gpupolicy_cli("audit", "--format", "json", *argv)
    assert code in (0, 1), err
    return json.loads(out)


def corpus_objects(corpus: Path) -> list[dict[str, Any]]:
    """Every workload and Namespace of the corpus, once per (apiVersion, kind, namespace, name),
    custom kinds under the version a cluster would serve them as."""
    found: dict[tuple[Any, ...], dict[str, Any]] = {}
    # kinds the audit finds through discovery: all of a kind under one version, as a cluster
    # serves every object of a kind under each of its versions
    first_seen: dict[tuple[str, str], str] = {}
    for file in sorted(corpus.rglob("*")):
        if file.suffix not in (".yaml", ".yml", ".json") or "admissionreview" in file.parts:
            continue
        try:
            docs = list(reading.read_objects(file))
        except reading.SourceError:
            continue  # the linter's own tests cover unreadable files
        for obj in docs:
            meta = obj.get("metadata")
            if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
                continue
            if not (audited_kind(obj) or obj.get("kind") == "Namespace"):
                continue
            group = str(obj.get("apiVersion", "")).rpartition("/")[0]
            obj["apiVersion"] = FIRST_VERSION.get((group, obj["kind"])) or first_seen.setdefault(
                (group, obj["kind"]), obj["apiVersion"])
            key = (obj["apiVersion"], obj["kind"], namespace_of(obj, None), meta["name"])
            found.setdefault(key, obj)
    return list(found.values())


def _nodes() -> list[dict[str, Any]]:
    return list(reading.read_objects(NODES))


def _load(server: FakeAPIServer, objects: list[dict[str, Any]]) -> None:
    for obj in objects:
        server.add(obj)


def _finding_keys(records: list[dict[str, Any]]) -> Counter[tuple[Any, ...]]:
    return Counter((r.get("object"), r["rule"], r["severity"], r.get("policy"), r.get("path"),
                    r["message"]) for r in records)


@pytest.fixture
def corpus_cluster(corpus_dir, api_server, kubeconfig, tmp_path):
    """The fake cluster holding every corpus workload and the test nodes, and the same objects
    as one file."""
    objects = corpus_objects(corpus_dir)
    _load(api_server, [*objects, *_nodes()])
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump_all(objects, sort_keys=False), encoding="utf-8")
    return kubeconfig, dump, len(objects)


def test_live_audit_of_corpus_equals_lint_on_the_same_files(corpus_cluster):
    kubeconfig, dump, _count = corpus_cluster
    live = audit_json("--kubeconfig", kubeconfig, "--page-size", "37")
    code, out, err = gpupolicy_cli("lint", "--format", "json", "--show-mutations",
                                   "--inventory", str(NODES), str(dump))
    assert code in (0, 1), err
    linted = json.loads(out)["findings"]
    # the cluster's own findings (pending pods, shared GPUs, node facts) are no file's
    cluster = {"gpu-pod-pending", *(m.ID for m in CLUSTER_RULES)}
    audited = [r for r in live["findings"] if r["rule"] not in cluster]
    assert len(audited) > 20
    assert _finding_keys(audited) == _finding_keys(linted)


def test_offline_audit_equals_live_audit(corpus_cluster):
    kubeconfig, dump, count = corpus_cluster
    live = audit_json("--kubeconfig", kubeconfig)
    offline = audit_json(str(dump), str(NODES))
    for report in (live, offline):
        report["summary"].pop("seconds")
    assert sum(live["summary"]["audited"].values()) + sum(
        live["summary"]["skippedOwned"].values()) == count - _namespaces_in(dump)
    assert live["summary"] == offline["summary"]
    assert live["policies"] == offline["policies"]
    assert _finding_keys(live["findings"]) == _finding_keys(offline["findings"])


def _namespaces_in(dump: Path) -> int:
    return sum(1 for o in reading.read_objects(dump) if o.get("kind") == "Namespace")


def _pod(name: str, ns: str = "team-a", *, node: str | None = None, gpus: int = 1,
         phase: str = "Running", annotations: dict[str, str] | None = None,
         resource: str = "nvidia.com/gpu", message: str = "") -> dict[str, Any]:
    pod: dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
        "spec": {"containers": [{"name": "c", "image": "cuda",
                                 "resources": {"limits": {resource: str(gpus)}}}],
                 "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                  "effect": "NoSchedule"}]},
        "status": {"phase": phase},
    }
    if node:
        pod["spec"]["nodeName"] = node
    if message:
        pod["status"]["conditions"] = [{"type": "PodScheduled", "status": "False",
                                        "reason": "Unschedulable", "message": message}]
    return pod


SHARED = {"namespaces": ["team-*"], "mode": "Warn", "rules": {"shared": {"maxPodsPerGPU": 2}}}


def _share(name: str, idx: str, node: str = "a10-share-1") -> dict[str, Any]:
    return _pod(name, node=node, resource="aliyun.com/gpu-mem", gpus=4,
                annotations={"ALIYUN_COM_GPU_MEM_IDX": idx})


@pytest.mark.parametrize(
    ("pods", "over"),
    [
        ([_share("a", "0"), _share("b", "0")], []),
        ([_share("a", "0"), _share("b", "0"), _share("c", "0")], [("a10-share-1", "gpu0", 3)]),
        ([_share("a", "0"), _share("b", "1"), _share("c", "0"), _share("d", "1")], []),
        ([_share("a", "0"), _share("b", "0"), _share("c", "0", node="other")], []),
        ([_share("a", "0"), _share("b", "0"),
          {**_share("c", "0"), "status": {"phase": "Succeeded"}}], []),
        ([_pod(n, node="n1", resource="nvidia.com/gpu",
               annotations={"hami.io/vgpu-devices-allocated": "GPU-abc,NVIDIA,2000,30:;"})
          for n in "xyz"], [("n1", "GPU-abc", 3)]),
        ([_pod(n, node="n1", annotations={
            "scheduler.framework.gpushare.allocation": json.dumps({"0": {"1": 4}})})
          for n in "xyz"], [("n1", "gpu1", 3)]),
    ],
    ids=["at-limit", "over", "spread", "other-node", "finished-pods", "hami", "ack-allocation"],
)
def test_pods_sharing_one_gpu_over_max_pods_per_gpu(api_server, kubeconfig, pods, over):
    _load(api_server, [namespace("team-a"), gpupolicy("shared", **SHARED), *_nodes(), *pods])
    report = audit_json("--kubeconfig", kubeconfig)
    found = [(o["node"], o["device"], o["pods"]) for o in report["cluster"]["sharedGPUsOverLimit"]]
    assert found == over
    rules = [r for r in report["findings"] if r["rule"] == "shared-gpu-over-limit"]
    assert len(rules) == len(over)
    if over:
        assert rules[0]["policy"] == "shared"


@pytest.mark.parametrize(
    ("pod", "expect"),
    [
        (_pod("big", gpus=16, phase="Pending", message="0/4 nodes are available"),
         ["0/4 nodes are available", "pool", "nvidia.com/gpu"]),
        (_pod("mig", phase="Pending", resource="nvidia.com/mig-2g.20gb"),
         ["mig-2g.20gb"]),
        # what the running pods hold is subtracted (issue 28): the T4 node is taken
        (_pod("fits", phase="Pending"), ["pool p4de.24xlarge: fits now (1 of 1 node free)",
                                         "pool g4dn.xlarge: fits once 1 nvidia.com/gpu is free "
                                         "on t4-1 (held by team-a/running)"]),
    ],
    ids=["too-many-gpus", "mig-profile-absent", "capacity"],
)
def test_pending_gpu_pods_say_why(api_server, kubeconfig, pod, expect):
    _load(api_server, [namespace("team-a"), *_nodes(), pod,
                       _pod("running", node="t4-1"), _pod("plain-pending", phase="Pending",
                                                          gpus=0)])
    report = audit_json("--kubeconfig", kubeconfig)
    pending = report["cluster"]["pendingGPUPods"]
    assert pending["total"] == 1
    (entry,) = pending["pods"]
    text = " ".join([entry["scheduler"], *entry["pools"]])
    for word in expect:
        assert word in text


def test_owned_replicasets_are_skipped_and_pods_are_pods(api_server, kubeconfig):
    owned = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
             "metadata": {"name": "web-123", "namespace": "team-a", "ownerReferences": [
                 {"kind": "Deployment", "name": "web", "controller": True,
                  "apiVersion": "apps/v1", "uid": "u"}]},
             "spec": {"template": {"spec": _pod("x")["spec"]}}}
    deployment = {**owned, "kind": "Deployment",
                  "metadata": {"name": "web", "namespace": "team-a"}}
    _load(api_server, [namespace("team-a"), *_nodes(), owned, deployment, _pod("web-123-a")])
    report = audit_json("--kubeconfig", kubeconfig)
    assert report["summary"]["audited"] == {"Deployment": 1, "Pod": 1}
    assert report["summary"]["skippedOwned"] == {"ReplicaSet": 1}
    assert report["summary"]["pods"] == 1 and report["summary"]["templates"] == 1


def test_gpupolicy_resources_are_used_and_bad_ones_skipped(api_server, kubeconfig):
    refuse = {"namespaces": ["team-a"], "rules": {"maxGPUsPerPod": 1}}
    _load(api_server, [namespace("team-a"), *_nodes(), _pod("two", node="a100-1", gpus=2),
                       gpupolicy("max-one", **refuse), gpupolicy("broken", mode="Never")])
    code, out, err = gpupolicy_cli("audit", "--kubeconfig", kubeconfig, "--format", "json")
    assert code == 1  # something would be refused
    assert "GPUPolicy/broken" in err
    rules = {(r["rule"], r["policy"]) for r in json.loads(out)["findings"]}
    assert ("gpu-max-per-pod", "max-one") in rules


@pytest.mark.parametrize(("status", "times", "failed"), [(403, 1, True), (500, 1, False),
                                                       (500, 4, True)])
def test_a_kind_that_cannot_be_listed_is_named_and_a_passing_failure_retried(
        api_server, kubeconfig, status, times, failed):
    _load(api_server, [namespace("team-a"), *_nodes(), _pod("p", node="t4-1")])
    api_server.fail_next(times, status)  # the first workload list (Deployments) fails
    unavailable, kinds = _workloads(kubeconfig)
    if failed:  # a 403 will not change; a 500 that lasts is given up on after a few tries
        assert list(unavailable) == ["Deployment (apps/v1)"]
        assert unavailable["Deployment (apps/v1)"].startswith(f"HTTP {status}")
    else:  # retried with a back-off
        assert unavailable == {}
    assert kinds == ["Pod"]


def _workloads(kubeconfig: str) -> tuple[dict[str, str], list[str]]:
    from webhook.cluster.listing import LiveSource
    from webhook.output.progress import Progress

    source = LiveSource.connect(kubeconfig, None, 100)
    unavailable: dict[str, str] = {}
    kinds = [kind for kind, batch in source.workloads(Progress(io.StringIO(), enabled=False),
                                                      unavailable) if batch]
    return unavailable, kinds


def test_unreachable_cluster_is_a_clear_error(tmp_path):
    server = FakeAPIServer().start()
    config = server.kubeconfig(str(tmp_path / "kc"))
    server.stop()
    code, _out, err = gpupolicy_cli("audit", "--kubeconfig", config)
    assert code == 2
    assert "was refused - did you specify the right host or port?" in err
    assert "Traceback" not in err and "HTTPConnection" not in err


# The two report APIs, as their API references define them (wgpolicyk8s.io/v1alpha2 and
# openreports.io/v1alpha1 share the result shape; OpenReports adds `source` on the report).
_RESULT = {
    "type": "object", "additionalProperties": False, "required": ["policy", "result"],
    "properties": {
        "source": {"type": "string"}, "policy": {"type": "string"}, "rule": {"type": "string"},
        "category": {"type": "string"}, "message": {"type": "string"},
        "scored": {"type": "boolean"},
        "result": {"enum": ["pass", "fail", "warn", "error", "skip"]},
        "severity": {"enum": ["critical", "high", "low", "medium", "info"]},
        "timestamp": {"type": "object", "required": ["seconds", "nanos"]},
        "properties": {"type": "object", "additionalProperties": {"type": "string"}},
        "resources": {"type": "array", "items": {"type": "object"}},
    },
}
_SUMMARY = {"type": "object", "additionalProperties": False,
            "properties": {k: {"type": "integer", "minimum": 0}
                           for k in ("pass", "fail", "warn", "error", "skip")}}


def _report_schema(api_version: str, kinds: list[str], source: bool) -> dict[str, Any]:
    props: dict[str, Any] = {"apiVersion": {"const": api_version}, "kind": {"enum": kinds},
                             "metadata": {"type": "object", "required": ["name"]},
                             "summary": _SUMMARY, "results": {"type": "array", "items": _RESULT}}
    if source:
        props["source"] = {"type": "string"}
    return {"type": "object", "additionalProperties": False, "properties": props,
            "required": ["apiVersion", "kind", "metadata"]}


REPORT_SCHEMAS = {
    "policyreport": _report_schema("wgpolicyk8s.io/v1alpha2",
                                   ["PolicyReport", "ClusterPolicyReport"], False),
    "openreports": _report_schema("openreports.io/v1alpha1", ["Report", "ClusterReport"], True),
}
NAMESPACED = {"policyreport": "PolicyReport", "openreports": "Report"}
CLUSTER = {"policyreport": "ClusterPolicyReport", "openreports": "ClusterReport"}


def _reports(out: str, fmt: str) -> list[dict[str, Any]]:
    docs = list(yaml.safe_load_all(out))
    for doc in docs:
        jsonschema.validate(doc, REPORT_SCHEMAS[fmt])
        assert doc["summary"] == {k: sum(r["result"] == k for r in doc["results"])
                                  for k in ("pass", "fail", "warn", "error", "skip")}
    return docs


@pytest.mark.parametrize("fmt", ["policyreport", "openreports"])
def test_a_report_per_namespace_and_one_for_the_cluster(api_server, kubeconfig, fmt):
    refuse = {"rules": {"maxGPUsPerPod": 1}}
    _load(api_server, [namespace("team-a"), namespace("team-b"), *_nodes(),
                       _pod("two", node="a100-1", gpus=2), _pod("two", "team-b", gpus=2),
                       _pod("ok", "team-b", node="t4-1"), gpupolicy("max-one", **refuse)])
    code, out, _ = gpupolicy_cli("audit", "--kubeconfig", kubeconfig, "-o", fmt)
    assert code == 1
    docs = _reports(out, fmt)
    assert [(d["kind"], d["metadata"].get("namespace")) for d in docs] == [
        (CLUSTER[fmt], None), (NAMESPACED[fmt], "team-a"), (NAMESPACED[fmt], "team-b")]
    for doc in docs[1:]:
        assert doc["summary"]["fail"] == 1
        assert {r["resources"][0]["kind"] for r in doc["results"]} == {"Pod"}


@pytest.mark.parametrize("fmt", ["policyreport", "openreports"])
def test_a_clean_audit_writes_empty_reports_that_clear_old_ones(api_server, kubeconfig, fmt):
    _load(api_server, [namespace("team-a"), *_nodes(), _pod("ok", node="t4-1", gpus=1),
                       gpupolicy("max-one", rules={"maxGPUsPerPod": 1})])
    code, out, _ = gpupolicy_cli("audit", "--kubeconfig", kubeconfig, "-o", fmt)
    assert code == 0
    docs = _reports(out, fmt)
    assert [(d["kind"], d["metadata"].get("namespace"), d["results"]) for d in docs] == [
        (CLUSTER[fmt], None, []), (NAMESPACED[fmt], "team-a", [])]
    code, out, _ = gpupolicy_cli("audit", "--kubeconfig", kubeconfig, "-o", fmt,
                                 "--report-passes")
    docs = _reports(out, fmt)
    assert code == 0 and docs[1]["summary"]["pass"] >= 1
    assert {(r["policy"], r["result"]) for r in docs[1]["results"]} >= {("max-one", "pass")}


@pytest.mark.parametrize("fmt", ["table", "text", "json", "policyreport"])
def test_every_format_renders_and_progress_stays_off_a_pipe(api_server, kubeconfig, fmt):
    _load(api_server, [namespace("team-a"), *_nodes(), _pod("p", node="t4-1"),
                       _pod("q", gpus=16, phase="Pending")])
    code, out, err = gpupolicy_cli("audit", "--kubeconfig", kubeconfig, "-o", fmt)
    assert code == 1, err  # q asks for 16 GPUs: no node has them
    assert "\r" not in err
    if fmt in ("table", "text"):
        assert "POLICY" in out and "gpu-defaults" in out and "Pending" in out
    elif fmt == "json":
        assert json.loads(out)["summary"]["pods"] == 2
    else:
        assert list(yaml.safe_load_all(out))


def test_progress_bar_when_asked(api_server, kubeconfig):
    _load(api_server, [namespace("team-a"), *_nodes(),
                       *(_pod(f"p{i}", node="t4-1") for i in range(30))])
    code, _, err = gpupolicy_cli("audit", "--kubeconfig", kubeconfig, "--progress", "always",
                                 "--page-size", "5")
    assert code == 0
    assert "audit: Pod" in err


def test_offline_bad_files_are_named_and_the_rest_audited(tmp_path):
    (tmp_path / "broken.yaml").write_text("kind: Pod\n  bad: [indent\n", encoding="utf-8")
    (tmp_path / "twice.yaml").write_text("apiVersion: v1\nkind: Pod\nkind: Pod\n", "utf-8")
    (tmp_path / "odd.yaml").write_text("apiVersion: v1\nkind: {templated: true}\n", "utf-8")
    (tmp_path / "loop.yaml").symlink_to(tmp_path / "loop.yaml")  # unreadable, even for root
    (tmp_path / "pod.yaml").write_text(yaml.safe_dump(_pod("p", node="t4-1")), "utf-8")
    report = audit_json(str(tmp_path))
    assert report["summary"]["audited"] == {"Pod": 2}  # pod.yaml, and twice.yaml's last `kind`
    # refused as lint and review refuse them: Kubernetes would not read these documents
    refused = {(f["file"].rsplit("/", 1)[-1], f["rule"]) for f in report["findings"]
               if f.get("file")}
    assert refused == {("broken.yaml", "yaml-syntax"), ("twice.yaml", "yaml-duplicate-key")}
    assert report["summary"]["refusedObjects"] == 2
    assert list(report["summary"]["unavailable"]) == [f"file {tmp_path / 'loop.yaml'}"]


def test_shared_gpu_facts_go_to_a_cluster_policy_report(api_server, kubeconfig):
    _load(api_server, [namespace("team-a"), gpupolicy("shared", **SHARED), *_nodes(),
                       *(_share(n, "1") for n in "abc")])
    code, out, _ = gpupolicy_cli("audit", "--kubeconfig", kubeconfig, "-o", "policyreport")
    assert code == 0
    cluster = [d for d in yaml.safe_load_all(out) if d["kind"] == "ClusterPolicyReport"]
    (report,) = cluster
    (result,) = report["results"]
    assert result["rule"] == "shared-gpu-over-limit" and result["result"] == "warn"
    assert result["properties"]["node"] == "a10-share-1"
    assert result["properties"]["device"] == "gpu1"
    assert "namespace" not in report["metadata"]


def test_a_live_audit_refuses_sarif(api_server, kubeconfig):
    """Code scanning needs a file and line for every result; cluster objects have none."""
    code, out, err = gpupolicy_cli("audit", "--kubeconfig", kubeconfig, "-o", "sarif")
    assert code == 2 and out == ""
    assert "gpupolicy audit: -o sarif needs files: code scanning needs a file and line" in err


def test_offline_sarif_places_a_pending_pod_at_its_document(tmp_path):
    """The offline audit's Pending-pod results had no location: GitHub rejected the upload."""
    dump = tmp_path / "dump.yaml"
    dump.write_text("# pods\n" + yaml.safe_dump_all(
        [*_nodes(), _pod("p", node="t4-1"), _pod("q", gpus=16, phase="Pending")],
        sort_keys=False), encoding="utf-8")
    code, out, err = gpupolicy_cli("audit", "-o", "sarif", str(dump))
    assert code == 1, err
    log = json.loads(out)
    assert sarif_rules.problems(log) == []
    pending = [r for r in log["runs"][0]["results"] if r["ruleId"] == "gpu-pod-pending"]
    assert len(pending) == 1
    (location,) = pending[0]["locations"]
    start = location["physicalLocation"]["region"]["startLine"]
    document = dump.read_text().splitlines()[start - 1]
    assert document.startswith("apiVersion") or document.startswith("---"), document
    assert "left out of the SARIF log" not in err


def test_offline_audit_sarif_gives_file_and_line_as_lint_does(tmp_path):
    pod = tmp_path / "pods.yaml"
    pod.write_text("# two pods\n" + yaml.safe_dump_all(
        [_pod("fine", node="t4-1"), _pod("many", node="t4-1", gpus=3)], sort_keys=False))
    policies = tmp_path / "policies"
    policies.mkdir()
    (policies / "p.yaml").write_text(
        "apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: max-two}\n"
        "spec: {rules: {maxGPUsPerPod: 2}}\n")
    code, out, err = gpupolicy_cli("audit", "--policies", str(policies), "-o", "sarif", str(pod))
    assert code == 1, err
    assert sarif_rules.problems(json.loads(out)) == []
    results = json.loads(out)["runs"][0]["results"]
    located = {(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"])
               for r in results if "physicalLocation" in r["locations"][0]}
    code, out, _ = gpupolicy_cli("lint", "--policies", str(policies), "-o", "json", str(pod))
    linted = {(f["rule"], f["line"]) for f in json.loads(out)["findings"]}
    assert ("gpu-max-per-pod", next(line for rule, line in linted
                                    if rule == "gpu-max-per-pod")) in located
    assert {rule for rule, _ in located} == {rule for rule, _ in linted}
    assert all("logicalLocations" not in r["locations"][0] for r in results)


# ---- DRA: claims and templates are audited as objects; pods' claims resolve -----------------

DRA = DATA / "dra.yaml"  # h100-1 (8 GPUs through DRA), l4-1 and l4-2 (2 each), no MIG


def _claim(name: str, count: Any = 1, device_class: str = "gpu.nvidia.com", *,
           template: bool = False, ns: str = "team-a", **meta: Any) -> dict[str, Any]:
    devices = {"devices": {"requests": [{"name": "gpu", "exactly": {
        "deviceClassName": device_class, "count": count}}]}}
    return {"apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate" if template else "ResourceClaim",
            "metadata": {"name": name, "namespace": ns, **meta},
            "spec": {"spec": devices} if template else devices}


def _claiming_pod(name: str, template: str, *, node: str | None = None,
                  phase: str = "Pending") -> dict[str, Any]:
    pod = _pod(name, node=node, phase=phase, gpus=0)
    pod["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    pod["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    return pod


# What the resource claim controller makes from a template for one pod (or a user who writes
# the same annotation and owner): audited like any claim, since those fields prove nothing
GENERATED = _claim("train-0-gpu-x7k2p", 16, annotations={
    "resource.kubernetes.io/pod-claim-name": "gpu"}, ownerReferences=[
    {"apiVersion": "v1", "kind": "Pod", "name": "train-0", "uid": "u", "controller": True,
     "blockOwnerDeletion": True}])


def _dra_cluster() -> list[dict[str, Any]]:
    return [namespace("team-a"), *reading.read_objects(DRA),
            _claim("sixteen", 16, template=True), _claim("shared", 2), GENERATED,
            _claiming_pod("train-0", "sixteen"), _claiming_pod("ok", "sixteen", node="h100-1",
                                                              phase="Running")]


def test_live_audit_reviews_every_claim_and_template(api_server, kubeconfig):
    _load(api_server, _dra_cluster())
    code, out, err = gpupolicy_cli("audit", "--kubeconfig", kubeconfig, "-o", "json")
    assert code == 1, err
    report = json.loads(out)
    summary = report["summary"]
    assert summary["audited"] == {"Pod": 2, "ResourceClaim": 2, "ResourceClaimTemplate": 1}
    assert (summary["pods"], summary["templates"], summary["claims"]) == (2, 0, 3)
    assert summary["skippedOwned"] == {}
    assert summary["unavailable"] == {}
    found = {(r["kind"], r["name"], r["rule"], r["source"]) for r in report["findings"]
             if r["rule"] not in ("mutation",)}
    assert ("ResourceClaimTemplate", "sixteen", "dra-no-matching-device", "claim") in found
    # the pods' claims resolve: a GPU pod that no node can run, and a Pending one
    assert ("Pod", "train-0", "dra-no-matching-device", "pod") in found
    assert ("Pod", "train-0", "gpu-pod-pending", "pod") in found
    # the claim that says it was made for a pod asks for 16 GPUs: judged like any other
    assert ("ResourceClaim", GENERATED["metadata"]["name"], "dra-no-matching-device",
            "claim") in found
    code, table, _ = gpupolicy_cli("audit", "--kubeconfig", kubeconfig)
    assert "(2 pods: 1 Pending, 1 Running, 0 templates, 3 claims)" in table
    assert "Skipped" not in table


def test_offline_audit_of_the_same_claims_equals_the_live_one(api_server, kubeconfig, tmp_path):
    objects = _dra_cluster()
    _load(api_server, objects)
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump_all(objects, sort_keys=False), encoding="utf-8")
    live, offline = audit_json("--kubeconfig", kubeconfig), audit_json(str(dump))
    for report in (live, offline):
        report["summary"].pop("seconds")
    assert live["summary"] == offline["summary"]
    assert _finding_keys(live["findings"]) == _finding_keys(offline["findings"])
    assert live["cluster"] == offline["cluster"]


def test_a_cluster_without_the_dra_api_has_no_claims_and_no_error(api_server, kubeconfig):
    _load(api_server, [namespace("team-a"), *_nodes(), _pod("p", node="t4-1")])
    report = audit_json("--kubeconfig", kubeconfig)
    assert report["summary"]["audited"] == {"Pod": 1}
    assert report["summary"]["unavailable"] == {} and report["summary"]["claims"] == 0
    assert any("resourceclaimtemplates" in r for r in api_server.requests)  # asked, got 404


@pytest.mark.parametrize(
    ("template", "expect"),
    [
        (_claim("big", 16, template=True),
         # the scheduler's words (DynamicResources), then why
         ["pool NVIDIA-H100-80GB-HBM3: cannot allocate all claims (8 devices match class "
          "gpu.nvidia.com, the claim asks for 16)", "pool NVIDIA-L4: cannot allocate all claims "
          "(2 devices match class gpu.nvidia.com, the claim asks for 16)"]),
        (_claim("big", 1, "mig.nvidia.com", template=True),
         ["pool NVIDIA-H100-80GB-HBM3: cannot allocate all claims (0 devices match class "
          "mig.nvidia.com, the claim asks for 1)"]),
        (_claim("big", 4, template=True),
         ["pool NVIDIA-L4: cannot allocate all claims (2 devices match class gpu.nvidia.com, "
          "the claim asks for 4)", "fits pool NVIDIA-H100-80GB-HBM3 once capacity is free"]),
    ],
    ids=["no-pool-has-16", "no-mig-devices", "capacity"],
)
def test_pending_pods_whose_claims_cannot_be_allocated_say_pool_and_why(api_server, kubeconfig,
                                                                        template, expect):
    _load(api_server, [namespace("team-a"), *reading.read_objects(DRA), template,
                       _claiming_pod("waits", "big"), _pod("cpu", phase="Pending", gpus=0)])
    report = audit_json("--kubeconfig", kubeconfig)
    pending = report["cluster"]["pendingGPUPods"]
    assert pending["total"] == 1
    (entry,) = pending["pods"]
    assert entry["name"] == "waits"
    for line in expect:
        assert line in entry["pools"], entry["pools"]


@pytest.mark.parametrize("fmt", ["policyreport", "openreports"])
def test_claim_results_in_policy_reports(api_server, kubeconfig, fmt):
    _load(api_server, _dra_cluster())
    code, out, _ = gpupolicy_cli("audit", "--kubeconfig", kubeconfig, "-o", fmt)
    assert code == 1
    (team,) = [d for d in _reports(out, fmt) if d["metadata"].get("namespace") == "team-a"]
    refs = {(r["resources"][0]["kind"], r["resources"][0]["name"], r["rule"])
            for r in team["results"]}
    assert ("ResourceClaimTemplate", "sixteen", "dra-no-matching-device") in refs
    assert all(r["resources"][0]["apiVersion"] == "resource.k8s.io/v1" for r in team["results"]
               if r["resources"][0]["kind"].startswith("ResourceClaim"))


def test_offline_sarif_puts_claim_findings_on_the_claims_fields(tmp_path):
    manifest = tmp_path / "claims.yaml"
    manifest.write_text(yaml.safe_dump_all([_claim("sixteen", 16, template=True),
                                            _claim("bad", "many")],
                                           sort_keys=False), encoding="utf-8")
    code, out, err = gpupolicy_cli("audit", "-o", "sarif", "--inventory", str(DRA), str(manifest))
    assert code == 1, err
    assert sarif_rules.problems(json.loads(out)) == []
    results = json.loads(out)["runs"][0]["results"]
    located = {(r["ruleId"], r["locations"][0]["physicalLocation"]["region"]["startLine"])
               for r in results}
    code, out, _ = gpupolicy_cli("lint", "-o", "json", "--inventory", str(DRA), str(manifest))
    linted = {(f["rule"], f["line"]) for f in json.loads(out)["findings"]}
    assert located == linted
    assert {r for r, _ in located} == {"dra-no-matching-device", "dra-claim-invalid"}


def test_refusal_examples_are_twenty_at_most_over_pods_templates_and_claims(tmp_path):
    deployment = {"apiVersion": "apps/v1", "kind": "Deployment",
                  "metadata": {"namespace": "team-a"},
                  "spec": {"template": {"spec": _pod("x", gpus=16)["spec"]}}}
    objects = [*(_pod(f"p{i}", gpus=16) for i in range(12)),
               *({**deployment, "metadata": {"name": f"d{i}", "namespace": "team-a"}}
                 for i in range(12)),
               *(_claim(f"c{i}", 16) for i in range(12))]
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump_all(objects, sort_keys=False), encoding="utf-8")
    code, out, err = gpupolicy_cli("audit", "--inventory", str(DRA), str(dump))
    assert code == 1, err
    listed = out.split("Would be refused (first 20):\n", 1)[1].split("\n\n", 1)[0].splitlines()
    sources_listed = Counter(line.rsplit(" (", 1)[1].split(")")[0] for line in
                             (raw.split(":", 1)[0] for raw in listed))
    assert sum(sources_listed.values()) == 20 and max(sources_listed.values()) <= 10
    assert set(sources_listed) <= {"pod", "template", "claim"}


def test_audit_namespace_scopes_a_live_audit(api_server, kubeconfig):
    """`audit -n NS` lists the workloads of that namespace only (namespaced list calls, as a
    user with one namespace's rights can make)."""
    _load(api_server, [namespace("team-a"), namespace("team-b"), *_nodes(),
                       _pod("a", "team-a", node="t4-1"), _pod("b", "team-b", node="t4-1")])
    for argv, audited in ((("-n", "team-b"), {"team-b"}), ((), {"team-a", "team-b"})):
        report = audit_json("--kubeconfig", kubeconfig, *argv)
        namespaces = {r["namespace"] for r in report["policies"]}
        assert namespaces == audited, (argv, report["policies"])


def test_audit_namespace_scopes_an_offline_audit(tmp_path):
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump_all([_pod("a", "team-a", gpus=16), _pod("b", "team-b")],
                                       sort_keys=False), encoding="utf-8")
    assert audit_json(str(dump))["summary"]["audited"] == {"Pod": 2}
    scoped = audit_json("--namespace", "team-b", str(dump))
    assert scoped["summary"]["audited"] == {"Pod": 1}
    assert {f.get("namespace") for f in scoped["findings"]} <= {"team-b"}


KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
contexts: [{name: ctx, context: {cluster: c, user: u}}]
current-context: ctx
users: [{name: u, user: {token: t}}]
"""


# (arguments after --kubeconfig FILE, the error line): kubectl's words, no urllib3 repr
CLUSTER_ERRORS = [
    (["audit"], "gpupolicy audit: the connection to the server 127.0.0.1:1 was refused - did "
                "you specify the right host or port?"),
    (["explain", "ml/train"], "gpupolicy explain: the connection to the server 127.0.0.1:1 "
                              "was refused - did you specify the right host or port?"),
    (["audit", "--context", "nope"], 'gpupolicy audit: context "nope" does not exist'),
    (["explain", "ml/train", "--context", "nope"],
     'gpupolicy explain: context "nope" does not exist'),
]


@pytest.mark.parametrize(("argv", "line"), CLUSTER_ERRORS, ids=[" ".join(c[0])
                                                                for c in CLUSTER_ERRORS])
def test_cluster_errors_in_kubectls_words(tmp_path, argv, line):
    config = tmp_path / "kubeconfig"
    config.write_text(KUBECONFIG, encoding="utf-8")
    code, out, err = gpupolicy_cli(argv[0], "--kubeconfig", str(config), *argv[1:])
    assert code == 2 and out == ""
    assert err.splitlines() == [line]


def test_a_missing_kubeconfig_is_named(tmp_path):
    code, _, err = gpupolicy_cli("audit", "--kubeconfig", str(tmp_path / "none"))
    assert code == 2
    assert err == (f"gpupolicy audit: cannot load cluster credentials from {tmp_path / 'none'}: "
                   f"stat {tmp_path / 'none'}: no such file or directory\n")


def test_the_table_escapes_file_borne_names_and_counts_cluster_findings_apart(tmp_path):
    """A name from a file may hold escape sequences or a bidi override (U+202E): escaped, as
    lint's text report escapes them. A Pending pod is a cluster finding, not a policy warning
    (every WARN column was 0 while the summary said 1 warning). Counts read as English."""
    evil = _pod("evil\x1b[31mred\u202etxt.exe", "team-a", node="t4-1", gpus=16)
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump_all(
        [*_nodes(), evil, _pod("q", "team-a", gpus=1, phase="Pending")], sort_keys=False,
        allow_unicode=True), encoding="utf-8")
    code, out, err = gpupolicy_cli("audit", str(dump))
    assert code == 1, err
    assert "\x1b" not in out and "\u202e" not in out
    assert "evil\\x1b[31mred\\u202etxt.exe" in out
    assert "Audited 2 Pods in 1 namespace (2 pods: 1 Pending, 1 Running, 0 templates)" in out
    summary = next(line for line in out.splitlines() if line.startswith("Would refuse"))
    assert summary == ("Would refuse 1 object, mutate 0; 1 error, 0 warnings; "
                       "1 cluster finding (below).")
    assert "GPU pods Pending and unscheduled: 1" in out
