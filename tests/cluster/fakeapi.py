"""A small in-process HTTP server that speaks the Kubernetes list/watch protocol.

No kube-apiserver runs here, so the cluster tests and the audit bench drive the real
`kubernetes` client against this: JSON lists with `metadata.resourceVersion` and `continue`
(`limit` honoured, items in key order without kind/apiVersion as the real server sends them),
chunked watch streams with ADDED/MODIFIED/DELETED/BOOKMARK/ERROR events, 410 Gone for a
resourceVersion older than the last compaction, and knobs to drop watches, stop and restart
the listener on the same port, and fail the next requests.

Any `group/version` + plural that has objects is served; paths of kinds never added get 404,
like a CRD that is not installed. `GET /apis` (API discovery) answers an APIGroupList of the
groups served so far, each group's preferred version the first one registered, and
`GET /apis/<group>/<version>` the APIResourceList of that group/version (404 when none).

Faults (`inject(Fault(...))`, see Fault): error answers to chosen requests (a 404 burst on one
resource, a failure on later list pages only), watches that send their headers and then
nothing, and `add(..., unreadable=LINE)`: a change whose watch event is a malformed line,
kept in the history like any event so every watch resumed from before it gets it again.
"""

from __future__ import annotations

import base64
import bisect
import contextlib
import copy
import json
import select
import socket
import threading
import time
from collections.abc import Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

BUILT_IN = [
    ("v1", "Namespace"), ("v1", "Node"), ("v1", "Pod"), ("v1", "PodTemplate"),
    ("v1", "ReplicationController"), ("apps/v1", "Deployment"), ("apps/v1", "StatefulSet"),
    ("apps/v1", "DaemonSet"), ("apps/v1", "ReplicaSet"), ("batch/v1", "Job"),
    ("batch/v1", "CronJob"), ("v1", "LimitRange"),
]
CLUSTER_SCOPED = {"Namespace", "Node", "GPUPolicy", "CustomResourceDefinition", "PersistentVolume",
                  "ResourceSlice", "DeviceClass", "DeviceTaintRule", "ClusterPolicyReport",
                  "ClusterReport", "NodePool"}


def plural_of(kind: str) -> str:
    lower = kind.lower()
    if lower.endswith("y"):
        return lower[:-1] + "ies"
    if lower.endswith("s"):
        return lower + "es"
    return lower + "s"


def group_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


REASONS = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound",
           409: "Conflict", 410: "Expired", 429: "TooManyRequests", 500: "InternalError",
           503: "ServiceUnavailable", 504: "Timeout"}


@dataclass
class Fault:
    """A misbehaviour for the GET requests that match: `path` (exact, None: any), `watch`
    (True: watches only, False: lists and gets only, None: both), `query` (a substring of the
    query string, e.g. "continue=" for the pages after the first). The next `count` matching
    requests take it (-1: every one until `clear_faults()`).

    `status`: answer it with a Status body (e.g. 404 NotFound, as a restarted API server
    answers for a custom resource until its CRD informer has synced); `silent=True` (watches):
    send 200 and the headers, then nothing at all until the client goes."""

    status: int = 500
    count: int = 1
    path: str | None = None
    watch: bool | None = None
    query: str = ""
    silent: bool = False
    taken: int = 0  # how many requests it answered

    def matches(self, path: str, query: str, watch: bool) -> bool:
        return (self.count != 0
                and (self.path is None or self.path.rstrip("/") == path.rstrip("/"))
                and (self.watch is None or self.watch == watch)
                and self.query in query)


class _Resource:
    """One group/version/plural: objects by key, and the events since the last compaction."""

    def __init__(self, group: str, version: str, plural: str, kind: str, namespaced: bool):
        self.group, self.version, self.plural, self.kind = group, version, plural, kind
        self.namespaced = namespaced
        self.objects: dict[str, dict[str, Any]] = {}
        self.encoded: dict[str, bytes] = {}  # list form: no kind/apiVersion
        self.sorted_keys: list[str] | None = None
        self.events: list[tuple[int, str, dict[str, Any]]] = []

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    def ordered(self) -> list[str]:
        if self.sorted_keys is None:
            self.sorted_keys = sorted(self.objects)
        return self.sorted_keys


