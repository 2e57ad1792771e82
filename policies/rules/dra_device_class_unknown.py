"""dra-device-class-unknown: every request of a ResourceClaim names a DeviceClass the cluster
has. The API server admits a ResourceClaim or template whose class is missing, and a pod that
uses it; the scheduler cannot allocate the claim ("could not retrieve device class") and keeps
the pod Pending until the class is created, then schedules it. So this is advice, never a
refusal: a GitOps sync that installs a driver's classes and the workloads together must not
break. DeviceClasses among the reviewed inputs count as the cluster's. Needs an inventory that
lists the cluster's DeviceClasses (`kubectl get nodes,resourceslices,deviceclasses`).

WARN: `exactly: {deviceClassName: gpu.nvidia.co}` (a typo); a pod whose template names it
PASS: `exactly: {deviceClassName: gpu.nvidia.com}`; a class of that name shipped in the same file
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING

from policies.claimfit import judged
from policies.context import Context
from policies.decision import Finding
from policies.dra.claims import requests_of
from policies.model import GPUPolicy
from policies.view import ClaimView, PodView

if TYPE_CHECKING:
    from policies.dra.objects import Claim, Request

ID = "dra-device-class-unknown"
INTRINSIC = True
SEVERITY = "warning"  # advice: every finding it makes is a warning

EXAMPLES = """
- FAIL: a class the cluster does not have
  nodes:
  - apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: gpu.nvidia.com}
    spec:
      selectors:
      - cel: {expression: "device.driver == 'gpu.nvidia.com'"}
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-1
      labels: {kubernetes.io/hostname: gpu-1}
    status: {allocatable: {cpu: "8"}}
  - apiVersion: resource.k8s.io/v1
    kind: ResourceSlice
    metadata: {name: gpu-1-slice}
    spec:
      driver: gpu.nvidia.com
      nodeName: gpu-1
      pool: {name: gpu-1, generation: 1, resourceSliceCount: 1}
      devices:
      - name: gpu-0
        attributes: {type: {string: gpu}, productName: {string: NVIDIA A100-SXM4-80GB}}
  object:
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaim
    metadata: {name: gpus, namespace: ml-train}
    spec:
      devices:
        requests:
        - {name: gpu, exactly: {deviceClassName: mig.nvidia.com, count: 1}}
- PASS: the class the cluster has
  nodes:
  - apiVersion: resource.k8s.io/v1
    kind: DeviceClass
    metadata: {name: gpu.nvidia.com}
    spec:
      selectors:
      - cel: {expression: "device.driver == 'gpu.nvidia.com'"}
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-1
      labels: {kubernetes.io/hostname: gpu-1}
    status: {allocatable: {cpu: "8"}}
  - apiVersion: resource.k8s.io/v1
    kind: ResourceSlice
    metadata: {name: gpu-1-slice}
    spec:
      driver: gpu.nvidia.com
      nodeName: gpu-1
      pool: {name: gpu-1, generation: 1, resourceSliceCount: 1}
      devices:
      - name: gpu-0
        attributes: {type: {string: gpu}, productName: {string: NVIDIA A100-SXM4-80GB}}
  object:
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaim
    metadata: {name: gpus, namespace: ml-train}
    spec:
      devices:
        requests:
        - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 1}}
"""
NATIVE = "It looks the class up among the cluster's DeviceClasses (inventory)."
FAMILIES = frozenset({"dra"})
WAITS = ("until it is created, the scheduler cannot allocate the claim and pods using it stay "
         "Pending")


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    dra = judged(context.inventory)
    if dra is None:
        return
    for use in view.demand.claims:  # a pod's claims are in its namespace
        for request in missing(use.claim, dra.classes):
            yield Finding(ID, f"{use.claim.kind} {use.claim.name} request {request.name}: "
                          f"device class {request.class_name} does not exist: {WAITS}",
                          use.path, level="warning")


def check_claim(view: ClaimView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    dra = judged(context.inventory)
    if dra is None:
        return
    for request in missing(view.claim, dra.classes):
        yield Finding(ID, f"request {request.name}: device class {request.class_name} does "
                      f"not exist: {WAITS}", (*request.path, "deviceClassName"), level="warning")


def missing(claim: Claim, classes: Mapping[str, object]) -> Iterator[Request]:
    return (r for r in requests_of(claim) if r.class_name not in classes)
