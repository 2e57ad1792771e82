"""Options that several commands share, spelled the way kubectl, Checkov and gator spell them:
`-o FORMAT` picks the output format (`--format`), `--output FILE` writes the report to a file,
`-f PATH` names an input. A value that clearly belongs to the other option is refused with the
right spelling, never guessed ("-o report.sarif: did you mean --output report.sarif?")."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

REPORT_SUFFIXES = (".json", ".sarif", ".xml", ".txt", ".yaml", ".yml", ".html", ".out")


def add_format_options(parser: argparse.ArgumentParser, formats: Sequence[str],
                       default: str, *, output: bool = True) -> None:
    parser.add_argument("-o", "--format", type=_format(formats), default=default,
                        metavar="FORMAT",
                        help=f"report format: {', '.join(formats)} (default: {default})")
    if output:
        parser.add_argument("--output", metavar="FILE",
                            help="write the report to FILE instead of standard output")


def add_file_option(parser: argparse.ArgumentParser, formats: Sequence[str], *,
                    dest: str = "paths") -> None:
    """`-f PATH` (repeatable), as `kubectl apply -f`: added to the positional inputs."""
    parser.add_argument("-f", "--filename", dest=f"{dest}_f", action="append", default=[],
                        type=_path(formats), metavar="PATH",
                        help="an input file or directory (repeatable), as kubectl -f")


def merge_files(args: argparse.Namespace, dest: str = "paths") -> None:
    setattr(args, dest, [*getattr(args, dest), *getattr(args, f"{dest}_f")])


def write_report(text: str, output: str | None, stdout: TextIO, stderr: TextIO,
                 prog: str) -> bool:
    """The report to `--output FILE`, else to stdout; False (said on stderr) if it cannot."""
    if not output:
        stdout.write(text)
        return True
    try:
        Path(output).write_text(text, encoding="utf-8")
    except OSError as exc:
        stderr.write(f"gpupolicy {prog}: {output}: cannot write: {exc.strerror or exc}\n")
        return False
    return True


def _format(formats: Sequence[str]) -> Any:
    def check(value: str) -> str:
        if value in formats:
            return value
        if "/" in value or value.endswith(REPORT_SUFFIXES):
            raise argparse.ArgumentTypeError(
                f"{value!r} is not a format: did you mean --output {value}? "
                f"(-o picks the format: {', '.join(formats)})")
        raise argparse.ArgumentTypeError(
            f"unknown format {value!r}; choose one of {', '.join(formats)}")
    return check


def _path(formats: Sequence[str]) -> Any:
    def check(value: str) -> str:
        if value in formats:
            raise argparse.ArgumentTypeError(
                f"{value!r} is a format: did you mean -o {value} (--format {value})? "
                "(-f names an input file)")
        return value
    return check
