"""`gpupolicy review PATH ...|-`: what the webhook would do with each document, as a JSON array.

Files, directories (recursively, as `lint` reads them) and `-` for standard input; with more
than one file, each entry also names its `file`.

Input goes through the same hardened reader as `lint`: a document Kubernetes would refuse to
read (invalid YAML, a repeated key, an alias bomb) is refused with the reader's rule: the
document's own entry when it could still be read (a repeated key), else an entry of its own;
a ResourceClaim a pod names that the inputs lack is a `dra-claim-unresolved` warning. So
`review` and `lint` never disagree.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from policies import yamlpos
from policies.decision import Unresolved
from policies.engine import namespace_of, review
from policies.loading import PolicyLoadError
from policies.paths import to_display
from webhook.commands import options
from webhook.inputs import reading, sources
from webhook.output.findings import UNRESOLVED

FORMATS = ("json",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="files or directories (recursive: *.yaml, *.yml, *.json); - for stdin")
    parser.add_argument("--namespace", "-n", default=None,
                        help="namespace of documents that name none (default: default)")
    reading.add_source_arguments(parser)
    options.add_format_options(parser, FORMATS, "json")
    options.add_file_option(parser, FORMATS)


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    options.merge_files(args)
    try:
        streams = [(name, yamlpos.read_stream(raw)) for name, raw in _inputs(args.paths)]
        documents = [(name, doc, obj) for name, stream in streams
                     for doc in stream.documents for _, obj in doc.objects()]
        context, _ = sources.build_context(
            args, sources.context_objects((obj for _, _, obj in documents), args.namespace))
    except (reading.SourceError, PolicyLoadError) as exc:
        stderr.write(f"gpupolicy review: {exc}\n")
        return 2
    for line in sources.template_warnings(context):
        stderr.write(f"gpupolicy review: {line}\n")
    several = len(streams) > 1
    # A problem of a document that was still read (a repeated key: the last value wins) is
    # said in that document's entry, which it refuses, as lint refuses the document; a
    # problem of the file, or of a document that could not be read at all, has its own entry.
    read = {(name, doc.index) for name, doc, _ in documents}
    problems: dict[tuple[str, int], list[dict[str, Any]]] = {}
    results = []
    for name, stream in streams:
        for p in stream.problems:
            if (name, p.document) in read:
                problems.setdefault((name, p.document), []).append(_violation(name, p))
            else:
                results.append({**({"file": name} if several else {}), **_refused(name, p)})
    for name, doc, obj in documents:
        namespace = namespace_of(obj, args.namespace)
        decision = review(obj, context, namespace=namespace)
        meta = reading.metadata_of(obj)
        refused = problems.get((name, doc.index), [])
        results.append({
            **({"file": name} if several else {}),
            "kind": obj.get("kind"),
            "name": meta.get("name") or meta.get("generateName"),
            "namespace": namespace,
            "allowed": decision.allowed and not refused,
            "patch": list(decision.patch),
            "mutated": decision.mutated,
            "violations": [*refused, *(v.as_dict() for v in decision.violations),
                           *(_unresolved(u) for u in decision.unresolved)],
            "warnings": list(decision.warnings),
            "skipped": decision.skipped or None,
            "notes": list(decision.notes),
        })
    text = json.dumps(results, indent=2, default=str) + "\n"
    if not options.write_report(text, args.output_file, stdout, stderr, "review"):
        return 2
    return 0 if all(r["allowed"] for r in results) else 1


def _unresolved(u: Unresolved) -> dict[str, Any]:
    """A claim the decision could not judge: a warning, as lint says it."""
    return {"rule": UNRESOLVED, "severity": "warning", "message": u.message,
            "path": to_display(u.path), "policy": None, "mode": None}


def _inputs(paths: list[str]) -> list[tuple[str, bytes]]:
    """(name, bytes) of every file given, directories walked as lint walks them."""
    if not paths:
        raise reading.SourceError("no input: give files, directories or - for standard input")
    out: list[tuple[str, bytes]] = []
    for path in paths:
        if path == "-":
            out.append(("-", sys.stdin.buffer.read()))
            continue
        files = reading.manifest_files(Path(path))
        if not files:
            raise reading.SourceError(f"no manifests (*.yaml, *.yml, *.json) in {path}")
        out += [(str(file), reading.read_bytes(file)) for file in files]
    return out


def _violation(file: str, problem: yamlpos.SyntaxProblem) -> dict[str, Any]:
    where = f"{file}:{problem.line}:{problem.column}"
    return {"rule": problem.rule, "severity": "error", "mode": "Enforce", "policy": None,
            "path": "", "message": f"{where}: {problem.message}"}


def _refused(file: str, problem: yamlpos.SyntaxProblem) -> dict[str, Any]:
    """A document the reader refused, in the shape of a review entry."""
    return {
        "kind": None, "name": None, "namespace": None, "allowed": False, "patch": [],
        "mutated": None, "warnings": [], "violations": [_violation(file, problem)],
    }
