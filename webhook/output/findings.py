"""What every report is made of: the finding, the help text of every rule, and the words for a
would-be mutation. `lint` and `audit` both build findings here; output/report.py renders them.
Standard library and the core only, so the linter's start-up stays fast."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from policies.decision import PatchOp
from policies.paths import FieldPath, to_display

Severity = Literal["error", "warning", "info"]

MUTATION = "mutation"
ENGINE_ERROR = "engine-error"
PENDING = "gpu-pod-pending"
UNRESOLVED = "dra-claim-unresolved"
EDGE_RULE_HELP = {
    MUTATION: "The admission webhook would change this object (shown with --show-mutations; "
              "`gpupolicy lint --fix` writes the change into the file).",
    ENGINE_ERROR: "The policy engine could not review this object; please report it.",
    UNRESOLVED: "A pod names a ResourceClaim or ResourceClaimTemplate that is not among the "
                "inputs, so the GPUs it may give are not judged (lint the claim with the pod, "
                "or give the cluster's claims with --inventory).",
    PENDING: "A GPU pod is Pending and unscheduled; the message says why each node pool "
             "cannot take it.",
}


def version() -> str:
    from importlib import metadata  # 18 ms of imports, for the reports that name a version

    try:
        return metadata.version("gpupolicy")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        return "0+unknown"


@dataclass(frozen=True, slots=True)
class Finding:
    """One line of a report: a rule's finding, placed at a file position or an object."""

    rule: str
    severity: Severity
    message: str
    file: str | None = None
    line: int | None = None
    column: int | None = None
    policy: str | None = None
    path: str | None = None  # display field path, `spec.containers[0].resources`
    object: str | None = None  # `Deployment ml/train`
    document: int | None = None  # 1-based index in its file's stream
    rendered: str | None = None  # `file:line:column` in Helm output, when `file` is its template

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def where(self) -> str:
        parts = [self.file or self.object or "-"]
        if self.line:
            parts.append(str(self.line))
            if self.column:
                parts.append(str(self.column))
        return ":".join(parts)


def rule_help(rules: Iterable[str]) -> dict[str, str]:
    """Help text per rule id (SARIF): the reader's, the edges' and the engine's rules."""
    from policies.yamlpos import RULE_HELP

    known = {**RULE_HELP, **EDGE_RULE_HELP, **_engine_rule_help()}
    return {rule: known.get(rule, "") for rule in sorted(set(rules))}


def _engine_rule_help() -> dict[str, str]:
    """A rule module's docstring is its documentation (PASS/FAIL examples included)."""
    from policies.rules import RULES

    out = {}
    for rule_id, module in RULES.items():
        doc = (module.__doc__ or "").strip()
        out[rule_id] = doc.removeprefix(f"{rule_id}:").strip()
    return out


def mutation(op: PatchOp) -> tuple[str, FieldPath]:
    """The words for one patch op ("would add spec.tolerations: [...]") and the path to place
    it at: the engine only adds, and an added field does not exist yet, so its parent."""
    path = op.path
    value = json.dumps(op.value, separators=(",", ":"), default=str)
    if len(value) > 120:
        value = value[:117] + "..."
    verb = "add"
    if path and path[-1] == "-":
        verb, path = "append to", path[:-1]
    elif path and isinstance(path[-1], int):
        verb = "insert"
    return f"would {verb} {to_display(path) or '/'}: {value}", op.path[:-1]
