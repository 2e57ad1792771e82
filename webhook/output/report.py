"""Findings for people and machines: text, json, sarif (2.1.0), junit and GitHub annotations.

Generic on purpose: `gpupolicy lint` and `gpupolicy audit` both hand over a list of
`ReportFinding`; file, line and column are optional (a cluster object has no file).
Standard library only, so the linter's start-up stays fast.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO
from urllib.parse import quote

from webhook.output.findings import Finding, version

FORMATS = ("text", "json", "sarif", "junit", "github")
TOOL_NAME = "gpupolicy"
TOOL_URI = "https://github.com/gpupolicy/gpupolicy"
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
_ORDER = {"error": 0, "warning": 1, "info": 2}


ReportFinding = Finding  # the name the formats grew up with


def sort_key(finding: ReportFinding) -> tuple[Any, ...]:
    """By place, then severity; findings at one place keep the order they were made in (the
    engine's order, the patch's order), as the sort is stable."""
    return (finding.file or "", finding.line or 0, finding.column or 0, _ORDER[finding.severity])


def counts(findings: Iterable[ReportFinding]) -> dict[str, int]:
    out = {"error": 0, "warning": 0, "info": 0}
    for f in findings:
        out[f.severity] += 1
    return out


def render(
    fmt: str,
    findings: Sequence[ReportFinding],
    *,
    files: Sequence[str] = (),
    color: bool = False,
    rule_help: Mapping[str, str] | None = None,
) -> str:
    """The whole report as one string. `files` are the inputs checked (junit lists clean ones)."""
    ordered = sorted(findings, key=sort_key)
    if fmt == "text":
        return format_text(ordered, color=color, files=files)
    if fmt == "json":
        return format_json(ordered, files=files)
    if fmt == "sarif":
        return format_sarif(ordered, rule_help=rule_help or {})
    if fmt == "junit":
        return format_junit(ordered, files=files)
    if fmt == "github":
        return format_github(ordered)
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")


# -- text -------------------------------------------------------------------------------------

_COLORS = {"error": "31", "warning": "33", "info": "36", "dim": "2", "bold": "1"}


def format_text(
    findings: Sequence[ReportFinding], *, color: bool = False, files: Sequence[str] = ()
) -> str:
    paint: Callable[[str, str], str] = (
        (lambda what, text: f"\033[{_COLORS[what]}m{text}\033[0m") if color
        else (lambda what, text: text)
    )
    lines: list[str] = []
    group: str | None = None
    for f in findings:
        f = _printable(f)
        name = f.file or f.object or "-"
        if name != group:
            if group is not None:
                lines.append("")
            lines.append(paint("bold", name))
            group = name
        where = f"{f.line}:{f.column or 1}" if f.line else "-"
        about = " ".join(x for x in (
            f"[{f.policy}]" if f.policy else "",
            f.object if f.object and f.object != name else "",
            f.path if f.path and f.severity != "info" else "",  # a mutation's message has it
        ) if x)
        lines.append(
            f"  {where:<8} {paint(f.severity, f'{f.severity:<7}')} {f.message}  "
            + paint("dim", f.rule + (f"  {about}" if about else ""))
        )
    total = counts(findings)
    if lines:
        lines.append("")
    problems = total["error"] + total["warning"]
    summary = (
        f"{problems} problem{'s' * (problems != 1)} ({total['error']} error"
        f"{'s' * (total['error'] != 1)}, {total['warning']} warning"
        f"{'s' * (total['warning'] != 1)})"
    )
    if total["info"]:
        summary += f", {total['info']} would-be mutation{'s' * (total['info'] != 1)}"
    if files:
        summary += f" in {len(files)} file{'s' * (len(files) != 1)}"
    lines.append(paint("error" if total["error"] else "bold", summary))
    return "\n".join(lines) + "\n"


# Manifests are input from anyone: a terminal must not run the escape sequences they hold,
# nor show text reordered by bidirectional controls (U+202E makes "exe.txt" read "txt.exe").
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                      "\u2066-\u2069]")


def printable(text: str) -> str:
    """Control characters a manifest value holds, escaped: a terminal must not run them."""
    if not _CONTROL.search(text):
        return text
    return _CONTROL.sub(_escaped, text)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def plural(count: int, word: str, many: str | None = None) -> str:
    """`1 warning`, `2 warnings`, `1,204 Pods`: counts in reports read as English."""
    return f"{count:,} {word if count == 1 else many or word + 's'}"


def _printable(f: Finding) -> Finding:
    def clean(text: str | None) -> str | None:
        return None if text is None else printable(text)

    return dataclasses.replace(f, message=clean(f.message) or "", file=clean(f.file),
                               path=clean(f.path), object=clean(f.object),
                               policy=clean(f.policy))


# -- json -------------------------------------------------------------------------------------

def format_json(findings: Sequence[ReportFinding], *, files: Sequence[str] = ()) -> str:
    total = counts(findings)
    body = {
        "findings": [f.as_dict() for f in findings],
        "summary": {"errors": total["error"], "warnings": total["warning"],
                    "info": total["info"], "files": len(files)},
    }
    return json.dumps(body, indent=2, default=str) + "\n"


# -- sarif ------------------------------------------------------------------------------------

_SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}


def format_sarif(findings: Sequence[Finding], *, rule_help: Mapping[str, str]) -> str:
    out = io.StringIO()
    write_sarif(out, findings, rule_help=rule_help, rules=[f.rule for f in findings])
    return out.getvalue()


def write_sarif(
    out: TextIO, findings: Iterable[Finding], *, rule_help: Mapping[str, str],
    rules: Iterable[str], severities: Mapping[str, str] | None = None,
) -> int:
    """SARIF 2.1.0, results streamed one at a time after the rules (the rule list must be
    known first: `rules` and, per rule, its worst severity). A finding without a file is left
    out: GitHub code scanning rejects a whole upload when one result has no physical
    location. Returns how many were left out, for the caller to say so."""
    rule_ids = sorted(set(rules) | set(rule_help))
    index = {rule: i for i, rule in enumerate(rule_ids)}
    worst = dict(severities or {})
    if severities is None and isinstance(findings, Sequence):
        for f in findings:
            if f.rule not in worst or _ORDER[f.severity] < _ORDER[worst[f.rule]]:
                worst[f.rule] = f.severity
    tool = {"driver": {
        "name": TOOL_NAME, "version": version(), "semanticVersion": version(),
        "informationUri": TOOL_URI,
        "rules": [_sarif_rule(rule, rule_help.get(rule, ""), worst.get(rule, "warning"))
                  for rule in rule_ids],
    }}
    root = repository_root()
    bases = {"%SRCROOT%": {"uri": root.as_uri() + "/",
                           "description": {"text": "The repository the files belong to."}}}
    out.write(f'{{\n  "$schema": "{SARIF_SCHEMA}",\n  "version": "2.1.0",\n  "runs": [\n'
              f'    {{\n      "tool": {_nested(tool, 6)},\n'
              f'      "originalUriBaseIds": {_nested(bases, 6)},\n'
              '      "columnKind": "unicodeCodePoints",\n      "results": [')
    sep = "\n"
    left_out = 0
    for f in findings:
        if not f.file:
            left_out += 1
            continue
        result = _sarif_result(f, index[f.rule], root)
        out.write(f"{sep}        {_nested(result, 8)}")
        sep = ",\n"
    out.write("\n      ]\n    }\n  ]\n}\n" if sep != "\n" else "]\n    }\n  ]\n}\n")
    return left_out


def _nested(value: Any, indent: int) -> str:
    """JSON with two-space indentation, as it reads when nested `indent` spaces deep."""
    return json.dumps(value, indent=2, default=str).replace("\n", "\n" + " " * indent)


def _sarif_rule(rule: str, help_text: str, severity: str) -> dict[str, Any]:
    """`help_text` may hold paragraphs (a rule's documentation with PASS/FAIL examples): the
    first one describes the rule, its first sentence is the short description."""
    text = help_text.strip() or f"gpupolicy rule {rule}."
    first = " ".join(text.split("\n\n")[0].split())
    short = first.split(". ")[0].rstrip(".") + "."
    # PASS/FAIL example lines are paragraphs of their own in Markdown.
    markdown = f"**{rule}**: " + re.sub(r"\n(?=FAIL|PASS)", "\n\n", text)
    return {
        "id": rule,
        "name": "".join(part.capitalize() for part in rule.split("-")),
        "helpUri": help_uri(rule),
        "shortDescription": {"text": short[:1].upper() + short[1:]},
        "fullDescription": {"text": first[:1].upper() + first[1:]},
        "help": {"text": text, "markdown": markdown},
        "defaultConfiguration": {"level": _SARIF_LEVEL[severity]},
        "properties": {"tags": ["kubernetes", "gpu"]},
    }


def _sarif_result(f: ReportFinding, rule_index: int, root: Path) -> dict[str, Any]:
    result: dict[str, Any] = {
        "ruleId": f.rule,
        "ruleIndex": rule_index,
        "level": _SARIF_LEVEL[f.severity],
        "message": {"text": f.message},
    }
    if f.file:
        region: dict[str, int] = {"startLine": f.line or 1}
        if f.column:
            region["startColumn"] = f.column
        result["locations"] = [{"physicalLocation": {
            "artifactLocation": _artifact(f.file, root), "region": region,
        }}]
    # Stable across edits that only move lines, so code scanning keeps an alert's history.
    identity = "\0".join((f.rule, f.file or "", f.object or "", f.path or "", f.policy or ""))
    result["partialFingerprints"] = {
        "gpupolicyFinding/v1": hashlib.sha256(identity.encode()).hexdigest()[:32]
    }
    properties = {k: v for k, v in (("policy", f.policy), ("path", f.path),
                                    ("object", f.object)) if v}
    if properties:
        result["properties"] = properties
    return result


def repository_root(start: Path | None = None) -> Path:
    """The checkout the files belong to (the nearest folder with `.git`), else the working
    directory: code scanning resolves SARIF paths against the repository root."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / ".git").exists():
            return folder
    return here


def _artifact(file: str, root: Path) -> dict[str, str]:
    path = (Path.cwd() / file).resolve() if not Path(file).is_absolute() else Path(file)
    try:
        return {"uri": quote(path.relative_to(root).as_posix()), "uriBaseId": "%SRCROOT%"}
    except ValueError:  # outside the repository: an absolute URI
        return {"uri": path.as_uri()}


DOCS_URI = f"{TOOL_URI}/blob/main/docs"
# Rules documented in a section of a docs page rather than the rules reference.
_SECTIONS = {"yaml-": "lint-and-ci.md#linting-manifests",
             "mutation": "lint-and-ci.md#linting-manifests",
             "engine-error": "lint-and-ci.md#linting-manifests",
             "dra-claim-unresolved": "lint-and-ci.md#rule-dra-claim-unresolved",
             "gpu-pod-pending": "audit.md#why-is-my-gpu-pod-pending"}


def help_uri(rule: str) -> str:
    """Where a rule is documented: its section of docs/rules.md (generated from the rule
    modules, each with an anchor), or the docs section of what is not a rule module."""
    for prefix, section in _SECTIONS.items():
        if rule.startswith(prefix):
            return f"{DOCS_URI}/{section}"
    return f"{DOCS_URI}/rules.md#rule-{rule}"


# -- junit ------------------------------------------------------------------------------------

def format_junit(findings: Sequence[ReportFinding], *, files: Sequence[str] = ()) -> str:
    """One test suite per file; each error is a failed test case, warnings and would-be
    mutations pass with their text in system-out; a clean file is one passing case."""
    by_file: dict[str, list[ReportFinding]] = {name: [] for name in files}
    for f in findings:
        by_file.setdefault(f.file or f.object or "-", []).append(f)
    total = counts(findings)
    out = ['<?xml version="1.0" encoding="UTF-8"?>']
    tests = sum(max(1, len(items)) for items in by_file.values())
    out.append(f'<testsuites name="{TOOL_NAME}" tests="{tests}" failures="{total["error"]}">')
    for name, items in by_file.items():
        errors = sum(1 for f in items if f.severity == "error")
        out.append(f"  <testsuite name={quoteattr(name)} tests=\"{max(1, len(items))}\" "
                   f"failures=\"{errors}\" errors=\"0\" skipped=\"0\">")
        if not items:
            out.append(f"    <testcase classname={quoteattr(name)} name=\"lint\"/>")
        for f in items:
            case = f"{f.rule} at {f.where()}"
            out.append(f"    <testcase classname={quoteattr(name)} name={quoteattr(case)}>")
            detail = escape(_plain(f))
            if f.severity == "error":
                out.append(f"      <failure message={quoteattr(f.message)} type=\"{f.rule}\">"
                           f"{detail}</failure>")
            else:
                out.append(f"      <system-out>{detail}</system-out>")
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def escape(text: str) -> str:
    """XML text; characters XML 1.0 cannot hold at all become U+FFFD."""
    import html  # here: only junit needs it (its entity table: 1 ms of import)
    return html.escape(_NOT_XML.sub("\ufffd", text), quote=False)


def quoteattr(text: str) -> str:
    """A double-quoted XML attribute value; white space survives attribute normalisation."""
    text = escape(text).replace('"', "&quot;")
    return '"' + text.replace("\n", "&#10;").replace("\r", "&#13;").replace("\t", "&#9;") + '"'


def _plain(f: ReportFinding) -> str:
    extra = "".join(f"\n{k}: {v}" for k, v in (("policy", f.policy), ("object", f.object),
                                               ("path", f.path)) if v)
    return f"{f.where()}: {f.severity}: {f.message} [{f.rule}]{extra}"


# -- github -----------------------------------------------------------------------------------

_GITHUB_LEVEL = {"error": "error", "warning": "warning", "info": "notice"}


def format_github(findings: Sequence[ReportFinding]) -> str:
    """GitHub Actions workflow commands: `::error file=…,line=…,col=…,title=…::message`."""
    lines = []
    for f in findings:
        props = []
        if f.file:
            props.append(f"file={_gh_prop(f.file)}")
            if f.line:
                props.append(f"line={f.line}")
                if f.column:
                    props.append(f"col={f.column}")
        props.append(f"title={_gh_prop(f.rule + (f' ({f.policy})' if f.policy else ''))}")
        message = f.message + (f" [{f.path}]" if f.path else "")
        if not f.file and f.object:
            message = f"{f.object}: {message}"
        lines.append(f"::{_GITHUB_LEVEL[f.severity]} {','.join(props)}::{_gh_data(message)}")
    return "".join(line + "\n" for line in lines)


def _gh_data(text: str) -> str:
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _gh_prop(text: str) -> str:
    return _gh_data(text).replace(":", "%3A").replace(",", "%2C")
