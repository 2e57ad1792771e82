"""priority-class-unknown: a pod may name only a PriorityClass the cluster defines. The API
server's Priority admission plugin refuses a pod that names another, in these words: `no
PriorityClass with name <name> was found`; a workload's pod template that names one gets no
pod at all (its controller's create is refused, over and over).

Judged where the cluster's PriorityClasses are known (an inventory that lists them, or a live
cluster); the API server's own system-node-critical and system-cluster-critical always are.
A pod the API server already holds (an audited pod) is not judged again. A class a policy
injects is never named unless it is defined: injection leaves it out and says why.

FAIL (PriorityClasses listed: gpu-batch): `priorityClassName: gpu-batchh`
PASS: `priorityClassName: gpu-batch`; `priorityClassName: system-cluster-critical`;
  no priorityClassName; any name when no PriorityClass was listed
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.view import PodView

ID = "priority-class-unknown"
INTRINSIC = True
NATIVE = "It needs the cluster's PriorityClasses (inventory); the API server refuses it itself."

EXAMPLES = """
- FAIL: a GPU pod naming a PriorityClass the cluster does not define (a typo)
  nodes:
  - {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: gpu-batch},
     value: 1000}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: train}
    spec:
      priorityClassName: gpu-batchh
      containers:
      - name: main
        image: nvidia/cuda:12.4.1-base-ubuntu22.04
        resources: {limits: {nvidia.com/gpu: 1}}
- PASS: the class the cluster defines
  nodes:
  - {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: gpu-batch},
     value: 1000}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: train}
    spec:
      priorityClassName: gpu-batch
      containers:
      - name: main
        image: nvidia/cuda:12.4.1-base-ubuntu22.04
        resources: {limits: {nvidia.com/gpu: 1}}
- PASS: a system class the API server always creates
  nodes:
  - {apiVersion: scheduling.k8s.io/v1, kind: PriorityClass, metadata: {name: gpu-batch},
     value: 1000}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: train}
    spec:
      priorityClassName: system-cluster-critical
      containers:
      - name: main
        image: nvidia/cuda:12.4.1-base-ubuntu22.04
        resources: {limits: {nvidia.com/gpu: 1}}
- PASS: any name when the cluster's PriorityClasses were not listed
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: train}
    spec:
      priorityClassName: gpu-batchh
      containers:
      - name: main
        image: nvidia/cuda:12.4.1-base-ubuntu22.04
        resources: {limits: {nvidia.com/gpu: 1}}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    api = context.api
    if api is None or api.priority_classes is None or view.exists \
            or "priorityClassName" not in view.pod_fields:
        return
    name = view.spec.get("priorityClassName")
    if isinstance(name, str) and name and not api.defines(name):
        yield Finding(ID, f"no PriorityClass with name {name} was found",
                      view.at("priorityClassName"))
