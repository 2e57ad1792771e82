"""`gpupolicy review PATH ...|-`: what the webhook would do with each document, as a JSON array.

Files, directories (recursively, as `lint` reads them) and `-` for standard input; with more
than one file, each entry also names its `file`.

Input goes through the same hardened reader as `lint`: a document Kubernetes would refuse to
read (invalid YAML, a repeated key, an alias bomb) is an entry with `allowed: false` and the
reader's rule, so `review` and `lint` never disagree on it.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, TextIO

from policies import yamlpos
from policies.engine import namespace_of, review
from policies.loading import PolicyLoadError
from webhook.commands import options
from webhook.inputs import sources

FORMATS = ("json",)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="files or directories (recursive: *.yaml, *.yml, *.json); - for stdin")
    parser.add_argument("--namespace", "-n", default=None,
                        help="namespace of documents that name none (default: default)")
    sources.add_source_arguments(parser)
    options.add_format_options(parser, FORMATS, "json")
    options.add_file_option(parser, FORMATS)


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    options.merge_files(args)
    try:
        streams = [(name, yamlpos.read_stream(raw)) for name, raw in _inputs(args.paths)]
        documents = [(name, doc) for name, stream in streams
                     for doc in sources.stream_objects(stream)]
        context, _ = sources.build_context(
            args, sources.context_objects((doc for _, doc in documents), args.namespace))
    except (sources.SourceError, PolicyLoadError) as exc:
        stderr.write(f"gpupolicy review: {exc}\n")
        return 2
    for line in sources.template_warnings(context):
        stderr.write(f"gpupolicy review: {line}\n")
    several = len(streams) > 1
    results = [{**({"file": name} if several else {}), **_refused(name, p)}
               for name, stream in streams for p in stream.problems]
    for name, doc in documents:
        namespace = namespace_of(doc, args.namespace)
        decision = review(doc, context, namespace=namespace)
        meta = sources.metadata_of(doc)
        results.append({
            **({"file": name} if several else {}),
            "kind": doc.get("kind"),
            "name": meta.get("name") or meta.get("generateName"),
            "namespace": namespace,
            "allowed": decision.allowed,
            "patch": list(decision.patch),
            "mutated": decision.mutated,
            "violations": [v.as_dict() for v in decision.violations],
            "warnings": list(decision.warnings),
            "skipped": decision.skipped or None,
            "notes": list(decision.notes),
        })
    text = json.dumps(results, indent=2, default=str) + "\n"
    if not options.write_report(text, args.output_file, stdout, stderr, "review"):
        return 2
    return 0 if all(r["allowed"] for r in results) else 1


def _inputs(paths: list[str]) -> list[tuple[str, bytes]]:
    """(name, bytes) of every file given, directories walked as lint walks them."""
    if not paths:
        raise sources.SourceError("no input: give files, directories or - for standard input")
    out: list[tuple[str, bytes]] = []
    for path in paths:
        if path == "-":
            out.append(("-", sys.stdin.buffer.read()))
            continue
        files = sources.manifest_files(Path(path))
        if not files:
            raise sources.SourceError(f"no manifests (*.yaml, *.yml, *.json) in {path}")
        out += [(str(file), sources.read_bytes(file)) for file in files]
    return out


def _refused(file: str, problem: yamlpos.SyntaxProblem) -> dict[str, Any]:
    """A document the reader refused, in the shape of a review entry."""
    where = f"{file}:{problem.line}:{problem.column}"
    return {
        "kind": None, "name": None, "namespace": None, "allowed": False, "patch": [],
        "mutated": None, "warnings": [],
        "violations": [{"rule": problem.rule, "severity": "error", "mode": "Enforce",
                        "policy": None, "path": "", "message": f"{where}: {problem.message}"}],
    }
