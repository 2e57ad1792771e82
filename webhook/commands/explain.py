"""`gpupolicy explain POD.yaml|NS/NAME|KIND/NS/NAME`: why a GPU pod (or claim) fits no node.

For each GPU pod spec of the workload, after the policies' injections, every node pool and
the exact reasons it cannot take the pod: taint not tolerated, nodeSelector or affinity not
matching, not enough of a resource, MIG profile absent, shared memory larger than one device,
model not allowed, a ResourceClaim of the pod that no node of the pool can allocate. For a
ResourceClaim or ResourceClaimTemplate (DRA), every DRA node group and why it cannot allocate
the claim's requests (policies.engine.explain decides; this module fetches and prints).

Nodes, namespaces and GPUPolicy objects come from the cluster (`--kubeconfig` or in-cluster)
when the workload is named as NS/NAME, from `--inventory` and the file's own documents
otherwise, so the same objects give the same answer either way.
Exit 0 when every GPU pod spec fits some pool and every claim some node group, 1 when one
fits none, 2 on errors. A document
whose kind is not in the workload-kinds table but holds a pod spec is listed as skipped, with
why, and counts as nothing to explain (exit 0 if it is the only one): it is not a usage error.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from policies import yamlpos
from policies.context import Context
from policies.engine import claim_view, explain, is_claim, namespace_of, review
from policies.loading import PolicyLoadError
from policies.paths import to_display
from policies.workloads import unlisted_pod_template
from webhook.cluster.errors import ClusterError
from webhook.cluster.kinds import BUILT_IN, CUSTOM, PODS, discovered_kinds
from webhook.commands import options
from webhook.inputs import reading, sources
from webhook.output import report

if TYPE_CHECKING:
    from webhook.cluster.listing import LiveSource


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("target", metavar="POD.yaml|NS/NAME|KIND/NS/NAME",
                        help="a manifest file (- for stdin), or a workload or claim in the "
                             "cluster (a Pod by default; e.g. deployment/ml/train, "
                             "resourceclaimtemplate/ml/one-gpu)")
    reading.add_source_arguments(parser)
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="cluster to read the workload, nodes and namespaces from")
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context to use")
    parser.add_argument("--namespace", "-n", metavar="NS",
                        help="namespace of documents that name none (default: default)")
    options.add_format_options(parser, ("text", "json"), "text")


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    def warn(msg: str) -> None:
        stderr.write(f"gpupolicy explain: {msg}\n")

    try:
        objects, context, scheduler, nodes = _load(args, warn)
    except (ClusterError, reading.SourceError, PolicyLoadError) as exc:
        warn(str(exc))
        return 2
    answers = [answer(obj, context, args.namespace, scheduler.get(id(obj), ""))
               for obj in objects]
    unfit = [a for a in answers if any(not spec["fits"] for spec in a["podSpecs"])]
    if unfit and not nodes and getattr(args, "inventory", None):
        try:  # the nodes of the --inventory file (read again: only for a pod that fits nowhere)
            nodes = sources.read_cluster_file(args.inventory).nodes
        except reading.SourceError:
            nodes = []
    broken = node_errors(context, nodes) if unfit and nodes else []
    members = {p.name: p.node_names for p in (
        *context.inventory.pools, *context.inventory.cordoned)} if context.inventory else {}
    for a in unfit:
        # the nodes the pod would take but for what they hold or advertise: not those its
        # selector or tolerations keep it from
        wanted = {n for spec in a["podSpecs"] for p in spec["pools"] if not p["fits"]
                  and (not p["scheduler"] or p["scheduler"].startswith("Insufficient"))
                  for n in members.get(p["pool"], ())}
        a["nodeFacts"] = [f for f in broken if f["node"] in wanted]
    if not answers:
        warn(f"{args.target}: no workload with a pod spec and no ResourceClaim found")
        return 2
    text = (json.dumps(answers, indent=2) + "\n" if args.format == "json"
            else render(answers, pools_known=context.inventory is not None))
    if not options.write_report(text, args.output_file, stdout, stderr, "explain"):
        return 2
    return 1 if any(not spec["fits"] for a in answers
                    for spec in (*a["podSpecs"], *a["devices"])) else 0


_CLUSTER_REF = re.compile(r"^[A-Za-z0-9.-]+(/[a-z0-9][a-z0-9.-]*){1,2}$")


def _is_file(target: str) -> bool:
    """A path (existing or not) unless it reads as NS/NAME or KIND/NS/NAME."""
    return (target == "-" or Path(target).exists() or target.endswith((".yaml", ".yml", ".json"))
            or not _CLUSTER_REF.match(target))


def node_errors(context: Context, nodes: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The node facts that are errors (a node that cannot serve what it claims: GPUs labelled
    but not advertised, unhealthy devices, a driver below the minimum): part of why a pod
    fits no node. The audit reports them all; explain shows them beside a pod that fits
    nowhere."""
    from policies.cluster import ClusterView
    from policies.engine import review_cluster

    return [{"rule": f.rule, "node": f.node, "message": f.message}
            for f in review_cluster(ClusterView(context, nodes), context)
            if f.severity == "error" and f.rule.startswith("node-")]


