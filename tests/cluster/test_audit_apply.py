"""`gpupolicy audit --apply`: the reports written into the (fake) cluster with server-side
apply, kept current run after run (updated, cleared, split and re-merged, deleted with their
namespace), never touched by a failed audit, never another owner's; both report APIs;
`--shard I/N` partitions the namespaces exactly."""

from __future__ import annotations

import io
import json
from typing import Any

import jsonschema
import pytest

from tests.cluster.conftest import gpupolicy, namespace
from tests.cluster.fakeapi import FakeAPIServer
from tests.cluster.test_audit import NODES, REPORT_SCHEMAS, SHARED, _pod, _share
from webhook.cli import run as cli
from webhook.cluster.shards import shard_of
from webhook.inputs import reading
from webhook.output import audit_report

# format -> (apiVersion, namespaced kind, cluster kind)
APIS = {fmt: audit_report.REPORT_APIS[fmt] for fmt in ("policyreport", "openreports")}
MANAGED = {"app.kubernetes.io/managed-by": "gpupolicy"}


def _cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = cli(list(argv), out, err)
    return code, out.getvalue(), err.getvalue()


def _install(server: FakeAPIServer, *fmts: str) -> None:
    for fmt in fmts:
        api_version, kind, cluster_kind = APIS[fmt]
        server.install(api_version, kind)
        server.install(api_version, cluster_kind)


def _cluster(server: FakeAPIServer, teams: dict[str, int]) -> None:
    """Namespaces with that many refused pods (2 GPUs each under a 1-GPU policy)."""
    server.add_all([gpupolicy("max-one", rules={"maxGPUsPerPod": 1}),
                    *reading.read_objects(NODES)])
    for team, bad in teams.items():
        server.add(namespace(team))
        server.add_all(_pod(f"p{i:03}", team, node="a100-1", gpus=2) for i in range(bad))


def _apply(kubeconfig: str, *argv: str) -> dict[str, Any]:
    code, out, err = _cli("audit", "--kubeconfig", kubeconfig, "--apply", *argv)
    assert code == 0, err
    return json.loads(out)


def _reports(server: FakeAPIServer, fmt: str = "policyreport") -> dict[tuple[str, str],
                                                                      dict[str, Any]]:
    """(namespace, name) -> report, each checked against the report API's schema."""
    api_version, kind, cluster_kind = APIS[fmt]
    found = {}
    for obj in [*server.objects(api_version, kind), *server.objects(api_version, cluster_kind)]:
        meta = obj["metadata"]
        if meta.get("labels") == MANAGED:
            body = {k: v for k, v in obj.items()}
            body["metadata"] = {"name": meta["name"]}
            jsonschema.validate(body, REPORT_SCHEMAS[fmt])
            assert obj["summary"] == {k: sum(r["result"] == k for r in obj["results"])
                                      for k in ("pass", "fail", "warn", "error", "skip")}
        found[(meta.get("namespace", ""), meta["name"])] = obj
    return found


def _fails(server: FakeAPIServer, fmt: str = "policyreport") -> dict[str, int]:
    """Failing results per namespace, over all its parts."""
    counts: dict[str, int] = {}
    for (ns, _), report in _reports(server, fmt).items():
        counts[ns] = counts.get(ns, 0) + report["summary"]["fail"]
    return counts


def test_reports_are_created_updated_and_cleared(api_server, kubeconfig):
    _install(api_server, "policyreport")
    _cluster(api_server, {"team-a": 2, "team-b": 1})
    line = _apply(kubeconfig)
    assert line["reportAPIs"] == ["policyreport"] and line["reportsDeleted"] == 0
    assert line["reportsWritten"] == 3 and line["refusedObjects"] == 3
    assert set(_reports(api_server)) == {("", "gpupolicy-0"), ("team-a", "gpupolicy-0"),
                                        ("team-b", "gpupolicy-0")}
    assert _fails(api_server) == {"": 0, "team-a": 2, "team-b": 1}
    uid = _reports(api_server)[("team-a", "gpupolicy-0")]["metadata"]["uid"]
    patches = [r for r in api_server.requests if r.startswith("PATCH ")]
    assert all("fieldManager=gpupolicy" in r and "force=true" in r for r in patches)
    # team-b's bad pod is deleted, and nothing else is there: its report is emptied
    api_server.delete(_pod("p000", "team-b"))
    api_server.add(_pod("p002", "team-a", node="a100-1", gpus=2))
    _apply(kubeconfig)
    assert _fails(api_server) == {"": 0, "team-a": 3, "team-b": 0}
    assert _reports(api_server)[("team-a", "gpupolicy-0")]["metadata"]["uid"] == uid


