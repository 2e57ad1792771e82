"""`gpupolicy lint [PATH ...|-]`: the engine's verdict on manifests, at the line that causes it.

Each Kubernetes object goes through `policies.engine.review` exactly as the webhook would send
it; violations and would-be mutations become report findings placed at the offending field.
Charts and overlays (webhook/inputs/discover.py) are rendered by the real helm and kustomize
(webhook/inputs/render.py) and their findings moved to the template, base or patch that wrote
the field (webhook/output/helm.py, webhook/output/kustomize.py).
Only the standard library, PyYAML and the core are imported on this path; `--fix` loads its
round-trip writer lazily.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import gc
import os
import re
import sys
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from stat import S_ISDIR, S_ISREG
from typing import TYPE_CHECKING, Any, TextIO

from policies import yamlpos
from policies.decision import PatchOp
from policies.paths import FieldPath, to_display, to_pointer
from webhook import cores, heap
from webhook.commands import options
from webhook.inputs import discover, reading
from webhook.inputs.discover import Target
from webhook.output import findings, helm, report
from webhook.output.findings import ENGINE_ERROR, MUTATION, UNRESOLVED
from webhook.output.findings import Finding as ReportFinding

if TYPE_CHECKING:
    from concurrent.futures import Future

    from webhook.inputs import sources
    from webhook.inputs.render import RenderError, Running
    from webhook.output import kustomize

STDIN = "-"
# What the files holding a CONTEXT_KINDS document contain: a file without one of these strings
# (ResourceClaimTemplate is found by ResourceClaim) is not read ahead, nor one where they are
# only part of a longer name (`targetNamespace`, `NamespaceSelector`).
_CONTEXT_MARKS = tuple(kind.encode() for kind in reading.CONTEXT_KINDS
                       if not any(k != kind and k in kind for k in reading.CONTEXT_KINDS))
_CONTEXT_WORD = re.compile(rb"(?<![\w-])(?:%s)(?![\w-])" % b"|".join(
    re.escape(kind.encode()) for kind in reading.CONTEXT_KINDS))
# apiVersion groups of files that build manifests rather than being ones
BUILD_API_GROUPS = ("kustomize.config.k8s.io/", "config.kubernetes.io/")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from webhook.inputs.reading import add_source_arguments

    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="files or directories (recursive: *.yaml, *.yml, *.json; a folder "
                             "with Chart.yaml or a kustomization is rendered first); - for stdin")
    add_source_arguments(parser)
    parser.add_argument("--namespace", "-n", metavar="NS",
                        help="namespace of documents that name none (default: default)")
    parser.epilog = ("Exit status: 0 when no finding is an error, 1 when one is, 2 for a usage "
                     "error, a path that cannot be read, or a chart or overlay that cannot be "
                     "rendered.")
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
                        help="say which files and documents were skipped and why")
    render = parser.add_argument_group("charts and overlays")
    render.add_argument("--no-render", action="store_true",
                        help="lint chart and overlay files as they are, without helm or kustomize")
    render.add_argument("--helm-values", metavar="FILE", action="append", default=[],
                        help="a values file for every chart, after its values.yaml (repeatable)")
    render.add_argument("--helm-set", metavar="KEY=VALUE", action="append", default=[],
                        help="a value for every chart, as helm --set (repeatable)")
    parser.add_argument("--exclude", metavar="GLOB", action="append", default=[],
                        help="leave out paths matching GLOB under a directory given (repeatable; "
                             "gitignore-like, as the lines of a .gpupolicyignore there)")


@dataclass(slots=True)
class Edit:
    """The patch the webhook would apply to one object of one document."""

    document: int  # 1-based index in the stream
    prefix: FieldPath  # where the object sits in the document (("items", i) in a List)
    ops: tuple[PatchOp, ...]
    mutated: Any  # the object after the patch, as the engine computed it


@dataclass(slots=True)
class Result:
    """What a lint run gathers: findings, fixes, the files checked and notes."""

    findings: list[ReportFinding] = field(default_factory=list)
    edits: dict[str, list[Edit]] = field(default_factory=dict)
    files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    documents: int = 0
    unfixable: list[str] = field(default_factory=list)  # rendered inputs with mutations


class UsageError(Exception):
    pass


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from webhook.inputs.render import RenderError

    options.merge_files(args)
    try:
        if args.fix and STDIN in args.paths:
            raise UsageError("--fix cannot write to standard input; use --fix-dry-run")
        collected = collect(args.paths, stdin_name=args.stdin_filename, exclude=args.exclude,
                            render=not args.no_render)
    except (UsageError, reading.SourceError) as exc:
        stderr.write(f"gpupolicy lint: {exc}\n")
        return 2
    # helm and kustomize start first, and run (their own processes, on the other cores)
    # while the files are read ahead and the engine is imported
    spawned = spawn_tools(collected.targets, args)
    loaded: list[tuple[str, bytes]] = []
    unreadable = False
    for name, raw in collected.inputs:
        try:
            loaded.append((name, raw if raw is not None else reading.read_bytes(name)))
        except reading.SourceError as exc:  # the other files are still linted
            stderr.write(f"gpupolicy lint: {exc}\n")
            unreadable = True
    ahead = read_ahead(loaded)
    sources = heap.import_frozen("webhook.inputs.sources")
    from policies.loading import PolicyLoadError

    # Threads (the tools' readers) only now that the children are forked: a fork copies only
    # the thread that makes it. The files are linted with the context the files give; that
    # result is kept when the tools' output adds nothing to it (no Namespace, policy, node…
    # among it), as is usual; else the files are linted again once it is in.
    renders = start_renders(collected.targets, args, spawned)
    early: tuple[Any, Result, list[str]] | None = None
    try:
        context = sources.build_context(args, documents_among(loaded, args.namespace))[0]
    except (reading.SourceError, PolicyLoadError):  # said below, with the whole input
        pass
    else:
        early = (context, *lint_files(loaded, context, collected.notes, args, ahead))
    finally:
        if ahead is not None:
            ahead.close()
    rendered: list[tuple[Target, bytes, Path | None]] = []
    for target, running in renders:
        try:
            rendered.append((target, *running.result()))
        except RenderError as exc:  # one line per chart or overlay, never its raw templates
            stderr.write(f"gpupolicy lint: {target.path}: {exc}\n")
            unreadable = True
    if early is not None and not any(_may_hold_context(raw) for _, raw, _ in rendered):
        context, result, said = early
    else:
        try:
            context, _ = sources.build_context(args, documents_among(
                [*loaded, *((str(t.path), raw) for t, raw, _ in rendered)], args.namespace))
        except (reading.SourceError, PolicyLoadError) as exc:
            stderr.write(f"gpupolicy lint: {exc}\n")
            return 2
        result, said = lint_files(loaded, context, collected.notes, args)
    for line in sources.template_warnings(context):
        stderr.write(f"gpupolicy lint: {line}\n")
    for line in said:
        stderr.write(line)
    with heap_frozen():
        for target, raw, relative_to in rendered:
            lint_rendered(target, raw, relative_to, context, result, args)
    if args.verbose:
        for note in result.notes:
            stderr.write(f"{note}\n")
    not_fixed = 0
    if args.fix or args.fix_dry_run:
        from webhook.output import fix

        not_fixed = fix.apply_edits(dict(loaded), result.edits, write=args.fix, stdout=stdout,
                                    stderr=stderr)
        for name in result.unfixable:  # the output of a tool: its sources are the thing to fix
            stderr.write(f"gpupolicy lint: {name}: not changed: rendered, so --fix cannot write "
                         "the mutations back (see them with --show-mutations)\n")
    status = emit(args, result, stdout, stderr)
    return 2 if unreadable or not_fixed else status


# Less input than this per core is read in one process: a fork and its answers cost more.
SHARE_BYTES = 256 * 1024
# A larger file is not read ahead: it is read a document at a time, as it is linted, so
# that a stream of 100k documents is linted in constant memory.
AHEAD_FILE_BYTES = 1024 * 1024


@dataclass
class Ahead:
    """Files read by forked children (cores.Takers) while this process imports the engine
    and builds the context: what they send back is each file's documents without their
    node trees (yamlpos.read_ahead), which cost far less to receive than to read."""

    files: list[int]  # the indexes in `loaded` of the files read ahead, in queue order
    queue: cores.Queue
    takers: cores.Takers

    def close(self) -> None:
        self.takers.close()
        self.queue.close()


def read_ahead(loaded: list[tuple[str, bytes]]) -> Ahead | None:
    """The files read ahead, by children forked now (None when it is not worth a fork)."""
    files = [i for i, (_, raw) in enumerate(loaded) if len(raw) <= AHEAD_FILE_BYTES]
    count = cores.helpers(sum(len(loaded[i][1]) for i in files), SHARE_BYTES)
    if not count:
        return None
    queue = cores.Queue(len(files))
    takers = cores.Takers(queue, count, lambda k: yamlpos.read_ahead(loaded[files[k]][1]))
    return Ahead(files, queue, takers)


Linted = tuple[Result, list[str]]  # a file's findings, and what to say of it on stderr


def lint_files(loaded: list[tuple[str, bytes]], context: Any, notes: list[str],
               args: argparse.Namespace, ahead: Ahead | None = None) -> Linted:
    """The files' findings (a new Result, with `notes`), and what to say on stderr. With
    `ahead`, the files its children have read are linted from what they sent, and while
    none has arrived this process reads the next file from the queue itself."""
    by_file: dict[int, Linted] = {}
    with heap_frozen():  # what lives on (imports, context) is not walked again
        if ahead is not None:
            mine = ahead.queue.take()
            while True:
                for k, items in ahead.takers.answers(wait=False):
                    i = ahead.files[k]
                    by_file[i] = lint_file(*loaded[i], context, args, items)
                taken = next(mine, None)
                if taken is None:
                    break
                i = ahead.files[taken]
                by_file[i] = lint_file(*loaded[i], context, args)
            while ahead.takers.running:
                for k, items in ahead.takers.answers(wait=True):
                    i = ahead.files[k]
                    by_file[i] = lint_file(*loaded[i], context, args, items)
        for i, (name, raw) in enumerate(loaded):  # the large files, and a failed child's
            if i not in by_file:
                by_file[i] = lint_file(name, raw, context, args)
    return merged([(Result(notes=list(notes)), []), *(by_file[i] for i in range(len(loaded)))])


def lint_file(name: str, raw: bytes, context: Any, args: argparse.Namespace,
              ahead: list[yamlpos.AheadItem] | None = None) -> Linted:
    """One file's findings, and what to say of it on stderr; `ahead`: its documents as a
    child read them (yamlpos.read_ahead)."""
    result = Result()
    said: list[str] = []
    # one document at a time: a stream of 100k documents is linted in constant memory
    stream = (yamlpos.iter_stream(raw) if ahead is None
              else yamlpos.documents_of(ahead, raw))
    lint_stream(name, stream, context, result, namespace=args.namespace,
                show_mutations=args.show_mutations and not args.fix,
                skip_non_manifest=name != args.stdin_filename,
                keep_edits=args.fix or args.fix_dry_run)
    placed = helm.rendered(raw)
    if placed:  # Helm output: point at the chart's template files
        result.findings = helm.place_all(result.findings, placed)
        # the files checked are the templates (JUnit: no empty suite for the stream)
        found = [p for p in placed.paths if p is not None]
        if found:
            result.files[-1:] = list(dict.fromkeys(found))
        for chart in sorted(placed.missing):
            said.append(f"gpupolicy lint: {name}: helm chart {chart!r} not found "
                        f"under {Path.cwd()}: its findings stay at the rendered lines "
                        "(lint from the folder that holds the chart)\n")
    return result, said


def merged(parts: Iterable[Linted]) -> Linted:
    """The results of the files, in their order, as one."""
    result, said = Result(), []
    for more, more_said in parts:
        result.findings += more.findings
        result.edits.update(more.edits)  # each file's own
        result.files += more.files
        result.notes += more.notes
        result.documents += more.documents
        result.unfixable += more.unfixable
        said += more_said
    return result, said


def _may_hold_context(raw: bytes) -> bool:
    """Whether documents_among could find a cluster-describing object in `raw`."""
    return any(m in raw for m in _CONTEXT_MARKS) and bool(_CONTEXT_WORD.search(raw))


@contextlib.contextmanager
def heap_frozen() -> Iterator[None]:
    """The objects alive now left out of garbage collection while the block runs. Reading
    makes many objects that live until their file is done, so collections run often, and
    each older-generation one walked every object the imports and the context made (a
    tenth of the corpus lint). Young objects are still collected, less often; all is as it
    was after the block, except that what an earlier freeze held (the command's import, in
    the cli) stays frozen with what this one added. Nothing is done with collection off."""
    if not gc.isenabled():
        yield
        return
    frozen_before = gc.get_freeze_count()
    thresholds = gc.get_threshold()
    gc.freeze()
    # and the young ones less often: most of what reading makes is freed by reference count
    gc.set_threshold(max(thresholds[0], 10_000), *thresholds[1:])
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        if not frozen_before:
            gc.unfreeze()


RENDERS_AT_ONCE = 4


def spawn_tools(targets: list[Target], args: argparse.Namespace
                ) -> list[Running | RenderError]:
    """The tools of the first RENDERS_AT_ONCE targets started, as processes only (no thread
    reads them yet); a tool that cannot start is its error."""
    from webhook.inputs.render import RenderError

    spawned: list[Running | RenderError] = []
    for target in targets[:RENDERS_AT_ONCE]:
        try:
            spawned.append(start_tool(target, args))
        except RenderError as exc:
            spawned.append(exc)
    return spawned


def start_renders(targets: list[Target], args: argparse.Namespace,
                  spawned: Sequence[Running | RenderError] = ()
                  ) -> list[tuple[Target, Future[tuple[bytes, Path | None]]]]:
    """Every chart and overlay rendered in the background (RENDERS_AT_ONCE tools at a time),
    in order, the first ones by the tools already `spawned`. Most of their time is the tools'
    own, in other processes."""
    if not targets:
        return []
    from concurrent.futures import ThreadPoolExecutor

    pool = ThreadPoolExecutor(min(RENDERS_AT_ONCE, len(targets)), "render")
    started = [(t, pool.submit(rendered_by, tool))
               for t, tool in zip(targets, spawned, strict=False)]  # the first ones
    started += [(t, pool.submit(render_target, t, args)) for t in targets[len(spawned):]]
    pool.shutdown(wait=False)  # the queued ones still run; the caller waits for each
    return started


def start_tool(target: Target, args: argparse.Namespace) -> Running:
    from webhook.inputs import render

    if target.kind == "helm":
        return render.start_helm(target.path, values=args.helm_values, sets=args.helm_set,
                                 namespace=args.namespace)
    return render.start_kustomize(target.path)


def rendered_by(tool: Running | RenderError) -> tuple[bytes, Path | None]:
    """The chart's or overlay's YAML, and the folder kustomize's origin paths are relative to."""
    if isinstance(tool, Exception):
        raise tool
    return tool.result(), tool.relative_to


