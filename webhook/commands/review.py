"""`gpupolicy review FILE|-`: what the webhook would do with each document, as a JSON array.

Input goes through the same hardened reader as `lint`: a document Kubernetes would refuse to
read (invalid YAML, a repeated key, an alias bomb) is an entry with `allowed: false` and the
reader's rule, so `review` and `lint` never disagree on it.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

from policies import yamlpos
from policies.engine import namespace_of, review
from policies.loading import PolicyLoadError
from webhook.inputs import sources


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="manifest file, or - for stdin")
    parser.add_argument("--namespace", "-n", default=None,
                        help="namespace of documents that name none (default: default)")
    sources.add_source_arguments(parser)


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    try:
        raw = sys.stdin.buffer.read() if args.file == "-" else sources.read_bytes(args.file)
        stream = yamlpos.read_stream(raw)
        documents = list(sources.stream_objects(stream))
        context, _ = sources.build_context(
            args, sources.context_objects(documents, args.namespace))
    except (sources.SourceError, PolicyLoadError) as exc:
        stderr.write(f"gpupolicy review: {exc}\n")
        return 2
    results = [_refused(args.file, p) for p in stream.problems]
    for doc in documents:
        namespace = namespace_of(doc, args.namespace)
        decision = review(doc, context, namespace=namespace)
        meta = sources.metadata_of(doc)
        results.append({
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
    json.dump(results, stdout, indent=2, default=str)
    stdout.write("\n")
    return 0 if all(r["allowed"] for r in results) else 1


def _refused(file: str, problem: yamlpos.SyntaxProblem) -> dict[str, Any]:
    """A document the reader refused, in the shape of a review entry."""
    where = f"{file}:{problem.line}:{problem.column}"
    return {
        "kind": None, "name": None, "namespace": None, "allowed": False, "patch": [],
        "mutated": None, "warnings": [],
        "violations": [{"rule": problem.rule, "severity": "error", "mode": "Enforce",
                        "policy": None, "path": "", "message": f"{where}: {problem.message}"}],
    }