def _load(args: argparse.Namespace, warn: Any) -> tuple[list[dict[str, Any]], Context,
                                                        dict[int, str], list[dict[str, Any]]]:
    if _is_file(args.target):
        raw = sys.stdin.buffer.read() if args.target == "-" else reading.read_bytes(args.target)
        stream = yamlpos.read_stream(raw)
        if stream.problems:
            p = stream.problems[0]
            raise reading.SourceError(f"{args.target}:{p.line}:{p.column}: {p.message}")
        found = sources.ClusterObjects(namespace=args.namespace or "default")
        every = []
        for obj in reading.stream_objects(stream):
            found.add(obj)
            every.append(obj)
        context, warnings = sources.build_context(args, found)
        for line in [*warnings, *sources.template_warnings(context)]:
            warn(line)
        kinds = context.workload_kinds
        objects = [o for o in every if is_claim(o)
                   or kinds.find(o) is not None or unlisted_pod_template(o, kinds)]
        return objects, context, {}, found.nodes
    # a workload in the cluster: only now is the Kubernetes client imported
    from webhook.cluster.listing import LiveSource

    live = LiveSource.connect(args.kubeconfig, args.context, 500)
    live.kinds = sources.load_workload_kinds(getattr(args, "workload_kinds", None))
    obj = fetch(live, args.target)
    found = live.cluster_objects(warn)
    context, warnings = sources.build_context(args, found)
    for line in [*warnings, *sources.template_warnings(context)]:
        warn(line)
    if context.inventory is not None:  # what the nodes hold now: "fits once ... are free"
        from dataclasses import replace
        context = replace(context, inventory=replace(context.inventory,
                                                     occupancy=live.occupancy()))
    return [obj], context, {id(obj): scheduler_message(obj)}, found.nodes


def fetch(live: LiveSource, target: str) -> dict[str, Any]:
    """The object named KIND/NS/NAME or NS/NAME (a Pod) from the cluster, as a dict."""
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    from webhook.cluster.client import unreachable

    parts = target.split("/")
    if len(parts) == 2:
        parts = ["pod", *parts]
    if len(parts) != 3 or not all(parts):
        raise ClusterError(f"{target}: name a file, NS/NAME or KIND/NS/NAME")
    kind_name, namespace, name = parts
    try:
        return _read(live, kind_name.lower(), namespace, name)
    except ApiException as exc:
        if exc.status == 404:
            raise ClusterError(f"{target}: not found in the cluster") from None
        raise ClusterError(f"{target}: HTTP {exc.status} {exc.reason}") from None
    except HTTPError as exc:
        raise unreachable(live.server, exc) from None


