"""Where the audit's objects come from (the `Source` both kinds of audit read), and the one
that reads files (and standard input) instead of a cluster.

A live cluster is webhook/cluster/listing.py's LiveSource, which alone loads the `kubernetes`
package: an offline audit must not pay for it. Both give the same four things: GPUPolicy
objects, Namespace labels, Node objects (with DRA slices, classes and the claims pods name),
and the workloads in batches (DRA ResourceClaims and ResourceClaimTemplates among them, reviewed
as objects of their own), so a dump of a cluster audits exactly like the cluster itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from policies import yamlpos
from policies.engine import namespace_of
from policies.paths import FieldPath
from policies.workloads import WORKLOAD_KINDS, KindTable, unlisted_pod_template
from webhook.cluster.kinds import audited_kind, node_facts
from webhook.inputs import reading, sources
from webhook.output.progress import Progress

Warn = Callable[[str], None]
# Where an object was read from, for file and line in the report: None for a cluster object.
Locator = Callable[[FieldPath], tuple[str, int, int]] | None
Batches = Iterator[tuple[str, list[tuple[dict[str, Any], Locator]]]]


class Source(Protocol):
    problems: list[tuple[str, yamlpos.SyntaxProblem]]  # documents the reader refused
    failures: dict[str, str]  # what could not be read -> why: the audit is incomplete
    kinds: KindTable  # the workload-kinds table: what is listed besides the fixed kinds
    namespace: str | None  # `audit -n NS`: only the workloads of that namespace

    def cluster_objects(self, warn: Warn) -> sources.ClusterObjects: ...
    def workloads(self, progress: Progress, unavailable: dict[str, str]) -> Batches: ...


def _locator(file: str, doc: yamlpos.Document, prefix: FieldPath) -> Locator:
    def locate(path: FieldPath) -> tuple[str, int, int]:
        return (file, *doc.position((*prefix, *path)))
    return locate


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
            self.files.extend(reading.manifest_files(Path(path)))  # raises SourceError
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
            except reading.SourceError:
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
        return given if given is not None else reading.read_bytes(file)

    def workloads(self, progress: Progress, unavailable: dict[str, str]) -> Batches:
        for file in self.files:
            try:
                raw = self._read(file)
            except reading.SourceError as exc:
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