def test_passes_only_when_asked(api_server, kubeconfig):
    _install(api_server, "policyreport")
    _cluster(api_server, {"team-a": 0})
    api_server.add(_pod("ok", "team-a", node="t4-1"))
    _apply(kubeconfig)
    assert _reports(api_server)[("team-a", "gpupolicy-0")]["results"] == []
    _apply(kubeconfig, "--include-passes")
    assert _reports(api_server)[("team-a", "gpupolicy-0")]["summary"]["pass"] >= 1


def test_reports_of_a_vanished_namespace_are_deleted_and_no_other_owners(api_server,
                                                                          kubeconfig):
    _install(api_server, "policyreport")
    _cluster(api_server, {"team-a": 1, "team-b": 1})
    theirs = {"apiVersion": "wgpolicyk8s.io/v1alpha2", "kind": "PolicyReport",
              "metadata": {"name": "kyverno-pol", "namespace": "team-b",
                           "labels": {"app.kubernetes.io/managed-by": "kyverno"}},
              "results": []}
    unlabelled = {**theirs, "metadata": {"name": "gpupolicy-9", "namespace": "team-b"}}
    api_server.add_all([theirs, unlabelled])
    _apply(kubeconfig)
    api_server.delete(_pod("p000", "team-b"))
    api_server.delete(namespace("team-b"))
    line = _apply(kubeconfig)
    assert line["reportsDeleted"] == 1
    assert set(_reports(api_server)) == {("", "gpupolicy-0"), ("team-a", "gpupolicy-0"),
                                        ("team-b", "kyverno-pol"), ("team-b", "gpupolicy-9")}


def test_a_namespace_with_many_results_is_split_and_merged_again(api_server, kubeconfig):
    _install(api_server, "policyreport")
    _cluster(api_server, {"team-a": 900, "team-b": 1})
    line = _apply(kubeconfig)
    parts = {name: r for (ns, name), r in _reports(api_server).items() if ns == "team-a"}
    assert len(parts) >= 2 and line["reportsWritten"] == 2 + len(parts)
    for report in parts.values():
        assert len(json.dumps(report)) <= 500 * 1024
    assert _fails(api_server)["team-a"] == 900
    where = {r["resources"][0]["name"]: name for name, report in parts.items()
             for r in report["results"]}
    # one pod fixed: every other pod stays in its part
    api_server.delete(_pod("p000", "team-a"))
    _apply(kubeconfig)
    parts = {name: r for (ns, name), r in _reports(api_server).items() if ns == "team-a"}
    again = {r["resources"][0]["name"]: name for name, report in parts.items()
             for r in report["results"]}
    assert again == {pod: name for pod, name in where.items() if pod != "p000"}
    # all but one fixed: the parts merge back into one, the others are deleted
    for i in range(1, 900):
        api_server.delete(_pod(f"p{i:03}", "team-a"))
    line = _apply(kubeconfig)
    assert line["reportsDeleted"] == len(parts) - 1
    assert [name for ns, name in _reports(api_server) if ns == "team-a"] == ["gpupolicy-0"]
    assert _fails(api_server) == {"": 0, "team-a": 0, "team-b": 1}


@pytest.mark.parametrize("fault", ["pods-page-2", "pods-403", "report-list-403", "policies"])
def test_a_failed_audit_writes_and_deletes_nothing(api_server, kubeconfig, fault):
    _install(api_server, "policyreport")
    _cluster(api_server, {f"team-{n}": 3 for n in range(4)})
    _apply(kubeconfig)
    before = _reports(api_server)
    for n in range(4):  # most fixed: a complete audit would clear most failures
        for i in range(2):
            api_server.delete(_pod(f"p{i:03}", f"team-{n}"))
    if fault == "pods-page-2":  # 4 pods left, 2 a page
        api_server.fault_page("/api/v1/pods", 2, 500, times=100)
    elif fault == "pods-403":
        api_server.fault_page("/api/v1/pods", 1, 403, times=100)
    elif fault == "report-list-403":
        api_server.fault_page("/apis/wgpolicyk8s.io/v1alpha2/policyreports", 1, 403, times=100)
    else:
        api_server.fault_page("/apis/gpupolicy.io/v1alpha1/gpupolicies", 1, 503, times=100)
    start = len(api_server.requests)
    code, out, err = _cli("audit", "--kubeconfig", kubeconfig, "--apply", "--page-size", "2")
    assert code == 2
    line = json.loads(out)  # the run's one line in the log says it failed, and why
    assert line["audit"] == "failed" and line["reportsWritten"] == line["reportsDeleted"] == 0
    assert "HTTP" in line["errors"][0]
    assert "HTTP" in err and "Traceback" not in err
    assert not [r for r in api_server.requests[start:] if r.startswith(("PATCH", "DELETE"))]
    assert _reports(api_server) == before


