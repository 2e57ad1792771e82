"""What the server judges with: the current policies.context.Context, rebuilt whenever a
source (policy files, namespace files, node inventory; later the cluster watch caches of
webhook/cluster/client.py) delivers a new version.

A source that fails keeps the last good version in effect and leaves its error here, for the
logs, /readyz and a metric. Reading the Context is one attribute load: the request path takes
no lock.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from policies.apiserver import ApiObjects
from policies.catalog import Catalog
from policies.context import DEFAULT_EXCLUDED_NAMESPACES, Context
from policies.loading import PolicyLoadError
from policies.scheduling.templates import Templates, read_templates, with_templates
from policies.workloads import WORKLOAD_KINDS, KindTable
from webhook import logs
from webhook.inputs import reading, sources


class State:
    def __init__(
        self,
        catalog: Catalog,
        *,
        excluded_namespaces: frozenset[str] = DEFAULT_EXCLUDED_NAMESPACES,
        expect: Collection[str] = ("policies",),
        workload_kinds: KindTable = WORKLOAD_KINDS,
    ) -> None:
        self._lock = threading.Lock()
        self._parts: dict[str, Any] = {
            "policies": (), "cluster_policies": (), "namespaces": {}, "inventory": None,
            "claims": {}, "node_templates": None, "api": None,
        }
        self._excluded = excluded_namespaces
        self._kinds = workload_kinds
        self._clashes: set[str] = set()
        self.catalog = catalog
        self.expected = frozenset(expect)  # sources that must load once before /readyz is 200
        self.loaded: set[str] = set()
        self.errors: dict[str, str] = {}
        # (source, "success" | "failure") -> loads; read by the metrics (webhook/http/server.py)
        self.reloads: Counter[tuple[str, str]] = Counter()
        self.context = Context(
            policies=(), catalog=catalog, excluded_namespaces=excluded_namespaces,
            workload_kinds=workload_kinds,
        )

    def expect(self, *sources: str) -> None:
        self.expected = self.expected | set(sources)

    def update(self, **parts: Any) -> Context:
        """Replace the given parts (`policies` from files, `cluster_policies` from GPUPolicy
        resources, `namespaces`, `inventory`) and publish a new Context; the others stay."""
        with self._lock:
            unknown = set(parts) - set(self._parts)
            if unknown:
                raise TypeError(f"unknown state parts: {sorted(unknown)}")
            self._parts.update(parts)
            self.loaded.update(parts)
            policies, clashes = sources.merge_policies(
                self._parts["policies"], self._parts["cluster_policies"])
            # a GPUPolicy resource skipped for a clash is reported like an invalid one
            for name in self._clashes - set(clashes):
                self.errors.pop(f"gpupolicy/{name}", None)
            for name, message in clashes.items():
                self.errors[f"gpupolicy/{name}"] = message
            self._clashes = set(clashes)
            inventory = self._parts["inventory"]
            templates = self._parts["node_templates"]
            if inventory is not None and templates is not None:  # --node-templates FILE
                inventory = with_templates(inventory, templates)
            self.context = Context(
                policies=tuple(policies), catalog=self.catalog,
                inventory=inventory, namespaces=dict(self._parts["namespaces"]),
                excluded_namespaces=self._excluded, workload_kinds=self._kinds,
                claims=self._parts["claims"], api=without_quotas(self._parts["api"]),
            )
            return self.context

    @property
    def clashes(self) -> frozenset[str]:
        """Names of GPUPolicy resources skipped because a policy file has the name."""
        return frozenset(self._clashes)

    def fail(self, source: str, message: str) -> None:
        self.errors[source] = message

    def clear(self, source: str) -> None:
        self.errors.pop(source, None)

    @property
    def ready(self) -> bool:
        return self.expected <= self.loaded

    def detail(self) -> dict[str, Any]:
        return {
            "ready": self.ready,
            "policies": [p.name for p in self.context.policies],
            "loaded": sorted(self.loaded),
            "waiting_for": sorted(self.expected - self.loaded),
            "errors": dict(self.errors),
        }


@dataclass
class _Watched:
    name: str
    fingerprint: Callable[[], Any]
    load: Callable[[], dict[str, Any]]  # keyword arguments for State.update
    last: Any = None  # the fingerprint last loaded (or that failed to load)
    seen: Any = None  # the fingerprint of the previous poll, to let a write settle


class FileSources:
    """Policy dir, namespace files and inventory file, polled for changes (mtime, size, inode
    of every file): works for plain edits, atomic renames and ConfigMap symlink swaps alike.

    A change is loaded once it has settled (the same fingerprint on two polls in a row), so a
    directory rewritten file by file is not read half-way. A load that fails, or a source
    that yields nothing, keeps the last good version and reports the error. With
    `cluster=True` namespaces and nodes come from the API server, so only policies are read."""

    def __init__(
        self, state: State, *, policies: str | None, namespaces: Sequence[str] = (),
        inventory: str | None = None, record: bool = True, cluster: bool = False,
        node_templates: str | None = None,
    ) -> None:
        self.state = state
        self.record = record  # False: a check that must not count in metrics or logs
        self.log = logs.get()
        root = Path(policies) if policies else sources.BUNDLED_POLICIES
        self.watched = [_Watched(
            "policies", lambda: _fingerprint(_policy_paths(root)),
            lambda: {"policies": sources.load_policies(root)},
        )]
        if cluster and (namespaces or inventory):
            logs.event(self.log, "cluster mode: namespaces and nodes come from the API server; "
                       "the --namespaces/--inventory files given are not read", level=30)
            namespaces, inventory = (), None
        if namespaces:
            paths = [Path(p) for p in namespaces]
            self.watched.append(_Watched(
                "namespaces", lambda: _fingerprint(paths),
                lambda: {"namespaces": sources.load_namespaces(paths)},
            ))
        if inventory:
            inv = Path(inventory)
            self.watched.append(_Watched(
                "inventory", lambda: _fingerprint([inv]),
                lambda: _inventory_parts(inv, state.catalog),
            ))
        if node_templates:  # read in cluster mode too: capacity the API server cannot list
            templates = Path(node_templates)
            self.watched.append(_Watched(
                "node_templates", lambda: _fingerprint([templates]),
                lambda: {"node_templates": _node_templates(templates, state.catalog)},
            ))
        self._stop = threading.Event()

    def load_all(self) -> list[str]:
        """First load; returns the error messages (empty when everything loaded)."""
        self.poll()
        return [f"{name}: {msg}" for name, msg in self.state.errors.items()]

    def poll(self) -> bool:
        """Reload what changed since the last poll; True when the Context changed."""
        changed = False
        for w in self.watched:
            mark = w.fingerprint()
            first = w.name not in self.state.loaded and w.last is None
            settled = mark == w.seen
            w.seen = mark
            if mark == w.last or not (first or settled):
                continue
            w.last = mark
            try:
                parts = w.load()
            except Exception as exc:  # untrusted files: any failure keeps the last good set
                message = _describe(exc)
                self.state.fail(w.name, message)
                if not self.record:
                    continue
                self.state.reloads[(w.name, "failure")] += 1
                logs.event(self.log, "source load failed; keeping the last good version",
                           level=40, source=w.name, error=message)
                continue
            context = self.state.update(**parts)
            self.state.clear(w.name)
            changed = True
            if not self.record:
                continue
            self.state.reloads[(w.name, "success")] += 1
            logs.event(self.log, "source loaded", source=w.name,
                       policies=[p.name for p in context.policies])
        return changed

    def start(self, interval: float = 1.0) -> threading.Thread:
        def loop() -> None:
            while not self._stop.wait(interval):
                try:
                    self.poll()
                except Exception:  # a watcher must never die; the next poll retries
                    self.log.exception("source poll failed")

        thread = threading.Thread(target=loop, name="gpupolicy-sources", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()


def _node_templates(path: Path, catalog: Catalog) -> Templates:
    """A --node-templates file: Node-shaped templates, NodePools, Cluster API node groups."""
    found = sources.ClusterObjects()
    sources.read_node_templates(path, found)
    return read_templates(found.templates, catalog, found.node_templates)


def _inventory_parts(path: Path, catalog: Catalog) -> dict[str, Any]:
    """An --inventory file gives the inventory, the ResourceClaims pods may name and the
    PriorityClasses and RuntimeClasses injection resolves (its ResourceQuotas are left to
    the API server's own quota admission)."""
    found = sources.read_cluster_file(path)
    return {"inventory": found.inventory(catalog), "claims": found.claims, "api": found.api()}


def without_quotas(api: ApiObjects | None) -> ApiObjects | None:
    """The webhook leaves quota to the API server's own quota admission, which runs after it
    and counts what is admitted concurrently: the webhook's Context has no ResourceQuotas."""
    return api if api is None or not api.quotas else replace(api, quotas={})


def _policy_paths(root: Path) -> list[Path]:
    try:
        return reading.manifest_files(root)
    except reading.SourceError:
        return [root]


def _fingerprint(paths: Sequence[Path]) -> tuple[Any, ...]:
    out: list[Any] = []
    for path in paths:
        try:
            st = path.stat()
            out.append((str(path), st.st_mtime_ns, st.st_size, st.st_ino))
        except OSError:
            out.append((str(path), None))
    return tuple(out)


def _describe(exc: Exception) -> str:
    if isinstance(exc, PolicyLoadError):
        problems = getattr(exc, "problems", None) or []
        lines = [str(p) for p in problems] or [str(exc)]
        return "; ".join(lines)
    if isinstance(exc, (reading.SourceError, OSError, ValueError)):
        return str(exc)
    return f"{type(exc).__name__}: {exc}"  # a reader bug: say what broke
