"""What the audit found, kept in bounded memory, and its four formats.

Findings go to a spool file (one JSON line each) as objects stream past; memory holds only
counters per policy and namespace, a few examples, and the spool offsets of each namespace
(for one PolicyReport per namespace). The formats read the spool back at the end.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
import time
from array import array
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, TextIO

import yaml

from policies.decision import Decision
from policies.engine import CLAIM_KINDS
from policies.model import GPUPolicy
from policies.paths import FieldPath, to_pointer
from webhook.output import report
from webhook.output.findings import ENGINE_ERROR, MUTATION, Finding, rule_help
from webhook.output.findings import mutation as mutation_words

FORMATS = ("table", "json", "sarif", "policyreport", "openreports")
EXAMPLES = 20


@dataclass(frozen=True, slots=True)
class ObjectRef:
    kind: str
    api_version: str
    namespace: str
    name: str
    uid: str = ""
    # file, line and column of a field path, for an object read from a file
    locate: Callable[[FieldPath], tuple[str, int, int]] | None = field(
        default=None, compare=False, repr=False)

    @property
    def label(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"

    @property
    def source(self) -> str:
        """A Pod is what runs; a DRA claim (or claim template) is what pods get devices
        through; every other kind is a template of pods to come."""
        return "pod" if self.kind == "Pod" else "claim" if self.kind in CLAIM_KINDS \
            else "template"


@dataclass
class Row:
    objects: int = 0
    mutate: int = 0
    refuse: int = 0
    warn: int = 0
    audit: int = 0

    def as_dict(self) -> dict[str, int]:
        return {"objects": self.objects, "mutate": self.mutate, "refuse": self.refuse,
                "warn": self.warn, "audit": self.audit}


def action(severity: str, mode: str) -> str:
    if severity == "error":
        return "refuse"
    return "audit" if mode == "Audit" else "warn"


@dataclass
class Collector:
    policies: dict[str, GPUPolicy]
    # closed with the process; the formats read it back at the end. Binary, with the offsets
    # counted here: a text file's tell() costs more than the write itself.
    spool: Any = field(default_factory=lambda: tempfile.TemporaryFile("w+b"))  # noqa: SIM115
    spooled: int = 0  # bytes written to the spool
    audited: Counter[str] = field(default_factory=Counter)
    skipped: Counter[str] = field(default_factory=Counter)
    unavailable: dict[str, str] = field(default_factory=dict)
    rows: dict[tuple[str, str], Row] = field(default_factory=dict)
    severities: Counter[str] = field(default_factory=Counter)
    rules: set[str] = field(default_factory=set)
    worst: dict[str, str] = field(default_factory=dict)  # rule -> its worst severity
    passes: bool = False  # record a `pass` result per object and governing policy
    refused_objects: int = 0
    mutated_objects: int = 0
    examples: list[dict[str, Any]] = field(default_factory=list)
    offsets: dict[str, array[int]] = field(default_factory=dict)  # where each record starts
    lengths: dict[str, array[int]] = field(default_factory=dict)  # and its bytes
    namespaces: set[str] = field(default_factory=set)
    # namespaces the audit covered with nothing in them: their reports are written (empty) too
    covered: set[str] = field(default_factory=set)
    cluster_report: bool = True  # write the cluster-scoped report (`--shard`: shard 0 only)
    incomplete: bool = False  # something could not be read: the counts are of what was
    cluster: dict[str, Any] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    def add(self, ref: ObjectRef, decision: Decision) -> None:
        self.audited[ref.kind] += 1
        self.namespaces.add(ref.namespace)
        if self.passes:  # a governing policy this object breaks nothing of
            broken = {v.policy for v in decision.violations}
            for name in decision.policies:
                if name not in broken:
                    self.write(ref, rule="all-rules", severity="info", policy=name, mode=None,
                               path=None, action="pass",
                               message=f"{ref.label} breaks no rule of policy {name}")
        self._rows(ref, decision)
        for v in decision.violations:
            self.write(ref, rule=v.rule, severity=v.severity, message=v.message,
                       policy=v.policy, mode=v.mode, path=v.field or None,
                       action=action("error" if v.denies else "warning", v.mode), at=v.path)
        if decision.ops:
            self.mutated_objects += 1
            for op in decision.ops:
                words, at = mutation_words(op)
                self.write(ref, rule=MUTATION, severity="info", message=words,
                           policy=op.policy, mode=None, path=to_pointer(op.path),
                           action="mutate", at=at)
        if decision.denials:
            self.refused_objects += 1
            # the first few of each source: pods (what runs), templates (what will run) and
            # claims, EXAMPLES in all
            if len(self.examples) < EXAMPLES and \
                    sum(e["source"] == ref.source for e in self.examples) < EXAMPLES // 2:
                self.examples.append({"object": ref.label, "source": ref.source,
                                      "why": decision.denials[0].describe()})

    def unreadable_document(self, file: str, problem: Any) -> None:
        """A document the reader refused (invalid YAML, a repeated key...): Kubernetes would
        not accept it, so it counts as refused, as in `lint` and `review`."""
        self.refused_objects += 1
        self.write(None, rule=problem.rule, severity="error", policy=None, mode=None,
                   path=None, action="refuse", file=file, line=problem.line,
                   message=f"{file}:{problem.line}:{problem.column}: {problem.message}")

    def failed(self, ref: ObjectRef, exc: Exception) -> None:
        self.audited[ref.kind] += 1
        self.write(ref, rule=ENGINE_ERROR, severity="error", policy=None, mode=None, path=None,
                   message=f"engine failed: {type(exc).__name__}: {exc}", action="error")

    def _row(self, policy: str, namespace: str) -> Row:
        return self.rows.setdefault((policy, namespace), Row())

    def _rows(self, ref: ObjectRef, decision: Decision) -> None:
        for name in decision.policies:
            row = self._row(name, ref.namespace)
            row.objects += 1
            mine = [v for v in decision.violations if v.policy == name]
            row.mutate += any(op.policy == name for op in decision.ops)
            row.refuse += any(v.denies for v in mine)
            row.warn += any(not v.denies and v.mode != "Audit" for v in mine)
            row.audit += any(v.mode == "Audit" for v in mine)

    def write(self, ref: ObjectRef | None, at: FieldPath = (), **fields: Any) -> None:
        record = {k: v for k, v in fields.items() if v is not None}
        if ref is not None:
            record.update(kind=ref.kind, apiVersion=ref.api_version, namespace=ref.namespace,
                          name=ref.name, uid=ref.uid, source=ref.source, object=ref.label)
            if ref.locate is not None:  # read from a file: where, as lint says it
                record["file"], record["line"], record["column"] = ref.locate(at)
        namespace = ref.namespace if ref is not None else ""
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        self.offsets.setdefault(namespace, array("q")).append(self.spooled)
        self.lengths.setdefault(namespace, array("l")).append(len(line))
        self.spool.write(line)
        self.spooled += len(line)
        self.severities[record["severity"]] += 1
        self.rules.add(record["rule"])
        rank = {"error": 0, "warning": 1, "info": 2}
        best = self.worst.get(record["rule"])
        if best is None or rank[record["severity"]] < rank[best]:
            self.worst[record["rule"]] = record["severity"]

    def records(self, namespace: str | None = None) -> Iterator[dict[str, Any]]:
        self.spool.flush()
        if namespace is None:
            self.spool.seek(0)
            for line in self.spool:
                yield json.loads(line)
            self.spool.seek(0, os.SEEK_END)  # where the next write goes
            return
        fd = self.spool.fileno()  # one read per record, at its offset: no buffer refilled
        for offset, length in zip(self.offsets.get(namespace, ()),
                                  self.lengths.get(namespace, ()), strict=True):
            yield json.loads(os.pread(fd, length, offset))

    def summary(self) -> dict[str, Any]:
        pods = self.audited.get("Pod", 0)
        claims = sum(self.audited.get(k, 0) for k in CLAIM_KINDS)
        return {
            "audited": dict(sorted(self.audited.items())),
            "pods": pods,
            "templates": sum(self.audited.values()) - pods - claims,
            "claims": claims,
            "namespaces": len(self.namespaces),
            "refusedObjects": self.refused_objects,
            "mutatedObjects": self.mutated_objects,
            "findings": {s: self.severities.get(s, 0) for s in ("error", "warning", "info")},
            "skippedOwned": dict(sorted(self.skipped.items())),
            "unavailable": dict(sorted(self.unavailable.items())),
            "seconds": round(time.monotonic() - self.started, 3),
        }

    def policy_rows(self) -> list[dict[str, Any]]:
        return [{"policy": p, "namespace": ns, **row.as_dict()}
                for (p, ns), row in sorted(self.rows.items())]


# -- formats ----------------------------------------------------------------------------------

def write(fmt: str, c: Collector, out: TextIO) -> None:
    if fmt in REPORT_APIS:
        write_policyreport(c, out, fmt)
        return
    {"table": write_table, "json": write_json, "sarif": write_sarif}[fmt](c, out)


def write_json(c: Collector, out: TextIO) -> None:
    head = {"summary": c.summary(), "policies": c.policy_rows(), "cluster": c.cluster}
    text = json.dumps(head, indent=2)
    out.write(text[:-2] + ',\n  "findings": [')
    for i, record in enumerate(c.records()):
        out.write(("," if i else "") + "\n    " + json.dumps(record, separators=(",", ":")))
    out.write("\n  ]\n}\n")


def as_finding(record: dict[str, Any]) -> Finding:
    return Finding(rule=record["rule"], severity=record["severity"],
                   message=record["message"], policy=record.get("policy"),
                   path=record.get("path"), object=record.get("object"),
                   file=record.get("file"), line=record.get("line"),
                   column=record.get("column"))


def write_sarif(c: Collector, out: TextIO) -> None:
    findings = (as_finding(record) for record in c.records())
    report.write_sarif(out, findings, rule_help=rule_help(c.rules), rules=c.rules,
                       severities=c.worst)


_PR_SEVERITY = {"refuse": "high", "warn": "medium", "audit": "low", "error": "high",
                "pass": "info"}
_PR_RESULT = {"refuse": "fail", "warn": "warn", "audit": "warn", "error": "error",
              "pass": "pass"}


def _pr_result(record: dict[str, Any], now: int) -> dict[str, Any]:
    result: dict[str, Any] = {
        "source": "gpupolicy",
        "policy": record.get("policy") or "gpupolicy",
        "rule": record["rule"],
        "category": "GPU",
        "result": _PR_RESULT.get(record["action"], "warn"),
        "severity": _PR_SEVERITY.get(record["action"], "info"),
        "message": record["message"],
        "scored": True,
        "timestamp": {"seconds": now, "nanos": 0},
        "properties": {k: str(record[k]) for k in ("path", "mode", "source", "node", "device")
                       if k in record},
    }
    if "kind" in record:
        resource = {"apiVersion": record["apiVersion"], "kind": record["kind"],
                    "name": record["name"], "namespace": record["namespace"]}
        if record.get("uid"):
            resource["uid"] = record["uid"]
        result["resources"] = [resource]
    return result


# (apiVersion, namespaced kind, cluster kind) of the two report APIs Policy Reporter reads
REPORT_APIS = {
    "policyreport": ("wgpolicyk8s.io/v1alpha2", "PolicyReport", "ClusterPolicyReport"),
    "openreports": ("openreports.io/v1alpha1", "Report", "ClusterReport"),
}


# A report is one etcd object: etcd refuses a request over 1.5 MiB and `kubectl apply` (its
# last-applied annotation) one over 256 KiB. A namespace's results are spread over as many
# parts as keep each under PART_LIMIT, aiming at PART_TARGET since hashing does not fill the
# parts evenly.
PART_TARGET = 200 * 1024
PART_LIMIT = 480 * 1024
MAX_PARTS = 4096
REPORT_PREFIX = "gpupolicy-"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpupolicy"}


def report_namespaces(c: Collector) -> list[str]:
    """The namespaces that get reports, "" (the cluster report) first."""
    names = sorted((c.namespaces | c.covered | set(c.offsets)) - {""})
    return ["", *names] if c.cluster_report else names


def part_of(record: dict[str, Any]) -> int:
    """A stable number for the object a result is about (sha256, not hash(): the same in
    every run), so that an unchanged object stays in the same part while the part count
    does not change, and a doubled count only splits each part in two."""
    if "kind" in record:
        key = f"{record['apiVersion']}/{record['kind']}/{record['namespace']}/{record['name']}"
    else:  # a node's shared GPU, an unreadable document
        key = "|".join(str(record.get(k, "")) for k in ("rule", "node", "device", "file",
                                                          "line"))
    return int.from_bytes(hashlib.sha256(key.encode()).digest()[:8], "big")


def split(results: list[tuple[int, dict[str, Any]]]) -> list[list[dict[str, Any]]]:
    """Results (with their part_of number) over the fewest power-of-two parts that keep
    every part under PART_LIMIT bytes of JSON; one (empty) part when there is nothing."""
    sizes = [len(json.dumps(r, separators=(",", ":"))) + 1 for _, r in results]
    total = sum(sizes)
    n = 1
    while n < MAX_PARTS and n * PART_TARGET < total:
        n *= 2
    while True:
        parts: list[list[dict[str, Any]]] = [[] for _ in range(n)]
        bytes_in = [0] * n
        for (key, result), size in zip(results, sizes, strict=True):
            parts[key % n].append(result)
            bytes_in[key % n] += size
        if max(bytes_in) <= PART_LIMIT or n >= MAX_PARTS:
            break
        n *= 2
    # empty parts are not written: part numbers stay the hash's, so names can have gaps
    return parts


def policy_reports(c: Collector, fmt: str = "policyreport") -> Iterator[dict[str, Any]]:
    """The reports of every namespace the audit covered, findings or not, and of the cluster:
    applied, a namespace that was cleaned up gets an empty report that replaces yesterday's
    failures (violations are results; mutations are not). A namespace with many results
    gets several reports (`gpupolicy-0`, `gpupolicy-1`, ...; see split)."""
    api_version, kind, cluster_kind = REPORT_APIS[fmt]
    now = int(time.time())
    for namespace in report_namespaces(c):
        results = [(part_of(r), _pr_result(r, now)) for r in c.records(namespace)
                   if r["action"] != "mutate"]
        parts = split(results)
        del results
        for index, part in enumerate(parts):
            if not part and index:
                continue
            counts = Counter(r["result"] for r in part)
            meta: dict[str, Any] = {"name": f"{REPORT_PREFIX}{index}"}
            if namespace:
                meta["namespace"] = namespace
            meta["labels"] = dict(MANAGED_BY)
            report: dict[str, Any] = {"apiVersion": api_version,
                                      "kind": kind if namespace else cluster_kind,
                                      "metadata": meta}
            if fmt == "openreports":
                report["source"] = "gpupolicy"
            report["summary"] = {k: counts[k] for k in ("pass", "fail", "warn", "error", "skip")}
            report["results"] = part
            yield report


# libyaml's emitter where PyYAML has it: the pure-Python one took half the time of a
# 100,000-pod audit to print its reports
_Dumper: Any = getattr(yaml, "CSafeDumper", yaml.SafeDumper)


def write_policyreport(c: Collector, out: TextIO, fmt: str = "policyreport") -> None:
    for i, doc in enumerate(policy_reports(c, fmt)):
        if i:
            out.write("---\n")
        out.write(yaml.dump(doc, Dumper=_Dumper, sort_keys=False, width=120,
                            allow_unicode=False))


def write_table(c: Collector, out: TextIO) -> None:
    # names, messages and file names come from the files and the cluster: a terminal must not
    # run the escape sequences (or bidi controls) they may hold
    def write(text: str) -> None:
        out.write(report.printable(text))

    count = report.plural
    s = c.summary()
    if c.incomplete:
        write("INCOMPLETE AUDIT: what could not be read (Not audited, below) is not "
              "counted.\n")
    kinds = ", ".join(count(n, k) for k, n in s["audited"].items()) or "nothing"
    claims = f", {count(s['claims'], 'claim')}" if s["claims"] else ""
    write(f"Audited {kinds} in {count(s['namespaces'], 'namespace')} ("
          f"{count(s['pods'], 'running pod')}, {count(s['templates'], 'template')}{claims}) "
          f"in {s['seconds']}s.\n")
    if s["skippedOwned"]:
        owned = ", ".join(count(n, k) for k, n in s["skippedOwned"].items())
        write(f"Skipped {owned} owned by a controller whose template is audited.\n")
    for what, why in s["unavailable"].items():
        write(f"Not audited: {what}: {why}\n")
    write("\n")
    rows = c.policy_rows()
    header = ("POLICY", "NAMESPACE", "OBJECTS", "MUTATE", "REFUSE", "WARN", "AUDIT")
    cells = [header] + [(report.printable(r["policy"]), report.printable(r["namespace"]),
                         *(str(r[k]) for k in ("objects", "mutate", "refuse", "warn", "audit")))
                        for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    for row in cells:
        write("  ".join(cell.ljust(w) if i < 2 else cell.rjust(w)
                        for i, (cell, w) in enumerate(zip(row, widths, strict=True)))
              .rstrip() + "\n")
    if not rows:
        write("(no object is governed by any policy)\n")
    over = c.cluster.get("sharedGPUsOverLimit") or []
    pending = c.cluster.get("pendingGPUPods") or {}
    # the cluster's own findings (pending pods, shared GPUs over their limit) belong to no row
    # of the table: counted apart, so the WARN column and the warnings agree
    cluster = len(over) + len(pending.get("pods") or ())
    warnings = s["findings"]["warning"] - cluster
    write(f"\nWould refuse {count(s['refusedObjects'], 'object')}, mutate "
          f"{s['mutatedObjects']:,}; {count(s['findings']['error'], 'error')}, "
          f"{count(warnings, 'warning')}"
          + (f"; {count(cluster, 'cluster finding')} (below)" if cluster else "") + ".\n")
    if c.examples:
        write(f"\nWould be refused (first {len(c.examples)}):\n")
        for e in sorted(c.examples, key=lambda e: e["source"]):
            write(f"  {e['object']} ({e['source']}): {e['why']}\n")
    if over:
        write(f"\nShared GPUs over maxPodsPerGPU: {len(over)}\n")
        for o in over[:EXAMPLES]:
            write(f"  node {o['node']} {o['device']}: {o['pods']} pods > "
                  f"{o['maxPodsPerGPU']} (policy {o['policy']}): {', '.join(o['sample'])}"
                  f"{' ...' if o['pods'] > len(o['sample']) else ''}\n")
        if len(over) > EXAMPLES:
            write(f"  ... and {len(over) - EXAMPLES} more (-o json lists them all)\n")
    if pending.get("total"):
        write(f"\nGPU pods Pending and unscheduled: {pending['total']}\n")
        for p in pending["pods"][:EXAMPLES]:
            write(f"  {p['namespace']}/{p['name']}\n")
            if p["scheduler"]:
                write(f"    scheduler: {p['scheduler']}\n")
            for line in p["pools"]:
                write(f"    {line}\n")