class _Writes:
    """Writes and per-page faults (`audit --apply`): server-side apply PATCH
    (application/apply-patch+yaml, fieldManager required; the applied object replaces the
    manager's previous one, uid and creationTimestamp kept), DELETE, list `labelSelector`
    (equality terms), and faults on the n-th page of a list or on writes. Kept apart from the
    list/watch core so that it reads (and merges) on its own."""

    _lock: threading.Condition
    requests: list[str]

    def _writes_init(self) -> None:
        # (path, page number from 1, status or 0 to hang, seconds to hang, times left)
        self._page_faults: list[list[Any]] = []
        self._write_faults: list[tuple[int, str, str]] = []  # (status, method, path prefix)

    def fault_page(self, path: str, page: int, status: int = 500, *, times: int = 1,
                   hang: float = 0.0) -> None:
        """The `page`-th page of lists of `path` (1: the first) answers `status`, `times`
        times; with `hang`, it answers nothing for that many seconds first."""
        with self._lock:
            self._page_faults.append([path.rstrip("/"), page, status, hang, times])

    def fail_writes(self, status: int = 403, method: str = "", path: str = "") -> None:
        """Every write (`method`: PATCH/DELETE, "" both) under `path` answers `status`."""
        with self._lock:
            self._write_faults.append((status, method, path))

    def objects(self, api_version: str, kind: str) -> list[dict[str, Any]]:
        """Every stored object of a kind (copies), in key order."""
        with self._lock:
            res = self._resource_for({"apiVersion": api_version, "kind": kind}, create=False)
            return [] if res is None else [copy.deepcopy(res.objects[k]) for k in res.ordered()]

    def _page_fault(self, path: str, page: int) -> tuple[int, float] | None:
        with self._lock:
            for fault in self._page_faults:
                if fault[0] == path.rstrip("/") and fault[1] == page and fault[4] > 0:
                    fault[4] -= 1
                    return fault[2], fault[3]
        return None

    def _write_fault(self, method: str, path: str) -> int | None:
        with self._lock:
            for status, only, prefix in self._write_faults:
                if (not only or only == method) and path.startswith(prefix):
                    return status
        return None


def _selected(obj: dict[str, Any], selector: str) -> bool:
    labels = (obj.get("metadata") or {}).get("labels") or {}
    for term in filter(None, selector.split(",")):
        key, _, value = term.partition("=")
        if labels.get(key) != value.lstrip("="):
            return False
    return True


