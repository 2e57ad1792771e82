"""The live cluster through the `kubernetes` client: paginated lists and list+watch caches.

Objects are kept as plain JSON dicts (camelCase, as the engine reads them): the client's
model classes cost ~1 ms per object to build and we would only turn them back into dicts.
So lists are requested with `_preload_content=False` and parsed here, and watches go through a
wrapper the client cannot find a model type for, which makes `Watch` hand out raw events.

A WatchCache lists once (in pages), then watches from the list's resourceVersion with
bookmarks on; a watch the server ends cleanly is resumed from the last resourceVersion seen.
Any failure (an error answer, 410 Gone, an ERROR or unreadable event, a watch silent for
`idle_timeout`, a broken connection) leads to a fresh list, after an exponential back-off
for all but 410, while the last listed state keeps serving (`staleness()` says for how long it
has not been confirmed; `error` says why). Objects are read one by one: one that cannot be
read is skipped and counted, never a reason to stall the rest.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.client import RemoteDisconnected
from typing import Any
from urllib.parse import urlsplit

from kubernetes import client as k8s
from kubernetes import config as _k8s_config
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import (
    ConnectTimeoutError,
    HTTPError,
    NameResolutionError,
    ProtocolError,
    ReadTimeoutError,
    SSLError,
)

# defined client-free (commands that read only files catch it); importable from here too
from webhook.cluster.errors import ClusterError as ClusterError

# the config module carries no annotations
k8s_config: Any = _k8s_config

log = logging.getLogger("gpupolicy.cluster")

ListFunc = Callable[..., Any]  # a client list_* method bound to its path arguments
Project = Callable[[dict[str, Any]], Any]


def api_client(kubeconfig: str | None = None, context: str | None = None) -> k8s.ApiClient:
    """A client from `kubeconfig`, else in-cluster config, else the default kubeconfig.
    Errors are said in kubectl's words (`context "nope" does not exist`)."""
    try:
        if kubeconfig is None and context is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config()
            return k8s.ApiClient()
        if kubeconfig is not None and not os.path.exists(kubeconfig):
            raise ClusterError(f"cannot load cluster credentials from {kubeconfig}: "
                               f"stat {kubeconfig}: no such file or directory")
        if context is not None:
            contexts, _ = k8s_config.list_kube_config_contexts(config_file=kubeconfig)
            if context not in {c.get("name") for c in contexts or ()}:
                raise ClusterError(f'context "{context}" does not exist')
        made: k8s.ApiClient = k8s_config.new_client_from_config(
            config_file=kubeconfig, context=context)
        return made
    except (k8s_config.ConfigException, OSError, ValueError, TypeError) as exc:
        where = kubeconfig or "the default kubeconfig"
        raise ClusterError(f"cannot load cluster credentials from {where}: {exc}") from None


def without_transport_retries(api: k8s.ApiClient) -> k8s.ApiClient:
    """urllib3 retries a request that times out or loses its connection (3 times by default,
    each with the full timeout), unseen by the caller: where `Retry` decides (with back-off
    and a deadline), those hidden retries are turned off."""
    pool = getattr(getattr(api, "rest_client", None), "pool_manager", None)
    if pool is not None:
        pool.connection_pool_kw["retries"] = False
        pool.clear()  # pools made before would keep their own
    return api


def unreachable(server: str, exc: BaseException) -> ClusterError:
    """A connection failure as kubectl says it (`the connection to the server 127.0.0.1:1 was
    refused`), never the HTTP library's repr of its retry state."""
    parsed = urlsplit(server if "//" in server else f"//{server}")
    host = parsed.hostname or server
    port = parsed.port or (443 if parsed.scheme != "http" else 80)
    hostport = f"{host}:{port}"
    reason: BaseException = getattr(exc, "reason", None) or exc
    text = str(reason)
    if "Connection refused" in text or isinstance(reason, ConnectionRefusedError):
        return ClusterError(f"the connection to the server {hostport} was refused - did you "
                            "specify the right host or port?")
    if isinstance(reason, NameResolutionError) or "Name or service not known" in text \
            or "nodename nor servname" in text:
        return ClusterError(f"unable to connect to the server: dial tcp: lookup {host}: "
                            "no such host")
    if isinstance(reason, TimeoutError | ConnectTimeoutError | ReadTimeoutError) or \
            "timed out" in text:
        return ClusterError(f"unable to connect to the server {hostport}: i/o timeout")
    if isinstance(reason, SSLError) or "CERTIFICATE_VERIFY_FAILED" in text:
        why = "certificate signed by unknown authority" if "CERTIFICATE_VERIFY" in text \
            else "TLS handshake failed"
        return ClusterError(f"unable to connect to the server {hostport}: tls: {why}")
    if isinstance(reason, ProtocolError | RemoteDisconnected) or "Connection aborted" in text:
        return ClusterError(f"unable to connect to the server {hostport}: the connection "
                            "was closed")
    return ClusterError(f"unable to connect to the server {hostport}")


