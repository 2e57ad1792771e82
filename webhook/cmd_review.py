"""`gpupolicy review FILE|-`: what the webhook would do with each document, as a JSON array."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any, TextIO

import yaml

from policies.engine import namespace_of, review
from policies.loading import PolicyLoadError
from webhook.sources import (
    SourceError,
    add_source_arguments,
    context_from_args,
    flatten,
    namespace_labels,
)

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("file", metavar="FILE", help="manifest file, or - for stdin")
    parser.add_argument("--namespace", "-n", default=None,
                        help="namespace of documents that name none (default: default)")
    add_source_arguments(parser)


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    try:
        text = sys.stdin.read() if args.file == "-" else _read(args.file)
        documents = [o for doc in yaml.load_all(text, Loader=_Loader) for o in flatten(doc)]
        context = context_from_args(args, extra_namespaces=namespace_labels(documents))
    except (OSError, UnicodeDecodeError) as exc:
        stderr.write(f"gpupolicy review: {args.file}: {exc}\n")
        return 2
    except yaml.YAMLError as exc:
        stderr.write(f"gpupolicy review: {args.file}: invalid YAML: {exc}\n")
        return 2
    except (SourceError, PolicyLoadError) as exc:
        stderr.write(f"gpupolicy review: {exc}\n")
        return 2
    results = []
    for doc in documents:
        namespace = namespace_of(doc, args.namespace)
        decision = review(doc, context, namespace=namespace)
        meta = doc.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        results.append({
            "kind": doc.get("kind"),
            "name": meta.get("name") or meta.get("generateName"),
            "namespace": namespace,
            "allowed": decision.allowed,
            "patch": list(decision.patch),
            "mutated": decision.mutated,
            "violations": [v.as_dict() for v in decision.violations],
            "warnings": list(decision.warnings),
        })
    json.dump(results, stdout, indent=2, default=str)
    stdout.write("\n")
    return 0 if all(r["allowed"] for r in results) else 1


def _read(path: str) -> str:
    with open(path, encoding="utf-8") as handle:
        return handle.read()
