"""`serve` in a cluster: Namespace, Node, GPUPolicy, DRA and node-template watch caches feeding
webhook.inputs.state.State.

- Namespaces become the label map of the Context, Nodes the Inventory (rebuilt at most every
  `debounce` seconds; only scheduling facts are kept, so status heartbeats change nothing).
- GPUPolicy custom resources are validated one by one: a bad one is logged, counted and
  skipped, never fatal. They are merged with the policies from files; a resource whose name
  a file already uses is skipped and reported the same way (the file wins).
- DRA (resource.k8s.io/v1, optional: a cluster without the API has none): ResourceSlices and
  DeviceClasses join the Inventory; ResourceClaims and ResourceClaimTemplates, each parsed once
  on arrival, become Context.claims, which a pod's spec.resourceClaims resolve against. Only the
  parsed claim is kept, so status updates publish nothing. Claims made for one pod from a
  template are kept too: what marks them (an annotation, a Pod owner) is the writer's to set,
  and a pod naming such a claim by resourceClaimName is judged on it.
- Node templates (Karpenter NodePools, Cluster API MachineDeployments, MachineSets and
  MachinePools; optional: a cluster without the CRD has none) and LimitRanges join the
  Inventory: capacity that can appear, and the defaults the fit applies.
- PriorityClasses and RuntimeClasses (scheduling.k8s.io/v1, node.k8s.io/v1) become
  Context.api: an injected class name is resolved to what the API server's Priority and
  RuntimeClass plugins would have written (policies/inject_classes.py).
- The State is told once every cache has finished its first full list, so /readyz stays 503
  until then. When the API server goes away, or answers a list or watch with an error, the
  last listed state keeps serving: `/readyz` (`errors`, as `cluster/<resource>`), the logs and
  `gpupolicy_cluster_cache_error`, `gpupolicy_cluster_watch_errors_total{resource,reason}` and
  `gpupolicy_cluster_cache_stale_seconds` say which resource, why and for how long.
- A publish that fails (building one part raised) keeps its pending changes: the next one,
  a second later, builds them again; `/readyz` shows `cluster/publish` meanwhile.
"""

from __future__ import annotations

import argparse
import functools
import logging
import threading
import time
from dataclasses import replace
from typing import Any

from kubernetes import client as k8s

from policies.apiserver import ApiObjects
from policies.dra.parse_slices import parse_device_class, parse_slice
from policies.dra.taint_rules import parse_taint_rule
from policies.inventory import Inventory
from policies.model import GPUPolicy
from policies.scheduling.request import limit_range_defaults
from policies.scheduling.templates import read_templates, with_templates
from webhook.cluster.client import WatchCache, WatchSettings, api_client, served
from webhook.cluster.config import wanted
from webhook.cluster.errors import ClusterError
from webhook.cluster.kinds import (
    CLAIM_RESOURCES,
    DRA_GROUP,
    DRA_VERSION,
    GROUP,
    PLURAL,
    TEMPLATE_RESOURCES,
    VERSION,
    node_facts,
)
from webhook.inputs import reading
from webhook.inputs.sources import Invalid, claim_entry, gpupolicy, inventory_of

log = logging.getLogger("gpupolicy.cluster")
# (API group, plural, kind) of the classes injection resolves (policies/apiserver.py)
API_CLASSES = (("scheduling.k8s.io", "priorityclasses", "PriorityClass"),
               ("node.k8s.io", "runtimeclasses", "RuntimeClass"))


def _with_kind(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    meta = {k: v for k, v in meta.items() if k != "managedFields"} \
        if isinstance(meta, dict) else {}
    return {**obj, "kind": kind, "metadata": meta}


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def template_facts(obj: dict[str, Any], *, kind: str, api_version: str) -> dict[str, Any]:
    """What a node template is read for, and no more (status heartbeats change nothing):
    names, annotations, the template, limits, replicas and what a NodePool has started."""
    meta = _dict(obj.get("metadata"))
    spec = _dict(obj.get("spec"))
    template = _dict(spec.get("template"))
    return {"apiVersion": api_version, "kind": kind,
            "metadata": {k: meta[k] for k in ("name", "namespace", "annotations", "labels")
                         if k in meta},
            "spec": {"template": {"metadata": _dict(template.get("metadata")),
                                  "spec": {k: v for k, v in _dict(template.get("spec")).items()
                                           if k in ("requirements", "taints", "nodeClassRef")}},
                     **{k: spec[k] for k in ("limits", "replicas") if k in spec}},
            "status": {k: v for k, v in _dict(obj.get("status")).items() if k == "resources"}}


def limit_range_facts(obj: dict[str, Any]) -> dict[str, Any]:
    meta = _dict(obj.get("metadata"))
    return {"metadata": {"name": meta.get("name"), "namespace": meta.get("namespace") or ""},
            "spec": _dict(obj.get("spec"))}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="watch Namespaces, Nodes, GPUPolicies and DRA objects "
                             "(ResourceSlices, DeviceClasses, ResourceClaims and templates) "
                             "of this cluster "
                             "(in a pod, the in-cluster config is used without it)")