@dataclass(frozen=True)
class Page:
    items: list[dict[str, Any]]
    resource_version: str
    next_token: str
    remaining: int | None = None  # the server's estimate of items still to come


def list_page(func: ListFunc, *, limit: int, token: str = "",
              timeout: float | tuple[float, float] | None = None) -> Page:
    """One page of a list call as dicts. Raises ApiException / urllib3 errors."""
    kwargs: dict[str, Any] = {"limit": limit, "_preload_content": False}
    if token:
        kwargs["_continue"] = token
    if timeout is not None:
        kwargs["_request_timeout"] = timeout
    resp = func(**kwargs)
    try:
        body = json.loads(resp.data)
    finally:
        resp.release_conn()
    meta = body.get("metadata") or {}
    remaining = meta.get("remainingItemCount")
    return Page(body.get("items") or [], str(meta.get("resourceVersion") or ""),
                str(meta.get("continue") or ""),
                remaining if isinstance(remaining, int) else None)


# Statuses a list page is retried after: the server is overloaded or restarting (client-go's
# pager and reflector retry these too); anything else (403, 404, 400...) will not change.
RETRIABLE = frozenset({429, 500, 502, 503, 504})


class DeadlineExceeded(ClusterError):
    """The overall deadline (`audit --timeout`) passed before the list was complete."""


@dataclass(frozen=True)
class Retry:
    """How a failed list page is retried: `attempts` tries in all, a jittered exponential
    back-off between them, the continue token kept (the page is asked for again, not the list
    restarted), and never past `deadline` (a `time.monotonic()` value; None: no deadline)."""
    attempts: int = 4
    backoff: float = 0.5
    backoff_max: float = 4.0
    deadline: float | None = None

    def remaining(self) -> float | None:
        return None if self.deadline is None else self.deadline - time.monotonic()

    def timeout(self, timeout: float | tuple[float, float] | None
                ) -> float | tuple[float, float] | None:
        """The request's (connect, read) timeout, cut to what the deadline leaves."""
        left = self.remaining()
        if left is None:
            return timeout
        if left <= 0:
            raise DeadlineExceeded("the deadline passed")
        if timeout is None:
            return (min(10.0, left), left)
        connect, read = timeout if isinstance(timeout, tuple) else (timeout, timeout)
        return (min(connect, left), min(read, left))


def retriable(exc: BaseException) -> bool:
    """A failure worth asking again for: an overloaded server's status, or no answer at all."""
    if isinstance(exc, ApiException):
        return exc.status in RETRIABLE
    return isinstance(exc, HTTPError)


def call_with_retry(call: Callable[[float | tuple[float, float] | None], Any], retry: Retry,
                    timeout: float | tuple[float, float] | None = None) -> Any:
    """`call(timeout)` until it succeeds, fails for good, or `retry` is used up. The last
    failure is raised; the deadline passing raises DeadlineExceeded."""
    delay = retry.backoff
    for attempt in range(1, max(1, retry.attempts) + 1):
        try:
            return call(retry.timeout(timeout))
        except (ApiException, HTTPError) as exc:
            left = retry.remaining()
            if left is not None and left <= 0:
                raise DeadlineExceeded(f"the deadline passed ({describe(exc)})") from None
            if attempt >= retry.attempts or not retriable(exc):
                raise
            pause = max(random.uniform(delay / 2, delay), _retry_after(exc, retry.backoff_max))
            if left is not None and pause >= left:
                raise DeadlineExceeded(f"the deadline passed ({describe(exc)})") from None
            log.info("retrying after %s (attempt %d of %d)", describe(exc), attempt + 1,
                     retry.attempts)
            time.sleep(pause)
            delay = min(delay * 2, retry.backoff_max)
    raise AssertionError("unreachable")  # pragma: no cover