def _read(live: LiveSource, kind: str, namespace: str, name: str) -> dict[str, Any]:
    from kubernetes.client.exceptions import ApiException

    from webhook.cluster.kube import get, resource_path
    from webhook.cluster.listing import served_versions

    builtin = {k.lower(): (k, v, p) for k, v, p in (PODS, *BUILT_IN)}
    if kind in builtin or kind.rstrip("s") in builtin:
        real, api_version, plural = builtin.get(kind) or builtin[kind.rstrip("s")]
        resp = get(live.api, resource_path(api_version, plural, namespace, name))
    else:
        # by kind or by plural (resourceclaimtemplate/ml/x, resourceclaimtemplates/ml/x)
        custom = {name: (k, g, vs, p) for k, g, vs, p in CUSTOM for name in (p, k.lower())}
        # the table's other kinds (--workload-kinds): their versions from API discovery
        table = {name: k for k in discovered_kinds(live.kinds) if k.resource
                 for name in (k.resource, k.kind.lower())}
        if kind in custom:
            real, group, versions, plural = custom[kind]
        elif kind in table:
            real, group, plural = table[kind].kind, table[kind].group, table[kind].resource
            try:
                versions = tuple(served_versions(live.api).get(group, ()))
            except ValueError as exc:
                raise ClusterError(f"API discovery (GET /apis): {exc}") from None
            if not versions:
                raise ClusterError(f"{real}: the cluster serves no API group {group}")
        else:
            raise ClusterError(f"unknown kind {kind!r}")
        resp = None
        for version in versions:
            try:
                resp = get(live.api, resource_path(f"{group}/{version}", plural, namespace, name))
                api_version = f"{group}/{version}"
                break
            except ApiException as exc:
                if exc.status != 404 or version == versions[-1]:
                    raise
    obj: dict[str, Any] = json.loads(resp.data)
    obj.setdefault("kind", real)
    obj.setdefault("apiVersion", api_version)
    return obj


def scheduler_message(obj: dict[str, Any]) -> str:
    for cond in (obj.get("status") or {}).get("conditions") or []:
        if isinstance(cond, dict) and cond.get("type") == "PodScheduled" \
                and cond.get("status") == "False":
            return str(cond.get("message") or cond.get("reason") or "")
    return ""


def answer(obj: dict[str, Any], context: Context, namespace: str | None,
           scheduler: str) -> dict[str, Any]:
    ns = namespace_of(obj, namespace)
    meta = reading.metadata_of(obj)
    claim = is_claim(obj)
    view = claim_view(obj, context, ns) if claim else None
    skipped = None if claim else unlisted_pod_template(obj, context.workload_kinds)
    specs = []
    for path, verdicts in explain(obj, context, namespace=ns):
        specs.append({
            "path": to_display(path) or "(pod)",
            "fits": any(v.fits for v in verdicts),
            "pools": [{"pool": v.pool, "nodes": v.nodes, "model": v.model, "fits": v.fits,
                       "reasons": list(v.reasons), "scheduler": v.scheduler,
                       **({"allocation": v.allocation} if v.allocation else {}),
                       **({"template": v.template, "label": v.label} if v.template else {}),
                       **({"now": v.now} if v.now else {})}
                      for v in verdicts],
        })
    return {
        "kind": obj.get("kind"), "namespace": ns, "name": meta.get("name"),
        "policies": [p.name for p in context.governing(ns)],
        # what the API server's own plugins (quota, priority and runtime classes) refuse,
        # apart from the pools below (the scheduler's filters, and the policies' say)
        "refusals": [] if claim else _refusals(obj, context, ns),
        "gpu": view.gpu if view is not None else bool(specs),
        "scheduler": scheduler,
        # a pod carrier's GPU pod specs per node pool; a claim's devices per DRA node group
        "podSpecs": [] if claim else specs, "devices": specs if claim else [],
        "claim": claim, "skipped": skipped or None,
        # what the API server would refuse in the claim, at its path (read as far as it goes)
        "problems": [{"path": to_display(p.path), "message": p.message}
                     for p in (view.claim.problems if view is not None else ())],
    }


def _refusals(obj: dict[str, Any], context: Context, ns: str) -> list[dict[str, str]]:
    """What the API server's own admission plugins refuse (the pools say the rest)."""
    decision = review(obj, context, namespace=ns)
    return [{"by": "API server", "rule": v.rule, "path": v.field, "message": v.message,
             "severity": v.severity}
            for v in decision.violations if v.rule in APISERVER_RULES]


# What the API server's own admission plugins refuse (Priority, RuntimeClass, ResourceQuota),
# said apart from what a policy refuses
APISERVER_RULES = frozenset({"priority-class-unknown", "resource-quota-exceeded",
                             "runtime-class-conflict"})
# the pool reasons that are a policy's say (allowedModels), not a scheduler filter's
_POLICY_REASON = re.compile(r"^GPU model .* is not allowed \(")


