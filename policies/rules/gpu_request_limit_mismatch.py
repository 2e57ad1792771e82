"""gpu-request-limit-mismatch: extended resources cannot be overcommitted: request == limit.

FAIL: `requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2}`
PASS: `requests: {nvidia.com/gpu: 2}, limits: {nvidia.com/gpu: "2"}`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.quantity import QuantityError, parse_quantity
from policies.rules._common import requested_accelerators
from policies.view import PodView

ID = "gpu-request-limit-mismatch"
INTRINSIC = True
NATIVE = "The API server refuses requests unequal to limits for extended resources itself."

EXAMPLES = """
- FAIL: a GPU request below its limit
  policy: {}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: main
        image: "trainer:1"
        resources: {requests: {nvidia.com/gpu: 1}, limits: {nvidia.com/gpu: 2}}
- PASS: request and limit equal
  policy: {}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: main
        image: "trainer:1"
        resources: {requests: {nvidia.com/gpu: 2}, limits: {nvidia.com/gpu: 2}}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    for container, name, requests, limits in requested_accelerators(view):
        if name not in limits:
            continue
        try:
            equal = parse_quantity(requests[name]) == parse_quantity(limits[name])
        except QuantityError:
            continue  # gpu-quantity-not-integer says why
        if not equal:
            yield Finding(
                ID,
                f"request {requests[name]} must be equal to {name} limit of {limits[name]}",
                (*container.path, "resources", "requests", name),
            )
