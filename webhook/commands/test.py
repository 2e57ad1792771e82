"""`gpupolicy test [DIR|FILE ...]`: policy unit tests, as `kyverno test` and `gator verify` do
them. A `GPUPolicyTest` suite (webhook/inputs/suite.py) names policies, an inventory, namespaces and
resources; each case names a resource and what `review` must answer for it.

The engine decides, this module only compares: every input is read by webhook/inputs/sources.py (the
hardened reader every door uses) and every answer comes from `policies.engine.review`.
Exit 0 when every case passes, 1 when one fails, 2 when a suite is invalid or a case cannot
run (a path that cannot be read, a resource that is not there): never a silent pass.
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TextIO

from policies import yamlpos
from policies.catalog import Catalog
from policies.context import Context
from policies.decision import Decision
from policies.engine import namespace_of, review
from policies.loading import PolicyLoadError, check_unique
from policies.model import GPUPolicy
from policies.paths import to_display
from webhook.commands import options
from webhook.inputs import reading, sources, suite
from webhook.output import report

FORMATS = ("text", "json", "junit")
Status = Literal["PASS", "FAIL", "ERROR"]
_ABSENT = object()


@dataclass
class Outcome:
    resource: str  # as the case wrote it
    status: Status
    details: list[str] = field(default_factory=list)


@dataclass
class SuiteRun:
    file: str
    name: str
    outcomes: list[Outcome] = field(default_factory=list)
    error: str | None = None  # the suite could not run at all


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="*", metavar="PATH",
                        help="suite files, or directories searched for kind: GPUPolicyTest "
                             "(default: the current directory)")
    options.add_format_options(parser, FORMATS, "text")
    options.add_file_option(parser, FORMATS)
    parser.epilog = ("Exit status: 0 when every case passes, 1 when one fails, 2 for an "
                     "invalid suite, a resource a case names that is not there, or a usage "
                     "error.")


def run(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    options.merge_files(args)
    try:
        found = list(_find_suites(args.paths or ["."]))
        catalog = sources.load_catalog()
    except reading.SourceError as exc:
        stderr.write(f"gpupolicy test: {exc}\n")
        return 2
    runs = [_run(file, doc, catalog) if isinstance(doc, yamlpos.Document)
            else SuiteRun(file, file, error=doc) for file, doc in found]
    # the text report on stdout shows an invalid suite's problems: said once, not twice
    if args.format != "text" or options.to_file(args.output_file):
        for r in runs:
            if r.error:
                stderr.write(f"gpupolicy test: invalid suite: {r.error}\n")
    text = {"junit": format_junit, "json": format_json}.get(args.format, format_text)(runs)
    if not options.write_report(text, args.output_file, stdout, stderr, "test"):
        return 2
    statuses = {o.status for r in runs for o in r.outcomes}
    if any(r.error for r in runs) or "ERROR" in statuses:
        return 2
    return 1 if "FAIL" in statuses else 0


# ---- finding suites -------------------------------------------------------------------------

def _find_suites(paths: Sequence[str]) -> Iterator[tuple[str, yamlpos.Document | str]]:
    """(file, suite document) for each suite, or (file, error). A file named on the command
    line must hold a suite; in a directory, files without one are the suites' inputs."""
    for given in paths:
        root = Path(given)
        files = reading.manifest_files(root)
        named = root.is_file()
        count = 0
        for file in files:
            stream = reading.read_stream(file)
            suites = [d for d in stream.documents if suite.is_suite(d.data)]
            if stream.problems and (named or suites or suite.KIND in stream.text):
                first = stream.problems[0]
                yield str(file), f"{file}:{first.line}:{first.column}: {first.message}"
                count += 1
                continue
            for doc in suites:
                yield str(file), doc
                count += 1
            if named and not suites:
                yield str(file), f"{file}: no {suite.KIND} document"
                count += 1
        if not count:
            raise reading.SourceError(f"{given}: no {suite.KIND} suite found")


