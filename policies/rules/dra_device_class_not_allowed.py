"""dra-device-class-not-allowed: requests of a ResourceClaim on a GPU or MIG device class name
a class that matches one of the globs in `rules.dra.allowedDeviceClasses` (requests on other
classes, NICs say, are not this policy's business).

FAIL (allowedDeviceClasses: ["mig.nvidia.com"]): `exactly: {deviceClassName: gpu.nvidia.com}`
PASS (allowedDeviceClasses: ["*.nvidia.com"]): the same request
"""

from __future__ import annotations

from collections.abc import Iterator
from fnmatch import fnmatchcase

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.view import ClaimView

ID = "dra-device-class-not-allowed"
INTRINSIC = False


def check_claim(view: ClaimView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    dra = policy.spec.rules.dra
    allowed = dra.allowed_device_classes if dra is not None else None
    if allowed is None:
        return
    for demand in view.demands:
        name = demand.request.class_name
        if demand.kind is not None and not any(fnmatchcase(name, g) for g in allowed):
            yield Finding(ID, f"device class {name} is not allowed here; allowed: "
                          f"{', '.join(allowed) or 'none'}",
                          (*demand.request.path, "deviceClassName"))
