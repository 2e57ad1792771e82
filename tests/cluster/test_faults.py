"""The cluster caches under faults of the API server (issue 22): the verdicts never differ from
the ones the full cluster state gives, the state detail (/readyz) and the metrics say what is
wrong, and the change that follows a fault is applied within a few seconds.

Each test starts the real ClusterSources on the fake API server, takes the verdicts of a few
probes (each needing one part of the cluster's state) once everything is listed, then has a
thread re-judge the probes with the State's current Context through the engine while the fault
lasts. Every wait is bounded (wait_for), so is each test."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from prometheus_client.parser import text_string_to_metric_families

from policies.engine import review
from tests.cluster.conftest import FAST, gpupolicy, namespace, node, wait_for
from tests.cluster.fakeapi import FakeAPIServer, Fault
from tests.cluster.test_claims import template
from webhook.cluster.client import WatchCache, WatchSettings
from webhook.cluster.watch import ClusterSources
from webhook.http.metrics import Metrics, exposition
from webhook.inputs import sources
from webhook.inputs.reading import labels_of
from webhook.inputs.state import State

POLICIES = "/apis/gpupolicy.io/v1alpha1/gpupolicies"
TEMPLATES = "/apis/resource.k8s.io/v1/resourceclaimtemplates"
CLAIMS = "/apis/resource.k8s.io/v1/resourceclaims"
RECOVERY = 5.0  # seconds a change after a fault may take to be applied


def gpu_pod(gpus: int) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "cuda", "resources": {
                "limits": {"nvidia.com/gpu": str(gpus)}}}]}}


def claims_pod() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
            "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}],
                     "containers": [{"name": "c", "image": "cuda",
                                     "resources": {"claims": [{"name": "gpu"}]}}]}}


# (probe, namespace, pod): each verdict needs a part of the cluster's state
PROBES = [
    ("max-two GPUPolicy", "team-a", gpu_pod(4)),
    ("namespace label", "team-c", gpu_pod(2)),
    ("node inventory", "team-b", gpu_pod(16)),
    ("claim template", "ml", claims_pod()),
    ("plain GPU pod", "team-b", gpu_pod(1)),
]


def cluster_objects() -> list[dict[str, Any]]:
    return [
        namespace("team-a"), namespace("team-b"), namespace("team-c", tier="gpu"),
        namespace("ml"), node("gpu-1", gpus=8),
        gpupolicy("max-two", namespaces=["team-a"], rules={"maxGPUsPerPod": 2}),
        gpupolicy("tier-gpu", namespaceSelector={"matchLabels": {"tier": "gpu"}},
                  rules={"maxGPUsPerPod": 1}),
        template("one-gpu"),
    ]


def verdicts(state: State) -> dict[str, str]:
    out = {}
    for name, ns, obj in PROBES:
        decision = review(obj, state.context, namespace=ns)
        out[name] = json.dumps([decision.allowed, sorted((v.policy, v.rule)
                                                         for v in decision.violations),
                                list(decision.patch)], sort_keys=True)
    return out


class Prober:
    """Re-judges the probes while a fault lasts and records, per probe, the verdicts in the
    order they were given. A right run shows each probe's full-state verdict, and for the
    probe a change targets that verdict then the new one: nothing else, nothing back."""

    def __init__(self, state: State) -> None:
        self.state = state
        self.seen: dict[str, list[str]] = {name: [v] for name, v in verdicts(state).items()}
        self.judged = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self._round()

    def _round(self) -> None:
        for name, verdict in verdicts(self.state).items():
            self.judged += 1
            if verdict != self.seen[name][-1]:
                self.seen[name].append(verdict)

    def check(self, expected: dict[str, str], changed: dict[str, str] | None = None) -> None:
        """Each probe gave only `expected` (the full state before), then for those in
        `changed` only the new verdict."""
        assert self.judged >= 3 * len(PROBES)  # three rounds at least
        want = {name: [v] + ([changed[name]] if changed and name in changed else [])
                for name, v in expected.items()}
        assert self.seen == want

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)
        self._round()  # a last one, so the verdicts waited for are in `seen`


class Cluster:
    """A started ClusterSources over the fake API server, with its State and metrics."""

    def __init__(self, client: Any, settings: WatchSettings = FAST) -> None:
        self.state = State(sources.load_catalog(), expect=("policies",))
        self.sources = ClusterSources(self.state, client, settings=settings, debounce=0.01,
                                      retry=0.2)
        self.meters = Metrics(None)
        self.sources.register(self.meters)
        self.state.update(policies=sources.load_policies())  # the bundled defaults
        self.state.expect("namespaces", "inventory", "cluster_policies", "claims")

    def metric(self, name: str, **labels: str) -> float | None:
        text, _ = exposition(self.meters)
        for family in text_string_to_metric_families(text.decode()):
            for sample in family.samples:
                if sample.name == name and sample.labels == labels:
                    return float(sample.value)
        return None

    def errors(self) -> dict[str, str]:
        errors: dict[str, str] = self.state.detail()["errors"]
        return errors


@pytest.fixture
def cluster(api_server: FakeAPIServer, client: Any) -> Iterator[Cluster]:
    api_server.add_all(cluster_objects())
    made = Cluster(client)
    made.sources.start()
    try:
        wait_for(lambda: made.state.ready)
        yield made
    finally:
        made.sources.stop()


FULL = {  # what the full cluster state says of each probe
    "max-two GPUPolicy": False, "namespace label": False, "node inventory": False,
    "claim template": True, "plain GPU pod": True,
}


def test_each_probe_needs_its_part_of_the_cluster_state(cluster: Cluster) -> None:
    """The probes are worth something: with the full state each gets its verdict, and
    without the part it needs, another."""
    full = verdicts(cluster.state)
    assert {name: json.loads(v)[0] for name, v in full.items()} == FULL
    assert "/spec/tolerations" in full["claim template"]
    state = cluster.state
    state.update(cluster_policies=[])
    assert json.loads(verdicts(state)["max-two GPUPolicy"])[0] is True
    state.update(namespaces={})
    assert json.loads(verdicts(state)["namespace label"])[0] is True
    state.update(inventory=None)
    assert json.loads(verdicts(state)["node inventory"])[0] is True
    state.update(claims={})
    assert "/spec/tolerations" not in verdicts(state)["claim template"]


RAISED = gpupolicy("max-two", namespaces=["team-a"], rules={"maxGPUsPerPod": 8})
TIMES: dict[str, float] = {}  # fault -> seconds until the change that follows is applied


def _applied(cluster: Cluster, since: float, fault: str) -> dict[str, str]:
    """Wait until max-two's limit of 8 shows in the verdicts; record the time since `since`.
    Returns the verdicts then."""
    wait_for(lambda: json.loads(verdicts(cluster.state)["max-two GPUPolicy"])[0] is True,
             timeout=RECOVERY)
    TIMES[fault] = time.monotonic() - since
    print(f"\n{fault}: change applied {TIMES[fault]:.2f}s after", end="")
    return verdicts(cluster.state)


def test_a_404_burst_after_the_first_list_keeps_policies_and_templates(
        cluster: Cluster, api_server: FakeAPIServer) -> None:
    """A restarted API server answers 404 for custom resources until its CRD informer syncs:
    that is an error, never "not installed" (only discovery says that, before a first list)."""
    expected = verdicts(cluster.state)
    with Prober(cluster.state) as prober:
        faults = [api_server.inject(Fault(404, count=-1, path=path))
                  for path in (POLICIES, TEMPLATES)]
        api_server.drop_watches()  # every cache lists and watches again, into the 404s
        wait_for(lambda: all(f.taken >= 4 for f in faults))
        wait_for(lambda: set(cluster.errors()) >= {"cluster/gpupolicies",
                                                    "cluster/resourceclaimtemplates"})
        assert cluster.errors()["cluster/gpupolicies"] == "404 Not Found: injected NotFound"
        assert cluster.state.ready
        assert cluster.metric("gpupolicy_cluster_cache_error", resource="gpupolicies") == 1
        assert (cluster.metric("gpupolicy_cluster_watch_errors_total", resource="gpupolicies",
                               reason="404") or 0) >= 2
        assert cluster.metric("gpupolicy_cluster_cache_objects", resource="gpupolicies") == 2
        api_server.modify(RAISED)  # made while the 404s last, applied once they end
        api_server.clear_faults()
        end = time.monotonic()
        after = _applied(cluster, end, "404 burst")
        wait_for(lambda: not cluster.errors())
    prober.check(expected, {"max-two GPUPolicy": after["max-two GPUPolicy"]})
    assert cluster.metric("gpupolicy_cluster_cache_error", resource="gpupolicies") == 0


def test_a_silent_watch_is_dropped_and_relisted(api_server: FakeAPIServer, client: Any) -> None:
    """A watch that sends its headers and then nothing: cut after idle_timeout, relisted,
    and its staleness grows meanwhile. Healthy watches get bookmarks and are never cut."""
    api_server.bookmark_interval = 0.2
    api_server.add_all(cluster_objects())
    settings = WatchSettings(page_size=50, watch_timeout=60, connect_timeout=1.0,
                             read_timeout=5.0, idle_timeout=1.0, quiet_period=1.0,
                             backoff_initial=0.05, backoff_max=0.2)
    made = Cluster(client, settings)
    made.sources.start()
    try:
        wait_for(lambda: made.state.ready)
        expected = verdicts(made.state)
        with Prober(made.state) as prober:
            silent = api_server.inject(Fault(silent=True, watch=True, path=POLICIES))
            api_server.drop_watches()
            wait_for(lambda: silent.taken == 1)
            start = time.monotonic()
            api_server.modify(RAISED)  # sent to a watch that says nothing
            wait_for(lambda: made.sources.policies.staleness() > 0.6, timeout=2)
            assert (made.metric("gpupolicy_cluster_cache_stale_seconds",
                                resource="gpupolicies") or 0) > 0.6
            after = _applied(made, start, "silent watch")
        prober.check(expected, {"max-two GPUPolicy": after["max-two GPUPolicy"]})
        assert TIMES["silent watch"] < 1.0 + 2.0  # idle_timeout, then a relist (a loaded CI)
        policies = made.sources.policies
        assert policies.error_counts["idle"] == 1
        assert made.metric("gpupolicy_cluster_watch_errors_total", resource="gpupolicies",
                           reason="idle") == 1
        assert all(c.error_counts["idle"] == 0 for c in made.sources.caches if c is not policies)
    finally:
        made.sources.stop()


@pytest.mark.parametrize("line", [
    b'{"type": "MODIFIED", "object": ',
    b'{"type": "MODIFIED"}',
    b'{"type": "MODIFIED", "object": {"kind": "GPUPolicy"}}',
    b'{"type": "RENAMED", "object": {"metadata": {"name": "max-two"}}}',
    b'["MODIFIED"]',
    b"\xff\xfe not even utf-8",
], ids=["truncated", "no-object", "no-metadata", "unknown-type", "not-an-object", "binary"])
def test_an_unreadable_event_is_skipped_counted_and_relisted(
        cluster: Cluster, api_server: FakeAPIServer, line: bytes) -> None:
    """The event stays in the server's history, so resuming the watch would meet it again:
    the cache skips it, counts it, and lists; the change it carried arrives by the list."""
    expected = verdicts(cluster.state)
    before = cluster.sources.policies.relists
    with Prober(cluster.state) as prober:
        start = time.monotonic()
        api_server.add(RAISED, unreadable=line)  # the change whose event is unreadable
        after = _applied(cluster, start, "unreadable event")
        wait_for(lambda: not cluster.errors())
    prober.check(expected, {"max-two GPUPolicy": after["max-two GPUPolicy"]})
    assert cluster.sources.policies.relists == before + 1
    assert cluster.metric("gpupolicy_cluster_unreadable_events_total",
                          resource="gpupolicies") == 1
    assert cluster.sources.policies.error_counts["unreadable"] == 1
    # the watch resumed past it: the next change comes as an event, with no relist
    api_server.delete(gpupolicy("max-two"))
    wait_for(lambda: "max-two" not in {p.name for p in cluster.state.context.policies})
    assert cluster.sources.policies.relists == before + 1


def test_a_failing_later_page_keeps_the_last_listed_state(
        cluster: Cluster, api_server: FakeAPIServer) -> None:
    """FAST lists 2 objects a page: the 2nd page of relists fails 6 times."""
    expected = verdicts(cluster.state)
    with Prober(cluster.state) as prober:
        fault = api_server.inject(Fault(503, count=6, query="continue=", watch=False))
        api_server.drop_watches()
        wait_for(lambda: fault.count == 0)
        start = time.monotonic()
        api_server.modify(RAISED)
        after = _applied(cluster, start, "failing later page")
        wait_for(lambda: not cluster.errors())
    prober.check(expected, {"max-two GPUPolicy": after["max-two GPUPolicy"]})
    assert sum(c.error_counts["503"] for c in cluster.sources.caches) == 6


def test_a_failed_publish_keeps_its_changes_for_the_next(
        cluster: Cluster, api_server: FakeAPIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    """Building the inventory raises twice: the policy change of the same window is not lost,
    the node change lands too once building works again; /readyz and a metric say so."""
    sources_ = cluster.sources
    real = sources_._inventory
    failures = [RuntimeError("inventory build failed")] * 2

    def flaky(nodes: dict[str, Any]) -> Any:
        if failures:
            raise failures.pop()
        return real(nodes)

    monkeypatch.setattr(sources_, "_inventory", flaky)
    expected = verdicts(cluster.state)
    with Prober(cluster.state) as prober:
        start = time.monotonic()
        api_server.add(node("gpu-2", gpus=16))  # the 16-GPU pod now fits a node
        api_server.modify(RAISED)
        wait_for(lambda: sources_.publish_failures >= 1, timeout=RECOVERY)
        assert "RuntimeError: inventory build failed" in cluster.errors()["cluster/publish"]
        wait_for(lambda: json.loads(verdicts(cluster.state)["node inventory"])[0] is True,
                 timeout=RECOVERY)
        after = _applied(cluster, start, "failed publish")
    prober.check(expected, {"max-two GPUPolicy": after["max-two GPUPolicy"],
                            "node inventory": after["node inventory"]})
    assert sources_.publish_failures == 2
    assert cluster.metric("gpupolicy_cluster_publish_failures_total") == 2
    assert "cluster/publish" not in cluster.errors()


def test_a_forbidden_kind_at_start_up_says_which_and_why(api_server: FakeAPIServer,
                                                         client: Any) -> None:
    api_server.add_all(cluster_objects())
    api_server.inject(Fault(403, count=-1, path=CLAIMS))
    made = Cluster(client)
    made.sources.start()
    try:
        wait_for(lambda: "cluster/resourceclaims" in made.errors())
        detail = made.state.detail()
        assert detail["ready"] is False
        assert detail["errors"] == {
            "cluster/resourceclaims": "403 Forbidden: injected Forbidden"}
        assert made.metric("gpupolicy_cluster_cache_error", resource="resourceclaims") == 1
        assert made.metric("gpupolicy_cluster_cache_error", resource="nodes") == 0
        api_server.clear_faults()
        wait_for(lambda: made.state.ready)
        assert made.errors() == {}
        assert verdicts(made.state) == verdicts_of_full_state(made.state)
    finally:
        made.sources.stop()


def verdicts_of_full_state(state: State) -> dict[str, str]:
    found = verdicts(state)
    assert {name: json.loads(v)[0] for name, v in found.items()} == FULL
    return found


@pytest.mark.parametrize(("installed", "ready_at_once"), [(False, True), (True, False)],
                         ids=["not-installed", "served-but-404"])
def test_not_installed_only_from_discovery_before_a_first_list(
        api_server: FakeAPIServer, client: Any, installed: bool, ready_at_once: bool) -> None:
    """Before a first list, a 404 means "not installed" only if API discovery agrees; a 404
    for a resource discovery serves is an error, and the cache waits for a real list."""
    api_server.add_all([namespace("team-a"), node("gpu-1")])
    if installed:
        api_server.install("gpupolicy.io/v1alpha1", "GPUPolicy")
        api_server.add(gpupolicy("max-two", namespaces=["team-a"], rules={"maxGPUsPerPod": 2}))
        fault = api_server.inject(Fault(404, count=-1, path=POLICIES))
    made = Cluster(client)
    made.sources.start()
    try:
        if ready_at_once:
            wait_for(lambda: made.state.ready)
            assert made.sources.policies.absent
            assert made.errors() == {}
            # installed later: found within backoff_max
            api_server.add(gpupolicy("max-two", namespaces=["team-a"],
                                     rules={"maxGPUsPerPod": 2}))
        else:
            wait_for(lambda: fault.taken >= 3)
            assert not made.state.ready
            assert made.errors() == {"cluster/gpupolicies": "404 Not Found: injected NotFound"}
            api_server.clear_faults()
        wait_for(lambda: made.state.ready
                 and [p.name for p in made.state.context.policies][-1:] == ["max-two"])
        assert not made.sources.policies.absent
    finally:
        made.sources.stop()


def test_the_back_off_starts_over_after_a_quiet_period(api_server: FakeAPIServer,
                                                        client: Any) -> None:
    """An outage doubles the back-off up to its maximum; after quiet_period without a
    failure, one hiccup is retried after backoff_initial again, not after the maximum."""
    api_server.add(namespace("a"))
    settings = WatchSettings(page_size=50, watch_timeout=30, connect_timeout=1.0,
                             read_timeout=5.0, idle_timeout=10.0, quiet_period=0.5,
                             backoff_initial=0.05, backoff_max=3.0)
    cache = WatchCache("namespaces", k8s.CoreV1Api(client).list_namespace, project=labels_of,
                       settings=settings).start()
    try:
        assert cache.listed.wait(5)
        wait_for(lambda: api_server.active_watches() == 1)
        api_server.fail_next(6, status=500)  # 6 more failures: 0.05 .. 3 s of back-off
        api_server.drop_watches()
        wait_for(lambda: cache.errors == 7 and not cache.error, timeout=10)
        time.sleep(0.6)  # quiet
        relists = cache.relists
        wait_for(lambda: api_server.active_watches() == 1)
        start = time.monotonic()
        api_server.drop_watches()  # one hiccup
        wait_for(lambda: cache.relists > relists, timeout=3)
        assert time.monotonic() - start < 1.2  # not the 1.5-3 s the outage had reached
    finally:
        cache.stop()
