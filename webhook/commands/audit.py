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
a CronJob are skipped (their owner's template is audited). Every ResourceClaim is audited,
one that says it was made for a pod from a template included: its annotation and owner are
the writer's to set, so they cannot tell the resource claim controller's claims from a user's.
Exit 0 when nothing would be refused, 1 when something would, 2 on usage or access errors.

A list page that fails (a 5xx, a 429, no answer) is asked for again a few times with a
back-off; what then still cannot be read (a 403 included) fails the audit: exit 2 naming it,
and no report that would stand for the whole cluster (policyreport, openreports, SARIF,
--apply) for what it did not see. `--timeout` bounds the whole run. `--apply` writes the
reports into the cluster (webhook/cluster/reports.py) instead of printing them, and exits 0
once they are written; `--shard I/N` audits one hash-slice of the namespaces.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TextIO

from policies.context import Context
from policies.engine import namespace_of, review
from policies.loading import PolicyLoadError
from policies.paths import FieldPath
from webhook.cluster.checks import ClusterChecks
from webhook.cluster.errors import ClusterError
from webhook.cluster.files import FileSource, Locator, Source
from webhook.cluster.kinds import REPORT_CHOICES
from webhook.cluster.shards import parse_shard, shard_of
from webhook.commands import options
from webhook.inputs import reading, sources
from webhook.output.audit_report import (
    FORMATS,
    Collector,
    ObjectRef,
    age,
    report_namespaces,
    write,
)
from webhook.output.findings import PENDING
from webhook.output.progress import Progress

if TYPE_CHECKING:
    from webhook.cluster.reports import Applied

# the table is `text`, as every command's human format is named (`table` still accepted)
HUMAN_FORMATS = (*("text" if f == "table" else f for f in FORMATS), "markdown", "html")
POOL_ONLY = ("markdown", "html")
SHARED_OVER = "shared-gpu-over-limit"
# (kind of the owner, kind of the owned) pairs whose owned objects are not audited twice
OWNED = {("ReplicaSet", "Deployment"), ("Job", "CronJob")}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="audit these files/directories instead of a live cluster; "
                             "- for standard input")
    parser.add_argument("--stdin-filename", metavar="NAME", default=options.STDIN_NAME,
                        help="file name to report for standard input")
    reading.add_source_arguments(parser)
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="cluster to audit (default: in-cluster config, else ~/.kube/config)")
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context to use")
    parser.add_argument("-n", "--namespace", metavar="NS", action="append",
                        help="audit only the workloads of this namespace (as kubectl -n); "
                             "repeat for several. --apply then writes, lists and deletes only "
                             "their reports, and no cluster report: namespaced Roles suffice")
    options.add_format_options(parser, HUMAN_FORMATS, "text", aliases={"table": "text"})
    options.add_file_option(parser, HUMAN_FORMATS)
    parser.add_argument("--report-passes", "--include-passes", dest="report_passes",
                        action="store_true",
                        help="policyreport/openreports/--apply: also a `pass` result for each "
                             "object and governing policy it breaks nothing of")
    parser.add_argument("--page-size", type=int, default=500, metavar="N",
                        help="objects per list call (default: 500)")
    parser.add_argument("--progress", choices=("auto", "always", "never"), default="auto",
                        help="progress bar on stderr (auto: when it is a terminal)")
    add_apply_arguments(parser)
    add_pool_arguments(parser)


def add_pool_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("pool view (docs/pools.md)")
    group.add_argument("--pools", action="store_true",
                       help="report per GPU node pool (allocation, waiting, failures, versions, "
                            "utilisation, advice) instead of per workload; -o text, json, "
                            "markdown or html")
    group.add_argument("--prometheus", metavar="URL",
                       help="with --pools: GPU utilisation from this Prometheus (DCGM "
                            "Exporter's series)")
    group.add_argument("--window", type=_duration, default=7 * 86400.0, metavar="DURATION",
                       help="with --prometheus: the utilisation window, e.g. 7d, 36h "
                            "(default: 7d)")
    group.add_argument("--prometheus-token-file", metavar="FILE",
                       help="with --prometheus: a bearer token read from FILE")
    group.add_argument("--prometheus-ca", metavar="FILE",
                       help="with --prometheus: CA bundle for an https URL")
    group.add_argument("--prometheus-timeout", type=_seconds, default=30.0, metavar="SECONDS",
                       help="with --prometheus: seconds per query (default: 30)")
    group.add_argument("--thresholds", metavar="FILE",
                       help="a GPUPoolThresholds file: minimums of the node facts and the "
                            "thresholds of the advice (docs/design.md)")
    group.add_argument("--now", type=_instant, metavar="TIME",
                       help="judge waiting times as of this RFC 3339 time (default: now), "
                            "for a dump taken earlier")


