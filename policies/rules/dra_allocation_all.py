"""dra-allocation-all (advice): `allocationMode: All` on a GPU or MIG class takes every
matching device of the node the pod lands on (all 8 GPUs of an HGX node, say), and the pod
waits until each of them is free. Ask for a `count` unless the whole node is meant.

WARN: `exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All}`
PASS: `exactly: {deviceClassName: gpu.nvidia.com, count: 8}`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.view import ClaimView

ID = "dra-allocation-all"
INTRINSIC = True
SEVERITY = "warning"  # advice: every finding it makes is a warning

EXAMPLES = """
- FAIL: every GPU of the node (allocationMode All)
  object:
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaim
    metadata: {name: gpus, namespace: ml-train}
    spec:
      devices:
        requests:
        - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com, allocationMode: All}}
- PASS: eight GPUs by count
  object:
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaim
    metadata: {name: gpus, namespace: ml-train}
    spec:
      devices:
        requests:
        - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 8}}
"""
NATIVE = "It counts the devices of the cluster's ResourceSlices (inventory)."


def check_claim(view: ClaimView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    for demand in view.demands:
        if demand.kind is not None and demand.request.mode == "All":
            most = f" (up to {demand.count} on one node here)" if demand.count else ""
            which = " its selectors match" if demand.request.selectors else ""
            yield Finding(ID, f"allocationMode All takes every device of class "
                          f"{demand.request.class_name}{which} on the node{most}; ask for a "
                          "count unless the whole node is meant",
                          (*demand.request.path, "allocationMode"), "warning")
