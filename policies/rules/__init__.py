"""The rule registry: one module per rule id, listed here explicitly.

A rule module has `ID` (kebab-case, stable), `INTRINSIC` (True when the rule states a fact that
does not depend on policy settings, such as the apiserver's own checks: it then runs once per
pod, attributed to the strictest governing policy), optionally `FAMILIES` (the resource families
without which it has nothing to say, so it is not run) and `check(view, policy, context)`
yielding Findings for a pod spec, and/or `check_claim(view, policy, context)` for a
ResourceClaim or ResourceClaimTemplate reviewed as an object of its own (DRA), or
`check_cluster(view, context)` for the whole cluster (CLUSTER_RULES, the audit only).
A rule listed in ANY_POD_RULES runs on pods that ask for no accelerator too (they must be cheap:
every pod of every governed namespace pays for them).

Its docstring is the rule's documentation: the first paragraph (after `rule-id:`) is the one
line `gpupolicy rules` lists, and the docstring's own `PASS:` / `FAIL:` lines say in words what
passes and fails. Optional attributes the reference (policies/rules/reference.py, `gpupolicy
rules`, docs/rules.md) reads: `SEVERITY` ("warning" for a rule that only advises; default: an
error under an Enforce policy, an error in every mode for a fact), `CATEGORY` (default from the
id's prefix), `NATIVE` ("" when the rule is exported as a native ValidatingAdmissionPolicy, else
why it stays in the webhook).

`EXAMPLES` (optional, wanted for every rule): a YAML list of examples that
tests/engine/test_rule_examples.py runs through the engine. A FAIL example must produce the
rule's id, a PASS example must not. Each item has exactly one of `FAIL: <what it shows>` or
`PASS: <what it shows>`, and:

    object:     the Kubernetes object reviewed (a Pod, a Deployment, a ResourceClaim...)
    policy:     the spec of the one GPUPolicy in force (it governs every namespace unless it
                says otherwise); absent: the bundled default policy
    nodes:      the inventory, as `kubectl get nodes,resourceslices,deviceclasses -o yaml`
                items (Node objects; DRA objects; PriorityClasses, RuntimeClasses and
                ResourceQuotas too); absent: no inventory. The Node objects are also what
                the node facts (cluster scope) read
    pods:       cluster-scope rules: the running pods (and the GPU stack's DaemonSets) the
                audit feeds to the ClusterView (their findings are what the example is judged
                by; `object` is then unused)
    namespace:  the namespace reviewed in (default: the object's own, else `default`)

For example:

    EXAMPLES = '''
    - FAIL: a privileged container in a GPU pod
      policy: {rules: {denyPrivilegedGPUContainers: true}}
      object:
        apiVersion: v1
        kind: Pod
        metadata: {name: train}
        spec:
          containers:
          - name: main
            image: nvidia/cuda:12.4.1-base-ubuntu22.04
            resources: {limits: {nvidia.com/gpu: 1}}
            securityContext: {privileged: true}
    - PASS: the same pod unprivileged
      ...
    '''
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from types import ModuleType
from typing import Any

from policies.rules import (
    cgpu_memory_over_card,
    cgpu_pods_over_limit,
    cuda_driver_too_old,
    dra_admin_access_namespace,
    dra_allocation_all,
    dra_claim_invalid,
    dra_claim_shared_by_replicas,
    dra_device_class_not_allowed,
    dra_device_class_unknown,
    dra_no_matching_device,
    dra_selector_invalid,
    extended_resource_mixed,
    extended_resource_served_twice,
    gpu_double_advertised,
    gpu_fraction_annotation,
    gpu_max_per_container,
    gpu_max_per_pod,
    gpu_mixed_architectures,
    gpu_model_not_allowed,
    gpu_no_matching_hardware,
    gpu_node_without_gpu_request,
    gpu_pod_pinned_to_host,
    gpu_qos_not_guaranteed,
    gpu_quantity_not_integer,
    gpu_request_limit_mismatch,
    gpu_request_without_limit,
    gpu_resource_not_allowed,
    gpu_scheduler_mismatch,
    gpu_share_whole_card,
    gpu_shared_request_over_one,
    gpu_sharing_modes_mixed,
    gpu_stack_misses_gpu_nodes,
    gpu_stack_not_critical,
    gpu_zero_request,
    gpushare_count_resource,
    mig_count_over_geometry,
    mig_instances_over_policy,
    mig_mixed_with_whole_gpu,
    mig_multiple_per_container,
    mig_name_single_strategy,
    mig_profile_not_allowed,
    mig_profile_unknown,
    node_below_minimum,
    node_gpu_unhealthy,
    node_gpus_not_advertised,
    node_no_system_reserved,
    node_pool_taint_missing,
    node_template_invalid,
    node_version_drift,
    pod_field_invalid,
    priority_class_unknown,
    privileged_gpu_container,
    resource_quota_exceeded,
    shared_core_invalid,
    shared_gpu_over_limit,
    shared_memory_over_device,
    shared_memory_over_policy,
    toleration_tolerates_everything,
    visible_devices_bypass,
)

_MODULES: tuple[ModuleType, ...] = (
    pod_field_invalid,
    gpu_quantity_not_integer,
    gpu_request_without_limit,
    gpu_request_limit_mismatch,
    gpu_zero_request,
    gpu_shared_request_over_one,
    gpu_resource_not_allowed,
    gpu_max_per_pod,
    gpu_max_per_container,
    gpu_model_not_allowed,
    gpu_sharing_modes_mixed,
    gpushare_count_resource,
    gpu_scheduler_mismatch,
    gpu_fraction_annotation,
    mig_profile_unknown,
    mig_profile_not_allowed,
    mig_instances_over_policy,
    mig_count_over_geometry,
    mig_mixed_with_whole_gpu,
    mig_multiple_per_container,
    shared_memory_over_device,
    shared_memory_over_policy,
    shared_core_invalid,
    visible_devices_bypass,
    privileged_gpu_container,
    dra_claim_invalid,
    dra_claim_shared_by_replicas,
    dra_device_class_not_allowed,
    dra_device_class_unknown,
    gpu_no_matching_hardware,
    dra_no_matching_device,
    priority_class_unknown,
    resource_quota_exceeded,
    # the operator's checklist: what the pod will meet on the nodes it can reach
    cuda_driver_too_old,
    gpu_pod_pinned_to_host,
    gpu_mixed_architectures,
    gpu_share_whole_card,
    mig_name_single_strategy,
    gpu_qos_not_guaranteed,
    gpu_node_without_gpu_request,
    toleration_tolerates_everything,
    gpu_stack_not_critical,
    gpu_stack_misses_gpu_nodes,
)
# Rules that also look at pods asking for no accelerator (every pod of a governed namespace
# pays for them, so they are cheap before anything else: a look at tolerations and selectors).
ANY_POD_RULES: tuple[ModuleType, ...] = (
    visible_devices_bypass, gpu_node_without_gpu_request, toleration_tolerates_everything,
    gpu_stack_not_critical, gpu_stack_misses_gpu_nodes,
)
_PLACEMENT_RULES = ANY_POD_RULES[:3]
_BYPASS_ONLY = (visible_devices_bypass,)


def any_pod_rules(kind: str, spec: Mapping[str, Any]) -> tuple[ModuleType, ...]:
    """The ANY_POD_RULES with something to look at in a pod asking for no accelerator: the
    placement rules read only tolerations, selectors and affinity, the GPU-stack rules only
    DaemonSets (most pods have none of these: they pay for one rule)."""
    if kind == "DaemonSet":
        return ANY_POD_RULES
    if "tolerations" in spec or "nodeSelector" in spec or "affinity" in spec:
        return _PLACEMENT_RULES
    return _BYPASS_ONLY


# Rules over the GPU stack's own DaemonSets: they run in the namespaces no policy governs too
# (the stack lives in gpu-operator or kube-system), under the first policy in force.
STACK_RULES: tuple[ModuleType, ...] = (gpu_stack_not_critical, gpu_stack_misses_gpu_nodes)

# Rules over a ResourceClaim or template of its own (`check_claim`), in report order.
CLAIM_RULES: tuple[ModuleType, ...] = (
    dra_claim_invalid,
    dra_selector_invalid,
    dra_device_class_unknown,
    dra_device_class_not_allowed,
    dra_admin_access_namespace,
    dra_allocation_all,
    gpu_max_per_pod,
    gpu_model_not_allowed,
    mig_profile_not_allowed,
    mig_instances_over_policy,
    dra_no_matching_device,
)
INTRINSIC_CLAIM_RULES = tuple(m for m in CLAIM_RULES if m.INTRINSIC)
POLICY_CLAIM_RULES = tuple(m for m in CLAIM_RULES if not m.INTRINSIC)

# Rules over the whole cluster (`check_cluster(view, context)`): only the audit sees them.
CLUSTER_RULES: tuple[ModuleType, ...] = (
    gpu_double_advertised, extended_resource_served_twice, extended_resource_mixed,
    shared_gpu_over_limit,
    # node facts (policies/pools/nodes.py reads the Node objects)
    node_gpus_not_advertised, node_gpu_unhealthy, node_below_minimum, node_version_drift,
    node_pool_taint_missing, node_no_system_reserved,
    cgpu_pods_over_limit, cgpu_memory_over_card,
    # node templates (policies/scheduling/templates.py) that cannot be read as capacity
    node_template_invalid,
)

RULES: dict[str, ModuleType] = {m.ID: m for m in (*_MODULES, *CLAIM_RULES, *CLUSTER_RULES)}
INTRINSIC_RULES = tuple(m for m in _MODULES if m.INTRINSIC)
# Rule ids that state facts: errors in every report whatever the policy's mode.
FACTS = frozenset(m.ID for m in (*_MODULES, *CLAIM_RULES) if m.INTRINSIC)
POLICY_RULES = tuple(m for m in _MODULES if not m.INTRINSIC)


@lru_cache(maxsize=64)
def for_families(present: frozenset[str]) -> tuple[tuple[ModuleType, ...], tuple[ModuleType, ...]]:
    """(intrinsic, policy) rules that can fire for a pod whose resources are of `present`
    families: a rule with `FAMILIES` runs only when one of them is there."""
    def wanted(rule: ModuleType) -> bool:
        families = getattr(rule, "FAMILIES", None)
        return families is None or not families.isdisjoint(present)

    return (tuple(filter(wanted, INTRINSIC_RULES)), tuple(filter(wanted, POLICY_RULES)))
# Rules that are not modules: they come from mutation and from reading the input.
OTHER_RULE_IDS = ("node-selector-conflict", "pod-spec-malformed", "runtime-class-conflict")
# What the webhook leaves to the API server's own admission (it has no ResourceQuotas):
# reported by lint, review, explain and the audit only.
NOT_AT_ADMISSION = frozenset({resource_quota_exceeded.ID})


def get(rule_id: str) -> ModuleType:
    try:
        return RULES[rule_id]
    except KeyError:
        raise ValueError(f'no such rule: "{rule_id}"') from None
