"""`audit --pools -o html`: one self-contained page (no script, no external font or style),
a section per pool with inline SVG charts: GPU allocation, waiting time of the Pending GPU
pods, and utilisation over the window when Prometheus was asked. Every text from the cluster
goes through html.escape."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from html import escape
from typing import Any, TextIO

from webhook.output.pools_report import rows

STYLE = """
body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:70em}
section{border:1px solid #ccc;border-radius:6px;padding:1em;margin:1em 0}
table{border-collapse:collapse}td{padding:2px 10px;vertical-align:top}
td:first-child{color:#666}.advice{font-weight:600}.note{color:#666}
svg{margin:4px 12px 4px 0;background:#fafafa}.facts td{font-size:90%}
"""
COLORS = {"allocated": "#3b6fb6", "free": "#6cbf6c", "fragmented": "#e3a33b"}


def _bar(gpus: Mapping[str, int]) -> str:
    total = max(1, gpus["allocatable"])
    x = 0.0
    parts = []
    usable = gpus["free"] - gpus["fragmented"]
    for label, value in (("allocated", gpus["allocated"]), ("free", usable),
                         ("fragmented", gpus["fragmented"])):
        width = 300 * value / total
        parts.append(f'<rect x="{x:.1f}" y="20" width="{width:.1f}" height="20" '
                     f'fill="{COLORS[label]}"><title>{label}: {value}</title></rect>')
        x += width
    legend = " ".join(f"{k} {gpus[k] if k != 'free' else usable}" for k in COLORS)
    return (f'<svg class="chart allocation" width="320" height="60" role="img" '
            f'aria-label="GPU allocation"><text x="0" y="14" font-size="12">GPUs: '
            f'{escape(legend)}</text>{"".join(parts)}</svg>')


def _waits(buckets: Mapping[str, int]) -> str:
    top = max([1, *buckets.values()])
    bars = []
    for i, (label, n) in enumerate(buckets.items()):
        h = 60 * n / top
        bars.append(f'<rect x="{10 + i * 48}" y="{80 - h:.1f}" width="36" height="{h:.1f}" '
                    f'fill="#8a63b8"><title>{escape(label)}: {n}</title></rect>'
                    f'<text x="{12 + i * 48}" y="95" font-size="10">{escape(label)}</text>')
    return (f'<svg class="chart waits" width="310" height="100" role="img" '
            f'aria-label="waiting time"><text x="0" y="12" font-size="12">Pending GPU pods by '
            f'waiting time</text>{"".join(bars)}</svg>')


def _series(points: Sequence[Sequence[float]]) -> str:
    if len(points) < 2:
        return ""
    t0, t1 = points[0][0], points[-1][0]
    span = max(1.0, t1 - t0)
    path = " ".join(f"{'M' if i == 0 else 'L'}{10 + 400 * (t - t0) / span:.1f},"
                    f"{90 - 70 * v:.1f}" for i, (t, v) in enumerate(points))
    return (f'<svg class="chart utilization" width="420" height="100" role="img" '
            f'aria-label="utilisation"><text x="0" y="12" font-size="12">GPU utilisation over '
            f'{span / 3600:.0f} h (0-100%)</text><line x1="10" y1="90" x2="410" y2="90" '
            f'stroke="#999"/><path d="{path}" fill="none" stroke="#d0483c"/></svg>')


def write_html(doc: Mapping[str, Any], out: TextIO) -> None:
    out.write('<!DOCTYPE html><html lang="en"><head><meta charset="utf-8">'
              f"<title>GPU pools</title><style>{STYLE}</style></head><body><h1>GPU pools</h1>")
    if not doc["pools"]:
        out.write("<p>No GPU node pools.</p>")
    for pool in doc["pools"]:
        name = escape(str(pool["name"]))
        out.write(f'<section class="pool" data-pool="{name}"><h2>{name}</h2><table>')
        for label, value in rows(pool):
            out.write(f"<tr><td>{escape(label)}</td><td>{escape(value)}</td></tr>")
        out.write("</table><div>")
        out.write(_bar(pool["gpus"]))
        out.write(_waits(pool["pending"]["waitBuckets"]))
        util = pool.get("utilization")
        if util is not None:
            out.write(_series(util.get("series") or []))
        out.write("</div><ul>")
        for a in pool["advice"]:
            out.write(f'<li class="advice">{escape(a["action"])}: {escape(a["because"])}</li>')
        for note in pool["notes"]:
            out.write(f'<li class="note">{escape(note)}</li>')
        out.write("</ul></section>")
    source = doc.get("utilizationSource")
    if source is not None and not source["available"]:
        out.write(f'<p class="unavailable">Utilisation unavailable: '
                  f'{escape(str(source["reason"]))}</p>')
    facts = doc.get("nodeFacts") or []
    if facts:
        out.write(f'<h2>Node facts ({len(facts)})</h2><table class="facts">')
        for f in facts[:500]:
            out.write(f"<tr><td>{escape(f['severity'])}</td><td>{escape(f['rule'])}</td>"
                      f"<td>{escape(f['message'])}</td></tr>")
        out.write("</table>")
    out.write("</body></html>\n")
