"""gpu-request-without-limit: a request for an extended resource needs a limit.

The apiserver does not derive a limit from a request: `Limit must be set for non overcommitable
resources`. (A limit alone is fine: requests are copied from it.)
FAIL: `requests: {nvidia.com/gpu: 1}` and no limit
PASS: `limits: {nvidia.com/gpu: 1}`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.rules._common import requested_accelerators
from policies.view import PodView

ID = "gpu-request-without-limit"
INTRINSIC = True
NATIVE = "The API server refuses an extended resource request without a limit itself."

EXAMPLES = """
- FAIL: a GPU request with no limit (no policy injects one)
  policy: {}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - {name: main, image: "trainer:1", resources: {requests: {nvidia.com/gpu: 1}}}
- PASS: a GPU limit (the request defaults to it)
  policy: {}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/gpu: 1}}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    for container, name, requests, limits in requested_accelerators(view):
        if name not in limits:
            yield Finding(
                ID,
                f"{name} is requested ({requests[name]}) without a limit; the API server "
                "refuses it (Limit must be set for non overcommitable resources): "
                f"set limits.{name} to the same value",
                (*container.path, "resources", "requests", name),
            )
