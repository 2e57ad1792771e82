"""dra-selector-invalid: CEL selectors of a claim's requests (and of the DeviceClasses they
name) compile, with the compiler's message when not: the API server refuses such a claim, and
a class whose selector does not compile stops every pod that uses it. A selector that names an
attribute no device of the class has compiles but fails at allocation: advice (a warning).

FAIL: `device.attributes['gpu.nvidia.com'].productName ==` (no right-hand side)
PASS: `device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.claimfit import judged
from policies.context import Context
from policies.decision import Finding
from policies.dra.claims import selector_problems, unknown_attributes
from policies.model import GPUPolicy
from policies.view import ClaimView

ID = "dra-selector-invalid"
INTRINSIC = True
NATIVE = "The API server compiles DRA selectors itself and refuses a bad one."

EXAMPLES = """
- FAIL: a CEL selector with no right-hand side
  object:
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaim
    metadata: {name: gpus, namespace: ml-train}
    spec:
      devices:
        requests:
        - name: gpu
          exactly:
            deviceClassName: gpu.nvidia.com
            selectors: [{cel: {expression: "device.attributes['gpu.nvidia.com'].productName =="}}]
- PASS: a selector that compiles
  object:
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaim
    metadata: {name: gpus, namespace: ml-train}
    spec:
      devices:
        requests:
        - name: gpu
          exactly:
            deviceClassName: gpu.nvidia.com
            selectors:
            - cel: {expression: "device.attributes['gpu.nvidia.com'].productName == 'H100'"}
"""


def check_claim(view: ClaimView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    dra = judged(context.inventory)
    problems = selector_problems(view.claim, dra.classes if dra is not None else None)
    if dra is not None:
        problems += unknown_attributes(view.claim, dra)
    for problem in problems:
        yield Finding(ID, problem.message, problem.path,
                      "warning" if problem.kind == "advice" else "error")
