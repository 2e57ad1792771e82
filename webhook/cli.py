"""`gpupolicy` command: a thin dispatcher. Each subcommand lives in its own module and is
imported only when used, so `gpupolicy lint` does not pay for Flask or the Kubernetes client.

A subcommand module provides `add_arguments(parser)` and `run(args, stdout, stderr) -> int`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from collections.abc import Sequence
from typing import TextIO

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("webhook.serve", "run the admission webhook (gunicorn, TLS)"),
    "review": ("webhook.cmd_review", "what the webhook would do to each document, as JSON"),
    "lint": ("webhook.lint", "lint manifests (YAML, Helm and Kustomize output)"),
    "audit": ("webhook.audit", "dry-run the policies over a live cluster or files"),
    "explain": ("webhook.explain", "why a GPU pod fits no node"),
    "policy": ("webhook.cmd_policy", "check policy files"),
    "schema": ("webhook.cmd_schema", "print the GPUPolicy JSON schema or CRD"),
    "certs": ("webhook.certs_cli", "generate a CA and serving certificate"),
}


def build_parser() -> tuple[argparse.ArgumentParser, argparse._SubParsersAction]:  # type: ignore[type-arg]
    parser = argparse.ArgumentParser(prog="gpupolicy", description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    return parser, sub


def run(argv: Sequence[str], stdout: TextIO, stderr: TextIO) -> int:
    parser, sub = build_parser()
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    if not argv or argv[0] not in COMMANDS:
        if argv and argv[0] in ("-h", "--help"):
            parser.print_help(stdout)
            return 0
        parser.print_usage(stderr)
        stderr.write("gpupolicy: choose a command: " + ", ".join(COMMANDS) + "\n")
        return 2
    name = argv[0]
    module = importlib.import_module(COMMANDS[name][0])
    sub_parser = argparse.ArgumentParser(prog=f"gpupolicy {name}", description=COMMANDS[name][1])
    module.add_arguments(sub_parser)
    try:
        # argparse writes usage and errors to sys.stdout/sys.stderr: send them where asked.
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            args = sub_parser.parse_args(argv[1:])
    except SystemExit as exit_:  # argparse exits 2 on usage errors, 0 on --help
        return int(exit_.code or 0)
    return int(module.run(args, stdout, stderr))


def main() -> None:
    sys.exit(run(sys.argv[1:], sys.stdout, sys.stderr))


if __name__ == "__main__":
    main()