def add_apply_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--apply", action="store_true",
                        help="live cluster: write the reports into it (server-side apply), "
                             "clear the ones no longer true, print one JSON summary line")
    parser.add_argument("--report-api", choices=REPORT_CHOICES, default="auto",
                        help="with --apply: openreports.io Reports, wgpolicyk8s.io "
                             "PolicyReports, or both (auto: the one installed, openreports "
                             "when both are)")
    parser.add_argument("--shard", type=_shard, default=(0, 1), metavar="I/N",
                        help="audit (and report on) only the namespaces whose name hashes to "
                             "shard I of N; the cluster report is shard 0's")
    parser.add_argument("--timeout", type=_seconds, default=300.0, metavar="SECONDS",
                        help="give up (exit 2, nothing written) when the cluster has not been "
                             "read and the reports written within this time (default: 300)")


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    options.merge_files(args)

    def warn(msg: str) -> None:
        stderr.write(f"gpupolicy audit: {msg}\n")

    if args.apply and args.paths:
        warn("--apply writes the reports into the live cluster: it audits no PATH")
        return 2
    problem = _pool_usage(args)
    if problem:
        warn(problem)
        return 2
    try:
        thresholds = _thresholds(args.thresholds)
    except (OSError, ValueError) as exc:
        warn(str(exc))
        return 2
    if args.format == "sarif" and not args.paths:
        warn("-o sarif needs files: code scanning needs a file and line for every result, "
             "and objects read from a live cluster have none. Audit the manifests instead "
             "(gpupolicy audit PATH -o sarif), or use -o json, policyreport or openreports")
        return 2
    started = time.monotonic()
    try:
        source: Source = (
            FileSource(args.paths, stdin=sys.stdin.buffer.read() if "-" in args.paths else None,
                       stdin_name=args.stdin_filename) if args.paths else connect(args))
        only = frozenset(args.namespace) if args.namespace else None
        # one namespace: listed in it alone; several: listed everywhere, then filtered
        source.namespace = args.namespace[0] if only and len(only) == 1 else None
        found = source.cluster_objects(warn)
        context = build_context(args, found, warn)
        source.kinds = context.workload_kinds  # --workload-kinds kinds are listed too
        progress = Progress(stderr, enabled=_progress_on(args.progress, stderr))
        # -n NS: those namespaces' reports only, and no cluster report (its facts would be
        # those of some namespaces' pods)
        covered = set(only) if only else set(found.namespaces)
        pools = None
        if args.pools:
            from policies.pools.view import PoolView
            pools = PoolView(found.nodes, context, args.now or time.time(), thresholds)
        collector = audit(source, context, progress, passes=args.report_passes,
                          shard=args.shard, covered=covered, only=only, nodes=found.nodes,
                          thresholds=thresholds, pools=pools, now=args.now)
        if only:
            collector.cluster_report = False
    except (ClusterError, reading.SourceError, PolicyLoadError) as exc:
        warn(str(exc))
        if args.apply:
            failed_line(args, stdout, [str(exc)], started)
        return 2
    if source.failures:
        if args.apply:
            failed_line(args, stdout, [f"could not read {what}: {why}"
                                       for what, why in sorted(source.failures.items())],
                        started)
        return incomplete(args, source, collector, stdout, warn)
    if args.apply:
        return apply(args, source, collector, stdout, warn)
    if pools is not None:
        return pool_report(args, pools, collector, stdout, warn)
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


def pool_report(args: argparse.Namespace, pools: Any, collector: Collector, stdout: TextIO,
                warn: Callable[[str], None]) -> int:
    """The pool view, with utilisation when --prometheus is given. Prometheus failing leaves
    the view as the cluster says it, utilisation marked unavailable with the reason; exit 2
    only when Prometheus was asked and never answered."""
    from webhook.output.pools_html import write_html
    from webhook.output.pools_report import write as write_pools

    fetched = None
    if args.prometheus:
        from webhook.cluster.prometheus import fetch
        token = ""
        if args.prometheus_token_file:
            try:
                with open(args.prometheus_token_file, encoding="utf-8") as handle:
                    token = handle.read(65536).strip()
            except OSError as exc:
                warn(f"{args.prometheus_token_file}: cannot read the token: "
                     f"{exc.strerror or exc}")
                return 2
        fetched = fetch(args.prometheus, args.window, now=args.now, token=token,
                        ca_file=args.prometheus_ca, timeout=args.prometheus_timeout)
        if fetched.utilization.unavailable:
            warn(f"utilisation unavailable: {fetched.utilization.unavailable}")
    doc = pools.report(fetched.utilization if fetched else None)
    doc["nodeFacts"] = [h for h in collector.cluster.get("hazards", ())]
    try:
        with options.report_stream(args.output_file, stdout) as out:
            if args.format == "html":
                write_html(doc, out)
            else:
                write_pools(args.format, doc, out)
    except OSError as exc:
        warn(options.cannot_write(args.output_file, exc))
        return 2
    if fetched is not None and not fetched.answered:
        return 2
    return 1 if any(h["severity"] == "error" for h in doc["nodeFacts"]) else 0


