"""The GPUPolicy document (`gpupolicy.io/v1alpha1`), strict: unknown keys are refused.

Field names are the YAML names (camelCase) through aliases, so pydantic's error `loc`
already reads like the path a user typed: `spec.rules.mig.allowedProfiles[1]`.

Numbers and booleans are strict (StrictInt, StrictBool): `maxGPUsPerPod: "8"` and
`requireHardwareMatch: "yes"` are refused, as the CRD's `integer`/`boolean` types refuse them
at `kubectl apply`. Each field's docstring is its description in the JSON schema and the CRD
(`kubectl explain gpupolicy.spec.rules`), read from this file only when a schema is made:
pydantic's `use_attribute_docstrings` would read it at every start.
"""

from __future__ import annotations

import ast
import inspect
import itertools
import textwrap
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    StrictInt,
    ValidationInfo,
    field_validator,
)
from pydantic.alias_generators import to_camel

from policies import names

API_VERSION = "gpupolicy.io/v1alpha1"
KIND = "GPUPolicy"

Mode = Literal["Enforce", "Warn", "Audit"]


def _attribute_docstrings(cls: type[BaseModel]) -> dict[str, str]:
    """field name -> the string literal right below its annotation in the class body."""
    body = ast.parse(textwrap.dedent(inspect.getsource(cls))).body[0]
    assert isinstance(body, ast.ClassDef)
    found = {}
    for statement, after in itertools.pairwise(body.body):
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name) \
                and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant) \
                and isinstance(after.value.value, str):
            found[statement.target.id] = inspect.cleandoc(after.value.value)
    return found


def _describe_fields(schema: dict[str, Any], cls: type[BaseModel]) -> None:
    """Give each property of a model's JSON schema its field's docstring as description."""
    properties = schema.get("properties", {})
    for name, doc in _attribute_docstrings(cls).items():
        field = cls.model_fields.get(name)
        prop = properties.get(field.alias or name) if field else None
        if prop is None:
            prop = properties.get(name)
        if prop is not None and "description" not in prop:
            prop["description"] = doc


class Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True,
        json_schema_extra=_describe_fields,
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
    """A label selector requirement: a key, an operator and the values it relates them to."""

    key: LabelKey
    """The label key the requirement applies to."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the key's value relates to `values`: In, NotIn, Exists or DoesNotExist."""
    values: tuple[LabelValue, ...] = Field(default=(), validate_default=True)
    """Label values: at least one for In and NotIn, none for Exists and DoesNotExist."""

    @field_validator("values")
    @classmethod
    def _values(cls, values: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        return _values_for(info.data.get("operator"), values, numeric=False)


class LabelSelector(Strict):
    """A standard label selector; both parts must match (ANDed)."""

    match_labels: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    """Labels the object must carry with exactly these values."""
    match_expressions: tuple[LabelSelectorRequirement, ...] = ()
    """Requirements on the object's labels, all of which must hold."""


class Toleration(Strict):
    """A core/v1 Toleration, checked by the apiserver's rules for pods."""

    key: TaintKey | None = None
    """The taint key tolerated; empty with operator Exists tolerates every taint."""
    # "" is the apiserver's spelling of Equal.
    operator: Literal["Exists", "Equal", ""] = Field(default="Equal", validate_default=True)
    """Exists (any value) or Equal (the taint's value must equal `value`); default Equal."""
    value: str | None = None
    """The taint value tolerated with operator Equal; empty with Exists."""
    effect: Literal["NoSchedule", "PreferNoSchedule", "NoExecute", ""] | None = None
    """The taint effect tolerated: NoSchedule, PreferNoSchedule or NoExecute; empty: all."""
    toleration_seconds: StrictInt | None = None
    """How long a NoExecute taint is tolerated before eviction (NoExecute only)."""

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
    """A node selector requirement on a node label."""

    key: LabelKey
    """The node label key the requirement applies to."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]
    """In, NotIn, Exists, DoesNotExist, or Gt/Lt (the label read as an integer)."""
    values: tuple[LabelValue, ...] = Field(default=(), validate_default=True)
    """Values: some for In/NotIn, none for Exists/DoesNotExist, one integer for Gt/Lt."""

    @field_validator("values")
    @classmethod
    def _values(cls, values: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        return _values_for(info.data.get("operator"), values, numeric=True)


class NodeFieldSelectorRequirement(Strict):
    """A node field requirement: only metadata.name, with one value, as the apiserver allows."""

    key: Literal["metadata.name"]
    """The node field: only metadata.name."""
    operator: Literal["In", "NotIn"]
    """In or NotIn."""
    values: tuple[ObjectName, ...] = Field(min_length=1, max_length=1)
    """Exactly one node name."""


class NodeSelectorTerm(Strict):
    """A node selector term: every requirement in it must hold."""

    match_expressions: tuple[NodeSelectorRequirement, ...] = ()
    """Requirements on the node's labels."""
    match_fields: tuple[NodeFieldSelectorRequirement, ...] = ()
    """Requirements on the node's fields (metadata.name)."""


class PreferredSchedulingTerm(Strict):
    """A preferred scheduling term: nodes matching the preference score `weight` more."""

    weight: StrictInt = Field(ge=1, le=100)
    """How much the scheduler prefers matching nodes, 1 to 100."""
    preference: NodeSelectorTerm
    """The nodes preferred."""


class NodeAffinityInjection(Strict):
    """Node affinity added to GPU pods."""

    required: tuple[NodeSelectorRequirement, ...] = ()
    """Node selector requirements ANDed into every required node selector term of the pod."""
    preferred: tuple[PreferredSchedulingTerm, ...] = ()
    """Preferred scheduling terms appended to the pod's when not already there."""


class Inject(Strict):
    """What the mutating webhook adds to pods that request a GPU."""

    tolerations: tuple[Toleration, ...] = ()
    """Tolerations added when the pod has no equal one."""
    node_selector: dict[LabelKey, LabelValue] = Field(default_factory=dict)
    """Node selector labels merged into the pod's; a conflicting value is a violation."""
    node_affinity: NodeAffinityInjection | None = None
    """Node affinity added to the pod's."""
    runtime_class_name: ObjectName | None = None
    """RuntimeClass set when the pod names none (e.g. nvidia)."""
    priority_class_name: ObjectName | None = None
    """PriorityClass set when the pod names none."""
    gpu_limits_from_requests: StrictBool = False
    """A GPU in a container's requests but not its limits gets the same limit."""
    hide_gpus_from_non_gpu_containers: StrictBool = Field(
        default=False, alias="hideGPUsFromNonGPUContainers"
    )
    """Containers without a GPU request get NVIDIA_VISIBLE_DEVICES=none."""


class MigRules(Strict):
    """Rules for MIG (Multi-Instance GPU) slices."""

    allowed_profiles: tuple[str, ...] | None = None
    """MIG profiles a pod may request (e.g. 1g.10gb); unset: any the catalog knows."""
    max_instances_per_pod: StrictInt | None = Field(default=None, ge=0)
    """At most this many MIG instances per pod."""


class SharedRules(Strict):
    """Rules for shared GPUs (cGPU, gpushare, HAMi, Volcano vGPU)."""

    max_memory_gib_per_container: StrictInt | None = Field(
        default=None, ge=0, alias="maxMemoryGiBPerContainer"
    )
    """At most this much GPU memory (GiB) per container."""
    max_pods_per_gpu: StrictInt | None = Field(default=None, ge=1, alias="maxPodsPerGPU")
    """At most this many pods sharing one GPU (checked by the audit over running pods)."""


class DraRules(Strict):
    """Rules for Dynamic Resource Allocation (ResourceClaims)."""

    # Globs (fnmatch) over DeviceClass names a GPU request of a ResourceClaim may name.
    allowed_device_classes: tuple[ClassGlob, ...] | None = None
    """DeviceClass names (globs with * and ?) a GPU request of a ResourceClaim may name."""


class Rules(Strict):
    """What a GPU pod may ask for; each breach is a violation under the policy's mode."""

    allowed_resources: tuple[str, ...] | None = None
    """GPU resource names (globs, e.g. nvidia.com/mig-*) a pod may request; others refused."""
    max_gpus_per_pod: StrictInt | None = Field(default=None, ge=0, alias="maxGPUsPerPod")
    """At most this many whole GPUs per pod (app containers summed, init containers max'ed)."""
    max_gpus_per_container: StrictInt | None = Field(
        default=None, ge=0, alias="maxGPUsPerContainer")
    """At most this many whole GPUs per container."""
    allowed_models: tuple[str, ...] | None = None
    """GPU models (node product labels, e.g. NVIDIA-A100-SXM4-80GB) a pod may target."""
    require_hardware_match: StrictBool = False
    """Refuse a GPU pod that no node pool of the inventory can run."""
    mig: MigRules | None = None
    """Rules for MIG slices."""
    shared: SharedRules | None = None
    """Rules for shared GPUs."""
    dra: DraRules | None = None
    """Rules for ResourceClaims (DRA)."""
    deny_privileged_gpu_containers: StrictBool = Field(
        default=False, alias="denyPrivilegedGPUContainers"
    )
    """Refuse privileged containers in GPU pods (they see every GPU of the node)."""
    deny_visible_devices_bypass: StrictBool = False
    """Refuse NVIDIA_VISIBLE_DEVICES naming devices in a container without a GPU request."""
    require_guaranteed_qos: StrictBool = Field(default=False, alias="requireGuaranteedQoS")
    """Refuse GPU pods that are not in the Guaranteed QoS class (every container's CPU and
    memory limited, requests equal to limits): latency-critical serving is evicted last."""


class Spec(Strict):
    """Which namespaces the policy governs, how it acts, what it injects and what it checks."""

    namespaces: tuple[str, ...] | None = None
    """Namespace names or shell globs governed; with namespaceSelector, both must match."""
    namespace_selector: LabelSelector | None = None
    """A label selector over the Namespace's labels; with neither matcher, every namespace."""
    mode: Mode = "Enforce"
    """Enforce refuses a violation, Warn admits it with a warning, Audit admits and records."""
    priority: StrictInt = 0
    """Lower wins for single-valued injections when several policies govern (then name)."""
    inject: Inject = Field(default_factory=Inject)
    """What the mutating webhook adds to GPU pods."""
    rules: Rules = Field(default_factory=Rules)
    """What GPU pods may ask for."""


class Metadata(BaseModel):
    """Standard object metadata; only the name is checked."""

    # Metadata comes from kubectl/the API server too (uid, resourceVersion, managedFields...),
    # so only `name` is checked and the rest is kept as given.
    model_config = ConfigDict(extra="allow", frozen=True, json_schema_extra=_describe_fields)
    name: ObjectName
    """The policy's name (a lowercase DNS subdomain)."""


class GPUPolicy(Strict):
    """A GPU admission policy: what the webhook injects into GPU pods and what it refuses."""

    api_version: Literal["gpupolicy.io/v1alpha1"]
    """gpupolicy.io/v1alpha1"""
    kind: Literal["GPUPolicy"]
    """GPUPolicy"""
    metadata: Metadata
    """Standard object metadata."""
    spec: Spec
    """The policy."""
    status: dict[str, Any] | None = None
    """Written by the system; not read."""

    @property
    def name(self) -> str:
        return self.metadata.name
