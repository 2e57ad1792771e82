"""What the engine answers: violations (data, with field paths) and the decision."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal, NamedTuple

from policies.paths import FieldPath, to_display, to_pointer

if TYPE_CHECKING:  # a type only: what needs no policy (--help, --version) builds no models
    from policies.model import Mode

Severity = Literal["error", "warning", "info"]
Level = Literal["error", "warning"]


class Finding(NamedTuple):
    """What a rule yields: a breach at a path. The engine adds policy and mode."""

    rule: str
    message: str
    path: FieldPath
    # "warning" marks advice (a pod that will run, but not as the user thinks): it never denies.
    level: Level = "error"


class Violation(NamedTuple):
    rule: str
    message: str
    path: FieldPath
    policy: str
    mode: Mode
    level: Level = "error"
    # A fact (an INTRINSIC rule: what the API server or kubelet refuses whatever the policy
    # says) is an error in every report, even under a Warn or Audit policy.
    fact: bool = False

    @property
    def severity(self) -> Severity:
        """The one place a report's severity is decided: an error breach of an Enforce policy,
        or a fact under any mode, is an error; everything else is a warning."""
        if self.level == "error" and (self.mode == "Enforce" or self.fact):
            return "error"
        return "warning"

    @property
    def denies(self) -> bool:
        """Whether the webhook refuses: Enforce only. Under Warn and Audit a fact is admitted
        with the policy's say (the API server refuses it anyway), while reports call it an
        error."""
        return self.mode == "Enforce" and self.level == "error"

    @property
    def field(self) -> str:
        return to_display(self.path)

    def describe(self) -> str:
        """One line a person can act on: `rule-id at path: reason`."""
        where = f" at {self.field}" if self.path else ""
        return f"{self.rule}{where}: {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return {
            "rule": self.rule,
            "severity": self.severity,
            "message": self.message,
            "path": self.field,
            "policy": self.policy,
            "mode": self.mode,
        }


class PatchOp(NamedTuple):
    """One change the engine makes, and the policy whose `inject` asked for it.

    `path` is the RFC 6902 path as a tuple: it ends in "-" when the op appends to a list,
    as the JSON pointer does. When several policies inject the same list item, the one
    credited is the winner (lowest priority, then name), the one that would have added it
    alone. A named tuple, not a frozen dataclass: one is made per op on the admission path,
    and this is about half the cost."""

    op: Literal["add", "remove"]  # the engine only adds; `migrate` removes too
    path: FieldPath
    value: Any
    policy: str

    def as_dict(self) -> dict[str, Any]:
        """The op as the mutating webhook sends it."""
        if self.op == "remove":
            return {"op": "remove", "path": to_pointer(self.path)}
        return {"op": self.op, "path": to_pointer(self.path), "value": self.value}


class Unresolved(NamedTuple):
    """A claim a pod names that the inputs do not hold: the GPUs it may give are not judged
    (a claim is not guessed at). Lint reports it at `path`; admission says it as a note."""

    path: FieldPath  # the pod's spec.resourceClaims entry
    message: str  # "ResourceClaimTemplate ns/name is not known here (...)"

    @property
    def note(self) -> str:
        return f"{to_display(self.path)}: {self.message}"


class Decision(NamedTuple):
    allowed: bool
    # RFC 6902 ops as sent to the apiserver; `ops` holds the same ops, structured and attributed.
    patch: tuple[dict[str, Any], ...] = ()
    mutated: Any = None
    violations: tuple[Violation, ...] = ()
    gpu: bool = False
    policies: tuple[str, ...] = ()
    ops: tuple[PatchOp, ...] = ()
    # Why the object was not reviewed at all (a kind not in the workload-kinds table that
    # holds a pod spec); "" when it was, or had nothing to review.
    skipped: str = ""
    # What the decision could not do and says so: injections a kind has no place for, and
    # the claims it could not judge (also in `unresolved`, with their paths).
    notes: tuple[str, ...] = ()
    unresolved: tuple[Unresolved, ...] = ()

    @property
    def denials(self) -> tuple[Violation, ...]:
        return tuple(v for v in self.violations if v.denies)

    @property
    def warnings(self) -> tuple[str, ...]:
        """Admission warnings: Warn-mode breaches and advice (Audit mode stays silent), then
        what the decision could not do: an object not reviewed, an injection left out."""
        return (
            *(v.describe() for v in self.violations if not v.denies and v.mode != "Audit"),
            *((f"not reviewed: {self.skipped}",) if self.skipped else ()),
            *self.notes,
        )

    @property
    def audited(self) -> tuple[Violation, ...]:
        return tuple(v for v in self.violations if v.mode == "Audit")
