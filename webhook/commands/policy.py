"""`gpupolicy policy check FILE|DIR ...`: validate GPUPolicy files before they reach a cluster.

Every problem of every file is printed as `file:line:column: document N: field.path: message`,
so an editor or CI log can jump to it. Besides the document's own shape, every value `inject`
would write into pods is held to the apiserver's rules (label and taint keys, label values,
DNS names, selector operators and their values): a policy the webhook would turn into pods
the apiserver refuses fails here instead. A valid policy may still get warnings (exit 0): a
hostname in an injected selector or affinity, an injected toleration of every taint, and, with
`--inventory`, an injected label no node carries. Exit 0 when all policies are valid, 1 on
problems, 2 when a path cannot be read.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from policies import yamlpos
from policies.loading import PolicyLoadError, PolicyProblem, check_unique
from policies.model import GPUPolicy
from policies.paths import to_display
from policies.policy_advice import advice
from webhook.inputs.reading import SourceError, manifest_files, read_stream
from webhook.inputs.sources import load_catalog, load_inventory, read_policy_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="validate policy files (field paths in every error)")
    check.add_argument("paths", nargs="+", metavar="PATH", help="policy files or directories")
    check.add_argument("--quiet", "-q", action="store_true", help="print problems only")
    check.add_argument("--inventory", metavar="FILE",
                       help="the cluster's nodes (kubectl get nodes -o yaml): also warn of "
                            "injected labels no node carries")


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    files: list[Path] = []
    try:
        for path in args.paths:
            under = manifest_files(Path(path))
            if not under:  # as --policies of an empty directory: never "ok: 0 policies"
                raise SourceError(f"{path}: no policy files (*.yaml, *.yml, *.json)")
            files += under
    except SourceError as exc:
        stderr.write(f"gpupolicy policy check: {exc}\n")
        return 2
    loaded: list[tuple[str, GPUPolicy]] = []
    problems: list[PolicyProblem] = []
    for file in files:
        try:
            found, trouble = read_policy_file(file)  # the hardened reader, as every door
        except SourceError as exc:
            stderr.write(f"gpupolicy policy check: {exc}\n")
            return 2
        loaded += found
        problems += trouble
    try:
        check_unique(loaded)
    except PolicyLoadError as exc:
        problems.extend(exc.problems)
    try:
        warnings = _warnings(loaded, args.inventory)
    except SourceError as exc:
        stderr.write(f"gpupolicy policy check: {exc}\n")
        return 2
    for problem in problems:
        stdout.write(f"{problem}\n")
    for warning in warnings:
        stdout.write(f"{warning}\n")
    if problems:
        stdout.write(f"{len(problems)} problem{'s' * (len(problems) != 1)} "
                     f"in {len(files)} file{'s' * (len(files) != 1)}\n")
        return 1
    if not args.quiet:
        names = ", ".join(p.name for _, p in loaded) or "none"
        said = f", {len(warnings)} warning{'s' * (len(warnings) != 1)}" if warnings else ""
        stdout.write(f"ok: {len(loaded)} polic{'ies' if len(loaded) != 1 else 'y'} "
                     f"in {len(files)} file{'s' * (len(files) != 1)} ({names}){said}\n")
    return 0


def _warnings(loaded: list[tuple[str, GPUPolicy]], inventory_file: str | None) -> list[str]:
    """Each valid policy's advice (policies/policy_advice.py) at its file:line:column."""
    inventory = load_inventory(inventory_file, load_catalog()) if inventory_file else None
    out = []
    documents: dict[str, list[yamlpos.Document]] = {}
    for source, policy in loaded:
        found = list(advice(policy, inventory))
        if not found:
            continue
        if source not in documents:
            documents[source] = read_stream(source).documents
        where = _place(documents[source], policy.name)
        for path, message in found:
            line, column = (where[1].position((*where[0], *path), value=True) if where
                            else (0, 0))
            at = f"{source}:{line}:{column}" if line else source
            out.append(f"{at}: warning: policy {policy.name}: {to_display(path)}: {message}")
    return out


def _place(docs: list[yamlpos.Document], name: str
           ) -> tuple[tuple[str | int, ...], yamlpos.Document] | None:
    """Where the GPUPolicy of this name is in a file: its path in its document."""
    for doc in docs:
        for prefix, obj in doc.objects():
            meta = obj.get("metadata")
            if obj.get("kind") == "GPUPolicy" and isinstance(meta, dict) \
                    and meta.get("name") == name:
                return prefix, doc
    return None
