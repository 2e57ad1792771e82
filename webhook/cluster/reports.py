"""`gpupolicy audit --apply`: the audit's reports written into the cluster, kept current.

The reports are the ones `-o policyreport` / `-o openreports` prints (one builder,
webhook/output/audit_report.policy_reports), written with server-side apply (field manager
`gpupolicy`, forced: the reports are ours alone). A report gpupolicy owns carries the label
`app.kubernetes.io/managed-by: gpupolicy` and a `gpupolicy-<n>` name; only those are ever
written or deleted. After a complete audit, every covered namespace's reports are rewritten
(empty when nothing is left), and the owned reports the audit did not write (a namespace
that is gone or no longer audited, a part no longer needed) are deleted, each shard deleting
only in the namespaces it owns (the cluster report: shard 0).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from webhook.cluster.client import (
    DeadlineExceeded,
    Retry,
    call_with_retry,
    describe,
    list_all,
)
from webhook.cluster.errors import ClusterError
from webhook.cluster.kinds import REPORT_PREFERRED, REPORT_RESOURCES
from webhook.cluster.listing import served_versions
from webhook.cluster.shards import shard_of
from webhook.output.audit_report import MANAGED_BY, REPORT_PREFIX, Collector, policy_reports

FIELD_MANAGER = "gpupolicy"
APPLY = "application/apply-patch+yaml"
SELECTOR = ",".join(f"{k}={v}" for k, v in MANAGED_BY.items())


def report_apis(api: k8s.ApiClient, wanted: str, retry: Retry) -> list[str]:
    """The report APIs to write: the ones asked for, each checked against API discovery
    (auto: the first of REPORT_PREFERRED the cluster serves). Raises ClusterError."""
    try:
        served = served_versions(api, retry)
    except DeadlineExceeded as exc:
        raise ClusterError(f"API discovery: {exc}") from None
    except (ApiException, HTTPError, ValueError) as exc:
        raise ClusterError(f"cannot tell which report API is installed: API discovery "
                           f"(GET /apis): {describe(exc)}") from None
    installed = [fmt for fmt in REPORT_PREFERRED
                 if REPORT_RESOURCES[fmt][1] in served.get(REPORT_RESOURCES[fmt][0], ())]
    if wanted == "auto":
        if not installed:
            raise ClusterError("no report API is installed: --apply needs the CRDs of "
                               "openreports.io/v1alpha1 or wgpolicyk8s.io/v1alpha2")
        return installed[:1]
    chosen = list(REPORT_PREFERRED) if wanted == "both" else [wanted]
    for fmt in chosen:
        if fmt not in installed:
            group, version, _, _ = REPORT_RESOURCES[fmt]
            raise ClusterError(f"--report-api {fmt}: the cluster does not serve "
                               f"{group}/{version} (its CRDs are not installed)")
    return chosen


@dataclass
class Applied:
    written: int = 0
    deleted: int = 0
    kept: int = 0  # owned reports of namespaces another shard owns


class ReportWriter:
    """Writes one collector's reports for one or more report APIs."""

    def __init__(self, api: k8s.ApiClient, retry: Retry, *, shard: tuple[int, int] = (0, 1),
                 page_size: int = 500, namespaces: frozenset[str] | None = None) -> None:
        self.custom = k8s.CustomObjectsApi(api)
        self.retry = retry
        self.shard = shard
        self.page_size = page_size
        # `audit -n NS ...`: only those namespaces' reports are ours, each listed in its
        # namespace (a Role there is all the writer needs), and no cluster report
        self.namespaces = namespaces
        self.done = Applied()  # so far: what a failure part-way had already done

    def owns(self, namespace: str) -> bool:
        if self.namespaces is not None:
            # one namespace (`-n NS`) is all its own, whatever --shard says
            return namespace in self.namespaces and (
                len(self.namespaces) == 1
                or shard_of(namespace, self.shard[1]) == self.shard[0])
        return shard_of(namespace, self.shard[1]) == self.shard[0]

    def apply(self, collector: Collector, fmts: list[str]) -> Applied:
        """First the owned reports of every API are listed (a failure there writes nothing),
        then the new ones applied, then the owned ones not written deleted."""
        done = self.done
        existing = {fmt: self._owned(fmt) for fmt in fmts}
        for fmt in fmts:
            written: set[tuple[str, str]] = set()
            for report in policy_reports(collector, fmt):
                meta = report["metadata"]
                self._call(f"apply {report['kind']} {_where(meta)}",
                           self._patch_call(fmt, meta.get("namespace", ""), meta["name"], report))
                written.add((meta.get("namespace", ""), meta["name"]))
                done.written += 1
            for namespace, name in sorted(existing[fmt] - written):
                if not self.owns(namespace):
                    done.kept += 1
                    continue
                self._delete(fmt, namespace, name)
                done.deleted += 1
        return done

    def _owned(self, fmt: str) -> set[tuple[str, str]]:
        group, version, plural, cluster_plural = REPORT_RESOURCES[fmt]
        found: set[tuple[str, str]] = set()
        lists = [(resource, _bound(self.custom.list_cluster_custom_object, group, version,
                                   resource, label_selector=SELECTOR))
                 for resource in (plural, cluster_plural)] if self.namespaces is None else [
            (plural, _bound(self.custom.list_namespaced_custom_object, group, version, ns,
                            plural, label_selector=SELECTOR))
            for ns in sorted(self.namespaces)]
        for resource, func in lists:
            try:
                for page in list_all(func, limit=self.page_size, timeout=(10, 60),
                                     retry=self.retry):
                    for item in page.items:
                        meta = item.get("metadata") or {}
                        name = str(meta.get("name") or "")
                        labels = meta.get("labels") or {}
                        if name.startswith(REPORT_PREFIX) and all(
                                labels.get(k) == v for k, v in MANAGED_BY.items()):
                            found.add((str(meta.get("namespace") or ""), name))
            except (ApiException, HTTPError, DeadlineExceeded) as exc:
                raise ClusterError(f"cannot list the {resource}.{group} reports gpupolicy "
                                   f"wrote: {describe(exc)}") from None
        return found

    def _patch_call(self, fmt: str, namespace: str, name: str,
                    report: dict[str, Any]) -> Callable[[Any], Any]:
        group, version, plural, cluster_plural = REPORT_RESOURCES[fmt]
        options: dict[str, Any] = {"field_manager": FIELD_MANAGER, "force": True,
                                   "_content_type": APPLY, "_preload_content": False}
        if namespace:
            return lambda t: self.custom.patch_namespaced_custom_object(
                group, version, namespace, plural, name, report, _request_timeout=t, **options)
        return lambda t: self.custom.patch_cluster_custom_object(
            group, version, cluster_plural, name, report, _request_timeout=t, **options)

    def _delete(self, fmt: str, namespace: str, name: str) -> None:
        group, version, plural, cluster_plural = REPORT_RESOURCES[fmt]
        if namespace:
            def call(t: Any) -> Any:
                return self.custom.delete_namespaced_custom_object(
                    group, version, namespace, plural, name, _request_timeout=t,
                    _preload_content=False)
        else:
            def call(t: Any) -> Any:
                return self.custom.delete_cluster_custom_object(
                    group, version, cluster_plural, name, _request_timeout=t,
                    _preload_content=False)
        try:
            self._call(f"delete {plural if namespace else cluster_plural}.{group} "
                       f"{_where({'namespace': namespace, 'name': name})}", call)
        except ClusterError as exc:
            if "HTTP 404" not in str(exc):  # gone already: what we wanted
                raise

    def _call(self, what: str, call: Callable[[Any], Any]) -> None:
        try:
            resp = call_with_retry(call, self.retry, (10, 60))
        except (ApiException, HTTPError, DeadlineExceeded) as exc:
            raise ClusterError(f"cannot {what}: {describe(exc)}{_message(exc)}") from None
        # the answer is not needed, but it must be read off the connection before the pool
        # hands the connection to the next request
        for step in ("drain_conn", "release_conn"):
            method = getattr(resp, step, None)
            if method is not None:
                method()


def _bound(func: Callable[..., Any], *args: Any, **kwargs: Any) -> Callable[..., Any]:
    def call(**more: Any) -> Any:
        return func(*args, **kwargs, **more)
    return call


def _where(meta: dict[str, Any]) -> str:
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


def _message(exc: BaseException) -> str:
    """The server's own words (a Status message), e.g. what a CRD's validation refused."""
    body = getattr(exc, "body", None)
    try:
        status = json.loads(body) if body else None
    except (ValueError, TypeError):
        return ""
    message = status.get("message") if isinstance(status, dict) else None
    return f": {str(message)[:500]}" if message else ""
