"""The pool view's formats: text (a table per pool, then the advice), json, markdown; html is
webhook/output/pools_html.py. The document is the core's (policies/pools/view.py) plus the
node facts the cluster rules found."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, TextIO

from webhook.output.audit_report import age

POOL_FORMATS = ("text", "json", "markdown", "html")


def _clean(text: Any) -> str:
    # names and messages come from the cluster: no terminal control characters
    return "".join(ch if ch.isprintable() else "?" for ch in str(text))


def _duration(seconds: float) -> str:
    """A wait as the audit's table shows a Pending pod's age; under a minute in seconds."""
    return f"{int(seconds)}s" if seconds < 60 else age(seconds)


def _n(count: int, what: str) -> str:
    return f"{count:,} {what}{'s' * (count != 1)}"


def _versions(versions: Mapping[str, Mapping[str, list[str]]]) -> list[tuple[str, str]]:
    rows = []
    for what, spread in versions.items():
        shown = ", ".join(f"{_clean(v)} ({len(n)})" for v, n in list(spread.items())[:4])
        if len(spread) > 4:
            shown += f", +{len(spread) - 4} more"
        rows.append((what, shown))
    return rows


def rows(pool: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, value) lines of one pool, shared by text and markdown."""
    g = pool["gpus"]
    p = pool["pending"]
    iso = pool["isolation"]
    out = [
        ("nodes", f"{len(pool['nodes'])}" + (f" ({_clean(pool['product'])})"
                                              if pool["product"] else "")),
        ("GPUs", f"{g['allocatable']} allocatable, {g['allocated']} allocated, {g['free']} free"
                 f", {g['fragmented']} fragmented"),
        ("pending", f"{_n(p['count'], 'GPU pod')} wait{'s' * (p['count'] == 1)} for it" + (
            f", p50 {_duration(p['waitSeconds']['p50'])}, max {_duration(p['waitSeconds']['max'])}"
            if p["count"] else "")),
    ]
    if p["blockedBy"]:
        out.append(("blocked by", "; ".join(f"{_clean(w)} ({n})" for w, n in
                                            list(p["blockedBy"].items())[:3])))
    out.append(("failing", ", ".join(f"{c} {n}" for c, n in pool["failures"].items())
                or "none"))
    out += _versions(pool["versions"])
    out.append(("isolation", ("tainted " + ", ".join(_clean(t) for t in iso["taints"][:3]))
                if iso["tainted"] else "untainted (shared)"))
    if iso["latencyCritical"]:
        out.append(("latency", "latency-critical"))
    util = pool.get("utilization")
    if util is not None:
        out.append(("utilisation", f"p50 {util['p50']:.0%}, p95 {util['p95']:.0%} over "
                                   f"{util['hours']:.0f} h; "
                                   f"{_n(util['idleAllocatedGPUs'], 'allocated GPU')} idle"))
    return out


def write_text(doc: Mapping[str, Any], out: TextIO) -> None:
    pools = doc["pools"]
    if not pools:
        out.write("No GPU node pools: no node advertises or is labelled with GPUs.\n")
    for pool in pools:
        out.write(f"Pool {_clean(pool['name'])}\n")
        for label, value in rows(pool):
            out.write(f"  {label:<12} {value}\n")
        for a in pool["advice"]:
            out.write(f"  -> {a['action']}: {_clean(a['because'])}\n")
        for note in pool["notes"]:
            out.write(f"  .. {_clean(note)}\n")
        if not pool["advice"] and not pool["notes"]:
            out.write("  -> no advice\n")
        out.write("\n")
    def put(text: str) -> None:
        out.write(text)

    _write_tail(doc, put, "")


def _write_tail(doc: Mapping[str, Any], write: Callable[[str], None], bullet: str) -> None:
    source = doc.get("utilizationSource")
    if source is not None and not source["available"]:
        write(f"{bullet}Utilisation unavailable: {_clean(source['reason'])}\n")
    elif source is not None and source.get("partial"):
        write(f"{bullet}Utilisation partial: {_clean(source['partial'])}\n")
    pending = doc["pending"]
    excluded = [p for p in pending["pods"] if p.get("excludedWithFree")]
    if pending["total"]:
        write(f"{bullet}{_n(pending['total'], 'GPU pod')} Pending"
              + (f"; {len(excluded)} are kept by their selector from pools with free GPUs "
                 "of the model they would take:" if excluded else "") + "\n")
        for p in excluded[:10]:
            write(f"{bullet}  {_clean(p['namespace'])}/{_clean(p['name'])} "
                  f"({p['gpus']} GPUs): {', '.join(_clean(x) for x in p['excludedWithFree'])}\n")
    facts = doc.get("nodeFacts") or []
    if facts:
        write(f"{bullet}Node facts ({len(facts)}):\n")
        for f in facts[:50]:
            write(f"{bullet}  {f['severity']:<7} {f['rule']}: {_clean(f['message'])}\n")
        if len(facts) > 50:
            write(f"{bullet}  ... {len(facts) - 50} more (-o json lists them)\n")


def write_json(doc: Mapping[str, Any], out: TextIO) -> None:
    json.dump(doc, out, indent=2)
    out.write("\n")


def _md(text: Any) -> str:
    return _clean(text).replace("|", "\\|").replace("<", "&lt;")


def write_markdown(doc: Mapping[str, Any], out: TextIO) -> None:
    out.write("# GPU pools\n\n")
    for pool in doc["pools"]:
        out.write(f"## {_md(pool['name'])}\n\n| | |\n|---|---|\n")
        for label, value in rows(pool):
            out.write(f"| {label} | {_md(value)} |\n")
        out.write("\n")
        for a in pool["advice"]:
            out.write(f"- **{a['action']}**: {_md(a['because'])}\n")
        for note in pool["notes"]:
            out.write(f"- _{_md(note)}_\n")
        out.write("\n")
    lines: list[str] = []

    def keep(text: str) -> None:
        lines.append(text)

    _write_tail(doc, keep, "")
    if lines:
        out.write("## Cluster\n\n```\n" + "".join(lines).replace("```", "'''") + "```\n")


def write(fmt: str, doc: Mapping[str, Any], out: TextIO) -> None:
    """text, json or markdown (html: webhook/output/pools_html.py)."""
    {"text": write_text, "json": write_json, "markdown": write_markdown}[fmt](doc, out)
