"""Options that several commands share, spelled the way kubectl, gator and Checkov spell them:
`-o/--output FORMAT` picks the output format (`--format` is an alias), `--output-file PATH`
writes the report to a file (`-` is standard output), `-f PATH` names an input. A value that
clearly belongs to the other option is refused with the right spelling, never guessed
(`--output report.sarif: did you mean --output-file report.sarif?`)."""

from __future__ import annotations

import argparse
import contextlib
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

REPORT_SUFFIXES = (".json", ".sarif", ".xml", ".txt", ".yaml", ".yml", ".html", ".out")
STDOUT = "-"
STDIN_NAME = "<stdin>"  # what a finding on standard input names as its file, by default
STDIN_WITHOUT_NAME = (
    f"findings on standard input are reported against {STDIN_NAME}, which code scanning "
    "cannot find in the repository: name the file with --stdin-filename PATH")


def add_format_options(parser: argparse.ArgumentParser, formats: Sequence[str],
                       default: str, *, output: bool = True,
                       aliases: Mapping[str, str] | None = None) -> None:
    """`-o/--output/--format FORMAT` and, with `output`, `--output-file PATH`. `aliases` are
    older names of a format, still accepted (audit's `table` is `text`)."""
    parser.add_argument("-o", "--output", "--format", dest="format", default=default,
                        action=_FormatAction, formats=tuple(formats), aliases=aliases or {},
                        metavar="FORMAT",
                        help=f"report format: {', '.join(formats)} (default: {default}); "
                             "--format is an alias")
    if output:
        parser.add_argument("--output-file", metavar="PATH", action=_OutputFileAction,
                            formats=tuple(formats),
                            help="write the report to PATH (- for standard output; a missing "
                                 "parent directory is created)")


def add_file_option(parser: argparse.ArgumentParser, formats: Sequence[str], *,
                    dest: str = "paths") -> None:
    """`-f PATH` (repeatable), as `kubectl apply -f`: added to the positional inputs."""
    parser.add_argument("-f", "--filename", dest=f"{dest}_f", action="append", default=[],
                        type=_path(formats), metavar="PATH",
                        help="an input file or directory (repeatable), as kubectl -f")


def merge_files(args: argparse.Namespace, dest: str = "paths") -> None:
    setattr(args, dest, [*getattr(args, dest), *getattr(args, f"{dest}_f")])


def to_file(output_file: str | None) -> bool:
    """Whether the report goes to a file rather than standard output."""
    return bool(output_file) and output_file != STDOUT


def write_report(text: str, output_file: str | None, stdout: TextIO, stderr: TextIO,
                 prog: str) -> bool:
    """The report to `--output-file PATH`, else to stdout; False (said on stderr) if it
    cannot be written."""
    try:
        with report_stream(output_file, stdout) as out:
            out.write(text)
    except OSError as exc:
        stderr.write(f"gpupolicy {prog}: {cannot_write(output_file, exc)}\n")
        return False
    return True


@contextlib.contextmanager
def report_stream(output_file: str | None, stdout: TextIO) -> Iterator[TextIO]:
    """Where a streamed report goes: PATH (its missing parent directories made) or stdout."""
    if not to_file(output_file):
        yield stdout
        return
    path = Path(str(output_file))
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as out:
        yield out


def cannot_write(output_file: str | None, exc: OSError) -> str:
    return f"{output_file}: cannot write the report: {exc.strerror or exc}"


def _looks_like_a_file(value: str) -> bool:
    return "/" in value or value.lower().endswith(REPORT_SUFFIXES)


class _FormatAction(argparse.Action):
    """Knows which spelling the user typed, so the refusal can repeat it."""

    def __init__(self, option_strings: Sequence[str], dest: str, *, formats: Sequence[str],
                 aliases: Mapping[str, str], **kwargs: Any) -> None:
        self.formats, self.aliases = tuple(formats), dict(aliases)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        value = str(values)
        if value in self.aliases:
            value = self.aliases[value]
        if value not in self.formats:
            given = option_string or "-o"
            choose = ", ".join(self.formats)
            if _looks_like_a_file(value):
                parser.error(f"{given} {value}: did you mean --output-file {value}? "
                             f"({given} picks the format: {choose})")
            parser.error(f"{given} {value}: unknown format; choose one of {choose}")
        setattr(namespace, self.dest, value)


class _OutputFileAction(argparse.Action):
    def __init__(self, option_strings: Sequence[str], dest: str, *, formats: Sequence[str],
                 **kwargs: Any) -> None:
        self.formats = tuple(formats)
        super().__init__(option_strings, dest, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        value = str(values)
        if value in self.formats:
            parser.error(f"{option_string} {value}: did you mean -o {value}? "
                         f"({option_string} names the file the report is written to; "
                         f"write ./{value} for a file of that name)")
        setattr(namespace, self.dest, value)


def _path(formats: Sequence[str]) -> Any:
    def check(value: str) -> str:
        if value in formats:
            raise argparse.ArgumentTypeError(
                f"{value!r} is a format: did you mean -o {value}? (-f names an input file)")
        return value
    return check



def format_choices(action: argparse.Action) -> tuple[str, ...]:
    """The formats `-o` takes (completion lists them), or () for any other option."""
    return action.formats if isinstance(action, _FormatAction) else ()