# ---- running one suite ----------------------------------------------------------------------

class _Invalid(Exception):
    pass


def _run(file: str, document: yamlpos.Document, catalog: Catalog) -> SuiteRun:
    try:
        spec = suite.parse(document, file)
    except suite.SuiteError as exc:
        return SuiteRun(file, file, error=str(exc))
    result = SuiteRun(file, spec.metadata.name)
    try:
        context, objects = _inputs(spec, Path(file).parent, document, file, catalog)
    except _Invalid as exc:
        result.error = str(exc)
        return result
    repeated = Counter(case.key for case in spec.cases)
    for index, case in enumerate(spec.cases):
        obj = objects.get(case.key)
        # two cases on one resource get two names, so a report (JUnit above all) tells them apart
        name = case.resource if repeated[case.key] == 1 else (
            f"{case.resource} (case {index + 1}"
            + (f": {case.description})" if case.description else ")"))
        if obj is None:
            line, _ = document.position(("cases", index, "resource"))
            names = [f"{o.get('kind')}/{k[1]}/{k[2]}" for k, o in objects.items()]
            known = ", ".join(names[:10]) + (f" and {len(names) - 10} more"
                                             if len(names) > 10 else "") or "none"
            result.outcomes.append(Outcome(name, "ERROR", [
                f"{file}:{line}: cases[{index}].resource: {case.resource!r} is not among the "
                f"resources of the suite (found: {known})"]))
            continue
        decision = review(obj, context, namespace=case.key[1])
        details = list(_compare(case, decision))
        result.outcomes.append(Outcome(name, "FAIL" if details else "PASS", details))
    return result


def _inputs(
    spec: suite.Suite, base: Path, document: yamlpos.Document, file: str, catalog: Catalog
) -> tuple[Context, dict[tuple[str, str, str], dict[str, Any]]]:
    """The suite's Context and its resources by (kind, namespace, name). Raises _Invalid with
    file, line and field of the entry that failed."""

    def where(*path: str | int) -> str:
        line, _ = document.position(path)
        return f"{file}:{line}: {to_display(path)}"

    found = sources.ClusterObjects()
    objects: dict[tuple[str, str, str], dict[str, Any]] = {}
    for i, name in enumerate(spec.resources):
        try:
            for path in reading.manifest_files(base / name):
                stream = reading.read_stream(path)
                if stream.problems:
                    first = stream.problems[0]
                    raise reading.SourceError(f"{path}:{first.line}:{first.column}: "
                                              f"{first.message}")
                for obj in reading.stream_objects(stream):
                    if suite.is_suite(obj):  # resources: [.] beside the suite itself
                        continue
                    found.add(obj)
                    key = _key(obj)
                    if key in objects:
                        raise reading.SourceError(
                            f"{path}: {obj.get('kind')}/{key[1]}/{key[2]} is given twice")
                    objects[key] = obj
        except reading.SourceError as exc:
            raise _Invalid(f"{where('resources', i)}: {exc}") from None
    if found.problems:
        raise _Invalid(f"{where('resources')}: {'; '.join(found.problems)}")

    loaded: list[tuple[str, GPUPolicy]] = []
    given: Sequence[str | None] = spec.policies or (None,)  # None: the bundled policies
    for i, entry in enumerate(given):
        source = None if entry is None else base / entry
        try:
            loaded.extend((str(source or "bundled"), p) for p in sources.load_policies(source))
        except (reading.SourceError, PolicyLoadError) as exc:
            raise _Invalid(f"{where('policies', i)}: {exc}") from None
    try:
        check_unique(loaded)
    except PolicyLoadError as exc:
        raise _Invalid(f"{where('policies')}: {exc}") from None
    policies, clashes = sources.merge_policies([p for _, p in loaded], found.policies)
    if clashes:
        raise _Invalid(f"{where('resources')}: {'; '.join(clashes.values())}")

    namespaces: dict[str, dict[str, str]] = {}
    for i, name in enumerate(spec.namespaces):
        try:
            namespaces.update(sources.load_namespaces([base / name]))
        except reading.SourceError as exc:
            raise _Invalid(f"{where('namespaces', i)}: {exc}") from None
    namespaces.update(found.namespaces)

    try:
        inventory, claims = sources.inventory_and_claims(
            found, base / spec.inventory if spec.inventory is not None else None, catalog)
    except reading.SourceError as exc:
        raise _Invalid(f"{where('inventory')}: {exc}") from None
    context = Context(policies=policies, catalog=catalog, inventory=inventory,
                      namespaces=namespaces, excluded_namespaces=sources.excluded_namespaces(None),
                      claims=claims, api=found.api())
    return context, objects