def _retry_after(exc: BaseException, most: float) -> float:
    """The seconds a 429/503's Retry-After asks for (at most `most`), else 0."""
    headers = getattr(exc, "headers", None)
    try:
        return min(float(headers.get("Retry-After") or 0), most) if headers else 0.0
    except (TypeError, ValueError):
        return 0.0


def describe(exc: BaseException) -> str:
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status} {exc.reason}"
    return f"{type(exc).__name__}: {exc}"


def list_all(func: ListFunc, *, limit: int = 500,
             timeout: float | tuple[float, float] | None = None,
             retry: Retry | None = None, ahead: bool = False) -> Iterator[Page]:
    """Every page of a list, following `continue`. A 410 on an expired continue token
    restarts the list and skips what was already yielded (items come in key order). With
    `retry`, a page that fails transiently is asked for again with the same token. With
    `ahead`, the next page is asked for while the caller works on this one: one page ahead
    at most, so two pages are held at most, whatever the list's length."""
    token = ""
    last_key = ""
    policy = retry or Retry(attempts=1)
    pending: _Ahead | None = None
    while True:
        try:
            if pending is not None:
                page, pending = pending.result(), None
            else:
                page = call_with_retry(
                    functools.partial(_page, func, limit, token), policy, timeout)
        except ApiException as exc:
            if exc.status == 410 and token:
                log.warning("list continue token expired; restarting after %s", last_key)
                token = ""
                continue
            raise
        items = page.items
        if last_key and not token:
            items = [i for i in items if object_key(i) > last_key]
        if items:
            last_key = object_key(items[-1])
        if ahead and page.next_token:
            pending = _Ahead(functools.partial(
                call_with_retry, functools.partial(_page, func, limit, page.next_token),
                policy, timeout))
        yield Page(items, page.resource_version, page.next_token, page.remaining)
        if not page.next_token:
            return
        token = page.next_token


