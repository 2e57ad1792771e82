"""`gpupolicy audit [PATH ...]`: what the policies would do to every workload already there.

Against a live cluster (kubeconfig or in-cluster), every workload kind of DESIGN.md §2.1, every
other kind of the workload-kinds table (`--workload-kinds` included; its version found through
API discovery) and every Pod is listed page by page (`limit`/`continue`) and streamed through
the engine, so memory does not grow with the cluster. Offline, files (a `kubectl get ... -o
yaml` dump, Helm output) stand in for the cluster: Namespace, Node and GPUPolicy documents
among them play the part of the cluster's own, and the report is the same as for a cluster
holding those objects.

Pods are reported as pods (what runs); ResourceClaims and ResourceClaimTemplates (DRA) as
claims; every other kind as a template. A ReplicaSet owned by a Deployment and a Job owned by
a CronJob are skipped (their owner's template is audited), and so is a ResourceClaim generated
for one pod from a template (the template is audited, and the pod's claims resolve to it).
Exit 0 when nothing would be refused, 1 when something would, 2 on usage or access errors.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from policies.context import Context
from policies.engine import namespace_of, review
from policies.loading import PolicyLoadError
from policies.paths import FieldPath
from webhook.cluster.checks import ClusterChecks
from webhook.cluster.client import ClusterError
from webhook.cluster.listing import FileSource, LiveSource, Locator, Source
from webhook.commands import options
from webhook.inputs import sources
from webhook.output.audit_report import FORMATS, Collector, ObjectRef, write
from webhook.output.findings import PENDING
from webhook.output.progress import Progress

# the table is `text`, as every command's human format is named (`table` still accepted)
HUMAN_FORMATS = tuple("text" if f == "table" else f for f in FORMATS)
SHARED_OVER = "shared-gpu-over-limit"
# (kind of the owner, kind of the owned) pairs whose owned objects are not audited twice
OWNED = {("ReplicaSet", "Deployment"), ("Job", "CronJob")}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="audit these files/directories instead of a live cluster; "
                             "- for standard input")
    parser.add_argument("--stdin-filename", metavar="NAME", default=options.STDIN_NAME,
                        help="file name to report for standard input")
    sources.add_source_arguments(parser)
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="cluster to audit (default: in-cluster config, else ~/.kube/config)")
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context to use")
    parser.add_argument("-n", "--namespace", metavar="NS",
                        help="audit only the workloads of this namespace (as kubectl -n)")
    options.add_format_options(parser, HUMAN_FORMATS, "text", aliases={"table": "text"})
    options.add_file_option(parser, HUMAN_FORMATS)
    parser.add_argument("--report-passes", action="store_true",
                        help="policyreport/openreports: also a `pass` result for each object "
                             "and governing policy it breaks nothing of")
    parser.add_argument("--page-size", type=int, default=500, metavar="N",
                        help="objects per list call (default: 500)")
    parser.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                        help="progress bar on stderr (auto: when it is a terminal)")


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    options.merge_files(args)

    def warn(msg: str) -> None:
        stderr.write(f"gpupolicy audit: {msg}\n")

    if args.format == "sarif" and not args.paths:
        warn("-o sarif needs files: code scanning needs a file and line for every result, "
             "and objects read from a live cluster have none. Audit the manifests instead "
             "(gpupolicy audit PATH -o sarif), or use -o json, policyreport or openreports")
        return 2
    try:
        source: Source = (
            FileSource(args.paths, stdin=sys.stdin.buffer.read() if "-" in args.paths else None,
                       stdin_name=args.stdin_filename) if args.paths
            else LiveSource.connect(args.kubeconfig, args.context, args.page_size))
        context = build_context(args, source, warn)
        source.kinds = context.workload_kinds  # --workload-kinds kinds are listed too
        source.namespace = args.namespace
        progress = Progress(stderr, enabled=_progress_on(args.progress, stderr))
        collector = audit(source, context, progress, passes=args.report_passes)
    except (ClusterError, sources.SourceError, PolicyLoadError) as exc:
        warn(str(exc))
        return 2
    try:
        with options.report_stream(args.output_file, stdout) as out:
            write("table" if args.format == "text" else args.format, collector, out)
    except OSError as exc:
        warn(options.cannot_write(args.output_file, exc))
        return 2
    if args.format == "sarif":
        _say_what_sarif_left_out(collector, warn)
    # a fact is an error under every mode (the API server refuses it): exit 1 as lint does
    return 1 if collector.refused_objects or collector.severities["error"] else 0


def build_context(args: argparse.Namespace, source: Source,
                  warn: Callable[[str], None]) -> Context:
    context, warnings = sources.build_context(args, source.cluster_objects(warn))
    for line in warnings:
        warn(line)
    return context


def audit(source: Source, context: Context, progress: Progress, *,
          passes: bool = False) -> Collector:
    collector = Collector({p.name: p for p in context.policies}, passes=passes)
    checks = ClusterChecks(context)
    places: Places = {}
    for kind, batch in source.workloads(progress, collector.unavailable):
        for obj, locate in batch:
            audit_one(obj, kind, context, collector, checks, locate, places)
        progress.advance(kind, len(batch))
    progress.done()
    for file, problem in source.problems:
        collector.unreadable_document(file, problem)
    finish(collector, checks, places)
    return collector


# (namespace, name) of a GPU pod read from a file -> where its document is (file, line,
# column): a Pending pod's finding is placed there, as code scanning needs a place for each
Places = dict[tuple[str, str], tuple[str, int, int]]


def audit_one(obj: dict[str, Any], kind: str, context: Context, collector: Collector,
              checks: ClusterChecks, locate: Locator = None,
              places: Places | None = None) -> None:
    meta = sources.metadata_of(obj)
    if _owned(kind, meta):
        collector.skipped[kind] += 1
        return
    namespace = namespace_of(obj, None)
    ref = ObjectRef(kind, str(obj.get("apiVersion", "")), namespace,
                    str(meta.get("name") or "?"), str(meta.get("uid") or ""), locate)
    try:
        decision = review(obj, context, namespace=namespace)
    except Exception as exc:  # one bad object must not end the audit of the cluster
        collector.failed(ref, exc)
        return
    collector.add(ref, decision)
    if kind == "Pod":
        checks.pod(obj, namespace, ref.name, decision.gpu)
        if decision.gpu and locate is not None and places is not None:
            places[(namespace, ref.name)] = locate(())


def finish(collector: Collector, checks: ClusterChecks, places: Places | None = None) -> None:
    found = checks.findings()
    for o in found:
        collector.write(None, rule=o.rule, severity=o.severity, policy=o.policy,
                        action="fail" if o.severity == "error" else "warn", node=o.node,
                        device=o.device, message=o.message)
    over = [o for o in found if o.rule == SHARED_OVER]
    hazards = [o for o in found if o.rule != SHARED_OVER]
    for p in checks.pending:
        reasons = "; ".join(p.pools) or "no GPU node pool in the inventory"
        scheduler = f"scheduler: {p.scheduler}; " if p.scheduler else ""
        place = (places or {}).get((p.namespace, p.name))
        ref = ObjectRef("Pod", "v1", p.namespace, p.name, locate=_at(place))
        collector.write(ref, rule=PENDING, severity="warning", action="warn",
                        message=f"GPU pod Pending: {scheduler}{reasons}")
    collector.cluster = {
        "sharedGPUs": checks.shared_gpus(),
        "sharedGPUsOverLimit": [
            {"node": o.node, "device": o.device, "pods": o.pods, "maxPodsPerGPU": o.limit,
             "policy": o.policy, "sample": list(o.sample)} for o in over],
        "hazards": [{"rule": o.rule, "severity": o.severity, "message": o.message}
                    for o in hazards],
        "pendingGPUPods": {"total": checks.pending_total,
                           "pods": [p.as_dict() for p in checks.pending]},
    }


def _at(place: tuple[str, int, int] | None) -> Locator:
    """A locator that puts every finding of the object at its document."""
    if place is None:
        return None

    def locate(_path: FieldPath) -> tuple[str, int, int]:
        return place

    return locate


def _say_what_sarif_left_out(collector: Collector, warn: Callable[[str], None]) -> None:
    """Findings without a file (a shared GPU over its limit: a node's, not a document's) are
    not in the SARIF log, since GitHub refuses a whole upload for one result without a place;
    and a result against standard input's stand-in name points at no file in the repository."""
    left: Counter[str] = Counter()
    on_stdin = False
    for record in collector.records():
        left[record["rule"]] += not record.get("file")
        on_stdin = on_stdin or record.get("file") == options.STDIN_NAME
    left = +left  # the rules with a count
    if on_stdin:
        warn(f"warning: {options.STDIN_WITHOUT_NAME}")
    if left:
        rules = ", ".join(f"{n} {rule}" for rule, n in sorted(left.items()))
        warn(f"left out of the SARIF log: {sum(left.values())} finding"
             f"{'s' * (sum(left.values()) != 1)} with no file and line ({rules}); "
             "-o json lists them")


def _owned(kind: str, meta: Mapping[str, Any]) -> bool:
    if kind == "ResourceClaim" and sources.generated_for_pod(meta):
        return True
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, dict) and ref.get("controller") and (kind, ref.get("kind")) in OWNED:
            return True
    return False


def _progress_on(mode: str, stream: TextIO) -> bool:
    if mode != "auto":
        return mode == "always"
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


if __name__ == "__main__":  # pragma: no cover
    from webhook.cli import run as cli_run

    sys.exit(cli_run(["audit", *sys.argv[1:]], sys.stdout, sys.stderr))
