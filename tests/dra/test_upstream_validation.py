"""The apiserver's ResourceClaim validation scenarios (tests/dra/upstream/validation.yaml) against
what gpupolicy refuses a claim for: the malformed fields its parser finds and the selectors
that do not compile or are over the cost limit (claims.selector_problems)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from policies.dra.claims import selector_problems
from policies.dra.parse_claims import parse_claim
from policies.paths import to_display
from tests.dra.upstream.table import rows, verdict

ROWS = rows("validation")
_LONG = re.compile(r"<<x\*(\d+)>>")


def _expand(value: Any) -> Any:
    if isinstance(value, str):
        return _LONG.sub(lambda m: "x" * int(m.group(1)), value)
    if isinstance(value, list):
        return [_expand(v) for v in value]
    if isinstance(value, dict):
        return {k: _expand(v) for k, v in value.items()}
    return value


def _judge(row: dict[str, Any]) -> str:
    claim = parse_claim({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
                         "metadata": {"name": "foo", "namespace": "ns"},
                         "spec": {"devices": _expand(row["devices"])}})
    found = {to_display(p.path) for p in claim.problems}
    found |= {to_display(p.path) for p in selector_problems(claim)
              if p.kind == "selector-invalid"}
    want = set(row["refused"])
    if found == want:
        return ""
    return f"missing {sorted(want - found)}, extra {sorted(found - want)}"


@pytest.mark.parametrize("row", ROWS, ids=[r["id"] for r in ROWS])
def test_upstream_validation_scenario(row: dict[str, Any]) -> None:
    verdict("validation", row, _judge(row))
