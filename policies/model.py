"""The GPUPolicy document (`gpupolicy.io/v1alpha1`), strict: unknown keys are refused.

Field names are the YAML names (camelCase) through aliases, so pydantic's error `loc`
already reads like the path a user typed: `spec.rules.mig.allowedProfiles[1]`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator
from pydantic.alias_generators import to_camel

from policies import names

API_VERSION = "gpupolicy.io/v1alpha1"
KIND = "GPUPolicy"

Mode = Literal["Enforce", "Warn", "Audit"]


class Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


def _rule(check: Callable[[str], str | None], what: str) -> AfterValidator:
    """One of the apiserver's name rules (policies/names.py) as a pydantic check."""

    def validate(value: str) -> str:
        problem = check(value)
        if problem is not None:
            raise ValueError(f"{value!r} is not a valid {what}: {problem}")
        return value

    return AfterValidator(validate)


# What the apiserver checks in a pod spec, so an injection it would refuse is refused here.
LabelKey = Annotated[str, _rule(names.qualified_name, "label key")]
LabelValue = Annotated[str, _rule(names.label_value, "label value")]
TaintKey = Annotated[str, _rule(names.taint_key, "taint key")]
ObjectName = Annotated[str, _rule(names.dns_subdomain, "name (a lowercase DNS subdomain)")]
# A DeviceClass name with `*` and `?` wildcards: a glob that can match some class.
ClassGlob = Annotated[str, _rule(
    lambda g: names.dns_subdomain(g.replace("*", "a").replace("?", "a")),
    "DeviceClass name glob (a lowercase DNS subdomain; * and ? match any characters)")]


def _values_for(
    operator: str | None, values: tuple[str, ...], *, numeric: bool
) -> tuple[str, ...]:
    """The values a selector operator takes: In/NotIn some, Exists/DoesNotExist none,
    Gt/Lt (node selectors only) exactly one integer."""
    if operator in ("In", "NotIn") and not values:
        raise ValueError(f"must list at least one value when operator is {operator}")
    if operator in ("Exists", "DoesNotExist") and values:
        raise ValueError(f"must be empty when operator is {operator}")
    if numeric and operator in ("Gt", "Lt"):
        if len(values) != 1:
            raise ValueError(f"must hold exactly one value when operator is {operator}, "
                             f"not {len(values)}")
        problem = names.integer(values[0])
        if problem is not None:
            raise ValueError(f"{values[0]!r} {problem}")
    return values


