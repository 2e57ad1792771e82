"""The live cluster through the `kubernetes` client: paginated lists and list+watch caches.

Objects are kept as plain JSON dicts (camelCase, as the engine reads them): the client's
model classes cost ~1 ms per object to build and we would only turn them back into dicts.
So lists are requested with `_preload_content=False` and parsed here, and watches go through a
wrapper the client cannot find a model type for, which makes `Watch` hand out raw events.

A WatchCache lists once (in pages), then watches from the list's resourceVersion with
bookmarks on; a watch that ends is resumed from the last resourceVersion seen, 410 Gone means
relist, and any other failure is retried with exponential back-off while the last good state
keeps serving (`staleness()` says for how long it has not been confirmed).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes import client as k8s
from kubernetes import config as _k8s_config
from kubernetes import watch as _k8s_watch
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

# the config and watch modules carry no annotations
k8s_config: Any = _k8s_config
k8s_watch: Any = _k8s_watch

log = logging.getLogger("gpupolicy.cluster")

ListFunc = Callable[..., Any]  # a client list_* method bound to its path arguments
Project = Callable[[dict[str, Any]], Any]


class ClusterError(RuntimeError):
    """The API server could not be reached or refused us; the message says which and why."""


def api_client(kubeconfig: str | None = None, context: str | None = None) -> k8s.ApiClient:
    """A client from `kubeconfig`, else in-cluster config, else the default kubeconfig."""
    try:
        if kubeconfig is None and os.environ.get("KUBERNETES_SERVICE_HOST"):
            k8s_config.load_incluster_config()
            return k8s.ApiClient()
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


def in_cluster() -> bool:
    return bool(os.environ.get("KUBERNETES_SERVICE_HOST"))


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
             retry: Retry | None = None) -> Iterator[Page]:
    """Every page of a list, following `continue`. A 410 on an expired continue token
    restarts the list and skips what was already yielded (items come in key order). With
    `retry`, a page that fails transiently is asked for again with the same token."""
    token = ""
    last_key = ""
    policy = retry or Retry(attempts=1)
    while True:
        try:
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
        yield Page(items, page.resource_version, page.next_token, page.remaining)
        if not page.next_token:
            return
        token = page.next_token


def _page(func: ListFunc, limit: int, token: str,
          timeout: float | tuple[float, float] | None) -> Page:
    return list_page(func, limit=limit, token=token, timeout=timeout)


def object_key(obj: dict[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace") or ""
    name = str(meta.get("name") or "")
    return f"{namespace}/{name}" if namespace else name


@dataclass
class WatchSettings:
    page_size: int = 500
    watch_timeout: int = 290  # server-side timeoutSeconds; the watch is then resumed
    connect_timeout: float = 5.0
    read_timeout: float = 330.0  # no byte for this long: the server is gone
    backoff_initial: float = 0.5
    backoff_max: float = 30.0


class WatchCache:
    """One resource kept in memory as `key -> project(obj)`; `project` may return None to skip
    an object (it is then absent from the cache). Runs in its own daemon thread."""

    def __init__(self, name: str, func: ListFunc, *, project: Project | None = None,
                 on_change: Callable[[], None] | None = None,
                 settings: WatchSettings | None = None, optional: bool = False,
                 on_event: Callable[[str, str], None] | None = None) -> None:
        self.name = name
        self._func = func
        self._project: Project = project or (lambda obj: obj)
        self._on_change = on_change or (lambda: None)
        self._on_event = on_event or (lambda kind, name: None)
        self.settings = settings or WatchSettings()
        # optional: a 404 (CRD not installed) counts as an empty, listed resource
        self._optional = optional
        self._items: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._rv = ""
        self.listed = threading.Event()
        self._stopping = threading.Event()
        self._watch: Any = None
        self._thread: threading.Thread | None = None
        self._connected = False
        self._last_contact = time.monotonic()
        self.relists = 0
        self.errors = 0
        self.last_error = ""

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
        """0 while connected; otherwise seconds since the API server last confirmed the state."""
        return 0.0 if self._connected else time.monotonic() - self._last_contact

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
            # again and again: a watch whose response had not arrived yet has no socket to cut
            if self._watch is not None:
                self._watch.stop()
            self._thread.join(0.05)

    def run(self) -> None:
        delay = self.settings.backoff_initial
        while not self._stopping.is_set():
            try:
                if not self._rv:
                    self._relist()
                self._watch_once()
                delay = self.settings.backoff_initial
            except ApiException as exc:
                if exc.status == 410:
                    log.info("%s: resourceVersion %s expired (410 Gone); relisting",
                             self.name, self._rv)
                    self._rv = ""
                    continue
                if exc.status == 404 and self._optional:
                    # not installed (yet): empty and in sync; look again now and then
                    if not self.listed.is_set() or self._items:
                        log.info("%s: not served by the API server (404); none in use",
                                 self.name)
                    self._set_items({}, "")
                    self._stopping.wait(self.settings.backoff_max)
                    continue
                self._failed(f"HTTP {exc.status}: {exc.reason}")
                delay = self._sleep(delay)
            except Exception as exc:  # whatever an object holds, the cache must not die
                self._failed(f"{type(exc).__name__}: {exc}")
                delay = self._sleep(delay)

    def _failed(self, reason: str) -> None:
        if self._stopping.is_set():
            return
        self._connected = False
        self.errors += 1
        self.last_error = reason
        self._on_event("error", reason)
        log.warning("%s: %s; serving the state last confirmed %.1fs ago (%d objects)",
                    self.name, reason, self.staleness(), len(self._items))

    def _sleep(self, delay: float) -> float:
        # full jitter keeps many replicas from hammering a recovering API server in step
        self._stopping.wait(random.uniform(delay / 2, delay))
        return min(delay * 2, self.settings.backoff_max)

    def _timeout(self) -> tuple[float, float]:
        return (self.settings.connect_timeout, self.settings.read_timeout)

    def _relist(self) -> None:
        fresh: dict[str, Any] = {}
        rv = ""
        for page in list_all(self._func, limit=self.settings.page_size, timeout=self._timeout()):
            for obj in page.items:
                projected = self._project(obj)
                if projected is not None:
                    fresh[object_key(obj)] = projected
            rv = page.resource_version or rv
        self.relists += 1
        self._set_items(fresh, rv)
        self._on_event("relist", str(len(fresh)))

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
        self._connected = True
        self._last_contact = time.monotonic()

    def _watch_once(self) -> None:
        def call(**kwargs: Any) -> Any:  # no model type to find: Watch yields raw dicts
            resp = self._func(**kwargs)
            self._contact()  # headers received with 2xx: connected, even if nothing happens
            return resp

        self._watch = k8s_watch.Watch()
        stream = self._watch.stream(
            call, resource_version=self._rv, allow_watch_bookmarks=True,
            timeout_seconds=self.settings.watch_timeout, _request_timeout=self._timeout(),
        )
        for event in stream:
            if self._stopping.is_set():
                break
            self._apply(event["type"], event["raw_object"])
        self._contact()

    def _apply(self, kind: str, obj: dict[str, Any]) -> None:
        self._contact()
        meta = obj.get("metadata") or {}
        rv = str(meta.get("resourceVersion") or "")
        if kind == "BOOKMARK":
            self._rv = rv or self._rv
            return
        key = object_key(obj)
        changed = False
        with self._lock:
            if kind in ("ADDED", "MODIFIED"):
                projected = self._project(obj)
                old = self._items.get(key)
                if projected is None:
                    changed = self._items.pop(key, None) is not None
                elif old != projected:
                    self._items[key] = projected
                    changed = True
            elif kind == "DELETED":
                changed = self._items.pop(key, None) is not None
            self._rv = rv or self._rv
        if changed:
            self._on_change()
