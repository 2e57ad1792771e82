"""dra-claim-invalid: fields of a ResourceClaim or template the API server would refuse
(a request with both `exactly` and `firstAvailable`, an unknown allocationMode, a count over
32, a malformed quantity...), each at its field path.

FAIL: `requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 64}}]`
PASS: `count: 8`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.view import ClaimView

ID = "dra-claim-invalid"
INTRINSIC = True


def check_claim(view: ClaimView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    for problem in view.claim.problems:
        if problem.kind == "malformed":
            yield Finding(ID, problem.message, problem.path)