def test_a_refused_write_fails_the_run(api_server, kubeconfig):
    _install(api_server, "policyreport")
    _cluster(api_server, {"team-a": 1})
    api_server.fail_writes(403, "PATCH")
    code, out, err = _cli("audit", "--kubeconfig", kubeconfig, "--apply")
    assert code == 2 and json.loads(out)["audit"] == "failed"
    assert "cannot apply ClusterPolicyReport gpupolicy-0: HTTP 403" in err


def test_a_write_failing_part_way_says_what_was_written_and_deletes_nothing(api_server,
                                                                            kubeconfig):
    _install(api_server, "policyreport")
    _cluster(api_server, {"team-a": 1, "team-b": 1, "team-c": 1})
    _apply(kubeconfig)
    api_server.delete(_pod("p000", "team-c"))
    api_server.delete(namespace("team-c"))  # its report is due for deletion
    api_server.fail_writes(403, "PATCH", "/apis/wgpolicyk8s.io/v1alpha2/namespaces/team-b/")
    code, out, err = _cli("audit", "--kubeconfig", kubeconfig, "--apply")
    assert code == 2 and "cannot apply PolicyReport team-b/gpupolicy-0: HTTP 403" in err
    line = json.loads(out)
    assert (line["audit"], line["reportsWritten"], line["reportsDeleted"]) == ("failed", 2, 0)
    assert ("team-c", "gpupolicy-0") in _reports(api_server)  # deletions come last


@pytest.mark.parametrize(
    ("installed", "asked", "written"),
    [
        (["policyreport"], "auto", ["policyreport"]),
        (["openreports"], "auto", ["openreports"]),
        (["policyreport", "openreports"], "auto", ["openreports"]),
        (["policyreport", "openreports"], "policyreport", ["policyreport"]),
        (["policyreport", "openreports"], "both", ["openreports", "policyreport"]),
    ],
)
def test_both_report_apis(api_server, kubeconfig, installed, asked, written):
    _install(api_server, *installed)
    _cluster(api_server, {"team-a": 1})
    line = _apply(kubeconfig, "--report-api", asked)
    assert line["reportAPIs"] == written
    for fmt in installed:
        assert _fails(api_server, fmt) == ({"": 0, "team-a": 1} if fmt in written else {})


@pytest.mark.parametrize(("installed", "asked"), [([], "auto"), (["policyreport"],
                                                                 "openreports")])
def test_a_report_api_not_installed_is_a_clear_error(api_server, kubeconfig, installed, asked):
    _install(api_server, *installed)
    _cluster(api_server, {"team-a": 1})
    code, out, err = _cli("audit", "--kubeconfig", kubeconfig, "--apply", "--report-api", asked)
    assert code == 2 and json.loads(out)["reportsWritten"] == 0
    assert "CRDs" in err


def test_shards_partition_the_namespaces_exactly(api_server, kubeconfig):
    _install(api_server, "policyreport")
    teams = {f"team-{n}": 1 + n % 3 for n in range(12)}
    _cluster(api_server, teams)
    done: set[str] = {""}
    for index in range(3):
        line = _apply(kubeconfig, "--shard", f"{index}/3")
        mine = {ns for ns in teams if shard_of(ns, 3) == index}
        assert mine and not mine & done  # every shard has some, none another's
        assert line["namespaces"] == len(mine) + (index == 0)
        done |= mine
        assert {ns for ns, _ in _reports(api_server)} == done  # exactly its own
    assert done == {"", *teams}
    assert _fails(api_server) == {"": 0, **teams}
    # each shard deletes only its own namespaces' reports
    gone = next(ns for ns in teams if shard_of(ns, 3) == 1)
    for i in range(teams[gone]):
        api_server.delete(_pod(f"p{i:03}", gone))
    api_server.delete(namespace(gone))
    assert _apply(kubeconfig, "--shard", "0/3")["reportsDeleted"] == 0
    assert _apply(kubeconfig, "--shard", "2/3")["reportsDeleted"] == 0
    assert (gone, "gpupolicy-0") in _reports(api_server)
    assert _apply(kubeconfig, "--shard", "1/3")["reportsDeleted"] == 1
    assert (gone, "gpupolicy-0") not in _reports(api_server)


