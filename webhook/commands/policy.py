"""`gpupolicy policy check FILE|DIR ...`: validate GPUPolicy files before they reach a cluster.

Every problem of every file is printed as `file:line:column: document N: field.path: message`,
so an editor or CI log can jump to it. Besides the document's own shape, every value `inject`
would write into pods is held to the apiserver's rules (label and taint keys, label values,
DNS names, selector operators and their values): a policy the webhook would turn into pods
the apiserver refuses fails here instead. Exit 0 when all policies are valid, 1 on problems,
2 when a path cannot be read.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TextIO

from policies.loading import PolicyLoadError, PolicyProblem, check_unique
from policies.model import GPUPolicy
from webhook.inputs.sources import SourceError, manifest_files, read_policy_file


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    check = sub.add_parser("check", help="validate policy files (field paths in every error)")
    check.add_argument("paths", nargs="+", metavar="PATH", help="policy files or directories")
    check.add_argument("--quiet", "-q", action="store_true", help="print problems only")


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
    for problem in problems:
        stdout.write(f"{problem}\n")
    if problems:
        stdout.write(f"{len(problems)} problem{'s' * (len(problems) != 1)} "
                     f"in {len(files)} file{'s' * (len(files) != 1)}\n")
        return 1
    if not args.quiet:
        names = ", ".join(p.name for _, p in loaded) or "none"
        stdout.write(f"ok: {len(loaded)} polic{'ies' if len(loaded) != 1 else 'y'} "
                     f"in {len(files)} file{'s' * (len(files) != 1)} ({names})\n")
    return 0
