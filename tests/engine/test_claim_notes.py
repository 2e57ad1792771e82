"""A pod naming a claim the inputs do not hold is not guessed at, and not passed in silence:
the decision says which claim it could not judge (an admission warning, a review note)."""

from __future__ import annotations

from typing import Any

import pytest

from policies.engine import review
from tests.engine import casetable

ROWS = [
    # (resourceClaims, namespace, expected note substrings)
    ([{"name": "gpu", "resourceClaimTemplateName": "missing"}], "ml-train",
     ["spec.resourceClaims[0]: ResourceClaimTemplate ml-train/missing is not known here"]),
    ([{"name": "gpu", "resourceClaimName": "gone"}], "ml-train",
     ["spec.resourceClaims[0]: ResourceClaim ml-train/gone is not known here"]),
    ([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}], "ml-train", []),
    # the template lives in ml-train: a pod of another namespace cannot use it
    ([{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}], "team-a",
     ["ResourceClaimTemplate team-a/one-gpu is not known here"]),
    ([{"name": "gpu"}, "junk", {"name": "x", "resourceClaimTemplateName": 7}], "ml-train", []),
    ([{"name": "gpu", "resourceClaimTemplateName": "missing"}], "kube-system", []),  # ungoverned
]


@pytest.mark.parametrize(("refs", "namespace", "expected"), ROWS)
def test_unknown_claims_are_said(refs: list[Any], namespace: str, expected: list[str]) -> None:
    case = casetable.Case(id="notes", object={}, policies=("defaults",), namespace=namespace,
                          inventory="dra", allowed=True, rules=frozenset())
    pod = casetable.expand({"containers": [{}], "resourceClaims": refs})
    decision = review(pod, casetable.context_for(case), namespace=namespace)
    claimed = [n for n in decision.notes if "is not known here" in n]
    assert len(claimed) == len(expected), decision.notes
    for note, part in zip(claimed, expected, strict=True):
        assert part in note
    assert all(n in decision.warnings for n in claimed)
