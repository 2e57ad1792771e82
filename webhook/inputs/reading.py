"""Reading input files: paths walked, bytes read, streams through the one hardened reader
(policies/yamlpos.py), and the flags every door reads its sources with. Light on purpose:
only the standard library and the reader, so a command can find and read its inputs (and
start helm and kustomize on them) before the engine is imported. Building the engine's
Context from what is read is webhook/inputs/sources.py's.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from policies import yamlpos

SUFFIXES = (".yaml", ".yml", ".json")
# What the workload documents of lint and review may be read beside: Namespace labels (for
# namespaceSelector), the ResourceClaims pods name and the DeviceClasses claims name (a
# driver's chart ships its classes with the workloads that use them).
CONTEXT_KINDS = ("Namespace", "ResourceClaim", "ResourceClaimTemplate", "DeviceClass")



class SourceError(ValueError):
    """An input that cannot be used; the message names the file (and line)."""


def manifest_files(path: Path) -> list[Path]:
    """`path` itself, or the manifests under it (sorted). Hidden files and folders are skipped
    (`.git`, a mounted ConfigMap's `..data`); symlinked folders are not followed, so a link
    loop cannot hang the walk. Raises SourceError for a path that is not there."""
    try:
        if path.stat() and path.is_file():
            return [path]
        if not path.is_dir():
            raise SourceError(f"{path}: not a file or directory")
    except FileNotFoundError:
        if path.is_symlink():
            raise SourceError(f"{path}: cannot read: a symbolic link to nothing") from None
        raise SourceError(f"{path}: no such file or directory") from None
    except OSError as exc:  # a symlink loop, a permission error...
        raise SourceError(f"{path}: cannot read: {exc.strerror or exc}") from None
    found: list[Path] = []
    errors: list[OSError] = []
    for dirpath, dirnames, filenames in os.walk(path, onerror=errors.append):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        found.extend(Path(dirpath, name) for name in filenames
                     if name.endswith(SUFFIXES) and not name.startswith("."))
    if errors:
        first = errors[0]
        raise SourceError(f"{first.filename}: cannot read: {first.strerror or first}")
    return sorted(found)


def read_bytes(path: Path | str) -> bytes:
    try:
        with open(path, "rb", buffering=0) as f:  # read whole: a buffer would only copy it
            return f.read()
    except FileNotFoundError:
        raise SourceError(f"{path}: no such file or directory") from None
    except OSError as exc:
        raise SourceError(f"{path}: cannot read: {exc.strerror or exc}") from None


def read_stream(path: Path | str) -> yamlpos.Stream:
    """A file through the hardened reader; its problems (bad YAML, duplicate keys...) stay in
    the stream for the caller to report."""
    return yamlpos.read_stream(read_bytes(path))


def stream_objects(stream: yamlpos.Stream) -> Iterator[dict[str, Any]]:
    """The Kubernetes objects of a stream; `kind: List` (and `PodList`...) flattened."""
    for doc in stream.documents:
        for _, obj in doc.objects():
            yield obj


def read_objects(path: Path | str) -> list[dict[str, Any]]:
    """Every object of a file that must be read whole (an inventory, namespaces): any problem
    in it is a SourceError naming file and line."""
    stream = read_stream(path)
    if stream.problems:
        raise SourceError(describe(path, stream.problems))
    return list(stream_objects(stream))


def describe(path: Path | str, problems: Sequence[yamlpos.SyntaxProblem]) -> str:
    first = problems[0]
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"{path}:{first.line}:{first.column}: {first.message}{more}"


def metadata_of(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    """An object's metadata; {} when it is not a mapping (input is read, never trusted)."""
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def labels_of(obj: Mapping[str, Any]) -> dict[str, str]:
    """An object's labels as strings; {} when metadata or labels are not mappings."""
    labels = metadata_of(obj).get("labels")
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}



def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policies", metavar="PATH",
                        help="policy file or directory (default: the bundled policies)")
    parser.add_argument("--inventory", metavar="FILE",
                        help="nodes, as from `kubectl get nodes -o yaml`")
    parser.add_argument("--node-templates", metavar="FILE",
                        help="nodes an autoscaler can start: Node-shaped templates, Karpenter "
                             "NodePools or Cluster API node groups (a pod only they can run is "
                             "admitted with a note)")
    parser.add_argument("--namespaces", metavar="FILE", action="append", default=[],
                        help="Namespace objects (labels for namespaceSelector); repeatable")
    parser.add_argument("--exclude-namespace", metavar="NS", action="append", default=None,
                        help="namespaces no policy governs (default: kube-system)")
    parser.add_argument("--workload-kinds", metavar="FILE",
                        help="workload kinds and where their pod specs live, added to (or "
                             "replacing entries of) the bundled table")
