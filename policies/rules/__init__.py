"""The rule registry: one module per rule id, listed here explicitly.

A rule module has `ID` (kebab-case, stable), `INTRINSIC` (True when the rule states a fact that
does not depend on policy settings, such as the apiserver's own checks: it then runs once per
pod, attributed to the strictest governing policy), optionally `FAMILIES` (the resource families
without which it has nothing to say, so it is not run) and `check(view, policy, context)`
yielding Findings for a pod spec, and/or `check_claim(view, policy, context)` for a
ResourceClaim or ResourceClaimTemplate reviewed as an object of its own (DRA).
Its docstring carries PASS/FAIL examples and is the rule's documentation.
"""

from __future__ import annotations

from functools import lru_cache
from types import ModuleType

from policies.rules import (
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
    gpu_model_not_allowed,
    gpu_no_matching_hardware,
    gpu_quantity_not_integer,
    gpu_request_limit_mismatch,
    gpu_request_without_limit,
    gpu_resource_not_allowed,
    gpu_scheduler_mismatch,
    gpu_shared_request_over_one,
    gpu_sharing_modes_mixed,
    gpu_zero_request,
    gpushare_count_resource,
    mig_count_over_geometry,
    mig_instances_over_policy,
    mig_mixed_with_whole_gpu,
    mig_multiple_per_container,
    mig_profile_not_allowed,
    mig_profile_unknown,
    pod_field_invalid,
    priority_class_unknown,
    privileged_gpu_container,
    resource_quota_exceeded,
    shared_core_invalid,
    shared_gpu_over_limit,
    shared_memory_over_device,
    shared_memory_over_policy,
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
)

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
