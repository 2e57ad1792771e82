"""dra-device-class-not-allowed: requests of a ResourceClaim on a GPU or MIG device class name
a class that matches one of the globs in `rules.dra.allowedDeviceClasses` (requests on other
classes, NICs say, are not this policy's business). A pod is held to it too, for the claims it
names: the claim may predate the policy, or reach the cluster past the webhook.

FAIL (allowedDeviceClasses: ["mig.nvidia.com"]): `exactly: {deviceClassName: gpu.nvidia.com}`
PASS (allowedDeviceClasses: ["*.nvidia.com"]): the same request
"""

from __future__ import annotations

from collections.abc import Iterator
from fnmatch import fnmatchcase

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.rules._dra import gpu_requests
from policies.view import ClaimView, PodView

ID = "dra-device-class-not-allowed"
INTRINSIC = False
NATIVE = "A pod's classes are in the ResourceClaims it names (inventory); claims not translated."

EXAMPLES = """
- FAIL: whole GPUs where only MIG devices are allowed
  policy: {rules: {dra: {allowedDeviceClasses: ["mig.nvidia.com"]}}}
  object:
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaim
    metadata: {name: gpus, namespace: ml-train}
    spec:
      devices:
        requests:
        - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}
- PASS: the same request under a glob that allows it
  policy: {rules: {dra: {allowedDeviceClasses: ["*.nvidia.com"]}}}
  object:
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaim
    metadata: {name: gpus, namespace: ml-train}
    spec:
      devices:
        requests:
        - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    yield from _refused(view, policy)


def check_claim(view: ClaimView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    yield from _refused(view, policy)


def _refused(view: PodView | ClaimView, policy: GPUPolicy) -> Iterator[Finding]:
    dra = policy.spec.rules.dra
    allowed = dra.allowed_device_classes if dra is not None else None
    if allowed is None:
        return
    for path, demand, what in gpu_requests(view):
        name = demand.request.class_name
        if not any(fnmatchcase(name, g) for g in allowed):
            own = isinstance(view, ClaimView)  # the path names the request already
            yield Finding(ID, f"{'' if own else what + ': '}device class {name} is not allowed "
                          f"here; allowed: {', '.join(allowed) or 'none'}",
                          (*path, "deviceClassName") if own else path)
