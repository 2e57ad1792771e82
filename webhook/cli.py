"""`gpupolicy`: a thin dispatcher. Each subcommand lives in its own module and is imported only
when used, so `gpupolicy lint` does not pay for Flask or the Kubernetes client.

A subcommand module provides `add_arguments(parser)` and `run(args, stdout, stderr) -> int`.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Sequence
from types import ModuleType
from typing import Any, TextIO

from webhook import heap

DESCRIPTION = ("GPU-aware admission control for Kubernetes: one engine behind the admission "
               "webhook, the manifest linter and the cluster audit.")
EPILOG = ("Run `gpupolicy COMMAND --help` for a command's options. Exit status: 0 clean, "
          "1 findings or refusals, 2 usage errors or unreadable input.")

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "serve": ("webhook.commands.serve", "run the admission webhook (gunicorn, TLS)"),
    "review": ("webhook.commands.review", "what the webhook would do to each document, as JSON"),
    "lint": ("webhook.commands.lint", "lint manifests (YAML, Helm and Kustomize output)"),
    "audit": ("webhook.commands.audit", "dry-run the policies over a live cluster or files"),
    "migrate": ("webhook.commands.migrate",
                "preview a move from the device plugin to DRA, workload by workload"),
    "explain": ("webhook.commands.explain", "why a GPU pod fits no node"),
    "policy": ("webhook.commands.policy", "check policy files"),
    "test": ("webhook.commands.test", "run GPUPolicyTest suites: expected verdicts per resource"),
    "rules": ("webhook.commands.rules", "list the rules, or describe one with its examples"),
    "schema": ("webhook.commands.schema", "print the GPUPolicy JSON schema or CRD"),
    "export": ("webhook.commands.export",
               "the policies as ValidatingAdmissionPolicies and MutatingAdmissionPolicies"),
    "certs": ("webhook.commands.certs", "generate a CA and serving certificate"),
    "completion": ("webhook.commands.completion", "print a shell completion script (bash, zsh)"),
}


class _Version(argparse.Action):
    """`--version`, reading the installed version only when asked: importlib.metadata costs
    about 15 ms of imports, which every `--help` and mistyped command paid."""

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS,
                         help="show program's version number and exit")

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        from webhook.output.findings import version  # the policy engine's types, too

        sys.stdout.write(f"gpupolicy {version()}\n")
        parser.exit()


def top_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="gpupolicy", description=DESCRIPTION, epilog=EPILOG)
    parser.add_argument("--version", action=_Version)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (_, help_text) in COMMANDS.items():
        sub.add_parser(name, help=help_text, add_help=False)
    return parser


def _command_module(name: str) -> ModuleType:
    """The command's module, imported out of the collector's way (webhook/heap.py)."""
    return heap.import_frozen(COMMANDS[name][0])


def command_parser(name: str) -> argparse.ArgumentParser:
    module = _command_module(name)
    parser = argparse.ArgumentParser(prog=f"gpupolicy {name}", description=COMMANDS[name][1])
    module.add_arguments(parser)
    return parser


def run(argv: Sequence[str], stdout: TextIO, stderr: TextIO) -> int:
    if not argv or argv[0] not in COMMANDS:
        parser = top_parser()
        try:
            # argparse writes usage and errors to sys.stdout/sys.stderr: send them where asked
            with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
                parser.parse_args(argv)
        except SystemExit as exit_:  # --help, --version, or an unknown command
            return int(exit_.code or 0)
        parser.print_usage(stderr)
        stderr.write("gpupolicy: choose a command: " + ", ".join(COMMANDS) + "\n")
        return 2
    name = argv[0]
    module = _command_module(name)
    sub_parser = command_parser(name)
    try:
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            args = sub_parser.parse_args(argv[1:])
    except SystemExit as exit_:  # argparse exits 2 on usage errors, 0 on --help
        return int(exit_.code or 0)
    return int(module.run(args, stdout, stderr))


def main() -> None:
    try:
        code = run(sys.argv[1:], sys.stdout, sys.stderr)
        sys.stdout.flush()
    except BrokenPipeError:
        # `gpupolicy ... | head`: the reader left; say nothing more, as other tools do
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        code = 141
    except KeyboardInterrupt:
        code = 130
    sys.exit(code)


if __name__ == "__main__":
    main()