class FakeAPIServer(_Writes):
    """Start with `start()` (port 0 picks a free port), `url` is the base to give the client."""

    def __init__(self, port: int = 0, *, bookmark_interval: float | None = None):
        self._lock = threading.Condition()
        self._resources: dict[tuple[str, str, str], _Resource] = {}
        self.rv = 100
        self.compacted = 0
        self._drop_generation = 0
        self._bookmark_generation = 0
        self._error_generation = 0
        self._error = 410
        self._failures: list[tuple[int, str | None]] = []  # (status, only for this path)
        self.bookmark_interval = bookmark_interval
        self.requests: list[str] = []  # "GET path?query", for assertions
        self.discovery: bytes | None = None  # the body of `GET /apis` instead of the real one
        self._faults: list[Fault] = []
        self._watch_sockets: set[socket.socket] = set()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.port = port
        self._writes_init()
        for api_version, kind in BUILT_IN:  # served even while empty; CRDs only once used
            self.install(api_version, kind)

    def install(self, api_version: str, kind: str) -> None:
        """Serve a kind (like installing its CRD) without adding an object."""
        with self._lock:
            self._resource_for({"apiVersion": api_version, "kind": kind}, create=True)

    # ---- lifecycle ---------------------------------------------------------------------

    def start(self) -> FakeAPIServer:
        handler = type("Handler", (_Handler,), {"api": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", self.port), handler)
        httpd.daemon_threads = True
        self.port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(target=httpd.serve_forever, daemon=True,
                                        kwargs={"poll_interval": 0.05})
        self._thread.start()
        return self

    def stop(self) -> None:
        """The API server goes away: the listener closes and open watches are cut."""
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        self.drop_watches()

    def __enter__(self) -> FakeAPIServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def kubeconfig(self, path: str) -> str:
        """Write a kubeconfig that points the client here; returns the path."""
        text = (
            "apiVersion: v1\nkind: Config\ncurrent-context: fake\n"
            f"clusters:\n- name: fake\n  cluster: {{server: '{self.url}'}}\n"
            "users:\n- name: fake\n  user: {token: fake}\n"
            "contexts:\n- name: fake\n  context: {cluster: fake, user: fake}\n"
        )
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text)
        return path

    # ---- changing the cluster ----------------------------------------------------------

    def add(self, obj: dict[str, Any], event: str = "ADDED",
            unreadable: bytes | None = None) -> dict[str, Any]:
        """Create or replace an object; it gets the next resourceVersion. `unreadable`: the
        watch event of this change is that line instead (a list shows the object)."""
        obj = copy.deepcopy(obj)
        with self._lock:
            res = self._resource_for(obj, create=True)
            assert res is not None
            self.rv += 1
            meta = obj.setdefault("metadata", {})
            meta["resourceVersion"] = str(self.rv)
            meta.setdefault("uid", f"uid-{self.rv}")
            key = _key(meta)
            kind = "MODIFIED" if key in res.objects and event == "ADDED" else event
            if key not in res.objects:
                res.sorted_keys = None
            res.objects[key] = obj
            res.encoded.pop(key, None)
            if unreadable is not None:
                res.events.append((self.rv, "RAW", {"metadata": meta, "raw": unreadable}))
            else:
                res.events.append((self.rv, kind, obj))
            self._lock.notify_all()
            return obj

    def add_all(self, objects: Iterable[dict[str, Any]]) -> None:
        for obj in objects:
            self.add(obj)

    def modify(self, obj: dict[str, Any]) -> dict[str, Any]:
        return self.add(obj, "MODIFIED")

    def delete(self, obj: dict[str, Any]) -> None:
        with self._lock:
            res = self._resource_for(obj, create=False)
            key = _key(obj.get("metadata") or {})
            if res is None or key not in res.objects:
                raise KeyError(key)
            gone = res.objects.pop(key)
            res.encoded.pop(key, None)
            res.sorted_keys = None
            self.rv += 1
            gone = {**gone, "metadata": {**gone["metadata"], "resourceVersion": str(self.rv)}}
            res.events.append((self.rv, "DELETED", gone))
            self._lock.notify_all()

    def compact(self) -> None:
        """Forget the event history: a watch from an older resourceVersion gets 410 Gone."""
        with self._lock:
            self.compacted = self.rv
            for res in self._resources.values():
                res.events.clear()
            self._lock.notify_all()

    def bookmark(self) -> None:
        """Every open watch that asked for bookmarks gets one at the current resourceVersion."""
        with self._lock:
            self._bookmark_generation += 1
            self._lock.notify_all()

    def drop_watches(self) -> None:
        """Cut every open watch connection without a final chunk, as a dying server does."""
        with self._lock:
            self._drop_generation += 1
            sockets = list(self._watch_sockets)
            self._lock.notify_all()
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def error_event(self, code: int = 410) -> None:
        """Every open watch gets an ERROR event with a Status of `code`, then ends (a 410 this
        way is what a watch sees when etcd compacts under it)."""
        with self._lock:
            self._error = code
            self._error_generation += 1
            self._lock.notify_all()

    def fail_next(self, count: int, status: int = 500, path: str | None = None) -> None:
        """The next `count` requests (to `path` only, when given: `/apis`) get `status` with a
        Status body."""
        with self._lock:
            self._failures.extend([(status, path)] * count)

    def inject(self, fault: Fault) -> Fault:
        """Misbehave as `fault` says (checked before fail_next's failures); returns it, so a
        test can read `taken` or set `count = 0` to end it."""
        with self._lock:
            self._faults.append(fault)
        return fault

    def clear_faults(self) -> None:
        with self._lock:
            for fault in self._faults:
                fault.count = 0
            self._faults.clear()

    def _fault(self, path: str, query: str, watch: bool) -> Fault | None:
        with self._lock:
            for fault in self._faults:
                if fault.matches(path, query, watch):
                    fault.count -= fault.count > 0
                    fault.taken += 1
                    return fault
            return None

    def _resources_of(self, path: str) -> dict[str, Any] | None:
        """The APIResourceList of `/apis/<group>/<version>`, None when nothing is served there."""
        parts = [p for p in path.split("/") if p]
        if len(parts) != 3 or parts[0] != "apis":
            return None
        with self._lock:
            served = [r for (g, v, _), r in self._resources.items()
                      if (g, v) == (parts[1], parts[2])]
        if not served:
            return None
        return {"kind": "APIResourceList", "apiVersion": "v1",
                "groupVersion": f"{parts[1]}/{parts[2]}",
                "resources": [{"name": r.plural, "singularName": r.kind.lower(),
                               "namespaced": r.namespaced, "kind": r.kind,
                               "verbs": ["get", "list", "watch"]} for r in served]}

    def active_watches(self) -> int:
        with self._lock:
            return len(self._watch_sockets)

    # ---- internals used by the handler -------------------------------------------------

    def _resource_for(self, obj: dict[str, Any], create: bool) -> _Resource | None:
        group, version = group_version(str(obj.get("apiVersion", "")))
        kind = str(obj.get("kind", ""))
        plural = plural_of(kind)
        res = self._resources.get((group, version, plural))
        if res is None and create:
            res = _Resource(group, version, plural, kind, kind not in CLUSTER_SCOPED)
            self._resources[(group, version, plural)] = res
        return res

    def _take_failure(self, path: str) -> int | None:
        with self._lock:
            for index, (status, only) in enumerate(self._failures):
                if only is None or only.rstrip("/") == path.rstrip("/"):
                    del self._failures[index]
                    return status
            return None

    def _discovery(self) -> dict[str, Any]:
        """The APIGroupList of `GET /apis`: every named group with a registered resource."""
        with self._lock:
            versions: dict[str, list[str]] = {}
            for group, version, _ in self._resources:
                if group and version not in versions.setdefault(group, []):
                    versions[group].append(version)
        def gv(group: str, version: str) -> dict[str, str]:
            return {"groupVersion": f"{group}/{version}", "version": version}
        return {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": group, "versions": [gv(group, v) for v in served],
             "preferredVersion": gv(group, served[0])} for group, served in versions.items()]}


