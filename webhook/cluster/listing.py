"""The live cluster as an audit's Source (webhook/cluster/files.py says what a Source gives;
FileSource is its offline twin): every workload kind listed page by page, with retries and
one deadline. The only part of the audit that imports the `kubernetes` package.
"""

from __future__ import annotations

import functools
import json
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from policies import yamlpos
from policies.scheduling.occupancy import Occupancy
from policies.workloads import WORKLOAD_KINDS, KindTable, WorkloadKind
from webhook.cluster.client import (
    DeadlineExceeded,
    Retry,
    api_client,
    call_with_retry,
    describe,
    list_all,
    unreachable,
    without_transport_retries,
)
from webhook.cluster.errors import ClusterError
from webhook.cluster.files import Batches, Warn
from webhook.cluster.kinds import (
    BUILT_IN,
    CLAIM_RESOURCES,
    CUSTOM,
    DRA_GROUP,
    DRA_VERSION,
    GROUP,
    PLURAL,
    PODS,
    TEMPLATE_RESOURCES,
    VERSION,
    discovered_kinds,
    node_facts,
)
from webhook.inputs import sources
from webhook.output.progress import Progress

_VERSION = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")  # a DNS-1035-ish label
_DISCOVERY = "API discovery (GET /apis)"
_MAX_VERSIONS = 16  # versions of one group tried per kind: a 404 each, so a bounded number


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

    def _built_in(self, api_class: str, method: str) -> Callable[..., Any]:
        """`list_X_for_all_namespaces`, or `list_namespaced_X` in the one namespace asked.
        `api_class`: its name in kubernetes.client (the kind tables import no client)."""
        api = getattr(k8s, api_class)(self.api)
        if self.namespace is None:
            return getattr(api, method)  # type: ignore[no-any-return]
        name = method.removesuffix("_for_all_namespaces").replace("list_", "list_namespaced_", 1)
        return functools.partial(getattr(api, name), self.namespace)

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
        # Node templates (optional CRDs) and LimitRanges: a 404 is none there, and a 403 is
        # said and read as none (the fit is then judged on the nodes alone).
        lists: list[tuple[str, Callable[..., Any], str]] = [
            (kind, functools.partial(custom.list_cluster_custom_object, group, version, plural),
             f"{group}/{version}") for group, version, plural, kind in TEMPLATE_RESOURCES]
        lists.append(("LimitRange", core.list_limit_range_for_all_namespaces, "v1"))
        for kind, lister, api_version in lists:
            try:
                for page in self._all(lister):
                    for obj in page:
                        found.add({**obj, "kind": kind, "apiVersion": api_version})
            except ApiException as exc:
                if exc.status == 403:
                    warn(f"cannot list {kind} objects ({describe(exc)}): judged without them")
                elif exc.status != 404:
                    raise ClusterError(f"cannot list {kind} objects: {describe(exc)}") from None
        self._api_objects(found, custom, core, warn)
        return found

    def occupancy(self) -> Occupancy:
        """What the pods bound to each node hold, summed page by page (no pod is kept)."""
        found = Occupancy()
        core = k8s.CoreV1Api(self.api)
        try:
            for page in self._all(core.list_pod_for_all_namespaces):
                for obj in page:
                    found.add_pod(obj)
        except ApiException as exc:
            raise ClusterError(f"cannot list pods: {describe(exc)}") from None
        return found

    def _api_objects(self, found: sources.ClusterObjects, custom: Any, core: Any,
                     warn: Warn) -> None:
        """PriorityClasses, RuntimeClasses and ResourceQuotas (policies/apiserver.py). Without
        the right to list one kind, it is not known and nothing is judged against it: said,
        not fatal (the audit still has everything else to say)."""
        for kind, func in (
                ("PriorityClass", functools.partial(custom.list_cluster_custom_object,
                                                    "scheduling.k8s.io", "v1",
                                                    "priorityclasses")),
                ("RuntimeClass", functools.partial(custom.list_cluster_custom_object,
                                                   "node.k8s.io", "v1", "runtimeclasses")),
                ("ResourceQuota", core.list_resource_quota_for_all_namespaces)):
            try:
                listed = [{**obj, "kind": kind} for page in self._all(func) for obj in page]
            except ApiException as exc:
                if exc.status != 404:
                    warn(f"cannot list {kind} objects ({describe(exc)}): not judged against")
                continue
            found.api_objects += listed

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
