"""Where the audit's objects come from: a live cluster (paged lists) or files.

Both give the same four things: GPUPolicy objects, Namespace labels, Node objects (with DRA
slices, classes and the claims pods name), and the workloads in batches (DRA ResourceClaims and
ResourceClaimTemplates among them, reviewed as objects of their own), so a dump of a cluster
audits exactly like the cluster itself.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from policies import yamlpos
from policies.engine import is_claim, namespace_of
from policies.paths import FieldPath
from policies.workloads import (
    WORKLOAD_KINDS,
    KindTable,
    WorkloadKind,
    locations_for,
    unlisted_pod_template,
)
from webhook.cluster.client import (
    ClusterError,
    DeadlineExceeded,
    Retry,
    api_client,
    call_with_retry,
    describe,
    list_all,
    unreachable,
    without_transport_retries,
)
from webhook.cluster.watch import (
    CLAIM_RESOURCES,
    DRA_GROUP,
    DRA_VERSION,
    GROUP,
    PLURAL,
    VERSION,
    node_facts,
)
from webhook.inputs import sources
from webhook.output.progress import Progress

Warn = Callable[[str], None]
# Where an object was read from, for file and line in the report: None for a cluster object.
Locator = Callable[[FieldPath], tuple[str, int, int]] | None
Batches = Iterator[tuple[str, list[tuple[dict[str, Any], Locator]]]]

# Built-in workload kinds: (kind, apiVersion, API class, its all-namespaces list method)
BUILT_IN = (
    ("Deployment", "apps/v1", k8s.AppsV1Api, "list_deployment_for_all_namespaces"),
    ("StatefulSet", "apps/v1", k8s.AppsV1Api, "list_stateful_set_for_all_namespaces"),
    ("DaemonSet", "apps/v1", k8s.AppsV1Api, "list_daemon_set_for_all_namespaces"),
    ("ReplicaSet", "apps/v1", k8s.AppsV1Api, "list_replica_set_for_all_namespaces"),
    ("ReplicationController", "v1", k8s.CoreV1Api,
     "list_replication_controller_for_all_namespaces"),
    ("Job", "batch/v1", k8s.BatchV1Api, "list_job_for_all_namespaces"),
    ("CronJob", "batch/v1", k8s.BatchV1Api, "list_cron_job_for_all_namespaces"),
    ("PodTemplate", "v1", k8s.CoreV1Api, "list_pod_template_for_all_namespaces"),
)
PODS = ("Pod", "v1", k8s.CoreV1Api, "list_pod_for_all_namespaces")
# Custom workload kinds: (kind, group, versions to try in order, plural). The first version
# the API server serves is used (a cluster serves every object under each of its versions).
CUSTOM = (
    ("PyTorchJob", "kubeflow.org", ("v1",), "pytorchjobs"),
    ("TFJob", "kubeflow.org", ("v1",), "tfjobs"),
    ("MPIJob", "kubeflow.org", ("v2beta1", "v1"), "mpijobs"),
    ("XGBoostJob", "kubeflow.org", ("v1",), "xgboostjobs"),
    ("PaddleJob", "kubeflow.org", ("v1",), "paddlejobs"),
    ("JAXJob", "kubeflow.org", ("v1",), "jaxjobs"),
    ("RayCluster", "ray.io", ("v1", "v1alpha1"), "rayclusters"),
    ("RayJob", "ray.io", ("v1", "v1alpha1"), "rayjobs"),
    ("RayService", "ray.io", ("v1", "v1alpha1"), "rayservices"),
    ("JobSet", "jobset.x-k8s.io", ("v1alpha2",), "jobsets"),
    ("LeaderWorkerSet", "leaderworkerset.x-k8s.io", ("v1",), "leaderworkersets"),
    ("Job", "batch.volcano.sh", ("v1alpha1",), "jobs"),
    ("Rollout", "argoproj.io", ("v1alpha1",), "rollouts"),
    ("InferenceService", "serving.kserve.io", ("v1beta1",), "inferenceservices"),
    ("Notebook", "kubeflow.org", ("v1", "v1beta1"), "notebooks"),
    ("TrainJob", "trainer.kubeflow.org", ("v1alpha1",), "trainjobs"),
    ("Workflow", "argoproj.io", ("v1alpha1",), "workflows"),
    ("WorkflowTemplate", "argoproj.io", ("v1alpha1",), "workflowtemplates"),
    ("CronWorkflow", "argoproj.io", ("v1alpha1",), "cronworkflows"),
    ("Service", "serving.knative.dev", ("v1",), "services"),
    ("SparkApplication", "sparkoperator.k8s.io", ("v1beta2",), "sparkapplications"),
    ("ScheduledSparkApplication", "sparkoperator.k8s.io", ("v1beta2",),
     "scheduledsparkapplications"),
    ("NIMService", "apps.nvidia.com", ("v1alpha1",), "nimservices"),
    # DRA claims are reviewed as objects of their own (DESIGN.md §2.4); 404 before 1.34
    *((kind, DRA_GROUP, (DRA_VERSION,), plural) for plural, kind in CLAIM_RESOURCES),
)
# Groups a cluster serves the built-in kinds under, old manifests included (extensions/v1beta1)
_BUILT_IN_GROUPS = {"", "apps", "extensions", "batch"}
_AUDITED = {("", "Pod")} | {(g, kind) for kind, _, _, _ in BUILT_IN for g in _BUILT_IN_GROUPS} | {
    (group, kind) for kind, group, _, _ in CUSTOM}


# (group, plural) pairs the fixed tables list: a table entry naming one is not listed twice
_LISTED_RESOURCES = {(group, plural) for _, group, _, plural in CUSTOM}
_VERSION = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # a DNS-1035-ish label
_DISCOVERY = "API discovery (GET /apis)"
_MAX_VERSIONS = 16  # versions of one group tried per kind: a 404 each, so a bounded number


def audited_kind(obj: dict[str, Any], table: KindTable = WORKLOAD_KINDS) -> bool:
    """Whether a live audit would list this object: a file holds only what a cluster can.
    Besides the fixed kinds, the live audit lists every kind of `table` in an API group
    (found through discovery), so those are audited from files too."""
    group = str(obj.get("apiVersion", "")).rpartition("/")[0]
    kind = obj.get("kind")
    if not isinstance(kind, str):
        return False
    if (group, kind) in _AUDITED:
        return bool(locations_for(obj)) or is_claim(obj)
    return (group, kind) in _discovered_keys(table) and bool(locations_for(obj, table))


@functools.lru_cache(maxsize=4)
def _discovered_keys(table: KindTable) -> frozenset[tuple[str, str]]:
    return frozenset((k.group, k.kind) for k in discovered_kinds(table) if k.resource)


def discovered_kinds(table: KindTable) -> list[WorkloadKind]:
    """The kinds of `table` the fixed tables (BUILT_IN, CUSTOM, Pods) do not list: the live
    audit finds their version through API discovery. Core-group kinds are not among them
    (every core kind that carries a pod is built in; discovery of /apis does not cover /api)."""
    seen = set(_LISTED_RESOURCES)
    out = []
    for k in table.kinds:
        if not k.group or (k.group, k.kind) in _AUDITED or (k.group, k.resource) in seen:
            continue
        seen.add((k.group, k.resource))
        out.append(k)
    return out


def served_versions(api: k8s.ApiClient, retry: Retry | None = None) -> dict[str, list[str]]:
    """Every API group the server serves (one `GET /apis`), and its versions: the preferred
    one first, then the others in the server's order (at most _MAX_VERSIONS). Entries that
    are not well-formed are left out. Raises ApiException (the server answered an error),
    HTTPError (it did not answer) and ValueError (the answer is no APIGroupList)."""
    resp: Any = call_with_retry(
        lambda t: k8s.ApisApi(api).get_api_versions(_preload_content=False, _request_timeout=t),
        retry or Retry(attempts=1), (10, 60))
    try:
        body = json.loads(resp.data)
    except (ValueError, UnicodeDecodeError):
        raise ValueError("the answer is not JSON") from None
    groups = body.get("groups") if isinstance(body, dict) else None
    if not isinstance(groups, list):
        raise ValueError("the answer is no APIGroupList")
    out: dict[str, list[str]] = {}
    for group in groups:
        if not isinstance(group, dict) or not isinstance(group.get("name"), str):
            continue
        preferred = group.get("preferredVersion")
        listed = [preferred, *(group.get("versions") or ())] \
            if isinstance(group.get("versions"), list) else [preferred]
        versions: list[str] = []
        for entry in listed:
            version = entry.get("version") if isinstance(entry, dict) else None
            if isinstance(version, str) and _VERSION.match(version) and version not in versions:
                versions.append(version)
        if versions:
            out[group["name"]] = versions[:_MAX_VERSIONS]
    return out


def _locator(file: str, doc: yamlpos.Document, prefix: FieldPath) -> Locator:
    def locate(path: FieldPath) -> tuple[str, int, int]:
        return (file, *doc.position((*prefix, *path)))
    return locate


class Source(Protocol):
    problems: list[tuple[str, yamlpos.SyntaxProblem]]  # documents the reader refused
    failures: dict[str, str]  # what could not be read -> why: the audit is incomplete
    kinds: KindTable  # the workload-kinds table: what is listed besides the fixed kinds
    namespace: str | None  # `audit -n NS`: only the workloads of that namespace

    def cluster_objects(self, warn: Warn) -> sources.ClusterObjects: ...
    def workloads(self, progress: Progress, unavailable: dict[str, str]) -> Batches: ...


class LiveSource:
    """A live cluster. Every list page that fails for a while (a 5xx, a 429, no answer) is
    asked for again a few times with a back-off (`retry`), never past one overall deadline
    (`timeout` seconds from now). What then still could not be read is in `failures`: the
    audit did not see it, so it must neither report on it nor clear its reports."""

    def __init__(self, api: k8s.ApiClient, page_size: int = 500,
                 timeout: float | None = None, attempts: int = 4) -> None:
        self.problems: list[tuple[str, yamlpos.SyntaxProblem]] = []
        self.api = api
        self.page_size = page_size
        self.server = api.configuration.host
        self.kinds: KindTable = WORKLOAD_KINDS  # the audit sets the one --workload-kinds gave
        self.timeout = timeout
        self.retry = Retry(attempts=attempts, deadline=None if timeout is None
                           else time.monotonic() + timeout)
        self.failures: dict[str, str] = {}  # what could not be read -> why
        self.namespace: str | None = None

    def _built_in(self, api_class: Any, method: str) -> Callable[..., Any]:
        """`list_X_for_all_namespaces`, or `list_namespaced_X` in the one namespace asked."""
        if self.namespace is None:
            return getattr(api_class(self.api), method)  # type: ignore[no-any-return]
        name = method.removesuffix("_for_all_namespaces").replace("list_", "list_namespaced_", 1)
        return functools.partial(getattr(api_class(self.api), name), self.namespace)

    def _custom(self, group: str, version: str, plural: str) -> Callable[..., Any]:
        custom = k8s.CustomObjectsApi(self.api)
        if self.namespace is None:
            return functools.partial(custom.list_cluster_custom_object, group, version, plural)
        return functools.partial(custom.list_namespaced_custom_object, group, version,
                                 self.namespace, plural)

    @classmethod
    def connect(cls, kubeconfig: str | None, context: str | None, page_size: int,
                timeout: float | None = None) -> LiveSource:
        return cls(without_transport_retries(api_client(kubeconfig, context)), page_size,
                   timeout)

    def late(self) -> ClusterError:
        return ClusterError(f"the audit did not finish within --timeout {self.timeout:g}s "
                            f"(API server {self.server})")

    def pages(self, func: Callable[..., Any]) -> Iterator[Any]:
        """list_all with the retry policy and deadline; raises ClusterError when the server
        does not answer or the deadline passes, ApiException when it answers an error."""
        try:
            yield from list_all(func, limit=self.page_size, timeout=(10, 120), retry=self.retry)
        except DeadlineExceeded:
            raise self.late() from None
        except HTTPError as exc:
            raise unreachable(self.server, exc) from None

    def _all(self, func: Callable[..., Any]) -> Iterator[list[dict[str, Any]]]:
        for page in self.pages(func):
            yield page.items

    def _everything(self, func: Callable[..., Any], what: str) -> list[dict[str, Any]]:
        try:
            return [obj for items in self._all(func) for obj in items]
        except ApiException as exc:
            raise ClusterError(f"cannot list {what}: HTTP {exc.status} {exc.reason}") from None

    def cluster_objects(self, warn: Warn) -> sources.ClusterObjects:
        core = k8s.CoreV1Api(self.api)
        found = sources.ClusterObjects()
        for obj in self._everything(core.list_namespace, "namespaces"):
            found.add({**obj, "kind": "Namespace"})
        for obj in self._everything(core.list_node, "nodes"):
            found.add({**node_facts(obj), "kind": "Node"})
        custom = k8s.CustomObjectsApi(self.api)
        # 404: the CRD (or resource.k8s.io/v1, before 1.34) is not there: none of that kind.
        # ResourceClaims and templates: what the pods' spec.resourceClaims name (DRA demand).
        for group, version, plural, kind in ((GROUP, VERSION, PLURAL, "GPUPolicy"),
                                             (DRA_GROUP, DRA_VERSION, "resourceslices",
                                              "ResourceSlice"),
                                             (DRA_GROUP, DRA_VERSION, "deviceclasses",
                                              "DeviceClass"),
                                             (DRA_GROUP, DRA_VERSION, "devicetaintrules",
                                              "DeviceTaintRule"),
                                             *((DRA_GROUP, DRA_VERSION, plural, kind)
                                               for plural, kind in CLAIM_RESOURCES)):
            func = functools.partial(custom.list_cluster_custom_object, group, version, plural)
            try:
                for page in self._all(func):
                    for obj in page:
                        found.add({**obj, "kind": kind})
            except ApiException as exc:
                if exc.status != 404:  # audited without them, policies would be missed
                    raise ClusterError(f"cannot list {kind} objects: {describe(exc)}") from None
        return found

    def _kinds(self, unavailable: dict[str, str]) -> Iterator[tuple[str, str, Callable[..., Any]]]:
        """(kind, apiVersion, list function) in listing order: the built-in kinds, the fixed
        custom kinds, the other kinds of the kind table (versions from API discovery, asked
        only once the earlier kinds are listed), then Pods. A kind comes once per version to
        try; the first version the server serves it under is the one listed."""
        for kind, api_version, api_class, method in BUILT_IN:
            yield kind, api_version, self._built_in(api_class, method)
        for kind, group, versions, plural in CUSTOM:
            for version in versions:
                yield kind, f"{group}/{version}", self._custom(group, version, plural)
        for entry, version in self._discovered(unavailable):
            yield entry.kind, f"{entry.group}/{version}", self._custom(
                entry.group, version, entry.resource)
        kind, api_version, api_class, method = PODS
        yield kind, api_version, self._built_in(api_class, method)

    def _discovered(self, unavailable: dict[str, str]) -> Iterator[tuple[WorkloadKind, str]]:
        """Each kind of the table the fixed lists leave out, with each version its group is
        served under (preferred first). A group the server does not serve: none of that kind,
        as a CRD that is not installed. Discovery failing is reported, not fatal."""
        kinds = discovered_kinds(self.kinds)
        for entry in kinds:
            if not entry.resource:
                unavailable[f"{entry.kind} ({entry.group})"] = (
                    "the workload-kinds table gives no resource (plural) to list it by")
        kinds = [k for k in kinds if k.resource]
        if not kinds:
            return
        try:
            served = served_versions(self.api, self.retry)
        except ApiException as exc:
            why = f"HTTP {exc.status} {exc.reason}"
        except ValueError as exc:
            why = str(exc)
        except DeadlineExceeded:
            raise self.late() from None
        except HTTPError as exc:
            raise unreachable(self.server, exc) from None
        else:
            for entry in kinds:
                for version in served.get(entry.group, ()):
                    yield entry, version
            return
        unavailable[_DISCOVERY] = self.failures[_DISCOVERY] = f"{why}; not listed: " + ", ".join(
            f"{k.kind} ({k.group})" for k in kinds)

    def workloads(self, progress: Progress, unavailable: dict[str, str]) -> Batches:
        served: set[str] = set()
        for kind, api_version, func in self._kinds(unavailable):
            group = api_version.rpartition("/")[0]
            if f"{group}/{kind}" in served:
                continue  # already listed under an earlier version
            try:
                first = True
                for page in self.pages(func):
                    if first:
                        served.add(f"{group}/{kind}")
                        progress.expect(kind, len(page.items) + (page.remaining or 0))
                        first = False
                    for obj in page.items:  # list items carry no kind/apiVersion
                        obj["kind"], obj["apiVersion"] = kind, api_version
                    yield kind, [(obj, None) for obj in page.items]
            except ApiException as exc:
                if exc.status == 404:
                    continue  # that CRD (or version) is not installed
                # the rest is still listed, so that every failure is named at once
                unavailable[f"{kind} ({api_version})"] = self.failures[
                    f"{kind} ({api_version})"] = describe(exc)


class FileSource:
    """Objects from files and directories (*.yaml, *.yml, *.json, recursively), read through
    the one hardened reader. A file that cannot be read is reported and the others audited;
    a document the reader refuses is a refusal, as in `lint` and `review`."""

    def __init__(self, paths: list[str], *, stdin: bytes | None = None,
                 stdin_name: str = "<stdin>") -> None:
        self.files: list[Path] = []
        self.given: dict[str, bytes] = {}  # `-`: standard input, read once by the caller
        for path in paths:
            if path == "-":
                if stdin_name not in self.given:
                    self.given[stdin_name] = stdin or b""
                    self.files.append(Path(stdin_name))
                continue
            self.files.extend(sources.manifest_files(Path(path)))  # raises SourceError
        self.unreadable: dict[str, str] = {}  # file -> why
        self.failures: dict[str, str] = {}  # a file that cannot be read is named, not fatal
        self.problems: list[tuple[str, yamlpos.SyntaxProblem]] = []
        self.kinds: KindTable = WORKLOAD_KINDS  # the audit sets the one --workload-kinds gave
        self.namespace: str | None = None

    def cluster_objects(self, warn: Warn) -> sources.ClusterObjects:
        """Namespace, Node and GPUPolicy documents, found in a first pass."""
        found = sources.ClusterObjects()
        for file in self.files:
            try:
                raw = self._read(file)
            except sources.SourceError:
                continue  # reported by the workload pass
            if not any(k.encode() in raw for k in sources.CLUSTER_KINDS):
                continue
            for doc in yamlpos.iter_stream(raw):  # streamed: a large dump is never held whole
                if isinstance(doc, yamlpos.Document):
                    for _, obj in doc.objects():
                        found.add(obj)
        for problem in found.problems:
            warn(problem)
        found.problems.clear()
        found.nodes = [node_facts(n) for n in found.nodes]
        return found

    def _read(self, file: Path) -> bytes:
        given = self.given.get(str(file))
        return given if given is not None else sources.read_bytes(file)

    def workloads(self, progress: Progress, unavailable: dict[str, str]) -> Batches:
        for file in self.files:
            try:
                raw = self._read(file)
            except sources.SourceError as exc:
                self.unreadable[str(file)] = str(exc).removeprefix(f"{file}: ")
                continue
            for item in yamlpos.iter_stream(raw):  # one document at a time
                if isinstance(item, yamlpos.SyntaxProblem):
                    self.problems.append((str(file), item))
                    continue
                for prefix, obj in item.objects():
                    if self.namespace is not None and namespace_of(obj, None) != self.namespace:
                        continue  # audit -n NS
                    if audited_kind(obj, self.kinds):
                        yield str(obj["kind"]), [(obj, _locator(str(file), item, prefix))]
                    elif why := unlisted_pod_template(obj, self.kinds):
                        meta = obj.get("metadata")
                        name = meta.get("name") if isinstance(meta, dict) else None
                        unavailable[f"{file}: {obj.get('kind')}/{name or '?'}"] = why
        for name, why in sorted(self.unreadable.items()):
            unavailable[f"file {name}"] = why