def render_target(target: Target, args: argparse.Namespace) -> tuple[bytes, Path | None]:
    return rendered_by(start_tool(target, args))


def lint_rendered(target: Target, raw: bytes, relative_to: Path | None, context: Any,
                  result: Result, args: argparse.Namespace) -> None:
    """A rendered chart or overlay, its findings at the files in the repository that wrote
    them; the report's file list names those files (the chart or overlay when it is clean)."""
    from webhook.output import kustomize

    name = str(target.path)
    start, files = len(result.findings), len(result.files)
    overlay = kustomize.Overlay(target.path, relative_to) if relative_to is not None else None
    lint_stream(name, yamlpos.iter_stream(raw), context, result, namespace=args.namespace,
                show_mutations=args.show_mutations, overlay=overlay, editable=False)
    if target.kind == "helm":
        chart = helm.chart_name(target.path)
        placed = helm.Sources(raw, charts={chart: target.path} if chart else {})
        result.findings[start:] = helm.place_all(result.findings[start:], placed)
    shown = list(dict.fromkeys(f.file for f in result.findings[start:] if f.file))
    known = set(result.files[:files])  # a base two overlays render is one file
    result.files[files:] = [f for f in shown if f not in known] if shown else [name]


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


@dataclass(slots=True)
class Collected:
    """The inputs of a lint run: files or standard input, and what to render."""

    inputs: list[tuple[str, bytes | None]]  # (name, bytes for stdin / None for a file to read)
    targets: list[Target]  # charts and overlays to render
    notes: list[str]  # what was left out, for -v


