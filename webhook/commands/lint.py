"""`gpupolicy lint [PATH ...|-]`: the engine's verdict on manifests, at the line that causes it.

Each Kubernetes object goes through `policies.engine.review` exactly as the webhook would send
it; violations and would-be mutations become report findings placed at the offending field.
Only the standard library, PyYAML and the core are imported on this path; `--fix` loads its
round-trip writer lazily.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from policies import yamlpos
from policies.decision import PatchOp
from policies.paths import FieldPath, to_pointer
from webhook.commands import options
from webhook.inputs import sources
from webhook.inputs.sources import manifest_files
from webhook.output import findings, helm, report
from webhook.output.findings import ENGINE_ERROR, MUTATION
from webhook.output.findings import Finding as ReportFinding

STDIN = "-"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from webhook.inputs.sources import add_source_arguments

    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="files or directories (recursive: *.yaml, *.yml, *.json); - for stdin")
    add_source_arguments(parser)
    parser.add_argument("--namespace", "-n", metavar="NS",
                        help="namespace of documents that name none (default: default)")
    parser.epilog = ("Exit status: 0 when no finding is an error, 1 when one is, 2 for a usage "
                     "error or a path that cannot be read.")
    options.add_format_options(parser, report.FORMATS, "text")
    options.add_file_option(parser, report.FORMATS)
    parser.add_argument("--show-mutations", action="store_true",
                        help="also report what the mutating webhook would add (severity info)")
    fix = parser.add_mutually_exclusive_group()
    fix.add_argument("--fix", action="store_true",
                     help="write the mutations into the files, keeping comments and layout")
    fix.add_argument("--fix-dry-run", action="store_true",
                     help="print the --fix changes as a unified diff on stdout (the report "
                          "goes to stderr), change nothing")
    parser.add_argument("--color", choices=("auto", "always", "never"), default="auto",
                        help="colour the text report (auto: on a terminal, unless NO_COLOR)")
    parser.add_argument("--stdin-filename", metavar="NAME", default=options.STDIN_NAME,
                        help="file name to report for standard input")
    parser.add_argument("--verbose", "-v", action="store_true",
                        help="say which documents were skipped and why")


@dataclass(slots=True)
class Edit:
    """The patch the webhook would apply to one object of one document."""

    document: int  # 1-based index in the stream
    prefix: FieldPath  # where the object sits in the document (("items", i) in a List)
    ops: tuple[PatchOp, ...]
    mutated: Any  # the object after the patch, as the engine computed it


@dataclass(slots=True)
class Result:
    findings: list[ReportFinding] = field(default_factory=list)
    edits: dict[str, list[Edit]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    documents: int = 0


class UsageError(Exception):
    pass


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from policies.loading import PolicyLoadError

    options.merge_files(args)
    try:
        if args.fix and STDIN in args.paths:
            raise UsageError("--fix cannot write to standard input; use --fix-dry-run")
        inputs = collect_inputs(args.paths, stdin_name=args.stdin_filename)
    except (UsageError, sources.SourceError) as exc:
        stderr.write(f"gpupolicy lint: {exc}\n")
        return 2
    loaded: list[tuple[str, bytes]] = []
    unreadable = False
    for name, raw in inputs:
        try:
            loaded.append((name, raw if raw is not None else sources.read_bytes(name)))
        except sources.SourceError as exc:  # the other files are still linted
            stderr.write(f"gpupolicy lint: {exc}\n")
            unreadable = True
    try:
        context, _ = sources.build_context(args, documents_among(loaded))
    except (sources.SourceError, PolicyLoadError) as exc:
        stderr.write(f"gpupolicy lint: {exc}\n")
        return 2
    result = Result()
    for name, raw in loaded:
        # one document at a time: a stream of 100k documents is linted in constant memory
        start = len(result.findings)
        lint_stream(name, yamlpos.iter_stream(raw), context, result, namespace=args.namespace,
                    show_mutations=args.show_mutations and not args.fix)
        rendered = helm.Sources(raw)
        if rendered:  # Helm output: point at the chart's template files
            result.findings[start:] = helm.place_all(result.findings[start:], rendered)
            # the files checked are the templates (JUnit: no empty suite for the stream)
            result.files[-1:] = list(dict.fromkeys(rendered.paths))
    if args.verbose:
        for note in result.notes:
            stderr.write(f"{note}\n")
    not_fixed = 0
    if args.fix or args.fix_dry_run:
        from webhook.output import fix

        not_fixed = fix.apply_edits(dict(loaded), result.edits, write=args.fix, stdout=stdout,
                                    stderr=stderr)
    status = emit(args, result, stdout, stderr)
    return 2 if unreadable or not_fixed else status


def emit(args: argparse.Namespace, result: Result, stdout: TextIO, stderr: TextIO) -> int:
    color = args.color == "always" or (
        args.color == "auto" and not options.to_file(args.output_file) and _isatty(stdout)
        and "NO_COLOR" not in os.environ
    )
    text = report.render(args.format, result.findings, files=result.files, color=color,
                         rule_help=findings.rule_help(f.rule for f in result.findings))
    if args.format == "sarif" and any(f.file == options.STDIN_NAME for f in result.findings):
        stderr.write(f"gpupolicy lint: warning: {options.STDIN_WITHOUT_NAME}\n")
    # with --fix-dry-run stdout carries the diff alone, ready for `git apply`
    if not options.write_report(text, args.output_file, stderr if args.fix_dry_run else stdout,
                                stderr, "lint"):
        return 2
    return 1 if any(f.severity == "error" for f in result.findings) else 0


def collect_inputs(paths: Sequence[str], *, stdin_name: str) -> list[tuple[str, bytes | None]]:
    """(name, bytes for stdin / None for a file to read) in a stable order; a missing path or
    an empty argument list is a usage error."""
    if not paths:
        raise UsageError("no input: give files, directories or - for standard input")
    out: list[tuple[str, bytes | None]] = []
    seen: set[Path] = set()  # a file named twice (or inside a named folder) is linted once

    def add(name: str) -> None:
        try:
            key = Path(name).resolve()
        except (OSError, RuntimeError):  # a symlink loop: reading it will say so
            key = Path(name).absolute()
        if key not in seen:
            seen.add(key)
            out.append((name, None))

    for path in paths:
        if path == STDIN:
            if not any(name == stdin_name for name, _ in out):
                out.append((stdin_name, sys.stdin.buffer.read()))
            continue
        p = Path(path)
        if p.is_dir():
            for found in manifest_files(p):
                add(str(found))
        elif p.is_file() or p.is_symlink():
            add(path)
        else:
            raise UsageError(f"{path}: no such file or directory")
    if not out:
        raise UsageError(f"no manifests (*.yaml, *.yml, *.json) in {', '.join(paths)}: "
                         "nothing was linted")
    return out


def documents_among(loaded: list[tuple[str, bytes]]) -> sources.ClusterObjects:
    """The documents of the inputs that describe the cluster (sources.CONTEXT_KINDS); only
    files that can hold one are read ahead of the rest."""
    marks = {kind.encode() for kind in sources.CONTEXT_KINDS}
    return sources.context_objects(
        obj for _, raw in loaded if any(m in raw for m in marks)
        for doc in yamlpos.iter_stream(raw) if isinstance(doc, yamlpos.Document)
        for _, obj in doc.objects())  # streamed: a large dump is never held whole


def lint_stream(
    name: str,
    stream: yamlpos.Stream | Iterable[yamlpos.Document | yamlpos.SyntaxProblem],
    context: Any,
    result: Result,
    *,
    namespace: str | None = None,
    show_mutations: bool = False,
) -> None:
    from policies.engine import namespace_of, review

    result.files.append(name)
    items: Iterable[yamlpos.Document | yamlpos.SyntaxProblem] = (
        [*stream.problems, *stream.documents] if isinstance(stream, yamlpos.Stream) else stream)
    for doc in items:
        if isinstance(doc, yamlpos.SyntaxProblem):
            result.findings.append(ReportFinding(
                rule=doc.rule, severity="error", message=doc.message, file=name,
                line=doc.line, column=doc.column, document=doc.document or None,
            ))
            continue
        if doc.data is None:
            continue
        found = False
        for prefix, obj in doc.objects():
            if not is_kubernetes_object(obj):
                continue
            found = True
            result.documents += 1
            ns = namespace_of(obj, namespace)
            label = object_label(obj, ns)
            try:
                decision = review(obj, context, namespace=ns)
            except Exception as exc:  # a bug in a rule must not hide every other finding
                line, column = doc.position(prefix)
                result.findings.append(ReportFinding(
                    rule=ENGINE_ERROR, severity="error", file=name, line=line, column=column,
                    message=f"engine failed: {type(exc).__name__}: {exc}", object=label,
                    document=doc.index,
                ))
                continue
            where = f"{name}: document {doc.index} (line {doc.line})"
            if decision.skipped:
                result.notes.append(f"{where}: skipped, {decision.skipped}")
            result.notes += [f"{where}: {note}" for note in decision.notes]
            for v in decision.violations:
                line, column = doc.position((*prefix, *v.path))
                result.findings.append(ReportFinding(
                    rule=v.rule, severity=v.severity, message=v.message, file=name,
                    line=line, column=column, policy=v.policy, path=v.field or None,
                    object=label, document=doc.index,
                ))
            if decision.ops:
                result.edits.setdefault(name, []).append(
                    Edit(doc.index, prefix, decision.ops, decision.mutated))
                if show_mutations:
                    for op in decision.ops:
                        result.findings.append(mutation_finding(
                            op, doc, prefix, name=name, label=label))
        if not found:
            result.notes.append(
                f"{name}: document {doc.index} (line {doc.line}): skipped, not a Kubernetes "
                "object (needs apiVersion and kind)"
            )


def mutation_finding(
    op: PatchOp, doc: yamlpos.Document, prefix: FieldPath, *, name: str, label: str,
) -> ReportFinding:
    message, at = findings.mutation(op)
    line, column = doc.position((*prefix, *at))
    return ReportFinding(
        rule=MUTATION, severity="info", message=message, file=name, line=line, column=column,
        policy=op.policy, path=to_pointer(op.path), object=label, document=doc.index,
    )


def is_kubernetes_object(obj: Any) -> bool:
    return (isinstance(obj, dict) and isinstance(obj.get("apiVersion"), str)
            and isinstance(obj.get("kind"), str) and bool(obj["kind"]))


def object_label(obj: dict[str, Any], namespace: str) -> str:
    name = sources.metadata_of(obj).get("name")
    return f"{obj.get('kind')} {namespace}/{name or '?'}"


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
