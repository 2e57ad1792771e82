"""pod-field-invalid: a field the pod spec must hold with a given type holds another one.

The apiserver refuses such a Pod when it decodes it; a pod template inside a custom resource
(Kubeflow, Ray, KServe...) reaches the webhook as written, and so does a manifest in `lint`.
Each malformed field is reported at its path, with what it is and what it must be; mutation
leaves malformed parts alone.
FAIL: `nodeSelectorTerms: "gpu"`, `tolerations: {key: x}`, `nodeSelector: {nvidia.com/gpu.count: 8}`
  (label values are strings), `containers: [{resources: {limits: [1]}}]`, `env: "A=1"`
PASS: `nodeSelector: {nvidia.com/gpu.count: "8"}`, `tolerations: [{key: x, operator: Exists}]`
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.shape import container_problems, spec_problems
from policies.view import PodView

ID = "pod-field-invalid"
INTRINSIC = True
NATIVE = "The API server's own pod validation refuses a malformed field."

EXAMPLES = """
- FAIL: a GPU pod whose nodeSelector is a string
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      nodeSelector: gpu
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/gpu: 1}}
- PASS: a nodeSelector mapping
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: p}
    spec:
      nodeSelector: {workload: gpu}
      containers:
      - name: main
        image: "trainer:1"
        resources: {limits: {nvidia.com/gpu: 1}}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    for path, message in spec_problems(view.spec, view.prefix):
        yield Finding(ID, message, path)
    for container in view.demand.containers:  # those its kind keeps outside the lists
        if container.path[len(view.prefix):][:1] not in _LISTS:
            for path, message in container_problems(container.spec, container.path,
                                                    container.resources_field):
                yield Finding(ID, message, path)


_LISTS = {("containers",), ("initContainers",), ("ephemeralContainers",)}