def collect(paths: Sequence[str], *, stdin_name: str, exclude: Sequence[str] = (),
            render: bool = True) -> Collected:
    """The files, charts and overlays to lint, in a stable order; a missing path or an
    empty argument list is a usage error."""
    if not paths:
        raise UsageError("no input: give files, directories or - for standard input")
    out = Collected([], [], [])
    seen: set[Path] = set()  # charts and overlays rendered once
    files: set[tuple[int, int] | str] = set()  # a file named twice (or in a named folder)
    found_in: dict[str, Target | None] = {}  # folder named -> the chart or overlay it is in
    folders = discover.Lookups()  # discover.enclosing's: every folder looked at

    def add(name: str, st: os.stat_result | None = None) -> None:
        # One stat a file, where resolving its path would lstat every folder above it: the
        # same file is the same device and inode, whatever path or link names it.
        try:
            st = st or os.stat(name)
            key: tuple[int, int] | str = (st.st_dev, st.st_ino)
        except OSError:  # missing, or a symlink loop: reading it will say so
            key = os.path.abspath(name)
        if key not in files:
            files.add(key)
            out.inputs.append((name, None))

    for path in paths:
        if path == STDIN:
            if not any(name == stdin_name for name, _ in out.inputs):
                out.inputs.append((stdin_name, sys.stdin.buffer.read()))
            continue
        if render:
            inside, is_file = _enclosing(path, found_in, folders)
            if inside is not None and (is_file or inside.path.resolve() != Path(path).resolve()):
                if (folder := inside.path.resolve()) not in seen:  # render it whole
                    seen.add(folder)
                    out.targets.append(inside)
                    out.notes.append(f"{path}: part of {inside.path}, rendered whole")
                continue
        st = _stat(path)  # one stat says folder, file or neither (pre-commit names 1000s)
        if st is not None and S_ISDIR(st.st_mode):
            found = discover.walk(Path(path), exclude=exclude, render=render)
            for file in found.files:
                add(str(file))
            for target in found.targets:
                if target.path.resolve() not in seen:
                    seen.add(target.path.resolve())
                    out.targets.append(target)
            out.notes += found.notes
        elif (st is not None and S_ISREG(st.st_mode)) or os.path.islink(path):
            add(path, st)
        else:
            raise UsageError(f"{path}: no such file or directory")
    if not out.inputs and not out.targets:
        raise UsageError(f"no manifests (*.yaml, *.yml, *.json) in {', '.join(paths)}: "
                         "nothing was linted")
    return out