def _pool_usage(args: argparse.Namespace) -> str:
    """Why the pool options do not go together, "" when they do."""
    if args.format in POOL_ONLY and not args.pools:
        return f"-o {args.format} is a format of the pool view: add --pools"
    if not args.pools:
        given = [f for f in ("prometheus", "thresholds", "now") if getattr(args, f)]
        if "prometheus" in given:
            return "--prometheus is read by the pool view: add --pools"
        return ""
    if args.format not in ("text", "json", *POOL_ONLY):
        return "--pools reports in text, json, markdown or html"
    if args.apply:
        return "--pools prints the pool view: it writes no reports (no --apply)"
    return ""


def _thresholds(path: str | None) -> Any:
    from policies.pools.thresholds import DEFAULT, ThresholdsError, parse_thresholds
    if not path:
        return DEFAULT
    try:
        with open(path, "rb") as handle:
            return parse_thresholds(handle.read(1 << 20), path)
    except OSError as exc:
        raise OSError(f"{path}: cannot read the thresholds: {exc.strerror or exc}") from None
    except ThresholdsError as exc:
        raise ValueError(str(exc)) from None


def incomplete(args: argparse.Namespace, source: Source, collector: Collector,
               stdout: TextIO, warn: Callable[[str], None]) -> int:
    """Something could not be read: exit 2 naming it. The table and JSON still show what
    was seen (and name what was not); no report that stands for the whole cluster
    (policyreport, openreports, SARIF: each replaces the last) is printed or written."""
    for what, why in sorted(source.failures.items()):
        warn(f"could not read {what}: {why}")
    collector.incomplete = True
    if args.apply or args.format not in ("text", "json"):
        warn("the audit is incomplete: no report " + ("written" if args.apply else "printed"))
        return 2
    try:
        with options.report_stream(args.output_file, stdout) as out:
            write("table" if args.format == "text" else args.format, collector, out)
    except OSError as exc:
        warn(options.cannot_write(args.output_file, exc))
    warn("the audit is incomplete: what could not be read is not in the report")
    return 2


def connect(args: argparse.Namespace) -> Source:
    """The live cluster. Only here is the Kubernetes client imported: an audit of files
    never loads it (nor does `audit --help`)."""
    from webhook.cluster.listing import LiveSource

    return LiveSource.connect(args.kubeconfig, args.context, args.page_size, args.timeout)


def apply(args: argparse.Namespace, source: Source, collector: Collector, stdout: TextIO,
          warn: Callable[[str], None]) -> int:
    """Write the reports (--apply) and print one JSON line: what was audited and written.
    Exit 0 once they are written, findings or not (the findings are in the reports)."""
    from webhook.cluster import reports
    from webhook.cluster.listing import LiveSource

    assert isinstance(source, LiveSource)  # --apply audits no PATH
    writer = reports.ReportWriter(source.api, source.retry, shard=args.shard,
                                  page_size=args.page_size,
                                  namespaces=frozenset(args.namespace or ()) or None)
    try:
        apis = reports.report_apis(source.api, args.report_api, source.retry)
        done = writer.apply(collector, apis)
    except ClusterError as exc:
        warn(str(exc))
        failed_line(args, stdout, [str(exc)], collector.started, writer.done)
        return 2
    summary = collector.summary()
    line = {"audit": "applied", "shard": "/".join(map(str, args.shard)),
            "reportAPIs": apis, "objects": sum(summary["audited"].values()),
            "namespaces": len(report_namespaces(collector)),
            "refusedObjects": summary["refusedObjects"], "findings": summary["findings"],
            "reportsWritten": done.written, "reportsDeleted": done.deleted,
            "seconds": round(time.monotonic() - collector.started, 3)}
    stdout.write(json.dumps(line, separators=(",", ":")) + "\n")
    return 0


def failed_line(args: argparse.Namespace, stdout: TextIO, errors: list[str],
                started: float, done: Applied | None = None) -> None:
    """--apply's one JSON line for a failed run: what failed, and what had been written and
    deleted before (nothing, unless a write itself failed)."""
    line = {"audit": "failed", "shard": "/".join(map(str, args.shard)), "errors": errors,
            "reportsWritten": done.written if done else 0,
            "reportsDeleted": done.deleted if done else 0,
            "seconds": round(time.monotonic() - started, 3)}
    stdout.write(json.dumps(line, separators=(",", ":")) + "\n")