PUBLISH_ERROR = "cluster/publish"  # State.errors key while publishing fails


def error_key(resource: str) -> str:
    """State.errors key (so /readyz's `errors`) of a cache whose list or watch fails."""
    return f"cluster/{resource}"


class ClusterSources:
    def __init__(self, state: Any, api: k8s.ApiClient, *, settings: WatchSettings | None = None,
                 debounce: float = 0.2, retry: float = 1.0) -> None:
        self.state = state
        self.debounce = debounce
        self.retry = retry  # a failed publish is tried again after this long
        self.publish_failures = 0
        core = k8s.CoreV1Api(api)
        custom = k8s.CustomObjectsApi(api)
        self._dirty = threading.Event()
        self._changed: set[str] = set()
        self._changed_lock = threading.Lock()
        self._stop = threading.Event()
        self._reported: dict[str, str] = {}
        self.invalid_count = 0
        self._thread: threading.Thread | None = None
        timeout = (settings or WatchSettings()).connect_timeout

        def cache(name: str, func: Any, project: Any, group: str = "",
                  version: str = "") -> WatchCache:
            # With a group/version: optional, a resource API discovery may find not served.
            discovery = functools.partial(served, custom.get_api_resources, group, version,
                                          name, timeout=(timeout, timeout)) if group else None
            return WatchCache(name, func, project=project, settings=settings, served=discovery,
                              on_change=functools.partial(self._mark, name),
                              on_event=functools.partial(self._health, name))

        self.namespaces = cache("namespaces", core.list_namespace, reading.labels_of)
        self.nodes = cache("nodes", core.list_node, node_facts)
        self.policies = cache(
            "gpupolicies",
            functools.partial(custom.list_cluster_custom_object, GROUP, VERSION, PLURAL),
            gpupolicy, GROUP, VERSION,  # CRD not installed: no custom policies, not an error
        )
        # DRA drivers' devices: a cluster without resource.k8s.io/v1 (older than 1.34, or the
        # API off) simply has none. Each object is parsed once, on arrival.
        self.slices = cache(
            "resourceslices", functools.partial(custom.list_cluster_custom_object, DRA_GROUP,
                                                DRA_VERSION, "resourceslices"),
            parse_slice, DRA_GROUP, DRA_VERSION)
        self.classes = cache(
            "deviceclasses", functools.partial(custom.list_cluster_custom_object, DRA_GROUP,
                                               DRA_VERSION, "deviceclasses"),
            parse_device_class, DRA_GROUP, DRA_VERSION)
        # Admins' taints on devices (resource.k8s.io/v1 from 1.37: not served before).
        self.taint_rules = cache(
            "devicetaintrules", functools.partial(custom.list_cluster_custom_object, DRA_GROUP,
                                                  DRA_VERSION, "devicetaintrules"),
            parse_taint_rule, DRA_GROUP, DRA_VERSION)
        # The claims and templates pods name, across all namespaces: (key, Claim) pairs.
        self.claims = tuple(
            cache(plural, functools.partial(custom.list_cluster_custom_object, DRA_GROUP,
                                            DRA_VERSION, plural),
                  functools.partial(claim_entry, kind=kind), DRA_GROUP, DRA_VERSION)
            for plural, kind in CLAIM_RESOURCES)
        # Capacity that can appear (optional CRDs: a cluster without Karpenter or Cluster API
        # has no templates): NodePools and cluster-autoscaler node groups, and the
        # namespaces' LimitRanges, whose defaults count in the fit.
        self.templates = tuple(
            cache(plural, functools.partial(custom.list_cluster_custom_object, group, version,
                                            plural),
                  functools.partial(template_facts, kind=kind, api_version=f"{group}/{version}"),
                  group, version)
            for group, version, plural, kind in TEMPLATE_RESOURCES)
        self.limit_ranges = cache("limitranges", core.list_limit_range_for_all_namespaces,
                                  limit_range_facts)
        # The classes an injected priorityClassName or runtimeClassName resolves to, kept as
        # listed (few, small objects); list items come without their kind.
        self.api_classes = tuple(
            cache(plural, functools.partial(custom.list_cluster_custom_object, group, "v1",
                                            plural), functools.partial(_with_kind, kind),
                  group, "v1")
            for group, plural, kind in API_CLASSES)
        self.caches = (self.namespaces, self.nodes, self.policies, self.slices, self.classes,
                       self.taint_rules, *self.claims, *self.templates, self.limit_ranges,
                       *self.api_classes)

    # ---- lifecycle ---------------------------------------------------------------------

    def start(self) -> ClusterSources:
        for c in self.caches:
            c.start()
        self._thread = threading.Thread(target=self._publisher, name="gpupolicy-cluster",
                                        daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._dirty.set()
        for c in self.caches:
            c.stop()
        if self._thread is not None:
            self._thread.join(5)

    def listed(self) -> bool:
        return all(c.listed.is_set() for c in self.caches)

    def staleness(self) -> float:
        return max(c.staleness() for c in self.caches)

    def register(self, meters: Any) -> None:
        """Its families on the app's webhook.metrics.Metrics, read at flush and scrape time."""
        def errors() -> dict[tuple[str, ...], float]:
            out: dict[tuple[str, ...], float] = {}
            for c in self.caches:
                for reason, n in c.error_counts.copy().items():
                    out[(c.name, reason)] = float(n)
            return out

        meters.gauge("gpupolicy_cluster_cache_stale_seconds",
                     "Seconds since the API server last confirmed a cache: its last successful "
                     "list, event, bookmark (about one a minute on a quiet watch) or clean end "
                     "of a watch.", ["resource"],
                     read=lambda: {(c.name,): c.staleness() for c in self.caches})
        meters.gauge("gpupolicy_cluster_cache_objects", "Objects held by a cluster cache.",
                     ["resource"], read=lambda: {(c.name,): float(len(c)) for c in self.caches})
        meters.gauge("gpupolicy_cluster_cache_error",
                     "1 while the last list or watch of a cache failed (its last listed state "
                     "keeps serving; /readyz says why).", ["resource"],
                     read=lambda: {(c.name,): float(bool(c.error)) for c in self.caches})
        meters.counter("gpupolicy_cluster_watch_errors",
                       "Failed list/watch calls to the API server, by resource and reason (an "
                       "HTTP status, timeout, idle, connection, unreadable, other).",
                       ["resource", "reason"], read=errors)
        meters.counter("gpupolicy_cluster_unreadable_events",
                       "Watch events and listed objects that could not be read and were "
                       "skipped (a watch event so skipped is followed by a relist).",
                       ["resource"],
                       read=lambda: {(c.name,): float(c.unreadable) for c in self.caches})
        meters.counter("gpupolicy_cluster_relists",
                       "Full lists of a resource (start, and after any failed watch).",
                       ["resource"],
                       read=lambda: {(c.name,): float(c.relists) for c in self.caches})
        meters.counter("gpupolicy_cluster_publish_failures",
                       "Cluster state publications that raised (their changes are retried).",
                       read=lambda: {(): float(self.publish_failures)})
        meters.gauge("gpupolicy_cluster_invalid_policies",
                     "GPUPolicy resources skipped because they are invalid or clash.",
                     read=lambda: {(): float(self.invalid_count)})

    # ---- publishing --------------------------------------------------------------------

    def _mark(self, name: str) -> None:
        with self._changed_lock:
            self._changed.add(name)
        self._dirty.set()

    def _health(self, name: str, kind: str, detail: str) -> None:
        """A cache's list/watch failed (shown on /readyz until it lists again) or succeeded."""
        if kind == "error":
            self.state.fail(error_key(name), detail)
        elif kind in ("relist", "absent"):
            self.state.clear(error_key(name))

    def _publisher(self) -> None:
        last_log = 0.0
        while not self._stop.is_set():
            if self._dirty.wait(1.0):
                self._stop.wait(self.debounce)  # coalesce bursts (a node pool scaling up)
                self._dirty.clear()
                if not self._publish_or_keep():
                    self._stop.wait(self.retry)
            failing = [c for c in self.caches if c.error and c.staleness() > 30]
            if failing and time.monotonic() - last_log > 60:
                last_log = time.monotonic()
                log.warning("cluster state is %.0fs stale (%s)",
                            max(c.staleness() for c in failing),
                            "; ".join(f"{c.name}: {c.error}" for c in failing))

    def _publish_or_keep(self) -> bool:
        """publish(), counted, logged and shown on /readyz when it fails."""
        try:
            self.publish()
        except Exception as exc:  # the publisher must survive; its changes are kept
            self._dirty.set()
            self.publish_failures += 1
            message = f"publishing the cluster state failed ({type(exc).__name__}: {exc}); " \
                      f"the last published state stays in effect, retrying in {self.retry:g}s"
            if self.state.errors.get(PUBLISH_ERROR) != message:
                log.exception(message)
            self.state.fail(PUBLISH_ERROR, message)
            return False
        if PUBLISH_ERROR in self.state.errors:
            log.info("published the cluster state again")
            self.state.clear(PUBLISH_ERROR)
        return True

    def publish(self) -> None:
        """Hand every listed cache that changed to the State (all at once the first time).
        When building a part raises, the changes stay pending for the next publish (which
        builds them again) and the exception propagates."""
        if not self.listed():
            return
        with self._changed_lock:
            changed, self._changed = self._changed, set()
        try:
            self._publish(changed)
        except BaseException:
            with self._changed_lock:
                self._changed |= changed
            raise

    def _publish(self, changed: set[str]) -> None:
        first = not self.state.loaded >= {"namespaces", "inventory", "cluster_policies",
                                          "claims", "api"}
        parts: dict[str, Any] = {}
        if first or changed & {plural for _, plural, _ in API_CLASSES}:
            # A kind with no object reads as not known (a cluster always has the two system
            # PriorityClasses; one with no RuntimeClass gets injected names as they are).
            parts["api"] = ApiObjects.read(obj for c in self.api_classes
                                           for obj in c.snapshot().values())
        if first or "namespaces" in changed:
            parts["namespaces"] = self.namespaces.snapshot()
        if first or changed & {plural for plural, _ in CLAIM_RESOURCES}:
            parts["claims"] = dict(entry for c in self.claims for entry in c.snapshot().values())
        if first or changed & {"nodes", "resourceslices", "deviceclasses", "devicetaintrules",
                               "limitranges", *(plural for _, _, plural, _ in
                                                TEMPLATE_RESOURCES)}:
            nodes = self.nodes.snapshot()
            if nodes:
                parts["inventory"] = self._inventory(nodes)
                self.state.clear("inventory")
            else:
                # A cluster with no node is a broken list or RBAC, not a fact to judge with:
                # keep the last good inventory (or stay unready) and say so.
                self.state.fail("inventory", "the API server lists no Node objects; keeping "
                                "the last good inventory")
                log.error("the API server lists no Node objects; keeping the last inventory")
        if parts:
            self.state.update(**parts)
        if first or "gpupolicies" in changed:
            self._publish_policies()

    def _inventory(self, nodes: dict[str, Any]) -> Inventory:
        found = inventory_of(nodes.values(), self.slices.snapshot().values(),
                             self.classes.snapshot().values(), self.state.catalog,
                             self.taint_rules.snapshot().values())
        templates = [obj for c in self.templates for obj in c.snapshot().values()]
        if templates:
            found = with_templates(found, read_templates(templates, self.state.catalog))
        by_namespace: dict[str, list[dict[str, Any]]] = {}
        for obj in self.limit_ranges.snapshot().values():
            by_namespace.setdefault(obj["metadata"]["namespace"], []).append(obj)
        if by_namespace:
            found = replace(found, limits={ns: limit_range_defaults(items)
                                           for ns, items in by_namespace.items()})
        return found

    def _publish_policies(self) -> None:
        valid: list[GPUPolicy] = []
        problems: dict[str, str] = {}
        for item in self.policies.snapshot().values():
            if isinstance(item, Invalid):
                problems[item.name] = item.message
            else:
                valid.append(item)
        self._report(problems)
        # the State merges them with the file policies (a file wins a name clash)
        self.state.update(cluster_policies=valid)
        self.invalid_count = len(problems) + len(self.state.clashes)

    def _report(self, problems: dict[str, str]) -> None:
        for name, message in problems.items():
            if self._reported.get(name) != message:
                log.error("GPUPolicy %s skipped: %s", name, message)
            self.state.fail(f"gpupolicy/{name}", message)
        for name in set(self._reported) - set(problems):
            self.state.clear(f"gpupolicy/{name}")
        self._reported = problems


def from_args(args: argparse.Namespace, state: Any,
              settings: WatchSettings | None = None) -> ClusterSources | None:
    """ClusterSources when `--kubeconfig` is given or we run in a pod, else None. Not started.
    Raises webhook.cluster.ClusterError for unusable credentials."""
    if not wanted(args):
        return None
    sources = ClusterSources(state, api_client(getattr(args, "kubeconfig", None)),
                             settings=settings)
    state.expect("namespaces", "inventory", "cluster_policies", "claims", "api")
    return sources


def check(args: argparse.Namespace) -> list[str]:
    """For `serve` before it forks: unusable cluster credentials, as problem lines."""
    if not wanted(args):
        return []
    try:
        api_client(getattr(args, "kubeconfig", None))
    except ClusterError as exc:
        return [str(exc)]
    return []


def attach(args: argparse.Namespace, state: Any,
           settings: WatchSettings | None = None) -> ClusterSources | None:
    """`serve`'s hook, called once per worker: with `--kubeconfig` or in a pod, start the
    cluster caches feeding `state`. Returns None outside a cluster."""
    cluster = from_args(args, state, settings)
    return cluster.start() if cluster is not None else None