def _enclosing(path: str, known: dict[str, Target | None], folders: discover.Lookups
               ) -> tuple[Target | None, bool]:
    """The chart or overlay a path named lies in (discover.enclosing, which looks at each
    folder once: `folders`), and whether it is a file. Files named in one folder lie in the
    same one: pre-commit names every changed file, so it is asked once a folder (`known`). A
    link or a folder is asked for itself."""
    try:
        st = os.lstat(path)
    except (OSError, ValueError):
        st = None
    if st is not None and S_ISREG(st.st_mode):
        folder = os.path.dirname(path)
        if folder not in known:
            known[folder] = discover.enclosing(Path(path), known=folders)
        return known[folder], True
    p = Path(path)
    return (discover.enclosing(p, known=folders) if p.exists() else None), p.is_file()


def _stat(path: str) -> os.stat_result | None:
    """The path's stat, None when it is missing or unusable (as Path.is_dir and is_file
    answer False: other errors are raised as they are)."""
    try:
        return os.stat(path)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.EBADF, errno.ELOOP):
            return None
        raise
    except ValueError:  # a NUL in the path
        return None


def documents_among(loaded: list[tuple[str, bytes]], namespace: str | None = None
                    ) -> sources.ClusterObjects:
    """The documents of the inputs that describe the cluster (reading.CONTEXT_KINDS); only
    files that can hold one are read ahead of the rest. A claim that names no namespace is
    in `namespace` (--namespace), as the workloads beside it are."""
    from webhook.inputs import sources

    return sources.context_objects((  # streamed: a large dump is never held whole
        obj for _, raw in loaded
        if any(m in raw for m in _CONTEXT_MARKS) and _CONTEXT_WORD.search(raw)
        for doc in yamlpos.iter_stream(raw) if isinstance(doc, yamlpos.Document)
        for _, obj in doc.objects()), namespace)


