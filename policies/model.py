"""The GPUPolicy document (`gpupolicy.io/v1alpha1`), strict: unknown keys are refused.

Field names are the YAML names (camelCase) through aliases, so pydantic's error `loc`
already reads like the path a user typed: `spec.rules.mig.allowedProfiles[1]`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.alias_generators import to_camel

API_VERSION = "gpupolicy.io/v1alpha1"
KIND = "GPUPolicy"

Mode = Literal["Enforce", "Warn", "Audit"]


class Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class LabelSelectorRequirement(Strict):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    values: tuple[str, ...] = ()


class LabelSelector(Strict):
    match_labels: dict[str, str] = Field(default_factory=dict)
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()


class Toleration(Strict):
    key: str | None = None
    operator: Literal["Exists", "Equal"] = "Equal"
    value: str | None = None
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute"] | None = None
    toleration_seconds: int | None = None


class NodeSelectorRequirement(Strict):
    key: str
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    values: tuple[str, ...] = ()


class NodeSelectorTerm(Strict):
    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    match_fields: tuple[NodeSelectorRequirement, ...] = ()


class PreferredSchedulingTerm(Strict):
    weight: int = Field(ge=1, le=100)
    preference: NodeSelectorTerm


class NodeAffinityInjection(Strict):
    required: tuple[NodeSelectorRequirement, ...] = ()
    preferred: tuple[PreferredSchedulingTerm, ...] = ()


class Inject(Strict):
    tolerations: tuple[Toleration, ...] = ()
    node_selector: dict[str, str] = Field(default_factory=dict)
    node_affinity: NodeAffinityInjection | None = None
    runtime_class_name: str | None = None
    priority_class_name: str | None = None
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


class Rules(Strict):
    allowed_resources: tuple[str, ...] | None = None
    max_gpus_per_pod: int | None = Field(default=None, ge=0, alias="maxGPUsPerPod")
    max_gpus_per_container: int | None = Field(default=None, ge=0, alias="maxGPUsPerContainer")
    allowed_models: tuple[str, ...] | None = None
    require_hardware_match: bool = False
    mig: MigRules | None = None
    shared: SharedRules | None = None
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
    name: str = Field(min_length=1, max_length=253)

    @field_validator("name")
    @classmethod
    def _dns_name(cls, value: str) -> str:
        if value != value.lower() or not all(c.isalnum() or c in "-." for c in value):
            raise ValueError("must be a lowercase DNS subdomain name")
        return value


class GPUPolicy(Strict):
    api_version: Literal["gpupolicy.io/v1alpha1"]
    kind: Literal["GPUPolicy"]
    metadata: Metadata
    spec: Spec
    status: dict[str, Any] | None = None

    @property
    def name(self) -> str:
        return self.metadata.name
