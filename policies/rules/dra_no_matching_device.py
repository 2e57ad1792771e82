"""dra-no-matching-device (`rules.requireHardwareMatch`): some node must be able to allocate
every request of every ResourceClaim of the pod at once, on top of the pod's own scheduling
facts, or the pod stays Pending with the scheduler's terse "cannot allocate all claims". Per
pool the message names the first thing that failed: device count, selectors of class and
request, `firstAvailable` alternatives, constraints, device taints, capacity, shared counters.
A ResourceClaim or template is judged the same way on its own. Needs an inventory with the
cluster's DeviceClasses and ResourceSlices.

FAIL: a claim for `count: 4` GPUs with selector productName == 'NVIDIA H100 80GB HBM3' where
  every node has 2 H100s
PASS: the same claim for 2
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING

from policies.claimfit import claim_verdicts, judged, pod_verdicts
from policies.context import Context
from policies.decision import Finding
from policies.dra.claims import selector_problems, unknown_classes
from policies.model import GPUPolicy
from policies.rules.gpu_no_matching_hardware import message
from policies.view import ClaimView, PodView

if TYPE_CHECKING:
    from policies.dra.allocate import GroupVerdict

ID = "dra-no-matching-device"
INTRINSIC = False

EXAMPLES = """
- FAIL: two GPUs where the only node has one
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
        - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 2}}
- PASS: one GPU
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
NATIVE = "It matches requests against the cluster's devices (inventory)."
FAMILIES = frozenset({"dra"})
SHOWN = 3


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    dra = judged(context.inventory)
    if not policy.spec.rules.require_hardware_match or dra is None or context.inventory is None \
            or not view.demand.claims:
        return
    if any(unknown_classes(u.claim, dra.classes) for u in view.demand.claims):
        return  # the pod waits for the class (dra-device-class-unknown): not judged before
    results = pod_verdicts(view, context.inventory, dra,
                           context.allowed_models(view.namespace))
    if not any(v.fits for v in results):
        yield Finding(ID, message(results), view.at("resourceClaims"))


def check_claim(view: ClaimView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    dra = judged(context.inventory)
    if not policy.spec.rules.require_hardware_match or dra is None:
        return
    if any(p.kind == "malformed" for p in view.claim.problems) or unknown_classes(
            view.claim, dra.classes) or any(
            p.kind == "selector-invalid" for p in selector_problems(view.claim, dra.classes)):
        return  # dra-claim-invalid, dra-device-class-unknown, dra-selector-invalid say why
    results = claim_verdicts(view.claim, dra)
    if any(v.fits or v.undecided for v in results):
        return
    yield Finding(ID, claim_message(results), (*view.claim.base, "devices", "requests"))


def claim_message(results: list[GroupVerdict]) -> str:
    if not results:
        return "no node can allocate this claim: no ResourceSlice publishes any device"
    ranked = sorted(results, key=lambda v: len(v.reasons))
    shown = "; ".join(f"{_group(v)}: {'; '.join(v.reasons)}" for v in ranked[:SHOWN])
    rest = len(ranked) - SHOWN
    more = (f" ({rest} other node group{'s' * (rest != 1)} fail{'s' * (rest == 1)} too)"
            if rest > 0 else "")
    return f"no node can allocate this claim: {shown}{more}"


def _group(verdict: GroupVerdict) -> str:
    others = len(verdict.nodes) - 1
    return f"node {verdict.group}" + (f" (and {others} like it)" if others else "")
