"""gpu-qos-not-guaranteed (`rules.requireGuaranteedQoS`): a GPU pod in the Guaranteed QoS class,
every container (init containers and sidecars too) with CPU and memory limits and requests equal
to them (a request left out is set to the limit). Burstable GPU pods are evicted before
Guaranteed ones under node memory pressure and share CPU with noisy neighbours: latency-critical
serving on dedicated GPU nodes asks for Guaranteed, namespace by namespace, through the policy.

FAIL (requireGuaranteedQoS): a GPU container with `requests: {cpu: "2"}` and `limits: {cpu: "4",
memory: 8Gi}`
PASS: `limits: {cpu: "4", memory: 8Gi, nvidia.com/gpu: 1}` and no requests (they default to
the limits)
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from policies.context import Context
from policies.decision import Finding
from policies.display import shown
from policies.model import GPUPolicy
from policies.quantity import QuantityError, parse_quantity
from policies.view import PodView

ID = "gpu-qos-not-guaranteed"
INTRINSIC = False
NATIVE = "Not translated yet: the pod's QoS class from every container's requests and limits."
CATEGORY = "scheduling"

_POD = """\
    apiVersion: v1
    kind: Pod
    metadata: {{name: serve}}
    spec:
      containers:
      - name: main
        image: "nvcr.io/nvidia/tritonserver:24.08-py3"
        resources:
{resources}
"""
EXAMPLES = f"""
- FAIL: a Burstable GPU server (its CPU request below the limit)
  policy: {{rules: {{requireGuaranteedQoS: true}}}}
  object:
{_POD.format(resources='''          requests: {cpu: "2", memory: 8Gi, nvidia.com/gpu: 1}
          limits: {cpu: "4", memory: 8Gi, nvidia.com/gpu: 1}''')}
- PASS: the same server with limits only (requests default to them)
  policy: {{rules: {{requireGuaranteedQoS: true}}}}
  object:
{_POD.format(resources='''          limits: {cpu: "4", memory: 8Gi, nvidia.com/gpu: 1}''')}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    if not policy.spec.rules.require_guaranteed_qos or not view.demand.gpu:
        return
    for container in view.demand.containers:
        if container.role == "ephemeral":
            continue
        why = _not_guaranteed(container.spec.get(container.resources_field))
        if why:
            yield Finding(ID, f"container {shown(container.name)} {why}: the pod is not in the "
                          "Guaranteed QoS class this namespace's policy asks of GPU pods "
                          "(CPU and memory limits, requests equal to them)",
                          (*container.path, container.resources_field))
            return


def _not_guaranteed(resources: Any) -> str:
    if not isinstance(resources, dict):
        return "has no CPU and memory limits"
    limits = resources.get("limits")
    requests = resources.get("requests")
    limits = limits if isinstance(limits, dict) else {}
    requests = requests if isinstance(requests, dict) else {}
    for name in ("cpu", "memory"):
        if name not in limits:
            return f"has no {name} limit"
        if name in requests and not _equal(requests[name], limits[name]):
            return f"requests {name} {requests[name]} below its limit {limits[name]}"
    return ""


def _equal(a: Any, b: Any) -> bool:
    try:
        return parse_quantity(a) == parse_quantity(b)
    except QuantityError:
        return True  # pod-field-invalid and the apiserver speak of a malformed quantity
