"""The chart runs `gpupolicy audit --apply` on a schedule (audit.cronJob), rendered with the
real helm: the webhook's image, policies and hardening, its own ServiceAccount with the audit
role plus the report kinds only, an Indexed Job per shard; and the rendered command itself,
run against the fake API server, writes the reports."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.chart.helm import one, render, template
from tests.cluster.conftest import gpupolicy, namespace, node
from tests.cluster.fakeapi import FakeAPIServer
from tests.cluster.test_audit import _pod
from webhook.cli import run as cli

REPORT_VERBS = ["create", "delete", "get", "list", "patch"]


def _named(objects: tuple[dict[str, Any], ...], kind: str, name: str) -> dict[str, Any] | None:
    return next((o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name), None)


def _container(cronjob: dict[str, Any]) -> dict[str, Any]:
    container: dict[str, Any] = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"][
        "containers"][0]
    return container


def test_the_audit_runs_hourly_one_at_a_time_with_the_webhooks_image_and_hardening() -> None:
    objects = render()
    cronjob = one(objects, "CronJob")
    deployment = one(objects, "Deployment")
    assert cronjob["spec"]["schedule"] == "7 * * * *"
    assert cronjob["spec"]["concurrencyPolicy"] == "Forbid"
    job = cronjob["spec"]["jobTemplate"]["spec"]
    assert "completionMode" not in job
    pod, webhook_pod = job["template"]["spec"], deployment["spec"]["template"]["spec"]
    container, webhook = _container(cronjob), webhook_pod["containers"][0]
    assert container["image"] == webhook["image"]
    assert container["securityContext"] == webhook["securityContext"]
    assert pod["securityContext"] == webhook_pod["securityContext"]
    assert container["resources"] == {"requests": {"cpu": "100m", "memory": "256Mi"},
                                      "limits": {"cpu": "1", "memory": "512Mi"}}
    assert pod["restartPolicy"] == "Never"
    assert pod["serviceAccountName"] == "rel-gpupolicy-audit"
    assert container["command"] == ["gpupolicy"]
    args = container["args"]
    assert args[:2] == ["audit", "--apply"] and "--timeout=300" in args
    assert "--exclude-namespace=gpu-system" in args and not any("--shard" in a for a in args)
    # never counted as a webhook replica by its Service, PDB or anti-affinity
    selector = deployment["spec"]["selector"]["matchLabels"]
    labels = job["template"]["metadata"]["labels"]
    assert not all(labels.get(k) == v for k, v in selector.items())


def test_the_audit_has_its_own_account_with_the_report_kinds_and_nothing_else() -> None:
    objects = render()
    assert _named(objects, "ServiceAccount", "rel-gpupolicy-audit") is not None
    role = _named(objects, "ClusterRole", "rel-gpupolicy-audit-reports")
    assert role is not None
    grants = {(g, r): sorted(rule["verbs"]) for rule in role["rules"]
              for g in rule["apiGroups"] for r in rule["resources"]}
    assert grants == {("openreports.io", "reports"): REPORT_VERBS,
                      ("openreports.io", "clusterreports"): REPORT_VERBS,
                      ("wgpolicyk8s.io", "policyreports"): REPORT_VERBS,
                      ("wgpolicyk8s.io", "clusterpolicyreports"): REPORT_VERBS}
    account = {"kind": "ServiceAccount", "name": "rel-gpupolicy-audit",
               "namespace": "gpu-system"}
    bound = {o["roleRef"]["name"] for o in objects if o["kind"] == "ClusterRoleBinding"
             and account in o["subjects"]}
    assert bound == {"rel-gpupolicy-audit", "rel-gpupolicy-audit-reports"}
    webhook_account = {**account, "name": "rel-gpupolicy"}
    assert not [o for o in objects if o["kind"] == "ClusterRoleBinding"
                and webhook_account in o["subjects"]
                and o["roleRef"]["name"] != "rel-gpupolicy"]


def test_shards_make_an_indexed_job() -> None:
    cronjob = one(render("default", ("--set", "audit.cronJob.shards=4")), "CronJob")
    job = cronjob["spec"]["jobTemplate"]["spec"]
    assert (job["completionMode"], job["completions"], job["parallelism"]) == ("Indexed", 4, 4)
    container = _container(cronjob)
    assert "--shard=$(JOB_COMPLETION_INDEX)/4" in container["args"]
    assert container["env"] == [{"name": "JOB_COMPLETION_INDEX", "valueFrom": {"fieldRef": {
        "fieldPath": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}}}]


@pytest.mark.parametrize("off", ["audit.cronJob.enabled=false", "rbac.audit.create=false"])
def test_disabled_renders_none_of_it(off: str) -> None:
    objects = render("default", ("--set", off))
    assert not [o for o in objects if o["kind"] == "CronJob"]
    assert _named(objects, "ServiceAccount", "rel-gpupolicy-audit") is None
    assert _named(objects, "ClusterRole", "rel-gpupolicy-audit-reports") is None


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--set", "audit.cronJob.shards=0"), "shards"),
        (("--set", "audit.cronJob.reportApi=kyverno"), "reportApi"),
        (("--set", "audit.cronJob.typo=1"), "typo"),
    ],
)
def test_bad_audit_values_fail(args: tuple[str, ...], message: str) -> None:
    result = template(*args)
    assert result.returncode != 0 and message in result.stderr


def test_the_rendered_command_writes_the_reports(tmp_path: Path) -> None:
    """The CronJob's own arguments (policies and kind table from the rendered ConfigMaps),
    shard 1 of 2, against the fake API server."""
    objects = render("default", ("--set", "audit.cronJob.shards=2",
                                 "--set", "audit.cronJob.reportApi=both"))
    for suffix, directory in (("-policies", "policies"), ("-workload-kinds", "kinds")):
        [config] = [o for o in objects if o["kind"] == "ConfigMap"
                    and o["metadata"]["name"] == f"rel-gpupolicy{suffix}"]
        (tmp_path / directory).mkdir()
        for name, text in (config.get("data") or {}).items():
            (tmp_path / directory / name).write_text(text, encoding="utf-8")
    args = [a.replace("=/policies", f"={tmp_path / 'policies'}")
            .replace("=/etc/gpupolicy/", f"={tmp_path / 'kinds'}/")
            .replace("$(JOB_COMPLETION_INDEX)", "1") for a in _container(one(objects,
                                                                             "CronJob"))["args"]]
    with FakeAPIServer() as server:
        for api_version, kinds in (("openreports.io/v1alpha1", ("Report", "ClusterReport")),
                                   ("wgpolicyk8s.io/v1alpha2", ("PolicyReport",
                                                                "ClusterPolicyReport"))):
            for kind in kinds:
                server.install(api_version, kind)
        server.add_all([gpupolicy("max-one", rules={"maxGPUsPerPod": 1}),
                        *(namespace(f"team-{n}") for n in range(6)),
                        *(_pod("two", f"team-{n}", gpus=2) for n in range(6))])
        out, err = io.StringIO(), io.StringIO()
        code = cli([*args, "--kubeconfig", server.kubeconfig(str(tmp_path / "kc"))], out, err)
        assert code == 0, err.getvalue()
        line = json.loads(out.getvalue())
        assert line["shard"] == "1/2" and line["reportAPIs"] == ["openreports", "policyreport"]
        assert line["reportsWritten"] == 2 * line["namespaces"] > 0
        reports = server.objects("openreports.io/v1alpha1", "Report")
        assert {r["metadata"]["namespace"] for r in reports} < {f"team-{n}" for n in range(6)}
        assert not server.objects("openreports.io/v1alpha1", "ClusterReport")  # shard 0's
        assert all(r["summary"]["fail"] == 1 for r in reports)


# ---- audit.namespaces: the report writes granted per namespace (issue 27) -------------------

SCOPED = ("--set-json", 'audit.namespaces=["team-1","team-4"]')


def test_scoped_audit_writes_reports_through_roles_in_its_namespaces_only() -> None:
    objects = render("default", SCOPED)
    assert _named(objects, "ClusterRole", "rel-gpupolicy-audit-reports") is None
    assert _named(objects, "ClusterRoleBinding", "rel-gpupolicy-audit-reports-cronjob") is None
    roles = [o for o in objects if o["kind"] == "Role"
             and o["metadata"]["name"] == "rel-gpupolicy-audit-reports"]
    bindings = [o for o in objects if o["kind"] == "RoleBinding"
                and o["metadata"]["name"] == "rel-gpupolicy-audit-reports"]
    assert sorted(r["metadata"]["namespace"] for r in roles) == ["team-1", "team-4"]
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["team-1", "team-4"]
    for role in roles:  # namespaced report kinds only: no cluster report
        assert {(g, r) for rule in role["rules"] for g in rule["apiGroups"]
                for r in rule["resources"]} == {("openreports.io", "reports"),
                                                ("wgpolicyk8s.io", "policyreports")}
        assert all(sorted(rule["verbs"]) == REPORT_VERBS for rule in role["rules"])
    for binding in bindings:
        assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                                      "name": "rel-gpupolicy-audit-reports"}
        assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "rel-gpupolicy-audit",
                                        "namespace": "gpu-system"}]
    # the list-only audit role stays cluster-wide: reading is not what this narrows
    assert _named(objects, "ClusterRoleBinding", "rel-gpupolicy-audit-cronjob") is not None
    args = _container(one(objects, "CronJob"))["args"]
    assert [a for a in args if a.startswith("--namespace=")] == ["--namespace=team-1",
                                                                 "--namespace=team-4"]


def test_unscoped_audit_keeps_the_cluster_role() -> None:
    objects = render()
    assert _named(objects, "ClusterRole", "rel-gpupolicy-audit-reports") is not None
    assert not [o for o in objects if o["kind"] == "Role" and "audit" in o["metadata"]["name"]]
    assert not any(a.startswith("--namespace") for a in _container(one(objects,
                                                                       "CronJob"))["args"])


@pytest.mark.parametrize("value", ['["Team-A"]', '["a","a"]', '[""]'])
def test_audit_namespaces_must_be_namespace_names(value: str) -> None:
    result = template("--set-json", f"audit.namespaces={value}")
    assert result.returncode != 0 and "namespaces" in result.stderr


def test_the_rendered_scoped_command_writes_only_its_namespaces_reports(tmp_path: Path) -> None:
    objects = render("default", SCOPED)
    for suffix, directory in (("-policies", "policies"), ("-workload-kinds", "kinds")):
        [config] = [o for o in objects if o["kind"] == "ConfigMap"
                    and o["metadata"]["name"] == f"rel-gpupolicy{suffix}"]
        (tmp_path / directory).mkdir()
        for name, text in (config.get("data") or {}).items():
            (tmp_path / directory / name).write_text(text, encoding="utf-8")
    args = [a.replace("=/policies", f"={tmp_path / 'policies'}")
            .replace("=/etc/gpupolicy/", f"={tmp_path / 'kinds'}/")
            for a in _container(one(objects, "CronJob"))["args"]]
    with FakeAPIServer() as server:
        server.install("openreports.io/v1alpha1", "Report")
        server.install("openreports.io/v1alpha1", "ClusterReport")
        server.add_all([gpupolicy("max-one", rules={"maxGPUsPerPod": 1}),
                        *(namespace(f"team-{n}") for n in range(6)),
                        *(_pod("two", f"team-{n}", gpus=2) for n in range(6))])
        out, err = io.StringIO(), io.StringIO()
        code = cli([*args, "--kubeconfig", server.kubeconfig(str(tmp_path / "kc"))], out, err)
        assert code == 0, err.getvalue()
        reports = server.objects("openreports.io/v1alpha1", "Report")
        assert sorted(r["metadata"]["namespace"] for r in reports) == ["team-1", "team-4"]
        assert not server.objects("openreports.io/v1alpha1", "ClusterReport")
        assert all(r["summary"]["fail"] == 1 for r in reports)


# ---- audit.cronJob.thresholds: the node facts' minimums (issue 32) ----------------------------

THRESHOLDS = ("--set-json", 'audit.cronJob.thresholds={"minimums":{"driver":"550.54.15"},'
                            '"cgpuMaxPodsPerGPU":10}')


def _rendered_command(objects: tuple[dict[str, Any], ...], tmp_path: Path) -> list[str]:
    """The CronJob's arguments, its ConfigMaps written where they point."""
    mounts = {"-policies": "/policies", "-workload-kinds": "/etc/gpupolicy/",
              "-audit-thresholds": "/etc/gpupolicy-thresholds/"}
    args = _container(one(objects, "CronJob"))["args"]
    for suffix, mounted in mounts.items():
        config = _named(objects, "ConfigMap", f"rel-gpupolicy{suffix}")
        if config is None:
            continue
        (tmp_path / suffix).mkdir()
        for name, text in (config.get("data") or {}).items():
            (tmp_path / suffix / name).write_text(text, encoding="utf-8")
        args = [a.replace(f"={mounted}", f"={tmp_path / suffix}/") for a in args]
    return [a.replace("//", "/") for a in args]