def lint_stream(
    name: str,
    stream: yamlpos.Stream | Iterable[yamlpos.Document | yamlpos.SyntaxProblem],
    context: Any,
    result: Result,
    *,
    namespace: str | None = None,
    show_mutations: bool = False,
    skip_non_manifest: bool = False,
    overlay: kustomize.Overlay | None = None,
    editable: bool = True,
    keep_edits: bool = True,
) -> None:
    """Lint one file's stream into `result`. With `skip_non_manifest`, a file that reads
    cleanly and holds no Kubernetes object (a values file, a CI workflow) is skipped with a
    note; one the reader refuses is reported whatever it was meant to be (it cannot be told).
    `overlay`: a rendered overlay, whose findings go to the files that define each object.
    `keep_edits`: keep each mutated object for --fix (the bulk of a result otherwise)."""
    from policies.engine import namespace_of, review

    result.files.append(name)
    first, notes = len(result.findings), len(result.notes)
    items: Iterable[yamlpos.Document | yamlpos.SyntaxProblem] = (
        [*stream.problems, *stream.documents] if isinstance(stream, yamlpos.Stream) else stream)
    objects = problems = 0
    for doc in items:
        if isinstance(doc, yamlpos.SyntaxProblem):
            problems += 1
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
            objects += 1
            result.documents += 1
            origin = overlay.take(obj) if overlay is not None else None
            ns = namespace_of(obj, namespace)
            here: list[ReportFinding] = []
            paths: list[FieldPath | None] = []
            try:
                decision = review(obj, context, namespace=ns)
            except Exception as exc:  # a bug in a rule must not hide every other finding
                line, column = doc.position(prefix)
                here.append(ReportFinding(
                    rule=ENGINE_ERROR, severity="error", file=name, line=line, column=column,
                    message=f"engine failed: {type(exc).__name__}: {exc}",
                    object=object_label(obj, ns), document=doc.index,
                ))
                paths.append(None)
                decision = None
            if decision is not None:
                if decision.skipped or decision.notes:
                    where = f"{name}: document {doc.index} (line {doc.line})"
                    if decision.skipped:
                        result.notes.append(f"{where}: skipped, {decision.skipped}")
                    unresolved = {u.note for u in decision.unresolved}  # said as findings
                    result.notes += [f"{where}: {note}" for note in decision.notes
                                     if note not in unresolved]
                # the object's name, for the findings it has (most objects have none)
                label = (object_label(obj, ns) if decision.violations or decision.unresolved
                         or (decision.ops and show_mutations) else "")
                for v in decision.violations:
                    line, column = doc.position((*prefix, *v.path))
                    here.append(ReportFinding(
                        rule=v.rule, severity=v.severity, message=v.message, file=name,
                        line=line, column=column, policy=v.policy, path=v.field or None,
                        object=label, document=doc.index,
                    ))
                    paths.append(v.path)
                for u in decision.unresolved:  # a pod lint could not judge is said
                    line, column = doc.position((*prefix, *u.path))
                    here.append(ReportFinding(
                        rule=UNRESOLVED, severity="warning", message=u.message, file=name,
                        line=line, column=column, path=to_display(u.path), object=label,
                        document=doc.index,
                    ))
                    paths.append(u.path)
                if decision.ops and editable:
                    if keep_edits:  # the objects after the patch: what --fix writes
                        result.edits.setdefault(name, []).append(
                            Edit(doc.index, prefix, decision.ops, decision.mutated))
                elif decision.ops and name not in result.unfixable:
                    result.unfixable.append(name)
                if decision.ops and show_mutations:
                    for op in decision.ops:
                        here.append(mutation_finding(op, doc, prefix, name=name, label=label))
                        paths.append(op.path[:-1])
            if origin is not None and overlay is not None:
                here = [overlay.place(f, origin, path) for f, path in zip(here, paths,
                                                                          strict=True)]
            result.findings += here
        if not found:
            result.notes.append(
                f"{name}: document {doc.index} (line {doc.line}): skipped, not a Kubernetes "
                "object (needs apiVersion and kind)"
            )
    if skip_non_manifest and not objects and not problems:  # values, a workflow, compose...
        del result.findings[first:]
        del result.notes[notes:]
        result.files.pop()
        result.notes.append(f"{name}: skipped, not a Kubernetes manifest (no document has "
                            "apiVersion and kind)")


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
    """apiVersion and kind, and not a build file (a kustomization names them too)."""
    return (isinstance(obj, dict) and isinstance(obj.get("apiVersion"), str)
            and isinstance(obj.get("kind"), str) and bool(obj["kind"])
            and not obj["apiVersion"].startswith(BUILD_API_GROUPS))


def object_label(obj: dict[str, Any], namespace: str) -> str:
    name = reading.metadata_of(obj).get("name")
    return f"{obj.get('kind')} {namespace}/{name or '?'}"


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