def build_context(args: argparse.Namespace, found: sources.ClusterObjects,
                  warn: Callable[[str], None]) -> Context:
    context, warnings = sources.build_context(args, found)
    for line in warnings:
        warn(line)
    return context


def audit(source: Source, context: Context, progress: Progress, *,
          passes: bool = False, shard: tuple[int, int] = (0, 1),
          covered: set[str] | None = None, only: frozenset[str] | None = None,
          nodes: Iterable[Mapping[str, Any]] = (), thresholds: Any = None, pools: Any = None,
          now: float | None = None) -> Collector:
    """Review every workload of the source (of shard `shard[0]` of `shard[1]`: the objects
    of the namespaces that hash there; of the namespaces `only`, when given). `covered`: the
    namespaces known to exist, whose reports are written even with nothing in them."""
    index, count = shard
    collector = Collector({p.name: p for p in context.policies}, passes=passes)
    collector.cluster_report = index == 0
    collector.covered = {ns for ns in covered or () if shard_of(ns, count) == index}
    checks = ClusterChecks(context, nodes, thresholds, pools, now)
    places: Places = {}
    for kind, batch in source.workloads(progress, collector.unavailable):
        for obj, locate in batch:
            if only is not None and namespace_of(obj, None) not in only:
                continue
            if count > 1 and shard_of(namespace_of(obj, None), count) != index:
                if kind == "Pod":  # what it holds on its node counts in every shard
                    checks.hold(obj)
                    name = str(reading.metadata_of(obj).get("name") or "?")
                    if index == 0:  # the cluster report counts shared GPUs
                        checks.view.add_pod(obj, namespace_of(obj, None), name)
                    if pools is not None:  # a pool is every pod on its nodes, any shard's
                        pools.add_pod(obj, namespace_of(obj, None), name, None)
                continue
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
    meta = reading.metadata_of(obj)
    if _owned(kind, meta):
        collector.skipped[kind] += 1
        return
    namespace = namespace_of(obj, None)
    ref = ObjectRef(kind, str(obj.get("apiVersion", "")), namespace,
                    str(meta.get("name") or "?"), str(meta.get("uid") or ""), locate)
    status = obj.get("status")
    phase = status.get("phase") if kind == "Pod" and isinstance(status, dict) else None
    if kind == "Pod":
        collector.phases[phase if isinstance(phase, str) and len(phase) < 32 else ""] += 1
    try:
        # a Pod the API server holds (it has a phase) was admitted long ago: the mutating
        # webhook can no longer change it, so it is judged as it is (as an UPDATE), never
        # counted under "would mutate"
        decision = review(obj, context, namespace=namespace,
                          operation="UPDATE" if isinstance(phase, str) and phase else "CREATE")
    except Exception as exc:  # one bad object must not end the audit of the cluster
        collector.failed(ref, exc)
        return
    collector.add(ref, decision)
    if kind == "Pod":
        checks.pod(obj, namespace, ref.name, decision.gpu, judged=bool(decision.policies))
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
        waited = f" for {age(p.waited)}" if p.waited is not None else ""
        collector.write(ref, rule=PENDING, severity="warning", action="warn",
                        message=f"GPU pod Pending{waited}: {scheduler}{reasons}")
    collector.cluster = {
        "sharedGPUs": checks.shared_gpus(),
        "sharedGPUsOverLimit": [
            {"node": o.node, "device": o.device, "pods": o.pods, "maxPodsPerGPU": o.limit,
             "policy": o.policy, "sample": list(o.sample)} for o in over],
        "hazards": [{"rule": o.rule, "severity": o.severity, "message": o.message,
                     **({"node": o.node} if o.node else {})} for o in hazards],
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
    refs = meta.get("ownerReferences")
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, dict) and ref.get("controller") and (kind, ref.get("kind")) in OWNED:
            return True
    return False


def _shard(text: str) -> tuple[int, int]:
    try:
        return parse_shard(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"--shard {text!r}: ")) from None


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0 < value <= 86400:
        raise argparse.ArgumentTypeError(f"{text!r} is no number of seconds in (0, 86400]")
    return value


def _duration(text: str) -> float:
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
    number, unit = text[:-1], text[-1:]
    if unit not in units:
        number, unit = text, "s"
    try:
        value = float(number) * units[unit]
    except ValueError:
        value = -1.0
    if not 3600 <= value <= 90 * 86400:
        raise argparse.ArgumentTypeError(f"{text!r} is no window between 1h and 90d "
                                         "(e.g. 7d, 36h)")
    return value


def _instant(text: str) -> float:
    from policies.pools.view import timestamp
    found = timestamp(text)
    if found is None:
        raise argparse.ArgumentTypeError(f"{text!r} is no RFC 3339 time "
                                         "(e.g. 2026-05-01T12:00:00Z)")
    return found


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
