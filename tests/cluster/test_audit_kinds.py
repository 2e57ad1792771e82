"""The live audit lists the kinds of the workload-kinds table (`--workload-kinds FILE` and the
bundled kinds the fixed lists leave out), their versions found through API discovery
(`GET /apis` on the fake API server, read by the real `kubernetes` client)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.workloads import KindTable, WorkloadKind
from tests.cluster.conftest import gpupolicy, namespace
from tests.cluster.fakeapi import FakeAPIServer
from webhook.cli import run as cli
from webhook.cluster.listing import LiveSource, served_versions
from webhook.output.progress import Progress

NODES = Path(__file__).parent / "data" / "nodes.yaml"
KINDS = """\
- kind: GPUJob
  apiGroup: example.com
  resource: gpujobs
  podSpecPaths: [spec.template.spec]
"""
MAX_ONE = {"namespaces": ["team-a"], "rules": {"maxGPUsPerPod": 1}}
DISCOVERY = "API discovery (GET /apis)"


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def _audit(kubeconfig: str, *argv: str) -> tuple[int, dict[str, Any]]:
    code, out, err = _cli("audit", "--kubeconfig", kubeconfig, "--format", "json", *argv)
    assert code in (0, 1, 2) and out, err
    return code, json.loads(out)


def _spec(gpus: int) -> dict[str, Any]:
    return {"containers": [{"name": "c", "image": "cuda",
                            "resources": {"limits": {"nvidia.com/gpu": str(gpus)}}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                             "effect": "NoSchedule"}]}


def gpujob(name: str, gpus: int, api_version: str = "example.com/v1") -> dict[str, Any]:
    return {"apiVersion": api_version, "kind": "GPUJob",
            "metadata": {"name": name, "namespace": "team-a"},
            "spec": {"template": {"spec": _spec(gpus)}}}


def _pod(name: str, gpus: int = 1) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "team-a"},
            "spec": {**_spec(gpus), "nodeName": "a100-1"}, "status": {"phase": "Running"}}


def _base() -> list[dict[str, Any]]:
    return [namespace("team-a"), *yaml.safe_load_all(NODES.read_text()),
            gpupolicy("max-one", **MAX_ONE), _pod("p")]


@pytest.fixture
def kinds_file(tmp_path: Path) -> str:
    path = tmp_path / "kinds.yaml"
    path.write_text(KINDS, encoding="utf-8")
    return str(path)


def _refused(report: dict[str, Any]) -> set[tuple[str, str, str]]:
    return {(r["kind"], r["name"], r["rule"]) for r in report["findings"]
            if r["severity"] == "error"}


def _lists(server: FakeAPIServer, fragment: str) -> list[str]:
    return [r for r in server.requests if fragment in r]


def test_a_workload_kinds_kind_is_listed_and_judged(api_server, kubeconfig, kinds_file,
                                                    tmp_path):
    objects = [*_base(), gpujob("one", 1), gpujob("two", 2)]
    api_server.add_all(objects)
    code, report = _audit(kubeconfig, "--workload-kinds", kinds_file)
    assert code == 1
    assert report["summary"]["audited"] == {"GPUJob": 2, "Pod": 1}
    assert report["summary"]["unavailable"] == {}
    assert _refused(report) == {("GPUJob", "two", "gpu-max-per-pod")}
    assert [r for r in api_server.requests if r.partition("?")[0] in ("GET /apis", "GET /apis/")
            ] == ["GET /apis/"]  # once per audit, not per kind
    # the same objects as a file audit the same: the file audit lists the table's kinds too
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump_all(objects), encoding="utf-8")
    code, out, err = _cli("audit", "--format", "json", "--workload-kinds", kinds_file, str(dump))
    assert code == 1, err
    offline = json.loads(out)
    for r in (report, offline):
        r["summary"].pop("seconds")
    assert offline["summary"] == report["summary"]
    assert _refused(offline) == _refused(report)


def test_without_the_kind_table_entry_the_kind_is_not_listed(api_server, kubeconfig):
    api_server.add_all([*_base(), gpujob("two", 2)])
    code, report = _audit(kubeconfig)
    assert code == 0
    assert report["summary"]["audited"] == {"Pod": 1}
    assert not _lists(api_server, "gpujobs")


@pytest.mark.parametrize(
    ("served", "requests"),
    [
        ([], []),  # the group is not served: nothing to ask
        ([("example.com/v1", "Widget")], ["/apis/example.com/v1/gpujobs"]),  # 404
        ([("example.com/v2", "Widget"), ("example.com/v1", "Widget")],
         ["/apis/example.com/v2/gpujobs", "/apis/example.com/v1/gpujobs"]),
    ],
    ids=["group-not-served", "resource-not-served", "no-version-serves-it"],
)
def test_a_kind_the_cluster_does_not_serve_is_absent_without_error(
        api_server, kubeconfig, kinds_file, served, requests):
    api_server.add_all(_base())
    for api_version, kind in served:
        api_server.install(api_version, kind)
    code, report = _audit(kubeconfig, "--workload-kinds", kinds_file)
    assert code == 0
    assert report["summary"]["audited"] == {"Pod": 1}
    assert report["summary"]["unavailable"] == {}
    asked = [r.split()[1].partition("?")[0] for r in _lists(api_server, "gpujobs")]
    assert asked == requests


def test_the_preferred_version_first_then_the_others(api_server, kubeconfig, kinds_file):
    api_server.install("example.com/v2", "Widget")  # v2 is registered first: preferred
    api_server.add_all([*_base(), gpujob("two", 2)])  # served under v1 only
    code, report = _audit(kubeconfig, "--workload-kinds", kinds_file)
    assert code == 1
    assert report["summary"]["audited"] == {"GPUJob": 1, "Pod": 1}
    (finding,) = [r for r in report["findings"] if r["kind"] == "GPUJob"
                  and r["rule"] == "gpu-max-per-pod"]
    assert finding["apiVersion"] == "example.com/v1"


def test_a_kind_served_under_two_versions_is_listed_once(api_server, kubeconfig, kinds_file):
    api_server.add_all([*_base(), gpujob("two", 2), gpujob("two", 2, "example.com/v1beta1")])
    _, report = _audit(kubeconfig, "--workload-kinds", kinds_file)
    assert report["summary"]["audited"] == {"GPUJob": 1, "Pod": 1}
    assert not _lists(api_server, "/apis/example.com/v1beta1/gpujobs")


@pytest.mark.parametrize("status", [500, 403])
def test_discovery_failing_fails_the_audit_and_names_what_was_not_listed(
        api_server, kubeconfig, kinds_file, status):
    api_server.add_all([*_base(), _pod("big", 2), gpujob("two", 2)])
    api_server.fail_next(9, status, path="/apis")  # a 500 is retried; one that lasts is not
    code, report = _audit(kubeconfig, "--workload-kinds", kinds_file)
    assert code == 2  # the audit did not see every kind: it is incomplete
    assert report["summary"]["audited"] == {"Pod": 2}
    assert _refused(report) == {("Pod", "big", "gpu-max-per-pod")}
    unavailable = report["summary"]["unavailable"]
    assert list(unavailable) == [DISCOVERY]
    assert unavailable[DISCOVERY].startswith(f"HTTP {status} ")
    assert "GPUJob (example.com)" in unavailable[DISCOVERY]
    assert "RayCronJob (ray.io)" in unavailable[DISCOVERY]  # bundled kinds found the same way
    api_server.fail_next(9, status, path="/apis")
    code, table, err = _cli("audit", "--kubeconfig", kubeconfig, "--workload-kinds", kinds_file)
    assert code == 2
    assert f"Not audited: API discovery (GET /apis): HTTP {status} " in table
    assert f"could not read API discovery (GET /apis): HTTP {status}" in err


def test_discovery_failing_once_is_retried(api_server, kubeconfig, kinds_file):
    api_server.add_all([*_base(), _pod("big", 2), gpujob("two", 2)])
    api_server.fail_next(1, 503, path="/apis")
    code, report = _audit(kubeconfig, "--workload-kinds", kinds_file)
    assert code == 1 and report["summary"]["unavailable"] == {}
    assert report["summary"]["audited"] == {"GPUJob": 1, "Pod": 2}


@pytest.mark.parametrize(
    ("body", "why"),
    [
        (b"<html>proxy error</html>", "the answer is not JSON"),
        (b"\xff\xfe", "the answer is not JSON"),
        (b"[]", "the answer is no APIGroupList"),
        (b'{"kind": "APIGroupList", "groups": {"name": "example.com"}}',
         "the answer is no APIGroupList"),
    ],
    ids=["html", "not-utf8", "a-list", "groups-not-a-list"],
)
def test_a_discovery_answer_that_is_no_group_list_is_reported(api_server, kubeconfig,
                                                             kinds_file, body, why):
    api_server.add_all([*_base(), gpujob("two", 2)])
    api_server.discovery = body
    code, report = _audit(kubeconfig, "--workload-kinds", kinds_file)
    assert code == 2 and report["summary"]["audited"] == {"Pod": 1}
    assert report["summary"]["unavailable"][DISCOVERY].startswith(why + "; not listed: ")


def test_malformed_discovery_entries_are_left_out(api_server, client):
    api_server.discovery = json.dumps({"kind": "APIGroupList", "groups": [
        {"name": 5, "versions": [{"version": "v1"}]}, "x", None, {"name": "empty"},
        {"name": "no-versions", "versions": None, "preferredVersion": None},
        {"name": "example.com", "preferredVersion": {"version": "../v1"},
         "versions": [{"version": "v2"}, {"version": 7}, None, {"version": "V1"},
                      {"version": "v1/../x"}, {"version": "v2"}, {"version": "v1"}]},
        {"name": "other.io", "preferredVersion": {"version": "v1beta1"}},
    ]}).encode()
    assert served_versions(client) == {"example.com": ["v2", "v1"], "other.io": ["v1beta1"]}
    api_server.discovery = json.dumps({"groups": [{"name": "many", "versions": [
        {"version": f"v{i}"} for i in range(10_000)]}]}).encode()
    assert served_versions(client) == {"many": [f"v{i}" for i in range(16)]}


def test_hostile_versions_never_reach_a_request_path(api_server, kubeconfig, kinds_file):
    api_server.add_all([*_base(), gpujob("two", 2)])
    api_server.discovery = json.dumps({"groups": [{
        "name": "example.com", "preferredVersion": {"version": "../../api/v1/pods#"},
        "versions": [{"version": "v1?watch=true"}, {"version": "v1"}]}]}).encode()
    code, report = _audit(kubeconfig, "--workload-kinds", kinds_file)
    assert code == 1 and report["summary"]["audited"] == {"GPUJob": 1, "Pod": 1}
    assert _lists(api_server, "gpujobs") == [
        r for r in api_server.requests if r.startswith("GET /apis/example.com/v1/gpujobs?")]


def test_a_cluster_scoped_bundled_kind_is_listed_too(api_server, kubeconfig, tmp_path):
    template = {"apiVersion": "argoproj.io/v1alpha1", "kind": "ClusterWorkflowTemplate",
                "metadata": {"name": "train"},
                "spec": {"templates": [{"name": "main", "container": {
                    "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": "1"}}}}]}}
    objects = [*_base(), template]
    api_server.add_all(objects)
    _, report = _audit(kubeconfig)
    assert report["summary"]["audited"] == {"ClusterWorkflowTemplate": 1, "Pod": 1}
    dump = tmp_path / "dump.yaml"
    dump.write_text(yaml.safe_dump_all(objects), encoding="utf-8")
    _, out, _ = _cli("audit", "--format", "json", str(dump))
    assert json.loads(out)["summary"]["audited"] == report["summary"]["audited"]


def test_an_entry_naming_a_resource_already_listed_is_not_listed_twice(api_server, kubeconfig,
                                                                       tmp_path):
    kinds = tmp_path / "kinds.yaml"
    kinds.write_text("- {kind: PTJob, apiGroup: kubeflow.org, resource: pytorchjobs,\n"
                     "   podSpecPaths: ['spec.pytorchReplicaSpecs.*.template.spec']}\n")
    job = {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob",
           "metadata": {"name": "pt", "namespace": "team-a"},
           "spec": {"pytorchReplicaSpecs": {"Worker": {"template": {"spec": _spec(2)}}}}}
    api_server.add_all([*_base(), job])
    _, report = _audit(kubeconfig, "--workload-kinds", str(kinds))
    assert report["summary"]["audited"] == {"PyTorchJob": 1, "Pod": 1}
    assert len(_lists(api_server, "/pytorchjobs")) == 1


def test_an_entry_without_a_resource_is_reported_once_and_nothing_crashes(api_server, client):
    api_server.add_all([*_base(), gpujob("two", 2)])
    source = LiveSource(client)
    # parse_kind_table never gives an empty resource (it defaults to the kind's plural)
    source.kinds = KindTable((
        WorkloadKind("GPUJob", "example.com", "", (("spec", "template", "spec"),)),))
    unavailable: dict[str, str] = {}
    kinds = [kind for kind, batch in source.workloads(Progress(io.StringIO(), enabled=False),
                                                      unavailable) if batch]
    assert kinds == ["Pod"]
    assert unavailable == {"GPUJob (example.com)": "the workload-kinds table gives no resource "
                                                   "(plural) to list it by"}


@pytest.mark.parametrize("target", ["gpujob/team-a/two", "gpujobs/team-a/two",
                                    "GPUJob/team-a/two"])
def test_explain_reads_a_workload_kinds_kind_from_the_cluster(api_server, kubeconfig,
                                                              kinds_file, target):
    api_server.install("example.com/v2", "Widget")  # preferred, without gpujobs
    api_server.add_all([*_base(), gpujob("two", 2)])
    code, out, err = _cli("explain", target, "--kubeconfig", kubeconfig, "--workload-kinds",
                          kinds_file, "--format", "json")
    assert code == 0, err
    (answer,) = json.loads(out)
    assert (answer["kind"], answer["namespace"], answer["name"]) == ("GPUJob", "team-a", "two")
    assert [s["path"] for s in answer["podSpecs"]] == ["spec.template.spec"]
    assert answer["skipped"] is None


@pytest.mark.parametrize(
    ("setup", "target", "message"),
    [
        ("table-less", "gpujob/team-a/two", "unknown kind 'gpujob'"),
        ("group-not-served", "gpujob/team-a/two",
         "GPUJob: the cluster serves no API group example.com"),
        ("discovery-500", "gpujob/team-a/two", "gpujob/team-a/two: HTTP 500"),
        ("discovery-html", "gpujob/team-a/two", "API discovery (GET /apis): the answer is not "
                                                "JSON"),
        ("", "gpujob/team-a/nobody", "gpujob/team-a/nobody: not found in the cluster"),
    ],
)
def test_explain_of_a_table_kind_it_cannot_read_is_a_clear_error(
        api_server, kubeconfig, kinds_file, setup, target, message):
    api_server.add_all(_base())
    if setup != "group-not-served":
        api_server.add(gpujob("two", 2))
    if setup == "discovery-500":
        api_server.fail_next(1, 500, path="/apis")
    if setup == "discovery-html":
        api_server.discovery = b"<html>"
    argv = [] if setup == "table-less" else ["--workload-kinds", kinds_file]
    code, out, err = _cli("explain", target, "--kubeconfig", kubeconfig, *argv)
    assert code == 2 and out == ""
    assert message in err