class LabelSelectorRequirement(Strict):
    key: LabelKey
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[LabelValue, ...] = Field(default=(), validate_default=True)

    @field_validator("values")
    @classmethod
    def _values(cls, values: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        return _values_for(info.data.get("operator"), values, numeric=False)


class LabelSelector(Strict):
    match_labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()


class Toleration(Strict):
    """A core/v1 Toleration, checked by the apiserver's rules for pods."""

    key: TaintKey | None = None
    # "" is the apiserver's spelling of Equal.
    operator: Literal["Exists", "Equal", ""] = Field(default="Equal", validate_default=True)
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute", ""] | None = None
    toleration_seconds: int | None = None

    @field_validator("operator")
    @classmethod
    def _operator(cls, operator: str, info: ValidationInfo) -> str:
        if "key" in info.data and not info.data["key"] and operator != "Exists":
            raise ValueError("must be Exists when key is empty (an empty key with Exists "
                             "tolerates every taint)")
        return operator

    @field_validator("value")
    @classmethod
    def _value(cls, value: str | None, info: ValidationInfo) -> str | None:
        operator = info.data.get("operator")
        if value and operator == "Exists":
            raise ValueError(f"must be empty when operator is Exists, not {value!r}")
        if value and operator in ("Equal", ""):
            problem = names.label_value(value)
            if problem is not None:
                raise ValueError(f"{value!r} is not a valid taint value: {problem}")
        return value

    @field_validator("toleration_seconds")
    @classmethod
    def _seconds(cls, seconds: int | None, info: ValidationInfo) -> int | None:
        effect = info.data.get("effect", "NoExecute")  # absent: the effect was itself invalid
        if seconds is not None and effect != "NoExecute":
            have = f"effect is {effect!r}" if effect else "no effect is set"
            raise ValueError("is only allowed with effect NoExecute (how long a NoExecute "
                             f"taint is tolerated before eviction); {have}")
        return seconds


class NodeSelectorRequirement(Strict):
    key: LabelKey
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: tuple[LabelValue, ...] = Field(default=(), validate_default=True)

    @field_validator("values")
    @classmethod
    def _values(cls, values: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        return _values_for(info.data.get("operator"), values, numeric=True)


class NodeFieldSelectorRequirement(Strict):
    """A node field requirement: only metadata.name, with one value, as the apiserver allows."""

    key: Literal["metadata.name"]
    operator: Literal["In", "NotIn"]
    values: tuple[ObjectName, ...] = Field(min_length=1, max_length=1)


class NodeSelectorTerm(Strict):
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeFieldSelectorRequirement, ...] = ()


class PreferredSchedulingTerm(Strict):
    weight: int = Field(ge=1, le=100)
    preference: NodeSelectorTerm


class NodeAffinityInjection(Strict):
    required: tuple[NodeSelectorRequirement, ...] = ()
    preferred: tuple[PreferredSchedulingTerm, ...] = ()


class Inject(Strict):
    tolerations: tuple[Toleration, ...] = ()
    node_selector: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    node_affinity: NodeAffinityInjection | None = None
    runtime_class_name: ObjectName | None = None
    priority_class_name: ObjectName | None = None
    gpu_limits_from_requests: bool = False
    hide_gpus_from_non_gpu_containers: bool = Field(
        default=False, alias="hideGPUsFromNonGPUContainers"
    )


class MigRules(Strict):
    allowed_profiles: tuple[str, ...] | None = None
    max_instances_per_pod: int | None = Field(default=None, ge=0)


class SharedRules(Strict):
    max_memory_gib_per_container: int | None = Field(
        default=None, ge=0, alias="maxMemoryGiBPerContainer"
    )
    max_pods_per_gpu: int | None = Field(default=None, ge=1, alias="maxPodsPerGPU")


class DraRules(Strict):
    # Globs (fnmatch) over DeviceClass names a GPU request of a ResourceClaim may name.
    allowed_device_classes: tuple[ClassGlob, ...] | None = None


class Rules(Strict):
    allowed_resources: tuple[str, ...] | None = None
    max_gpus_per_pod: int | None = Field(default=None, ge=0, alias="maxGPUsPerPod")
    max_gpus_per_container: int | None = Field(default=None, ge=0, alias="maxGPUsPerContainer")
    allowed_models: tuple[str, ...] | None = None
    require_hardware_match: bool = False
    mig: MigRules | None = None
    shared: SharedRules | None = None
    dra: DraRules | None = None
    deny_privileged_gpu_containers: bool = Field(
        default=False, alias="denyPrivilegedGPUContainers"
    )
    deny_visible_devices_bypass: bool = False


class Spec(Strict):
    namespaces: tuple[str, ...] | None = None
    namespace_selector: LabelSelector | None = None
    mode: Mode = "Enforce"
    priority: int = 0
    inject: Inject = Field(default_factory=Inject)
    rules: Rules = Field(default_factory=Rules)


class Metadata(BaseModel):
    # Metadata comes from kubectl/the API server too (uid, resourceVersion, managedFields...),
    # so only `name` is checked and the rest is kept as given.
    model_config = ConfigDict(extra="allow", frozen=True)
    name: ObjectName


class GPUPolicy(Strict):
    api_version: Literal["gpupolicy.io/v1alpha1"]
    kind: Literal["GPUPolicy"]
    metadata: Metadata
    spec: Spec
    status: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.metadata.name
