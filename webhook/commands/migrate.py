"""`gpupolicy migrate [PATH ...]`: what a move from the device plugin to DRA would do to every
workload, before a node is touched (DESIGN.md §3.7).

Workloads come from files or a live cluster, read as the audit reads them; the current
inventory is `--inventory` or the cluster's (or the Nodes among the files); the target is
`--target-inventory FILE`, or `--to-dra [SELECTOR]`, derived from the selected nodes' labels
(policies/migrate/derive.py). Every workload is judged by the same review() against both.
Exit 0 when nothing breaks or is newly refused, 1 otherwise, 2 on unreadable input.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TextIO

from policies import yamlpos
from policies.context import Context
from policies.engine import namespace_of
from policies.loading import PolicyLoadError
from policies.migrate.compare import OUTCOMES, Move, judge, with_templates
from policies.migrate.derive import to_dra
from policies.migrate.hazards import Hazard, admin_access_hazards, hazards, reaches_all_gpus
from policies.migrate.rewrite import apply
from policies.migrate.selector import SelectorError, parse_label_selector
from policies.paths import FieldPath
from policies.selectors import label_selector_matches
from webhook.cluster.errors import ClusterError
from webhook.commands import options
from webhook.inputs import reading, sources

FORMATS = ("text", "json", "markdown")
ALL_NODES = ""
# Kinds whose objects a controller of another audited kind creates: judged through it.
OWNED = {"Pod", "ReplicaSet", "Job"}
BAD = ("breaks", "newly-refused")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="workload files/directories (default: the live cluster)")
    reading.add_source_arguments(parser)
    parser.add_argument("--kubeconfig", metavar="FILE",
                        help="cluster to read (default: in-cluster config, else ~/.kube/config)")
    parser.add_argument("--context", metavar="NAME", help="kubeconfig context to use")
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--target-inventory", metavar="FILE",
                        help="Nodes, ResourceSlices and DeviceClasses after the move")
    target.add_argument("--to-dra", nargs="?", const=ALL_NODES, metavar="SELECTOR",
                        help="derive the target: the GPU nodes this label selector picks "
                             "(default: every GPU node) run the NVIDIA DRA driver")
    parser.add_argument("--write", metavar="DIR",
                        help="write claim-based rewrites of the needs-claim workloads (and the "
                             "ResourceClaimTemplates they need) here; inputs are never changed")
    parser.add_argument("--namespace", "-n", metavar="NS",
                        help="namespace of documents that name none (default: default)")
    options.add_format_options(parser, FORMATS, "text")


@dataclass
class Item:
    """A workload and where it came from (a file's document, or the cluster)."""

    obj: dict[str, Any]
    file: str = ""
    document: int = 0
    prefix: FieldPath = ()


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    def warn(msg: str) -> None:
        stderr.write(f"gpupolicy migrate: {msg}\n")

    try:
        selector = parse_label_selector(args.to_dra) if args.to_dra is not None else None
        now, target, derived, items = _load(args, selector, warn)
    except (reading.SourceError, PolicyLoadError, SelectorError, ClusterError) as exc:
        warn(str(exc))
        return 2
    moves = [(item, m) for item in items
             if (m := judge(item.obj, now, target, args.namespace)) is not None]
    reaching = Counter(namespace_of(item.obj, args.namespace) for item in items
                       if reaches_all_gpus(item.obj, now.workload_kinds))
    found = hazards(now, target) + admin_access_hazards(now, reaching)
    if args.write:
        try:
            still = _write(Path(args.write), moves, target, args.namespace)
        except OSError as exc:
            warn(f"{args.write}: cannot write: {exc.strerror or exc}")
            return 2
        for line in still:
            warn(line)
    report = {"text": _text, "json": _json, "markdown": _markdown}[args.format](
        [m for _, m in moves], found, derived)
    if not options.write_report(report, args.output_file, stdout, stderr, "migrate"):
        return 2
    bad = any(m.outcome in BAD for _, m in moves) or any(h.severity == "error" for h in found)
    return 1 if bad else 0


def _load(args: argparse.Namespace, selector: Mapping[str, Any] | None,
          warn: Any) -> tuple[Context, Context, list[str], list[Item]]:
    if args.paths:
        files = [f for p in args.paths for f in reading.manifest_files(Path(p))]
        objects = list(_file_items(files))
        found = sources.ClusterObjects()
        for item in objects:
            if item.obj.get("kind") in sources.CLUSTER_KINDS or \
                    item.obj.get("kind") == "ResourceClaimTemplate":
                found.add(item.obj)
        items = [i for i in objects if i.obj.get("kind") not in (*sources.CLUSTER_KINDS,
                                                                  "ResourceClaimTemplate")]
    else:
        from webhook.cluster.listing import LiveSource
        from webhook.output.progress import Progress

        source = LiveSource.connect(args.kubeconfig, args.context, 500)
        found = source.cluster_objects(warn)
        items = [Item(obj) for kind, batch in source.workloads(Progress(None, enabled=False),  # type: ignore[arg-type]
                                                                {})
                 for obj, _ in batch if not _owned(kind, obj)]
    for problem in found.problems:
        warn(problem)
    now, _ = sources.build_context(args, found)
    base = sources.read_cluster_file(args.inventory) if args.inventory else found
    catalog = now.catalog
    notes: list[str] = []
    if args.target_inventory:
        goal = sources.read_cluster_file(args.target_inventory)
    else:
        picked = selector or {}
        derived = to_dra(base.nodes, lambda labels: label_selector_matches(picked, labels),
                         catalog, base.classes)
        if not derived.moved:
            raise reading.SourceError("--to-dra: the selector picks no GPU node of the "
                                      "inventory" if picked.get("matchExpressions")
                                      else "--to-dra: the inventory has no GPU node")
        goal = sources.ClusterObjects(nodes=derived.nodes, classes=derived.classes,
                                      slices=[*base.slices, *derived.slices])
        notes = [f"derived: {len(derived.moved)} node{'s' * (len(derived.moved) != 1)} move to "
                 f"the DRA driver ({', '.join(derived.moved[:5])}"
                 f"{' ...' if len(derived.moved) > 5 else ''})",
                 *(f"not known from labels: {what} ({_few(nodes)})"
                   for what, nodes in sorted(derived.unknown.items()))]
    target = replace(now, inventory=goal.inventory(catalog),
                     claims={**goal.claims, **now.claims})
    return now, target, notes, items


def _few(names: list[str], shown: int = 3) -> str:
    more = f" and {len(names) - shown} more" if len(names) > shown else ""
    return f"node{'s' * (len(names) != 1)} {', '.join(names[:shown])}{more}"


def _file_items(files: list[Path]) -> Iterator[Item]:
    for file in files:
        raw = reading.read_bytes(file)
        for doc in yamlpos.iter_stream(raw):
            if isinstance(doc, yamlpos.Document):
                for prefix, obj in doc.objects():
                    yield Item(obj, str(file), doc.index, prefix)


def _owned(kind: str, obj: Mapping[str, Any]) -> bool:
    refs = reading.metadata_of(obj).get("ownerReferences")
    return kind in OWNED and isinstance(refs, list) and any(
        isinstance(r, dict) and r.get("controller") for r in refs)


@dataclass
class _Edit:  # what webhook.output.fix reads of lint's Edit
    document: int
    prefix: FieldPath
    ops: tuple[Any, ...]
    mutated: Any


def _write(root: Path, moves: list[tuple[Item, Move]], target: Context,
           namespace: str | None) -> list[str]:
    """Rewritten manifests (comments and key order kept) and their ResourceClaimTemplates
    under `root`; then every rewrite is judged again against the target: what would still
    not run is returned, one line each."""
    from webhook.output.fix import FixError, fix_text

    wanted = [(i, m) for i, m in moves if m.outcome == "needs-claim" and m.rewrite]
    if not wanted:
        return []
    root.mkdir(parents=True, exist_ok=True)
    by_file: dict[str, list[_Edit]] = {}
    templates: list[dict[str, Any]] = []
    loose: list[dict[str, Any]] = []
    problems = []
    for item, move in wanted:
        assert move.rewrite is not None
        mutated = apply(item.obj, move.rewrite.ops)
        templates += move.rewrite.templates
        if item.file:
            by_file.setdefault(item.file, []).append(
                _Edit(item.document, item.prefix, tuple(move.rewrite.ops), mutated))
        else:
            loose.append(_clean(mutated))
    written: list[tuple[Path, set[tuple[int, FieldPath]]]] = []
    for index, (file, edits) in enumerate(sorted(by_file.items())):
        text = Path(file).read_text(encoding="utf-8")
        try:
            fixed = fix_text(text, edits, json_file=file.endswith(".json"))
        except FixError as exc:
            problems.append(f"{file}: not rewritten: {exc}")
            continue
        out = root / f"{index:02d}-{Path(file).name}"
        out.write_text(fixed, encoding="utf-8")
        written.append((out, {(e.document, e.prefix) for e in edits}))
    if loose:
        out = root / "workloads.yaml"
        out.write_text(_yaml_stream(loose), encoding="utf-8")
        written.append((out, {(i + 1, ()) for i in range(len(loose))}))
    claims = root / "resourceclaimtemplates.yaml"
    claims.write_text(_yaml_stream(templates), encoding="utf-8")
    checked = with_templates(target, templates)
    for path, rewritten in written:
        for doc in yamlpos.iter_stream(path.read_bytes()):
            if not isinstance(doc, yamlpos.Document):
                problems.append(f"{path}: cannot read back what was written")
                continue
            for prefix, obj in doc.objects():
                if (doc.index, prefix) not in rewritten:
                    continue
                again = judge(obj, target, checked, namespace)
                if again is not None and again.after.startswith(("refused", "fits no pool")):
                    problems.append(f"{path}: {again.kind} {again.namespace}/{again.name} "
                                    f"would still not run: {again.after}")
    return problems


def _clean(obj: Mapping[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in reading.metadata_of(obj).items()
            if k in ("name", "namespace", "labels", "annotations")}
    return {k: v for k, v in {**obj, "metadata": meta}.items() if k != "status"}


def _yaml_stream(objects: list[dict[str, Any]]) -> str:
    import yaml

    return yaml.safe_dump_all(objects, sort_keys=False, default_flow_style=False)


def _counts(moves: list[Move]) -> dict[str, int]:
    counted = Counter(m.outcome for m in moves)
    return {o: counted.get(o, 0) for o in OUTCOMES}


def _json(moves: list[Move], found: list[Hazard], notes: list[str]) -> str:
    body = {"summary": _counts(moves), "hazards": [h.as_dict() for h in found],
            "notes": notes, "workloads": [m.as_dict() for m in moves]}
    return json.dumps(body, indent=2) + "\n"


def _text(moves: list[Move], found: list[Hazard], notes: list[str]) -> str:
    out = []
    if found:
        out.append("Cluster hazards:")
        out += [f"  {h.severity.upper():7} {h.rule}: {h.message}" for h in found]
        out.append("")
    for m in moves:
        if m.outcome == "unchanged" and not m.reasons:
            continue
        where = f" -> pool {m.pool}" if m.pool else ""
        out.append(f"{m.outcome:26} {m.kind} {m.namespace}/{m.name}{where}")
        out += [f"    {r}" for r in m.reasons]
    if out and out[-1]:
        out.append("")
    namespaces: dict[str, Counter[str]] = {}
    for m in moves:
        namespaces.setdefault(m.namespace, Counter())[m.outcome] += 1
    out.append("By namespace:")
    for ns, counted in sorted(namespaces.items()):
        out.append(f"  {ns}: " + ", ".join(f"{n} {o}" for o, n in sorted(counted.items())))
    total = _counts(moves)
    out.append(f"{len(moves)} GPU workload{'s' * (len(moves) != 1)}: "
               + ", ".join(f"{n} {o}" for o, n in total.items()))
    out += notes
    return "\n".join(out) + "\n"


def _markdown(moves: list[Move], found: list[Hazard], notes: list[str]) -> str:
    out = ["## GPU workloads after the move to DRA", ""]
    out.append("| outcome | workloads |")
    out.append("|---|---|")
    out += [f"| `{o}` | {n} |" for o, n in _counts(moves).items()]
    if found:
        out += ["", "### Cluster hazards", ""]
        out += [f"- **{h.severity}** `{h.rule}`: {_md(h.message)}" for h in found]
    listed = [m for m in moves if m.outcome != "unchanged"]
    if listed:
        out += ["", "| outcome | workload | pool after | why |", "|---|---|---|---|"]
        out += [f"| `{m.outcome}` | {m.kind} `{m.namespace}/{m.name}` | {m.pool or '-'} | "
                f"{_md('; '.join(m.reasons))} |" for m in listed]
    if notes:
        out += [""] + [f"- {_md(n)}" for n in notes]
    return "\n".join(out) + "\n"


def _md(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")
