"""What DRA parsing and evaluation found wrong, with the field path it is about."""

from __future__ import annotations

from typing import Literal, NamedTuple

from policies.paths import FieldPath

# malformed: the apiserver would refuse the field. selector-invalid: the CEL does not compile or
# fails at run time on a device (the scheduler aborts the pod). advice: accepted, likely wrong.
ProblemKind = Literal["malformed", "selector-invalid", "advice"]


class Problem(NamedTuple):
    path: FieldPath
    message: str
    kind: ProblemKind = "malformed"
