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
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from policies.context import Context
from policies.engine import namespace_of, review
from policies.loading import PolicyLoadError
from webhook.cluster.checks import ClusterChecks
from webhook.cluster.client import ClusterError
from webhook.cluster.listing import FileSource, LiveSource, Locator, Source
from webhook.commands import options
from webhook.inputs import sources
from webhook.output.audit_report import FORMATS, Collector, ObjectRef, write
from webhook.output.findings import PENDING
from webhook.output.progress import Progress

SHARED_OVER = "shared-gpu-over-limit"

# (kind of the owner, kind of the owned) pairs whose owned objects are not audited twice
OWNED = {("ReplicaSet", "Deployment"), ("Job", "CronJob")}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="audit these files/directories instead of a live cluster")
    sources.add_source_arguments(parser)
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="cluster to audit (default: in-cluster config, else ~/.kube/config)")
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context to use")
    options.add_format_options(parser, FORMATS, "table")
    options.add_file_option(parser, FORMATS)
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

    try:
        source: Source = (FileSource(args.paths) if args.paths
                          else LiveSource.connect(args.kubeconfig, args.context, args.page_size))
        context = build_context(args, source, warn)
        source.kinds = context.workload_kinds  # --workload-kinds kinds are listed too
        progress = Progress(stderr, enabled=_progress_on(args.progress, stderr))
        collector = audit(source, context, progress, passes=args.report_passes)
    except (ClusterError, sources.SourceError, PolicyLoadError) as exc:
        warn(str(exc))
        return 2
    try:
        if args.output:
            with open(args.output, "w", encoding="utf-8") as out:
                write(args.format, collector, out)
        else:
            write(args.format, collector, stdout)
    except OSError as exc:
        warn(f"cannot write the report: {exc}")
        return 2
    return 1 if collector.refused_objects else 0


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
    for kind, batch in source.workloads(progress, collector.unavailable):
        for obj, locate in batch:
            audit_one(obj, kind, context, collector, checks, locate)
        progress.advance(kind, len(batch))
    progress.done()
    for file, problem in source.problems:
        collector.unreadable_document(file, problem)
    finish(collector, checks)
    return collector


def audit_one(obj: dict[str, Any], kind: str, context: Context, collector: Collector,
              checks: ClusterChecks, locate: Locator = None) -> None:
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


def finish(collector: Collector, checks: ClusterChecks) -> None:
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
        ref = ObjectRef("Pod", "v1", p.namespace, p.name)
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