def _key(obj: Mapping[str, Any]) -> tuple[str, str, str]:
    """(kind lowercased, namespace, name): as a case names a resource (suite.Case.key)."""
    meta = reading.metadata_of(obj)
    return (str(obj.get("kind") or "").lower(), namespace_of(obj, None),
            str(meta.get("name") or ""))


# ---- comparing ------------------------------------------------------------------------------

def _compare(case: suite.Case, decision: Decision) -> Iterator[str]:
    """What differs between the case and the engine's answer, one line each; nothing: a pass."""
    fired = sorted({v.rule for v in decision.violations})
    if case.allowed is not None and case.allowed != decision.allowed:
        why = "; ".join(v.describe() for v in decision.denials)
        yield (f"allowed: expected {_show(case.allowed)}, got {_show(decision.allowed)}"
               + (f" ({why})" if why else ""))
    if case.rules is not None and set(case.rules) != set(fired):
        missing = [r for r in case.rules if r not in fired]
        extra = [r for r in fired if r not in case.rules]
        yield (f"rules: expected {_list(case.rules)}, got {_list(fired)}"
               + (f"; did not fire: {', '.join(missing)}" if missing else "")
               + (f"; also fired: {', '.join(extra)}" if extra else ""))
    if case.rules_include is not None:
        missing = [r for r in case.rules_include if r not in fired]
        if missing:
            yield (f"rulesInclude: expected {_list(case.rules_include)} to fire, "
                   f"{', '.join(missing)} did not; got {_list(fired)}")
    for rule in case.rules_exclude or ():
        for v in decision.violations:
            if v.rule == rule:
                yield f"rulesExclude: {rule} fired: {v.describe()}"
    if case.mutates is not None and case.mutates != bool(decision.patch):
        ops = ", ".join(f"{op['op']} {op['path']}" for op in decision.patch)
        yield (f"mutates: expected {_show(case.mutates)}, got {_show(bool(decision.patch))}"
               + (f" ({ops})" if ops else ""))
    for pointer, expected in (case.patched or {}).items():
        got = resolve(decision.mutated, pointer)
        if got is _ABSENT or not _same(expected, got):
            shown = "(not set)" if got is _ABSENT else _show(got)
            yield f"patched {pointer}: expected {_show(expected)}, got {shown}"


def resolve(doc: Any, pointer: str) -> Any:
    """The value at an RFC 6901 pointer, or _ABSENT (a missing key, an index out of range)."""
    for raw in pointer.split("/")[1:]:
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(doc, dict) and token in doc:
            doc = doc[token]
        elif isinstance(doc, list) and token.isdigit() and int(token) < len(doc):
            doc = doc[int(token)]
        else:
            return _ABSENT
    return doc


def _same(expected: Any, got: Any) -> bool:
    """Equal as JSON values: `true` is not `1`, and `"1"` is not `1`."""
    if isinstance(expected, bool) or isinstance(got, bool):
        return type(expected) is type(got) and expected == got
    if isinstance(expected, dict) and isinstance(got, dict):
        return expected.keys() == got.keys() and all(_same(v, got[k]) for k, v in expected.items())
    if isinstance(expected, list) and isinstance(got, list):
        return len(expected) == len(got) and all(map(_same, expected, got))
    if isinstance(expected, int | float) and isinstance(got, int | float):
        return expected == got
    return type(expected) is type(got) and expected == got


