"""gpu-no-matching-hardware (`rules.requireHardwareMatch`): at least one node must be able to
run the pod after injection, or it would stay Pending forever. The message names the closest
pools (those failing the fewest checks, at most 3) with every reason, and counts the rest;
`gpupolicy explain` lists them all. The fit is kube-scheduler's (policies/scheduling): cpu,
memory, ephemeral-storage, hugepages, the pod count and every extended resource against each
node's allocatable as if the node were empty (what pods hold now never refuses a pod), after
NodeUnschedulable, NodeName, TaintToleration and NodeAffinity. A pod no node can run but a node
template can (a Karpenter NodePool, a cluster-autoscaler node group that scales from zero,
`--node-templates`) is admitted with a note naming the template. Needs an inventory (a Node
watch or `--inventory`);
without one the catalog rules (mig-profile-unknown, shared-memory-over-device,
mig-count-over-geometry) stand in.

FAIL: `nvidia.com/mig-1g.10gb: 1` in a cluster whose only GPU pool is H200 in mixed strategy
FAIL: `cpu: "96"` and `nvidia.com/gpu: 1` where every GPU node has 94 allocatable CPUs
PASS: `nvidia.com/gpu: 1` with the toleration of a tainted H100 pool
PASS: `nvidia.com/gpu: 1` with no GPU node but a NodePool of g6 instances (admitted, noted)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from policies.claimfit import asks_dra_served, judged, pod_verdicts
from policies.context import Context
from policies.decision import Finding
from policies.hardware import (
    SCALE_UP,
    PoolVerdict,
    any_fits,
    closest,
    first_fit,
    open_pools,
    template_label,
    verdicts,
)
from policies.inventory import Inventory
from policies.model import GPUPolicy
from policies.scheduling.request import NO_DEFAULTS
from policies.view import PodView

ID = "gpu-no-matching-hardware"
INTRINSIC = False
NATIVE = "It needs the node inventory."

EXAMPLES = """
- FAIL: eight GPUs in a cluster whose GPU nodes have four
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-1
      labels: {nvidia.com/gpu.product: Tesla-T4, nvidia.com/gpu.count: "4"}
    spec: {taints: [{key: nvidia.com/gpu, effect: NoSchedule}]}
    status: {allocatable: {nvidia.com/gpu: "4"}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: train}
    spec:
      containers:
      - {name: main, image: trainer:1, resources: {limits: {nvidia.com/gpu: 8}}}
- PASS: four GPUs, with the toleration the default policy injects
  nodes:
  - apiVersion: v1
    kind: Node
    metadata:
      name: gpu-1
      labels: {nvidia.com/gpu.product: Tesla-T4, nvidia.com/gpu.count: "4"}
    spec: {taints: [{key: nvidia.com/gpu, effect: NoSchedule}]}
    status: {allocatable: {nvidia.com/gpu: "4"}}
  object:
    apiVersion: v1
    kind: Pod
    metadata: {name: train}
    spec:
      containers:
      - {name: main, image: trainer:1, resources: {limits: {nvidia.com/gpu: 4}}}
"""


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    inventory = context.inventory
    if not policy.spec.rules.require_hardware_match or inventory is None \
            or not view.demand.gpu:
        return
    # Nothing below depends on the policy: every policy that asks gets the same answer.
    key = ("hardware", id(inventory))
    if key not in view.memo:
        view.memo[key] = _refusal(view, inventory, context.allowed_models(view.namespace))
    refusal: str | None = view.memo[key]
    if refusal is not None:
        yield Finding(ID, refusal, view.containers_path)


def _refusal(view: PodView, inventory: Inventory, allowed: list[Sequence[str]]) -> str | None:
    """Why no node can run the pod, or None when one can."""
    dra = judged(inventory)
    if dra is not None and view.demand.claims:
        return None  # dra-no-matching-device judges the pod, claims and all
    bound = view.spec.get("nodeName")
    if isinstance(bound, str) and (node := inventory.node(bound)) is not None \
            and node.unschedulable:
        return None  # a cordoned node joins no pool, yet the kubelet runs a pod bound to it
    if dra is not None and asks_dra_served(view, dra):
        results = pod_verdicts(view, inventory, dra, allowed)
        return None if any(v.fits for v in results) else message(results)
    pools = open_pools(view, inventory.pools, inventory.cordoned)
    defaults = inventory.limits.get(view.namespace, NO_DEFAULTS)
    if any_fits(view, pools, allowed_models=allowed, defaults=defaults):
        return None
    if inventory.templates:
        template = first_fit(view, inventory.templates, allowed_models=allowed,
                             defaults=defaults)
        if template is not None:
            view.memo[SCALE_UP] = f"fits {template_label(template)} on scale-up; no node now"
            return None
    return message(verdicts(view, (*pools, *inventory.templates), allowed_models=allowed,
                            defaults=defaults))


def message(results: list[PoolVerdict]) -> str:
    shown, rest = closest(results)
    if not shown:
        return "no node can run this pod: the inventory has no nodes"
    detail = "; ".join(v.describe() for v in shown)
    if any(v.template for v in results):
        detail += " (node templates included: no autoscaler can start a node for it either)"
    more = (f" ({rest} other pool{'s' * (rest != 1)} fail{'s' * (rest == 1)} too; "
            "gpupolicy explain lists every pool)") if rest else ""
    return f"no node can run this pod: {detail}{more}"
