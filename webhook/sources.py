"""Reading the engine's inputs from disk: policy files, the GPU catalog, node inventory and
namespace files. Every front door builds its Context here, so all three see the same thing."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import yaml

from policies.catalog import Catalog
from policies.context import DEFAULT_EXCLUDED_NAMESPACES, Context
from policies.inventory import Inventory
from policies.loading import PolicyLoadError, PolicyProblem, check_unique, parse_policies
from policies.model import GPUPolicy

PACKAGE_DIR = Path(__file__).resolve().parent.parent / "policies"
BUNDLED_POLICIES = PACKAGE_DIR / "defaults"
CATALOG_FILE = PACKAGE_DIR / "data" / "catalog.yaml"
POLICY_SUFFIXES = (".yaml", ".yml", ".json")

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class SourceError(ValueError):
    """An input file that cannot be used; the message names the file."""


def policy_files(path: Path) -> list[Path]:
    if path.is_file():
        return [path]
    if not path.is_dir():
        raise SourceError(f"{path}: no such file or directory")
    # A mounted ConfigMap keeps its data in hidden `..data` folders behind symlinks: skip dot files.
    return sorted(
        p for p in path.rglob("*")
        if p.suffix in POLICY_SUFFIXES and p.is_file()
        and not any(part.startswith(".") for part in p.relative_to(path).parts)
    )


def load_policies(path: str | Path | None = None) -> list[GPUPolicy]:
    """Policies from a file or directory; the bundled defaults when `path` is None."""
    root = Path(path) if path is not None else BUNDLED_POLICIES
    loaded: list[tuple[str, GPUPolicy]] = []
    problems: list[PolicyProblem] = []
    for file in policy_files(root):
        try:
            text = file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            problems.append(PolicyProblem(str(file), 0, 0, "", f"cannot read: {exc}"))
            continue
        try:
            loaded.extend((str(file), p) for p in parse_policies(text, str(file)))
        except PolicyLoadError as exc:
            problems.extend(exc.problems)
    if problems:
        raise PolicyLoadError(problems)
    check_unique(loaded)
    return [p for _, p in loaded]


def load_catalog(path: str | Path = CATALOG_FILE) -> Catalog:
    return Catalog.from_data(_load_yaml(Path(path)))


def read_objects(path: str | Path) -> Iterator[dict[str, Any]]:
    """Kubernetes objects from a YAML/JSON stream; `kind: List` is flattened."""
    file = Path(path)
    try:
        text = file.read_text(encoding="utf-8")
        documents = list(yaml.load_all(text, Loader=_Loader))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise SourceError(f"{file}: {exc}") from None
    for doc in documents:
        yield from flatten(doc)


def flatten(doc: Any) -> Iterator[dict[str, Any]]:
    """The objects in one document: `kind: List` and typed lists (`PodList`, what
    `kubectl get -o yaml` prints) give their items; anything not a mapping gives nothing."""
    if not isinstance(doc, dict):
        return
    if str(doc.get("kind", "")).endswith("List") and isinstance(doc.get("items"), list):
        for item in doc["items"]:
            yield from flatten(item)
    else:
        yield doc


def load_inventory(path: str | Path, catalog: Catalog) -> Inventory:
    nodes = [o for o in read_objects(path) if o.get("kind") == "Node"]
    return Inventory.from_nodes(nodes, catalog)


def load_namespaces(paths: Iterable[str | Path]) -> dict[str, dict[str, str]]:
    """Namespace name -> labels, from files of Namespace objects."""
    found: dict[str, dict[str, str]] = {}
    for path in paths:
        for obj in read_objects(path):
            found.update(namespace_labels([obj]))
    return found


def namespace_labels(objects: Iterable[dict[str, Any]]) -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for obj in objects:
        if obj.get("kind") != "Namespace":
            continue
        meta = obj.get("metadata") or {}
        name = meta.get("name")
        if isinstance(name, str):
            labels = meta.get("labels") or {}
            found[name] = {str(k): str(v) for k, v in labels.items()}
    return found


def _load_yaml(path: Path) -> Any:
    try:
        return yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)
    except (OSError, yaml.YAMLError) as exc:
        raise SourceError(f"{path}: {exc}") from None


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--policies", metavar="PATH",
                        help="policy file or directory (default: the bundled policies)")
    parser.add_argument("--inventory", metavar="FILE",
                        help="nodes, as from `kubectl get nodes -o yaml`")
    parser.add_argument("--namespaces", metavar="FILE", action="append", default=[],
                        help="Namespace objects (labels for namespaceSelector); repeatable")
    parser.add_argument("--exclude-namespace", metavar="NS", action="append", default=None,
                        help="namespaces no policy governs (default: kube-system)")


def context_from_args(
    args: argparse.Namespace, *, extra_namespaces: dict[str, dict[str, str]] | None = None
) -> Context:
    """The Context every CLI front door uses. Raises SourceError / PolicyLoadError."""
    catalog = load_catalog()
    policies = load_policies(args.policies)
    inventory = load_inventory(args.inventory, catalog) if args.inventory else None
    namespaces = load_namespaces(args.namespaces)
    if extra_namespaces:
        namespaces.update(extra_namespaces)
    excluded = (
        frozenset(args.exclude_namespace) if args.exclude_namespace is not None
        else DEFAULT_EXCLUDED_NAMESPACES
    )
    return Context(
        policies=policies, catalog=catalog, inventory=inventory,
        namespaces=namespaces, excluded_namespaces=excluded,
    )