@pytest.mark.parametrize(("extra", "flagged"), [((), False), (THRESHOLDS, True)])
def test_thresholds_reach_the_audit_and_its_node_facts(
        tmp_path: Path, extra: tuple[str, ...], flagged: bool) -> None:
    """A driver the default minimum (418.87.01) passes is below the one given."""
    objects = render("default", extra)
    config = _named(objects, "ConfigMap", "rel-gpupolicy-audit-thresholds")
    assert (config is not None) == flagged
    if config is not None:
        assert yaml.safe_load(config["data"]["thresholds.yaml"]) == {
            "apiVersion": "gpupolicy.io/v1alpha1", "kind": "GPUPoolThresholds",
            "spec": {"minimums": {"driver": "550.54.15"}, "cgpuMaxPodsPerGPU": 10}}
    args = _rendered_command(objects, tmp_path)
    assert any(a.startswith("--thresholds=") for a in args) == flagged
    with FakeAPIServer() as server:
        server.install("openreports.io/v1alpha1", "Report")
        server.install("openreports.io/v1alpha1", "ClusterReport")
        server.add_all([gpupolicy("max-one", rules={"maxGPUsPerPod": 1}), namespace("team-a"),
                        node("gpu-1", **{"nvidia.com/cuda.driver-version.full": "535.104.05"})])
        out, err = io.StringIO(), io.StringIO()
        code = cli([*args, "--kubeconfig", server.kubeconfig(str(tmp_path / "kc"))], out, err)
        assert code == 0, err.getvalue()
        [report] = server.objects("openreports.io/v1alpha1", "ClusterReport")
    assert ("node-below-minimum" in json.dumps(report)) == flagged


@pytest.mark.parametrize(("value", "message"), [
    ('{"minimums":{"drivers":"1"}}', "drivers"),
    ('{"advice":{"idleBelow":2}}', "idleBelow"),
    ('{"cgpuMaxPodsPerGPU":"20"}', "cgpuMaxPodsPerGPU"),
])
def test_bad_thresholds_fail_at_install(value: str, message: str) -> None:
    result = template("--set-json", f"audit.cronJob.thresholds={value}")
    assert result.returncode != 0 and message in result.stderr