def _render_claim(a: dict[str, Any]) -> list[str]:
    lines = [f"  invalid: {p['message']}" if p["message"].startswith(p["path"]) else
             f"  invalid at {p['path']}: {p['message']}" for p in a["problems"]]
    if not a["gpu"]:
        lines.append("  not a GPU claim: no request names a GPU or MIG device class")
    if not a["devices"]:
        lines.append("  no DRA inventory to allocate it from: give --inventory FILE (kubectl "
                     "get nodes,resourceslices,deviceclasses -o yaml) or a cluster")
    for spec in a["devices"]:
        fitting = [p for p in spec["pools"] if p["fits"]]
        verdict = (f"fits {len(fitting)} of {len(spec['pools'])} node groups"
                   if fitting else "fits NO node group")
        lines.append(f"  devices {spec['path']}: {verdict}")
        for p in spec["pools"]:
            alike = f" and {p['nodes'] - 1} more alike" if p["nodes"] > 1 else ""
            head = f"    {p['pool']}{alike}: "
            if p["fits"]:
                taken = p.get("allocation")
                lines.append(head + "fits" + (f", taking {taken}" if taken else ""))
            else:
                lines.append(head + p["reasons"][0])
                lines.extend(f"{' ' * 6}- {r}" for r in p["reasons"][1:])
    return lines


def _said(reason: str) -> str:
    """A pool reason, a policy's (allowedModels) told apart from the scheduler's filters."""
    return f"policy: {reason}" if _POLICY_REASON.match(reason) else reason


def render(answers: list[dict[str, Any]], *, pools_known: bool) -> str:
    lines: list[str] = []
    for a in answers:
        policies = ", ".join(a["policies"]) or "none"
        lines.append(f"{a['kind']} {a['namespace']}/{a['name']}  (policies: {policies})")
        if a["scheduler"]:
            lines.append(f"  scheduler says: {a['scheduler']}")
        if a.get("skipped"):
            lines.append(f"  skipped: {a['skipped']}")
        elif a["claim"]:
            lines.extend(_render_claim(a))
        elif not a["gpu"]:
            lines.append("  not a GPU workload: no container requests an accelerator and no "
                         "GPU share is annotated")
        for r in a.get("refusals") or ():
            word = "refuses" if r["severity"] == "error" else "warns"
            lines.append(f"  {r['by']} {word}: {r['message']}  [{r['rule']}]")
        for spec in a["podSpecs"]:
            pools = [p for p in spec["pools"] if "template" not in p]
            templates = [p for p in spec["pools"] if "template" in p]
            fitting = [p["pool"] for p in pools if p["fits"]]
            total = len(pools)
            verdict = (f"fits {len(fitting)} of {total} pool{'s' * (total != 1)}"
                       if fitting else "fits NO node pool")
            if templates:
                grown = sum(p["fits"] for p in templates)
                verdict += (f"; {grown} of {len(templates)} node templates can start a node "
                            "for it" if grown else "; no node template can start a node for it")
            lines.append(f"  pod spec {spec['path']}: {verdict}")
            for p in spec["pools"]:
                size = f"{p['nodes']} node{'s' * (p['nodes'] != 1)}, " if pools_known else ""
                head = f"    pool {p['pool']} ({size}{p['model'] or 'no GPU'}): "
                if "template" in p:
                    head = f"    {p['label']} ({p['model'] or 'no GPU'}): "
                if p["fits"]:
                    lines.append(head + p.get("now", "fits on scale-up" if "template" in p
                                              else "fits"))
                elif p["scheduler"]:  # the scheduler's words, then every reason in full
                    never = "never fits: " if p.get("now") else ""  # whatever pods hold
                    lines.append(head + never + p["scheduler"])
                    lines.extend(f"{' ' * 6}- {_said(r)}" for r in p["reasons"])
                else:
                    never = "never fits: " if p.get("now") else ""
                    lines.append(head + never + _said(p["reasons"][0]))
                    lines.extend(f"{' ' * 6}- {_said(r)}" for r in p["reasons"][1:])
        if a.get("nodeFacts"):
            lines.append("  nodes that cannot serve what they claim (node facts):")
            lines.extend(f"    {f['rule']}: {f['message']}" for f in a["nodeFacts"][:20])
        lines.append("")
    if not pools_known:
        lines.append("No inventory: the pools are the GPU catalog's models and amounts are not "
                     "checked. Give --inventory FILE (kubectl get nodes -o yaml) or a cluster.")
    # names and messages quote the manifest: escaped, as every text report does
    return "\n".join(report.printable(line) for line in lines) + "\n"
