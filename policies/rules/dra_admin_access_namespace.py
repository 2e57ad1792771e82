"""dra-admin-access-namespace: a request with `adminAccess: true` (access to devices already
in use, for monitoring and maintenance) is refused by the API server outside a namespace
labelled `resource.kubernetes.io/admin-access: "true"`.

FAIL: `exactly: {deviceClassName: gpu.nvidia.com, adminAccess: true}` in namespace ml-train
PASS: the same in a namespace with the label
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.dra.claims import requests_of
from policies.model import GPUPolicy
from policies.view import ClaimView

ID = "dra-admin-access-namespace"
INTRINSIC = True

EXAMPLES = """
- FAIL: admin access in a namespace without the admin-access label
  object:
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaim
    metadata: {name: gpus, namespace: ml-train}
    spec:
      devices:
        requests:
        - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com, adminAccess: true}}
- PASS: the same request without admin access
  object:
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaim
    metadata: {name: gpus, namespace: ml-train}
    spec:
      devices:
        requests:
        - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com}}
"""
NATIVE = "It reads ResourceClaims, which the pod only names: the claims are inventory."
LABEL = "resource.kubernetes.io/admin-access"


def check_claim(view: ClaimView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    if context.namespace_labels(view.namespace).get(LABEL) == "true":
        return
    for request in requests_of(view.claim):
        if request.admin_access:
            yield Finding(ID, f"adminAccess is only allowed in a namespace labelled "
                          f"{LABEL}: \"true\"; namespace {view.namespace} is not",
                          (*request.path, "adminAccess"))
