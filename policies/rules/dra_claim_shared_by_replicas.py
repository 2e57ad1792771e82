"""dra-claim-shared-by-replicas (advice): a pod template (Deployment, Job, a training job's
replicas...) whose `spec.resourceClaims` names a ResourceClaim of GPUs by
`resourceClaimName` makes every pod it creates share that one claim's devices, the new pod of
a rolling update included; a `resourceClaimTemplateName` gives each pod GPUs of its own.

WARN: a Deployment whose pod template has `resourceClaims: [{name: gpu, resourceClaimName: gpus}]`
PASS: the same with `resourceClaimTemplateName: one-gpu`; a bare Pod naming a ResourceClaim
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.view import PodView

ID = "dra-claim-shared-by-replicas"
INTRINSIC = True
SEVERITY = "warning"  # advice: every finding it makes is a warning

EXAMPLES = """
- FAIL: every replica shares one ResourceClaim of GPUs
  nodes:
  - apiVersion: resource.k8s.io/v1
    kind: ResourceClaim
    metadata: {name: shared-gpus, namespace: ml-train}
    spec:
      devices:
        requests:
        - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 1}}
  object:
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: serve, namespace: ml-train}
    spec:
      selector: {matchLabels: {app: serve}}
      template:
        metadata: {labels: {app: serve}}
        spec:
          resourceClaims: [{name: gpu, resourceClaimName: shared-gpus}]
          containers:
          - {name: main, image: "server:1", resources: {claims: [{name: gpu}]}}
- PASS: a claim template gives each pod GPUs of its own
  nodes:
  - apiVersion: resource.k8s.io/v1
    kind: ResourceClaim
    metadata: {name: shared-gpus, namespace: ml-train}
    spec:
      devices:
        requests:
        - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 1}}
  object:
    apiVersion: apps/v1
    kind: Deployment
    metadata: {name: serve, namespace: ml-train}
    spec:
      selector: {matchLabels: {app: serve}}
      template:
        metadata: {labels: {app: serve}}
        spec:
          resourceClaims: [{name: gpu, resourceClaimTemplateName: gpu-per-pod}]
          containers:
          - {name: main, image: "server:1", resources: {claims: [{name: gpu}]}}
"""
NATIVE = "It reads the ResourceClaim a workload names, which is inventory."
FAMILIES = frozenset({"dra"})


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    if view.is_pod:
        return
    for use in view.demand.claims:
        if use.gpu and use.claim.kind == "ResourceClaim":
            yield Finding(ID, f"every pod this {view.kind} creates shares the GPUs of "
                          f"ResourceClaim {use.claim.name}; use a resourceClaimTemplateName "
                          "for GPUs of each pod's own", (*use.path, "resourceClaimName"),
                          "warning")
