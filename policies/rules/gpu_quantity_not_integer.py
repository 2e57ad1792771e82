"""gpu-quantity-not-integer: accelerator quantities must be whole, non-negative numbers.

The apiserver refuses `nvidia.com/gpu: 0.5` (`must be an integer`) for every extended resource.
Quantities are read as the apiserver reads them (policies/quantity.py); anything else (`²`,
`" 1"`, `1e`, null, true, NaN, a list) is not a quantity.
FAIL: `limits: {nvidia.com/gpu: 0.5}`, `limits: {aliyun.com/gpu-mem: 5.5}`,
  `limits: {nvidia.com/gpu: -1}`, `limits: {nvidia.com/gpu: null}`, `limits: {nvidia.com/gpu: "1e"}`
PASS: `limits: {nvidia.com/gpu: 1}`, `limits: {nvidia.com/gpu: "1000m"}`, `nvidia.com/gpu: 1e1`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.display import shown
from policies.model import GPUPolicy
from policies.quantity import QuantityError, parse_quantity
from policies.rules._common import accelerator_sections
from policies.view import PodView

ID = "gpu-quantity-not-integer"
INTRINSIC = True

EXAMPLES = """
- FAIL: half a GPU as an extended resource
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/gpu: "0.5"}}
- PASS: one GPU
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
NATIVE = "The API server refuses a non-integer extended resource in a pod itself."
HINT = ("for a share of a GPU use a MIG profile, HAMi nvidia.com/gpumem / nvidia.com/gpucores, "
        "or a memory unit (aliyun.com/gpu-mem is in GiB)")


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    for container, named in accelerator_sections(view):
        for section, values, names in named:
            for name in names:
                path = (*container.path, container.resources_field, section, name)
                raw = values[name]
                try:
                    value = parse_quantity(raw)
                except QuantityError as exc:
                    yield Finding(ID, str(exc), path)
                    continue
                if value < 0:
                    yield Finding(ID, f"{shown(raw)}: must be greater than or equal to 0", path)
                elif value.denominator != 1:
                    yield Finding(ID, f"{shown(raw)}: must be an integer; {HINT}", path)