def _show(value: Any) -> str:
    return json.dumps(value, default=str, ensure_ascii=False)


def _list(rules: Sequence[str]) -> str:
    return "[" + ", ".join(rules) + "]"


# ---- reports --------------------------------------------------------------------------------

def format_text(runs: Sequence[SuiteRun]) -> str:
    lines: list[str] = []
    for r in runs:
        lines.append(f"{r.name} ({r.file})" if r.name != r.file else r.file)
        if r.error:
            lines.extend(f"  ERROR {line}" for line in r.error.splitlines())
        for o in r.outcomes:
            lines.append(f"  {o.status:<5} {o.resource}")
            lines.extend(f"        {d}" for d in o.details)
    total = _totals(runs)
    lines.append(f"{report.plural(total['tests'], 'case')} in "
                 f"{report.plural(len(runs), 'suite')}: "
                 f"{total['passed']} passed, {total['failures']} failed, "
                 f"{report.plural(total['errors'], 'error')}")
    # messages quote manifest values: escaped as every report does
    return "\n".join(report.printable(line) for line in lines) + "\n"


def format_json(runs: Sequence[SuiteRun]) -> str:
    body = {
        "suites": [{"file": r.file, "name": r.name, "error": r.error,
                    "cases": [{"resource": o.resource, "status": o.status, "details": o.details}
                              for o in r.outcomes]} for r in runs],
        "summary": _totals(runs),
    }
    return json.dumps(body, indent=2, ensure_ascii=False) + "\n"


def format_junit(runs: Sequence[SuiteRun]) -> str:
    """One testsuite per suite, one testcase per case; an invalid suite is one testcase with
    an <error>, so CI shows it rather than an empty, green suite."""
    total = _totals(runs)
    q = report.quoteattr
    out = ['<?xml version="1.0" encoding="UTF-8"?>',
           f'<testsuites name="gpupolicy test" tests="{total["tests"]}" '
           f'failures="{total["failures"]}" errors="{total["errors"]}">']
    for r in runs:
        t = _totals([r])
        out.append(f'  <testsuite name={q(r.file)} tests="{t["tests"]}" '
                   f'failures="{t["failures"]}" errors="{t["errors"]}" skipped="0">')
        if r.error:
            first = r.error.splitlines()[0]
            out.append(f'    <testcase classname={q(r.name)} name="suite">')
            out.append(f'      <error message={q(first)} type="invalid-suite">'
                       f"{report.escape(r.error)}</error>")
            out.append("    </testcase>")
        for o in r.outcomes:
            if o.status == "PASS":
                out.append(f"    <testcase classname={q(r.name)} name={q(o.resource)}/>")
                continue
            tag, kind = ("failure", "mismatch") if o.status == "FAIL" else ("error", "not-run")
            out.append(f"    <testcase classname={q(r.name)} name={q(o.resource)}>")
            out.append(f'      <{tag} message={q(o.details[0])} type="{kind}">'
                       f'{report.escape(chr(10).join(o.details))}</{tag}>')
            out.append("    </testcase>")
        out.append("  </testsuite>")
    out.append("</testsuites>")
    return "\n".join(out) + "\n"


def _totals(runs: Sequence[SuiteRun]) -> dict[str, int]:
    outcomes = [o for r in runs for o in r.outcomes]
    invalid = sum(1 for r in runs if r.error)
    return {
        "tests": len(outcomes) + invalid,
        "passed": sum(1 for o in outcomes if o.status == "PASS"),
        "failures": sum(1 for o in outcomes if o.status == "FAIL"),
        "errors": invalid + sum(1 for o in outcomes if o.status == "ERROR"),
    }
