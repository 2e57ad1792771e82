"""resource-quota-exceeded: a pod's GPUs must fit its namespace's ResourceQuotas as the API
server's quota admission counts them: the pod's requests of each extended resource (as
`requests.<name>`, the one form a quota can limit an extended resource by) added to the
quota's `status.used` may not go over its `spec.hard`. Refused in the quota plugin's words:
`exceeded quota: <quota>, requested: <r>=<n>, used: <r>=<n>, limited: <r>=<n>`. A quota
applies to the pods its scopes select (PriorityClass, Terminating/NotTerminating,
BestEffort/NotBestEffort; a scope not read here makes it not apply: never a refusal on a
guess). A quota that lists an extended resource without the `requests.` prefix limits
nothing: said as a warning. A quota whose usage the quota controller has not counted yet
(`status.hard` without the `status.used` of a resource it limits) refuses every pod it would
count, as the plugin does: `status unknown for quota: <quota>, resources: <r>,...`. The limits
are `status.hard`, as the plugin reads them (`spec.hard` for a quota listed without status).

Judged by lint, review, explain and the audit where the cluster's quotas are known (an
inventory that lists them, or a live cluster); the webhook leaves quota to the API server's
own quota admission, which runs after it and counts what is admitted meanwhile. A pod the API
server already holds is in `status.used` already, so is not judged again. A workload's pod
template is judged as one pod: its first replica.

FAIL (quota gpu: `hard: {requests.nvidia.com/gpu: 8}`, `used: {requests.nvidia.com/gpu: 6}`):
  a pod with `limits: {nvidia.com/gpu: 4}`
PASS: the same pod with `limits: {nvidia.com/gpu: 2}`; a pod in a namespace without a quota
WARN: a quota with `hard: {nvidia.com/gpu: 8}` (limits nothing)
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from fractions import Fraction
from typing import Any

from policies.apiserver import Quota, Scope
from policies.context import Context
from policies.decision import Finding
from policies.model import GPUPolicy
from policies.quantity import Number
from policies.view import PodView

ID = "resource-quota-exceeded"
INTRINSIC = True
NATIVE = "It needs the namespace's ResourceQuotas (inventory); the API server refuses it itself."
PREFIX = "requests."

EXAMPLES = """
- FAIL: 4 GPUs asked where the namespace's quota has 2 of its 8 left
  nodes:
  - apiVersion: v1
    kind: ResourceQuota
    metadata: {name: gpu, namespace: default}
    spec: {hard: {requests.nvidia.com/gpu: "8"}}
    status:
      hard: {requests.nvidia.com/gpu: "8"}
      used: {requests.nvidia.com/gpu: "6"}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: train}
    spec:
      containers:
      - name: main
        image: nvidia/cuda:12.4.1-base-ubuntu22.04
        resources: {limits: {nvidia.com/gpu: 4}}
- PASS: 2 GPUs fit what is left
  nodes:
  - apiVersion: v1
    kind: ResourceQuota
    metadata: {name: gpu, namespace: default}
    spec: {hard: {requests.nvidia.com/gpu: "8"}}
    status:
      hard: {requests.nvidia.com/gpu: "8"}
      used: {requests.nvidia.com/gpu: "6"}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: train}
    spec:
      containers:
      - name: main
        image: nvidia/cuda:12.4.1-base-ubuntu22.04
        resources: {limits: {nvidia.com/gpu: 2}}
- PASS: a namespace without a quota
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: train}
    spec:
      containers:
      - name: main
        image: nvidia/cuda:12.4.1-base-ubuntu22.04
        resources: {limits: {nvidia.com/gpu: 4}}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    api = context.api
    if api is None or view.exists:
        return
    quotas = api.quotas.get(view.namespace)
    if not quotas:
        return
    requested = {PREFIX + name: value for name, value in view.demand.totals.items() if value}
    if not requested:
        return
    for quota in quotas:
        if not all(_scope_selects(scope, view.spec) for scope in quota.scopes):
            continue
        for name in requested:
            bare = name.removeprefix(PREFIX)
            if bare in quota.hard and name not in quota.hard:
                yield Finding(ID, f"quota {quota.name} lists {bare}, which limits nothing: an "
                              f"extended resource is limited as {name}",
                              view.containers_path, level="warning")
        tracked = sorted(n for n in quota.hard if _pod_resource(n))
        if quota.synced and any(n in requested for n in tracked) \
                and any(n not in quota.used for n in tracked):
            # the plugin will not count against a quota whose usage it does not know
            yield Finding(ID, f"status unknown for quota: {quota.name}, resources: "
                          f"{','.join(tracked)}", view.containers_path)
            return
        exceeded = sorted(n for n in requested if n in quota.hard
                          and quota.used.get(n, 0) + requested[n] > quota.hard[n])
        if exceeded:
            yield Finding(ID, _message(quota, requested, exceeded), view.containers_path)
            return  # the plugin stops at the first quota that refuses


# What the pod quota evaluator counts (pkg/quota/v1/evaluator/core/pods.go): a quota listing
# one of these must have its usage known before a pod is counted against it.
_POD_RESOURCES = frozenset({"pods", "count/pods", "cpu", "memory", "ephemeral-storage",
                            "requests.cpu", "requests.memory", "requests.ephemeral-storage",
                            "limits.cpu", "limits.memory", "limits.ephemeral-storage"})


def _pod_resource(name: str) -> bool:
    return name in _POD_RESOURCES or name.startswith(("hugepages-", "requests.hugepages-")) \
        or (name.startswith(PREFIX) and "/" in name)


def _message(quota: Quota, requested: Mapping[str, Number], names: list[str]) -> str:
    def listed(values: Mapping[str, Number]) -> str:
        return ",".join(f"{n}={_quantity(values.get(n, 0))}" for n in names)

    return (f"exceeded quota: {quota.name}, requested: {listed(requested)}, used: "
            f"{listed(quota.used)}, limited: {listed(quota.hard)}")


def _quantity(value: Number) -> str:
    """As the API server prints a quantity: whole numbers plain, else in milli-units."""
    if isinstance(value, int) or value.denominator == 1:
        return str(int(value))
    milli = value * 1000
    return f"{int(milli)}m" if milli.denominator == 1 else str(float(Fraction(value)))


def _scope_selects(scope: Scope, spec: Mapping[str, Any]) -> bool:
    if scope.name == "PriorityClass":
        name = spec.get("priorityClassName")
        name = name if isinstance(name, str) else ""
        return {"In": name in scope.values, "NotIn": name not in scope.values,
                "Exists": bool(name), "DoesNotExist": not name}.get(scope.operator, False)
    if scope.name in ("Terminating", "NotTerminating"):
        deadline = spec.get("activeDeadlineSeconds")
        terminating = isinstance(deadline, int) and not isinstance(deadline, bool) \
            and deadline >= 0
        return terminating == (scope.name == "Terminating")
    if scope.name in ("BestEffort", "NotBestEffort"):
        return _best_effort(spec) == (scope.name == "BestEffort")
    return False


def _best_effort(spec: Mapping[str, Any]) -> bool:
    """The pod's QoS class is BestEffort: no container asks for cpu or memory at all."""
    for key in ("containers", "initContainers"):
        listed = spec.get(key)
        for container in listed if isinstance(listed, list) else ():
            resources = container.get("resources") if isinstance(container, dict) else None
            if not isinstance(resources, dict):
                continue
            for part in ("requests", "limits"):
                amounts = resources.get(part)
                if isinstance(amounts, dict) and ("cpu" in amounts or "memory" in amounts):
                    return False
    return True