def test_shard_0_counts_every_shards_pods_on_a_shared_gpu(api_server, kubeconfig):
    names = [f"team-{n}" for n in range(16)]
    first = [t for t in names if shard_of(t, 2) == 0]
    second = [t for t in names if shard_of(t, 2) == 1]
    teams = [first[0], second[0], second[1]]  # one pod each, on one GPU: 3 > 2
    api_server.add_all([*(namespace(t) for t in teams), *reading.read_objects(NODES),
                        gpupolicy("shared", **SHARED)])
    api_server.add_all({**_share(f"p{n}", "0"), "metadata": {
        **_share(f"p{n}", "0")["metadata"], "namespace": teams[n]}} for n in range(3))
    over = []
    for index in range(2):
        code, out, err = _cli("audit", "--kubeconfig", kubeconfig, "-o", "json",
                              "--shard", f"{index}/2")
        assert code in (0, 1), err
        over.append(json.loads(out)["cluster"]["sharedGPUsOverLimit"])
    assert [(o["node"], o["device"], o["pods"]) for o in over[0]] == [("a10-share-1", "gpu0", 3)]


def test_one_namespace_touches_only_its_own_reports(api_server, kubeconfig):
    _install(api_server, "policyreport")
    _cluster(api_server, {"team-a": 1, "team-b": 1})
    _apply(kubeconfig)
    before = _reports(api_server)
    api_server.delete(_pod("p000", "team-b"))  # fixed, but only team-a is audited next
    api_server.delete(_pod("p000", "team-a"))
    line = _apply(kubeconfig, "-n", "team-a")
    assert (line["reportsWritten"], line["reportsDeleted"]) == (1, 0)
    after = _reports(api_server)
    assert _fails(api_server) == {"": 0, "team-a": 0, "team-b": 1}
    assert after[("", "gpupolicy-0")] == before[("", "gpupolicy-0")]  # no partial cluster view


@pytest.mark.parametrize("value", ["3/3", "1", "a/b", "-1/2", "0/0"])
def test_a_bad_shard_is_a_usage_error(value):
    code, _, err = _cli("audit", "--shard", value)
    assert code == 2 and "--shard" in err


def test_apply_takes_no_files(tmp_path):
    dump = tmp_path / "x.yaml"
    dump.write_text("", encoding="utf-8")
    code, _, err = _cli("audit", "--apply", str(dump))
    assert code == 2 and "--apply" in err


def test_namespaces_scoped_audit_needs_no_cluster_wide_report_rights(api_server, kubeconfig):
    """audit.namespaces in the chart: `-n A -n B --apply` with report rights only in A and B
    (Roles): the report kinds are listed in each namespace, never cluster-wide, and no other
    namespace's report nor the cluster report is written or deleted."""
    from tests.cluster.fakeapi import Fault

    _install(api_server, "policyreport")
    _cluster(api_server, {"team-a": 1, "team-b": 2, "team-c": 1})
    _apply(kubeconfig)  # an earlier cluster-wide run left reports everywhere
    before = _reports(api_server)
    for pod in ("p000", "p001"):
        api_server.delete(_pod(pod, "team-b"))
    api_server.delete(_pod("p000", "team-c"))  # fixed, but team-c is not audited now
    group = "/apis/wgpolicyk8s.io/v1alpha2"
    # what a RoleBinding in team-a and team-b does not allow: answered 403
    for path in (f"{group}/policyreports", f"{group}/clusterpolicyreports"):
        api_server.inject(Fault(status=403, count=-1, path=path, watch=False))
    api_server.fail_writes(403, path=f"{group}/clusterpolicyreports")
    api_server.fail_writes(403, path=f"{group}/namespaces/team-c/")
    line = _apply(kubeconfig, "-n", "team-a", "--namespace", "team-b")
    assert line["audit"] == "applied" and line["namespaces"] == 2
    assert _fails(api_server) == {"": 0, "team-a": 1, "team-b": 0, "team-c": 1}
    after = _reports(api_server)
    assert after[("", "gpupolicy-0")] == before[("", "gpupolicy-0")]
    assert after[("team-c", "gpupolicy-0")] == before[("team-c", "gpupolicy-0")]