class _Ahead:
    """One call run in a thread of its own while the caller does something else; result()
    waits for it and gives its answer, or raises what it raised."""

    def __init__(self, call: Callable[[], Page]) -> None:
        self.call = call
        self.page: Page | None = None
        self.error: BaseException | None = None
        # A daemon: a caller that stops listing (an error, --timeout) never waits for it;
        # its answer, when it comes, is dropped.
        self.thread = threading.Thread(target=self._run, name="list-ahead", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            self.page = self.call()
        except BaseException as exc:  # handed to the caller, who decides
            self.error = exc

    def result(self) -> Page:
        self.thread.join()
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        assert self.page is not None
        return self.page


def _page(func: ListFunc, limit: int, token: str,
          timeout: float | tuple[float, float] | None) -> Page:
    return list_page(func, limit=limit, token=token, timeout=timeout)


def object_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    name = str(meta.get("name") or "")
    return f"{namespace}/{name}" if namespace else name


def served(func: Callable[..., Any], group: str, version: str, plural: str,
           timeout: float | tuple[float, float] | None = None) -> bool:
    """Whether API discovery (`GET /apis/<group>/<version>`, `func` being
    CustomObjectsApi.get_api_resources) lists `plural`. A 404 there means the group/version is
    not served at all; any other failure raises."""
    try:
        resp = func(group, version, _preload_content=False, _request_timeout=timeout)
    except ApiException as exc:
        if exc.status == 404:
            return False
        raise
    try:
        body = json.loads(resp.data)
    finally:
        resp.release_conn()
    resources = body.get("resources") if isinstance(body, dict) else None
    return any(isinstance(r, dict) and r.get("name") == plural for r in resources or [])


@dataclass
class WatchSettings:
    page_size: int = 500
    # Server-side timeoutSeconds; the watch is then resumed. The API server bookmarks an open
    # watch once a minute and 2 s before this deadline, so even one that sends no periodic
    # bookmarks confirms the state within watch_timeout.
    watch_timeout: int = 60
    connect_timeout: float = 5.0
    read_timeout: float = 330.0  # a list page: no byte for this long, the server is gone
    # A watch that brings neither an event nor a bookmark for this long is dropped and the
    # resource relisted: a healthy one is never this quiet (see watch_timeout).
    idle_timeout: float = 90.0
    quiet_period: float = 60.0  # this long without a failure: the back-off starts over
    backoff_initial: float = 0.5
    backoff_max: float = 30.0  # also how often a resource not installed is looked for again


class Unreadable(Exception):
    """A watch event that cannot be read (not JSON, no type, no object, no metadata)."""


class WatchIdle(Exception):
    """A watch sent neither an event nor a bookmark for idle_timeout seconds."""


KINDS = frozenset({"ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"})


def parse_event(line: bytes) -> tuple[str, dict[str, Any]]:
    """(type, object) of one watch line; raises Unreadable saying why."""
    try:
        event = json.loads(line)
    except ValueError as exc:
        raise Unreadable(f"not JSON ({exc}): {line[:120]!r}") from None
    if not isinstance(event, dict):
        raise Unreadable(f"not an object: {line[:120]!r}")
    kind, obj = event.get("type"), event.get("object")
    if kind not in KINDS:
        raise Unreadable(f"unknown event type {kind!r}")
    if not isinstance(obj, dict):
        raise Unreadable(f"{kind} event without an object")
    if kind != "ERROR" and not isinstance(obj.get("metadata"), dict):
        raise Unreadable(f"{kind} event whose object has no metadata")
    if kind in ("ADDED", "MODIFIED", "DELETED") and not object_key(obj):
        raise Unreadable(f"{kind} event whose object has no name")
    return kind, obj


def failure_reason(exc: BaseException) -> tuple[str, str]:
    """(a short label for metrics, the message for logs and /readyz) of a list/watch failure:
    `403 Forbidden: resourceclaims.resource.k8s.io is forbidden: ...`."""
    if isinstance(exc, ApiException):
        message = ""
        try:
            status = json.loads(exc.body or "")
            message = str(status.get("message") or "") if isinstance(status, dict) else ""
        except (ValueError, TypeError):
            message = ""
        text = f"{exc.status} {exc.reason or ''}".strip()
        return str(exc.status), (f"{text}: {message}" if message else text)[:400]
    if isinstance(exc, Unreadable):
        return "unreadable", f"unreadable watch event: {exc}"[:400]
    if isinstance(exc, WatchIdle):
        return "idle", str(exc)
    if isinstance(exc, (ReadTimeoutError, TimeoutError)):
        return "timeout", f"timed out: {exc}"[:400]
    if isinstance(exc, (HTTPError, OSError)):
        return "connection", f"{type(exc).__name__}: {exc}"[:400]
    return "other", f"{type(exc).__name__}: {exc}"[:400]


class WatchCache:
    """One resource kept in memory as `key -> project(obj)`; `project` may return None to skip
    an object (it is then absent from the cache). Runs in its own daemon thread.

    As client-go's reflector does, the last listed state stays in effect through any list or
    watch error, and every failed watch leads to a fresh list (the watch is resumed from the
    last resourceVersion only after the server ends it cleanly). Only a cache given `served`
    (API discovery) may find its resource not installed, and only before its first list."""

    def __init__(self, name: str, func: ListFunc, *, project: Project | None = None,
                 on_change: Callable[[], None] | None = None,
                 settings: WatchSettings | None = None,
                 served: Callable[[], bool] | None = None,
                 on_event: Callable[[str, str], None] | None = None) -> None:
        self.name = name
        self._func = func
        self._project: Project = project or (lambda obj: obj)
        self._on_change = on_change or (lambda: None)
        # ("relist" | "absent" | "error" | "unreadable", detail)
        self._on_event = on_event or (lambda kind, detail: None)
        self.settings = settings or WatchSettings()
        self._served = served
        self._items: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._rv = ""
        self._relist_needed = True
        self._listed_once = False  # a list succeeded: from now on a 404 is an error
        self.listed = threading.Event()  # the first list (or discovery's "not installed")
        self._stopping = threading.Event()
        self._resp: Any = None
        self._thread: threading.Thread | None = None
        self._last_contact = time.monotonic()
        self.relists = 0
        self.errors = 0
        self.error_counts: Counter[str] = Counter()  # failure label -> failures
        self.error = ""  # why the last attempt failed; "" once a list succeeds again
        self.last_error = ""
        self.unreadable = 0  # events and objects that could not be read, skipped
        self.last_unreadable = ""
        self.absent = False  # not installed, per API discovery

    # ---- reading ------------------------------------------------------------------------

    def snapshot(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._items)

    def __len__(self) -> int:
        return len(self._items)

    @property
    def resource_version(self) -> str:
        return self._rv

    def staleness(self) -> float:
        """Seconds since the API server last confirmed the state: a successful list, an
        event, a bookmark, or a watch it ended cleanly. An open watch confirms nothing."""
        return time.monotonic() - self._last_contact

    # ---- running ------------------------------------------------------------------------

    def start(self) -> WatchCache:
        self._thread = threading.Thread(target=self.run, name=f"watch-{self.name}", daemon=True)
        self._thread.start()
        return self

    def stop(self, join: float = 5.0) -> None:
        self._stopping.set()
        deadline = time.monotonic() + join
        while self._thread is not None and self._thread.is_alive() \
                and time.monotonic() < deadline:
            self._cut()  # again and again: a watch not answered yet has no socket to cut
            self._thread.join(0.05)

    def _cut(self) -> None:
        resp = self._resp
        if resp is None:
            return
        with contextlib.suppress(Exception):  # already closed or released: nothing to cut
            resp.shutdown()

    def run(self) -> None:
        delay = self.settings.backoff_initial
        last_failure = -float("inf")
        while not self._stopping.is_set():
            watching = False
            try:
                if self._relist_needed and not self._relist():
                    self._stopping.wait(self.settings.backoff_max)  # not installed: look later
                    continue
                watching = True
                self._watch_once()
            except Exception as exc:  # whatever the server or an object holds, never die
                if self._stopping.is_set():
                    return
                self._relist_needed = True
                now = time.monotonic()
                if now - last_failure >= self.settings.quiet_period:
                    delay = self.settings.backoff_initial  # healthy for a while: start over
                last_failure = now
                if watching and isinstance(exc, ApiException) and exc.status == 410:
                    # etcd compacted past our resourceVersion: the expected way to relist
                    log.info("%s: resourceVersion %s expired (410 Gone); relisting",
                             self.name, self._rv)
                    continue
                self._failed(exc)
                delay = self._sleep(delay)

    def _failed(self, exc: BaseException) -> None:
        label, reason = failure_reason(exc)
        self.errors += 1
        self.error_counts[label] += 1
        self.error = self.last_error = reason
        self._on_event("error", reason)
        log.warning("%s: %s; serving the state last confirmed %.1fs ago (%d objects); "
                    "relisting", self.name, reason, self.staleness(), len(self._items))

    def _sleep(self, delay: float) -> float:
        # full jitter keeps many replicas from hammering a recovering API server in step
        self._stopping.wait(random.uniform(delay / 2, delay))
        return min(delay * 2, self.settings.backoff_max)

    def _skip(self, what: str, why: str) -> None:
        self.unreadable += 1
        self.last_unreadable = f"{what}: {why}"
        self._on_event("unreadable", self.last_unreadable)
        log.warning("%s: skipped %s: %s", self.name, what, why)

    def _relist(self) -> bool:
        """A full list replaces the cache. False: not installed (per discovery)."""
        try:
            fresh, rv = self._list()
        except ApiException as exc:
            if exc.status != 404 or self._served is None or self._listed_once:
                raise
            try:
                installed = self._served()
            except Exception as discovery:
                _, why = failure_reason(discovery)
                raise ClusterError(f"404 Not Found, and API discovery failed: {why}") from None
            if installed:
                raise  # discovery serves it: a 404 of an API server still starting up
            if not self.absent:
                log.info("%s: not served by the API server (API discovery); none in use",
                         self.name)
            self.absent = True
            self.error = ""
            self._set_items({}, "")
            self._on_event("absent", "")
            return False
        self._listed_once = True
        self.absent = False
        self.relists += 1
        if self.error:
            log.info("%s: listed again (%d objects) after: %s", self.name, len(fresh),
                     self.error)
        self.error = ""
        self._relist_needed = False
        self._set_items(fresh, rv)
        self._on_event("relist", str(len(fresh)))
        return True

    def _list(self) -> tuple[dict[str, Any], str]:
        fresh: dict[str, Any] = {}
        rv = ""
        timeout = (self.settings.connect_timeout, self.settings.read_timeout)
        for page in list_all(self._func, limit=self.settings.page_size, timeout=timeout):
            for obj in page.items:
                if not isinstance(obj, dict):
                    self._skip("a list item", f"not an object: {str(obj)[:80]!r}")
                    continue
                try:
                    projected = self._project(obj)
                except Exception as exc:  # a reader bug: the object is skipped, not the list
                    self._skip(object_key(obj), f"{type(exc).__name__}: {exc}")
                    continue
                if projected is not None:
                    fresh[object_key(obj)] = projected
            rv = page.resource_version or rv
        return fresh, rv

    def _set_items(self, items: dict[str, Any], rv: str) -> None:
        with self._lock:
            changed = items != self._items or not self.listed.is_set()
            self._items = items
            self._rv = rv
        self._contact()
        self.listed.set()
        if changed:
            self._on_change()

    def _contact(self) -> None:
        self._last_contact = time.monotonic()

    def _watch_once(self) -> None:
        """One watch from the last resourceVersion, until the server ends it cleanly.
        Raises on any failure (ERROR event, unreadable event, silence, broken stream)."""
        idle = self.settings.idle_timeout
        resp = self._func(watch=True, resource_version=self._rv, allow_watch_bookmarks=True,
                          timeout_seconds=self.settings.watch_timeout, _preload_content=False,
                          _request_timeout=(self.settings.connect_timeout, idle))
        self._resp = resp
        started = last = time.monotonic()
        seen = 0
        try:
            if self._stopping.is_set():
                return
            for line in _lines(resp):
                now = time.monotonic()
                if not line.strip():
                    if now - last >= idle:  # blank keep-alives are no sign of progress
                        raise WatchIdle(f"no event nor bookmark for {idle:.0f}s")
                    continue
                try:
                    kind, obj = parse_event(line)
                except Unreadable as exc:
                    self._skip("a watch event", str(exc))
                    raise  # relisted: the list says what the event would have
                if kind == "ERROR":
                    raise _status_error(obj)
                seen += 1
                last = now
                self._apply(kind, obj)
                if self._stopping.is_set():
                    return
        except ReadTimeoutError:
            raise WatchIdle(f"no event nor bookmark for {idle:g}s") from None
        finally:
            self._resp = None
            with contextlib.suppress(Exception):
                resp.close()
                resp.release_conn()
        if self._stopping.is_set():
            return
        if not seen and time.monotonic() - started < min(1.0, self.settings.watch_timeout / 2):
            raise ConnectionError("the watch ended at once, with no event")  # never spin
        self._contact()  # ended cleanly by the server: everything up to now was sent

    def _apply(self, kind: str, obj: dict[str, Any]) -> None:
        self._contact()
        meta = obj["metadata"]
        rv = str(meta.get("resourceVersion") or "")
        if kind == "BOOKMARK":
            self._rv = rv or self._rv
            return
        key = object_key(obj)
        projected = None
        if kind != "DELETED":
            try:
                projected = self._project(obj)
            except Exception as exc:  # a reader bug: absent, as in a list
                self._skip(key, f"{type(exc).__name__}: {exc}")
        changed = False
        with self._lock:
            if projected is None:
                changed = self._items.pop(key, None) is not None
            elif self._items.get(key) != projected:
                self._items[key] = projected
                changed = True
            self._rv = rv or self._rv
        if changed:
            self._on_change()


def _lines(resp: Any) -> Iterator[bytes]:
    """The lines of a watch stream as they arrive (one JSON event each)."""
    buffer = bytearray()
    for chunk in resp.stream(amt=None, decode_content=False):
        buffer.extend(chunk)
        start = 0
        end = buffer.find(b"\n")
        while end != -1:
            yield bytes(buffer[start:end])
            start = end + 1
            end = buffer.find(b"\n", start)
        del buffer[:start]
    if buffer.strip():
        yield bytes(buffer)


def _status_error(status: dict[str, Any]) -> ApiException:
    """The ApiException of a watch ERROR event's Status (410 Gone when etcd compacted)."""
    code = status.get("code")
    exc = ApiException(status=code if isinstance(code, int) else 500,
                       reason=str(status.get("reason") or "watch error"))
    exc.body = json.dumps({"message": str(status.get("message") or "")})
    return exc