def _key(meta: dict[str, Any]) -> str:
    namespace = meta.get("namespace") or ""
    return f"{namespace}/{meta.get('name', '')}" if namespace else str(meta.get("name", ""))


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": message, "reason": reason, "code": code}


class _Handler(BaseHTTPRequestHandler):
    api: FakeAPIServer
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # headers and body go out in two writes: no 40 ms stalls

    def log_message(self, format: str, *args: Any) -> None:  # quiet in tests
        pass

    def do_GET(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        self.api.requests.append(f"GET {self.path}")
        fault = self.api._fault(url.path, url.query,
                                query.get("watch") in ("true", "True", "1"))
        if fault is not None and fault.silent:
            self._silent()
            return
        if fault is not None:
            reason = REASONS.get(fault.status, "InternalError")
            self._json(fault.status, _status(fault.status, reason, f"injected {reason}"))
            return
        failure = self.api._take_failure(url.path)
        if failure is not None:
            self._json(failure, _status(failure, "InternalError", "injected failure"))
            return
        if url.path.rstrip("/") == "/apis":
            if self.api.discovery is not None:
                self._send(200, self.api.discovery)
            else:
                self._json(200, self.api._discovery())
            return
        resources = self.api._resources_of(url.path)
        if resources is not None:
            self._json(200, resources)
            return
        parsed = self._route(url.path)
        if parsed is None:
            self._json(404, _status(404, "NotFound", f"the server could not find {url.path}"))
            return
        res, namespace, name = parsed
        if name is not None:
            self._get_one(res, namespace, name)
        elif query.get("watch") in ("true", "True", "1"):
            self._watch(res, namespace, query)
        else:
            self._list(res, namespace, query)

    def do_PATCH(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.api.requests.append(f"PATCH {self.path}")
        parsed = self._write_route(url.path, "PATCH")
        if parsed is None:
            return
        res, namespace, name = parsed
        if self.headers.get("Content-Type") != "application/apply-patch+yaml":
            self._json(415, _status(415, "UnsupportedMediaType", "only apply patches here"))
            return
        if not query.get("fieldManager"):
            self._json(422, _status(422, "Invalid", "fieldManager is required for apply"))
            return
        try:
            obj = json.loads(body)
        except ValueError:
            self._json(400, _status(400, "BadRequest", "body is not JSON"))
            return
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if not isinstance(meta, dict) or meta.get("name") != name or (
                obj.get("kind") != res.kind or obj.get("apiVersion") != res.api_version) or (
                (meta.get("namespace") or None) != namespace):
            self._json(400, _status(400, "BadRequest", "the object does not match the path"))
            return
        key = f"{namespace}/{name}" if namespace else name
        with self.api._lock:
            old = res.objects.get(key)
        if old is not None:
            kept = {k: old["metadata"][k] for k in ("uid", "creationTimestamp")
                    if k in old["metadata"]}
            meta.update(kept)
        meta.setdefault("creationTimestamp", "2026-01-01T00:00:00Z")
        meta["managedFields"] = [{"manager": query["fieldManager"], "operation": "Apply"}]
        self._json(200, self.api.add(obj))

    def do_DELETE(self) -> None:
        url = urlsplit(self.path)
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        self.api.requests.append(f"DELETE {self.path}")
        parsed = self._write_route(url.path, "DELETE")
        if parsed is None:
            return
        res, namespace, name = parsed
        key = f"{namespace}/{name}" if namespace else name
        with self.api._lock:
            obj = res.objects.get(key)
        if obj is None:
            self._json(404, _status(404, "NotFound", f'{res.plural} "{name}" not found'))
            return
        self.api.delete({"apiVersion": res.api_version, "kind": res.kind,
                         "metadata": obj["metadata"]})
        self._json(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})

    def _write_route(self, path: str, method: str) -> tuple[_Resource, str | None, str] | None:
        status = self.api._write_fault(method, path)
        if status is not None:
            self._json(status, _status(status, "Forbidden" if status == 403 else
                                       "InternalError", "injected write fault"))
            return None
        parsed = self._route(path)
        if parsed is None or parsed[2] is None:
            self._json(404, _status(404, "NotFound", f"the server could not find {path}"))
            return None
        return parsed[0], parsed[1], parsed[2]

    def _route(self, path: str) -> tuple[_Resource, str | None, str | None] | None:
        parts = [p for p in path.split("/") if p]
        if parts[:2] == ["api", "v1"]:
            group, version, rest = "", "v1", parts[2:]
        elif len(parts) >= 3 and parts[0] == "apis":
            group, version, rest = parts[1], parts[2], parts[3:]
        else:
            return None
        namespace = None
        if len(rest) >= 3 and rest[0] == "namespaces":
            namespace, rest = rest[1], rest[2:]
        if not rest or len(rest) > 2:
            return None
        with self.api._lock:
            res = self.api._resources.get((group, version, rest[0]))
        if res is None:
            return None
        return res, namespace, rest[1] if len(rest) == 2 else None

    def _get_one(self, res: _Resource, namespace: str | None, name: str) -> None:
        key = f"{namespace}/{name}" if namespace else name
        with self.api._lock:
            obj = res.objects.get(key)
        if obj is None:
            self._json(404, _status(404, "NotFound", f'{res.plural} "{name}" not found'))
        else:
            self._json(200, obj)

    def _list(self, res: _Resource, namespace: str | None, query: dict[str, str]) -> None:
        limit = int(query.get("limit") or 0)
        token = query.get("continue")
        selector = query.get("labelSelector") or ""
        page = json.loads(base64.b64decode(token)).get("page", 2) if token else 1
        fault = self.api._page_fault(urlsplit(self.path).path, page)
        if fault is not None:
            time.sleep(fault[1])
            self._json(fault[0], _status(fault[0], "InternalError", "injected page fault"))
            return
        with self.api._lock:
            list_rv = self.api.rv
            after = ""
            if token:
                state = json.loads(base64.b64decode(token))
                if state["rv"] < self.api.compacted:
                    self._json(410, _status(410, "Expired", "continue token is too old"))
                    return
                list_rv, after = state["rv"], state["after"]
            keys = res.ordered()
            prefix = f"{namespace}/" if namespace else ""
            chosen: list[bytes] = []
            last = ""
            more = False
            following = _keys_after(keys, after)
            for index, key in enumerate(following):
                if prefix and not key.startswith(prefix):
                    continue
                if selector and not _selected(res.objects[key], selector):
                    continue
                if limit and len(chosen) == limit:
                    more = True
                    remaining = len(following) - index
                    break
                encoded = res.encoded.get(key)
                if encoded is None:
                    item = {k: v for k, v in res.objects[key].items()
                            if k not in ("apiVersion", "kind")}
                    encoded = res.encoded[key] = json.dumps(item).encode()
                chosen.append(encoded)
                last = key
        meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
        if more:
            meta["continue"] = base64.b64encode(
                json.dumps({"rv": list_rv, "after": last, "page": page + 1}).encode()).decode()
            meta["remainingItemCount"] = remaining
        head = json.dumps({"kind": f"{res.kind}List", "apiVersion": res.api_version,
                           "metadata": meta})[:-1]
        body = head.encode() + b', "items": [' + b",".join(chosen) + b"]}"
        self._send(200, body)

    def _watch(self, res: _Resource, namespace: str | None, query: dict[str, str]) -> None:
        api = self.api
        since = int(query.get("resourceVersion") or 0)
        bookmarks = query.get("allowWatchBookmarks") in ("true", "True", "1")
        timeout = float(query.get("timeoutSeconds") or 0)
        deadline = time.monotonic() + timeout if timeout else None
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        sock = self.connection
        with api._lock:
            api._watch_sockets.add(sock)
            generation = api._drop_generation
            seen_bookmark = api._bookmark_generation
            seen_error = api._error_generation
            backlog: list[tuple[str, dict[str, Any]]] = []
            if since and since < api.compacted:
                gone = _status(410, "Expired", f"too old resource version: {since} "
                               f"({api.compacted})")
                backlog.append(("ERROR", gone))
                sent_rv = api.rv
            elif not since:  # "any": the current state as ADDED events, then changes
                backlog.extend(("ADDED", res.objects[k]) for k in res.ordered())
                sent_rv = api.rv
            else:
                sent_rv = since
        last_bookmark = time.monotonic()
        try:
            while True:
                for kind, obj in backlog:
                    if kind == "RAW":
                        self._raw(obj["raw"])
                    elif kind in ("ERROR", "BOOKMARK") or _in(obj, namespace):
                        self._chunk({"type": kind, "object": _full(res, obj)})
                    if kind == "ERROR":
                        self._end()
                        return
                backlog = []
                with api._lock:
                    while True:
                        if api._drop_generation != generation:
                            return  # cut without the final chunk
                        if api._error_generation != seen_error:
                            reason = "Expired" if api._error == 410 else "InternalError"
                            fresh = [("ERROR", _status(api._error, reason, "watch error"))]
                            break
                        fresh = [(k, o) for rv, k, o in res.events if rv > sent_rv]
                        now = time.monotonic()
                        due = bookmarks and (
                            api._bookmark_generation != seen_bookmark
                            or (api.bookmark_interval is not None
                                and now - last_bookmark >= api.bookmark_interval))
                        if fresh or due or (deadline is not None and now >= deadline):
                            break
                        api._lock.wait(0.05)
                    backlog = fresh
                    if fresh and fresh[0][0] == "ERROR":
                        continue
                    sent_rv = api.rv if not fresh else max(sent_rv, _rv_of(fresh[-1][1]))
                    if due:
                        seen_bookmark = api._bookmark_generation
                        last_bookmark = now
                        backlog.append(("BOOKMARK", {
                            "kind": res.kind, "apiVersion": res.api_version,
                            "metadata": {"resourceVersion": str(api.rv)}}))
                if not backlog and deadline is not None and time.monotonic() >= deadline:
                    self._end()
                    return
        except OSError:
            return
        finally:
            with api._lock:
                api._watch_sockets.discard(sock)
            self.close_connection = True

    def _silent(self) -> None:
        """A watch answered with 200 and its headers, then nothing until the client closes
        the connection (or drop_watches / stop)."""
        api = self.api
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        sock = self.connection
        with api._lock:
            api._watch_sockets.add(sock)
            generation = api._drop_generation
        try:
            while True:
                with api._lock:
                    if api._drop_generation != generation:
                        return
                readable, _, _ = select.select([sock], [], [], 0.05)
                if readable and not sock.recv(1, socket.MSG_PEEK):
                    return  # the client gave up
        except OSError:
            return
        finally:
            with api._lock:
                api._watch_sockets.discard(sock)
            self.close_connection = True

    def _raw(self, line: bytes) -> None:
        data = line + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _chunk(self, event: dict[str, Any]) -> None:
        data = json.dumps(event).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _end(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _json(self, status: int, body: dict[str, Any]) -> None:
        self._send(status, json.dumps(body).encode())

    def _send(self, status: int, body: bytes) -> None:
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def _keys_after(keys: list[str], after: str) -> list[str]:
    if not after:
        return keys
    return keys[bisect.bisect_right(keys, after):]


def _in(obj: dict[str, Any], namespace: str | None) -> bool:
    return namespace is None or (obj.get("metadata") or {}).get("namespace") == namespace


def _rv_of(obj: dict[str, Any]) -> int:
    return int((obj.get("metadata") or {}).get("resourceVersion") or 0)


def _full(res: _Resource, obj: dict[str, Any]) -> dict[str, Any]:
    if "kind" in obj:
        return obj
    return {"apiVersion": res.api_version, "kind": res.kind, **obj}
