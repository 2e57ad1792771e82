"""WatchCache and ClusterSources against the fake API server, through the real client."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families

from tests.cluster.conftest import FAST, gpupolicy, namespace, node, wait_for
from tests.cluster.fakeapi import FakeAPIServer
from webhook.cluster.client import WatchCache, list_all
from webhook.cluster.watch import ClusterSources
from webhook.http.metrics import Metrics, exposition
from webhook.inputs import sources
from webhook.inputs.reading import labels_of
from webhook.inputs.state import State


@contextlib.contextmanager
def labels_cache(client: Any) -> Iterator[WatchCache]:
    """A started cache of namespace labels, stopped when the block ends."""
    cache = WatchCache("namespaces", k8s.CoreV1Api(client).list_namespace,
                       project=labels_of, settings=FAST).start()
    try:
        yield cache
    finally:
        cache.stop()


def _step(server: FakeAPIServer, step: str) -> None:
    if step == "add":
        server.add(namespace("new", team="a"))
    elif step == "modify":
        server.modify(namespace("ns-1", team="changed"))
    elif step == "delete":
        server.delete(namespace("ns-2"))
    elif step == "add-then-delete":
        server.add(namespace("brief"))
        server.delete(namespace("brief"))


EXPECTED_AFTER = {
    "add": {"ns-0", "ns-1", "ns-2", "new"},
    "modify": {"ns-0", "ns-1", "ns-2"},
    "delete": {"ns-0", "ns-1"},
    "add-then-delete": {"ns-0", "ns-1", "ns-2"},
}


@pytest.mark.parametrize("step", list(EXPECTED_AFTER))
def test_cache_converges_after_each_event_kind(api_server, client, step):
    api_server.add_all(namespace(f"ns-{i}", team="x") for i in range(3))
    with labels_cache(client) as cache:
        assert cache.listed.wait(5)
        _step(api_server, step)
        wait_for(lambda: cache.resource_version == str(api_server.rv))
        assert set(cache.snapshot()) == EXPECTED_AFTER[step]
        if step == "modify":
            assert cache.snapshot()["ns-1"] == {"team": "changed"}
        if step == "add":
            assert cache.snapshot()["new"] == {"team": "a"}


def test_a_projection_that_fails_skips_that_object_only(api_server, client):
    """Whatever an object holds, the cache thread does not die nor stall: the object is
    skipped and counted, the rest is listed, and the object is read once it is fixed."""
    api_server.add(namespace("bad", team="x"))
    api_server.add(namespace("good", team="z"))

    def project(obj: dict[str, Any]) -> dict[str, str]:
        labels = labels_of(obj)
        if labels.get("team") == "x":
            raise AttributeError("an unforeseen shape")
        return labels

    cache = WatchCache("namespaces", k8s.CoreV1Api(client).list_namespace, project=project,
                       settings=FAST).start()
    try:
        assert cache.listed.wait(5)
        assert cache.snapshot() == {"good": {"team": "z"}}
        assert cache.unreadable == 1 and cache.errors == 0
        assert cache.last_unreadable == "bad: AttributeError: an unforeseen shape"
        api_server.modify(namespace("bad", team="y"))
        wait_for(lambda: cache.snapshot() == {"bad": {"team": "y"}, "good": {"team": "z"}})
    finally:
        cache.stop()


def test_bookmark_moves_the_resume_point_without_changing_the_cache(api_server, client):
    api_server.add(namespace("a"))
    with labels_cache(client) as cache:
        assert cache.listed.wait(5)
        api_server.add(node("n1"))  # a change elsewhere moves the global resourceVersion
        wait_for(lambda: api_server.active_watches() == 1)
        api_server.bookmark()
        wait_for(lambda: cache.resource_version == str(api_server.rv))
        assert set(cache.snapshot()) == {"a"}
        assert "allowWatchBookmarks=true" in " ".join(api_server.requests)


def test_list_is_paginated_with_continue(api_server, client):
    api_server.add_all(namespace(f"ns-{i:02d}") for i in range(7))
    pages = list(list_all(k8s.CoreV1Api(client).list_namespace, limit=3))
    assert [len(p.items) for p in pages] == [3, 3, 1]
    assert [p.items[0]["metadata"]["name"] for p in pages] == ["ns-00", "ns-03", "ns-06"]
    assert sum("continue=" in r for r in api_server.requests) == 2


@pytest.mark.parametrize("outage", ["drop", "restart"])
def test_relist_after_410_gone(api_server, client, outage):
    api_server.add_all(namespace(f"ns-{i}") for i in range(3))
    with labels_cache(client) as cache:
        assert cache.listed.wait(5)
        relists = cache.relists
        wait_for(lambda: api_server.active_watches() == 1)
        if outage == "restart":
            api_server.stop()
        api_server.add(namespace("while-away"))
        api_server.delete(namespace("ns-0"))
        api_server.compact()  # the history the watch would resume from is gone
        if outage == "restart":
            api_server.start()
        else:
            api_server.drop_watches()
        wait_for(lambda: cache.relists > relists)
        wait_for(lambda: set(cache.snapshot()) == {"ns-1", "ns-2", "while-away"})


def test_resumes_a_watch_the_server_ended_and_relists_after_a_broken_one(api_server, client):
    api_server.add(namespace("a"))
    with labels_cache(client) as cache:
        assert cache.listed.wait(5)
        seen = cache.resource_version
        # FAST's watches end after 2 s: the next one resumes from the last resourceVersion
        wait_for(lambda: sum(f"resourceVersion={seen}&" in r and "watch=true" in r
                             for r in api_server.requests) >= 2)
        assert cache.relists == 1 and cache.errors == 0
        api_server.drop_watches()  # cut mid-stream: a failed watch, so a fresh list
        api_server.add(namespace("b"))
        wait_for(lambda: "b" in cache.snapshot())
        wait_for(lambda: cache.relists == 2)
        assert cache.errors >= 1 and cache.error_counts["connection"] >= 1


def test_backs_off_on_errors_then_lists(api_server, client):
    api_server.add(namespace("a"))
    api_server.fail_next(3, status=500)
    with labels_cache(client) as cache:
        assert cache.listed.wait(5)
        assert cache.errors == 3
        assert cache.last_error == "500 Internal Server Error: injected failure"
        assert cache.error == ""  # listed since


METERS: dict[int, Metrics] = {}  # id(cluster) -> the Metrics it registered on


def _sources(client: Any, files: list[Any] | None = None) -> tuple[State, ClusterSources]:
    state = State(sources.load_catalog(), expect=("policies", "namespaces", "inventory"))
    cluster = ClusterSources(state, client, settings=FAST, debounce=0.01)
    METERS[id(cluster)] = meters = Metrics(None)
    cluster.register(meters)
    if files is not None:
        state.update(policies=files)
    return state, cluster


def _metric(cluster: ClusterSources, name: str, **labels: str) -> float | None:
    text, _ = exposition(METERS[id(cluster)])
    for family in text_string_to_metric_families(text.decode()):
        for sample in family.samples:
            if sample.name == name and sample.labels == labels:
                return float(sample.value)
    return None


def test_not_ready_until_first_full_list_then_ready(api_server, client):
    api_server.add(namespace("team-a", tier="gpu"))
    api_server.add(node("gpu-1"))
    api_server.fail_next(4, status=503)
    state, cluster = _sources(client, files=[])
    assert not state.ready
    cluster.start()
    try:
        wait_for(lambda: state.ready)
        assert state.context.namespace_labels("team-a")["tier"] == "gpu"
        assert state.context.inventory is not None
        assert [n.name for n in state.context.inventory.nodes] == ["gpu-1"]
        api_server.add(node("gpu-2"))
        wait_for(lambda: len(state.context.inventory.nodes) == 2)
    finally:
        cluster.stop()


def test_api_server_gone_keeps_last_state_and_reports_staleness(api_server, client):
    api_server.add(namespace("team-a", tier="gpu"))
    api_server.add(node("gpu-1"))
    state, cluster = _sources(client, files=[])
    cluster.start()
    try:
        wait_for(lambda: state.ready)
        wait_for(lambda: (_metric(cluster, "gpupolicy_cluster_cache_stale_seconds",
                                  resource="nodes") or 9) < 1.0)
        api_server.stop()
        wait_for(lambda: (_metric(cluster, "gpupolicy_cluster_cache_stale_seconds",
                                  resource="nodes") or 0) >= 1.0)
        assert state.ready  # the last good state keeps serving
        assert state.context.namespace_labels("team-a")["tier"] == "gpu"
        assert cluster.staleness() >= 1.0
        api_server.start()
        restarted = time.monotonic()
        # each cache has heard from the server since it came back; an open watch confirms
        # nothing, so under load they need not all be fresh in the same second
        wait_for(lambda: all(c.staleness() < time.monotonic() - restarted
                             for c in cluster.caches))
        # each cache clears its error when it lists again: not all in the same instant
        wait_for(lambda: state.errors == {})
    finally:
        cluster.stop()


GOOD = {"mode": "Warn", "rules": {"maxGPUsPerPod": 4}}


@pytest.mark.parametrize(
    ("resources", "files", "active", "skipped"),
    [
        ([gpupolicy("crd-a", **GOOD)], [], ["crd-a"], []),
        ([gpupolicy("crd-a", **GOOD), gpupolicy("bad", rules={"maxGPUsPerPod": -1})], [],
         ["crd-a"], ["bad"]),
        ([gpupolicy("bad", mode="Sometimes")], [], [], ["bad"]),
        ([gpupolicy("typo", rulez={})], [], [], ["typo"]),
        ([gpupolicy("same", **GOOD)], ["same"], ["same"], ["same"]),
        ([gpupolicy("crd-a", **GOOD)], ["from-file"], ["crd-a", "from-file"], []),
        ([], ["from-file"], ["from-file"], []),
    ],
    ids=["one", "good-and-bad", "bad-mode", "unknown-field", "clash-file-wins", "merged",
         "crd-not-installed"],
)
def test_policies_from_resources_merged_with_files(api_server, client, resources, files,
                                                   active, skipped):
    api_server.add(namespace("default"))
    api_server.add(node("gpu-1"))
    api_server.add_all(resources)
    file_policies = [_file_policy(name) for name in files]
    state, cluster = _sources(client, files=file_policies)
    cluster.start()
    try:
        wait_for(lambda: state.ready)
        assert sorted(p.name for p in state.context.policies) == sorted(active)
        assert sorted(k.removeprefix("gpupolicy/") for k in state.errors) == sorted(skipped)
        assert _metric(cluster, "gpupolicy_cluster_invalid_policies") == len(skipped)
        for name in skipped:
            assert f"GPUPolicy/{name}" in state.errors[f"gpupolicy/{name}"]
    finally:
        cluster.stop()


def test_fixing_a_bad_policy_clears_its_error(api_server, client):
    api_server.add(namespace("default"))
    api_server.add(node("gpu-1"))
    api_server.add(gpupolicy("p", mode="Sometimes"))
    state, cluster = _sources(client, files=[])
    cluster.start()
    try:
        wait_for(lambda: state.ready)
        assert "gpupolicy/p" in state.errors
        api_server.modify(gpupolicy("p", **GOOD))
        wait_for(lambda: [p.name for p in state.context.policies] == ["p"])
        assert "gpupolicy/p" not in state.errors
        api_server.delete(gpupolicy("p"))
        wait_for(lambda: list(state.context.policies) == [])
    finally:
        cluster.stop()


def _file_policy(name: str) -> Any:
    from policies.loading import parse_policies

    (policy,) = parse_policies(
        f"apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicy\nmetadata: {{name: {name}}}\n"
        "spec: {mode: Audit}\n", "file.yaml")
    return policy


def test_serve_hook_merges_file_policies_and_watches_the_cluster(api_server, kubeconfig,
                                                                  tmp_path):
    import argparse

    from webhook.cluster.watch import attach, check
    from webhook.inputs.state import FileSources

    policy_dir = tmp_path / "policies"
    policy_dir.mkdir()
    (policy_dir / "p.yaml").write_text(
        "apiVersion: gpupolicy.io/v1alpha1\nkind: GPUPolicy\nmetadata: {name: from-file}\n"
        "spec: {mode: Audit}\n", encoding="utf-8")
    api_server.add(namespace("team-a", tier="gpu"))
    api_server.add(node("gpu-1"))
    api_server.add(gpupolicy("from-cluster", **GOOD))
    args = argparse.Namespace(kubeconfig=kubeconfig)
    assert check(args) == []
    assert "cannot load cluster credentials" in check(
        argparse.Namespace(kubeconfig=str(tmp_path / "missing")))[0]
    state = State(sources.load_catalog(), expect=["policies"])
    files = FileSources(state, policies=str(policy_dir), inventory=str(tmp_path / "ignored"),
                        cluster=True)
    cluster = attach(args, state, settings=FAST)
    assert cluster is not None
    try:
        files.load_all()
        wait_for(lambda: state.ready)
        assert state.expected == {"policies", "namespaces", "inventory", "cluster_policies",
                                  "claims", "api"}
        assert sorted(p.name for p in state.context.policies) == ["from-cluster", "from-file"]
        assert state.context.namespace_labels("team-a")["tier"] == "gpu"
        api_server.delete(gpupolicy("from-cluster"))
        wait_for(lambda: [p.name for p in state.context.policies] == ["from-file"])
    finally:
        cluster.stop()
    assert attach(argparse.Namespace(kubeconfig=None), state, files) is None


def test_expired_continue_token_restarts_the_list_without_repeats(api_server, client):
    api_server.add_all(namespace(f"ns-{i}") for i in range(7))
    pages = list_all(k8s.CoreV1Api(client).list_namespace, limit=3)
    first = next(pages)
    api_server.add(namespace("ns-9"))
    api_server.compact()  # the continue token now points before the compaction: 410
    rest = [obj for page in pages for obj in page.items]
    names = [o["metadata"]["name"] for o in [*first.items, *rest]]
    assert names == [*(f"ns-{i}" for i in range(7)), "ns-9"]


@pytest.mark.parametrize(
    ("change", "publishes"),
    [("heartbeat", False), ("label", True), ("taint", True), ("allocatable", True),
     ("cordon", True)],
)
def test_node_cache_ignores_status_heartbeats(api_server, client, change, publishes):
    from webhook.cluster.kinds import node_facts

    api_server.add(node("gpu-1"))
    changes: list[int] = []
    cache = WatchCache("nodes", k8s.CoreV1Api(client).list_node, project=node_facts,
                       on_change=lambda: changes.append(1), settings=FAST).start()
    try:
        assert cache.listed.wait(5)
        before = len(changes)
        updated = node("gpu-1")
        if change == "heartbeat":
            updated["status"]["conditions"] = [{"type": "Ready", "status": "True",
                                                "lastHeartbeatTime": "2026-12-01T00:00:00Z"}]
        elif change == "label":
            updated["metadata"]["labels"]["pool"] = "b"
        elif change == "taint":
            updated["spec"]["taints"] = []
        elif change == "allocatable":
            updated["status"]["allocatable"]["nvidia.com/gpu"] = "4"
        else:
            updated["spec"]["unschedulable"] = True
        api_server.modify(updated)
        wait_for(lambda: cache.resource_version == str(api_server.rv))
        assert (len(changes) > before) is publishes
    finally:
        cache.stop()


@pytest.mark.parametrize(("code", "relists", "errors"), [(410, 1, 0), (500, 1, 1)])
def test_error_event_in_an_open_watch(api_server, client, code, relists, errors):
    api_server.add(namespace("a"))
    with labels_cache(client) as cache:
        assert cache.listed.wait(5)
        wait_for(lambda: api_server.active_watches() == 1)
        before_relists, before_errors = cache.relists, cache.errors
        api_server.error_event(code)
        wait_for(lambda: cache.relists - before_relists == relists
                 and cache.errors - before_errors == errors)
        api_server.add(namespace("b"))
        wait_for(lambda: set(cache.snapshot()) == {"a", "b"})
        assert cache.relists - before_relists == relists


def _dra_objects() -> list[dict[str, Any]]:
    """The NVIDIA DRA driver's GPU class and one node's slice of 2 L4 GPUs (the engine's
    DRA fixture, as the API server lists them)."""
    import yaml

    from tests.engine.casetable import inventory_file

    docs = list(yaml.safe_load_all(inventory_file("dra").read_text()))
    return [d for d in docs if d and d.get("kind") in ("ResourceSlice", "DeviceClass")]


def test_dra_slices_and_classes_follow_the_cluster(api_server, client):
    dra_node = node("l4-node-3", product="NVIDIA-L4", gpus=0)
    del dra_node["status"]["allocatable"]["nvidia.com/gpu"]  # only the DRA driver runs there
    api_server.add(namespace("default"))
    api_server.add(dra_node)
    state, cluster = _sources(client, files=[])
    cluster.start()

    def served() -> int | None:
        inventory = state.context.inventory
        pools = inventory.pools if inventory is not None else ()
        return next((p.allocatable.get("nvidia.com/gpu") for p in pools), None)

    try:
        wait_for(lambda: state.ready)
        assert served() is None  # no DRA objects yet: nothing serves nvidia.com/gpu
        objects = _dra_objects()
        [slice_] = [d for d in objects if d["kind"] == "ResourceSlice"
                    and d["spec"]["driver"] == "gpu.nvidia.com"]
        [device_class] = [d for d in objects if d["metadata"]["name"] == "gpu.nvidia.com"]
        api_server.add_all([d for d in objects if d["kind"] == "DeviceClass"])
        api_server.add(slice_)
        wait_for(lambda: served() == 2)  # appear: the class serves the node's 2 devices
        fewer = {**slice_, "spec": {**slice_["spec"], "devices": slice_["spec"]["devices"][:1]}}
        api_server.add(fewer)
        wait_for(lambda: served() == 1)  # change
        api_server.delete(device_class)
        wait_for(lambda: served() is None)  # disappear
    finally:
        cluster.stop()


def test_device_taint_rules_follow_the_cluster(api_server, client):
    """An admin's DeviceTaintRule takes the device it picks out of what the node serves;
    deleting the rule gives it back."""
    dra_node = node("l4-node-3", product="NVIDIA-L4", gpus=0)
    del dra_node["status"]["allocatable"]["nvidia.com/gpu"]
    api_server.add(namespace("default"))
    api_server.add(dra_node)
    api_server.add_all([d for d in _dra_objects() if d["kind"] == "DeviceClass" or (
        d["kind"] == "ResourceSlice" and d["spec"]["driver"] == "gpu.nvidia.com")])
    state, cluster = _sources(client, files=[])
    cluster.start()

    def served() -> int | None:
        inventory = state.context.inventory
        pools = inventory.pools if inventory is not None else ()
        return next((p.allocatable.get("nvidia.com/gpu") for p in pools), None)

    rule = {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceTaintRule",
            "metadata": {"name": "gpu-0-maintenance"},
            "spec": {"deviceSelector": {"driver": "gpu.nvidia.com", "pool": "l4-node-3",
                                        "device": "gpu-0"},
                     "taint": {"key": "example.com/maintenance", "effect": "NoSchedule"}}}
    try:
        wait_for(lambda: state.ready and served() == 2)
        api_server.add(rule)
        wait_for(lambda: served() == 1)
        api_server.delete(rule)
        wait_for(lambda: served() == 2)
    finally:
        cluster.stop()


def test_node_templates_and_limit_ranges_follow_the_cluster(api_server, client):
    """`serve` watches Karpenter NodePools, Cluster API node groups and LimitRanges (issue
    28): a GPU pod with no GPU node at rest fits a NodePool once it appears, and not once it
    is gone; a LimitRange's defaults join the inventory."""
    from pathlib import Path

    import yaml

    from policies.hardware import first_fit
    from policies.scheduling.request import NO_DEFAULTS
    from tests.engine.casetable import expand
    from webhook.inputs.reading import metadata_of

    fixture = Path(__file__).parent.parent / "engine" / "fixtures" / "scale-from-zero.yaml"
    items = yaml.safe_load(fixture.read_text())["items"]
    api_server.add_all([namespace("ml-train"), *(o for o in items if o["kind"] == "Node")])
    state, cluster = _sources(client, files=[])
    cluster.start()

    def templates() -> list[str]:
        inventory = state.context.inventory
        return sorted({p.template for p in inventory.templates}) if inventory else []

    try:
        wait_for(lambda: state.ready)
        assert templates() == []
        [pool] = [o for o in items if metadata_of(o).get("name") == "gpu-l4-spot"]
        [group] = [o for o in items if o["kind"] == "MachineDeployment"]
        [limits] = [o for o in items if o["kind"] == "LimitRange"]
        api_server.add_all([pool, group, limits])
        wait_for(lambda: templates() == ["MachineDeployment capi-gpu/a100-md-0",
                                         "NodePool gpu-l4-spot"])
        inventory = state.context.inventory
        assert inventory is not None and inventory.limits["ml-train"] != NO_DEFAULTS
        from policies.engine import _mutate  # the view review() judges
        from policies.workloads import carriers

        pod = expand({"containers": [{"limits": {"nvidia.com/gpu": 4}}],
                      "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}]})
        _, _, [view] = _mutate(pod, list(carriers(pod, state.context.workload_kinds)), (),
                               "ml-train", state.context)
        found = first_fit(view, inventory.templates)
        assert found is not None and found.name == "gpu-l4-spot/g6.12xlarge"
        api_server.delete(pool)
        wait_for(lambda: templates() == ["MachineDeployment capi-gpu/a100-md-0"])
    finally:
        cluster.stop()
