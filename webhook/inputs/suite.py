"""The `GPUPolicyTest` suite file (`gpupolicy.io/v1alpha1`) that `gpupolicy test` runs.

Strict like GPUPolicy: an unknown key is refused, so a misspelt expectation (`alowed:`)
cannot turn into a case that always passes. Paths are relative to the suite file.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from policies import yamlpos
from policies.loading import validation_message
from policies.model import API_VERSION
from policies.paths import FieldPath, to_display
from policies.rules import OTHER_RULE_IDS, RULES

KIND = "GPUPolicyTest"
KNOWN_RULES = frozenset((*RULES, *OTHER_RULE_IDS))


class _Strict(BaseModel):
    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )


class Metadata(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)  # labels, annotations: kept, unused
    name: str = Field(min_length=1)


class Case(_Strict):
    """One resource and what `review` must answer for it. Each expectation is optional, but a
    case must have at least one: a case that checks nothing would always pass."""

    resource: str  # KIND/NAMESPACE/NAME, or KIND/NAME for the default namespace
    description: str | None = None
    # strict: `allowed: "false"` is a string, refused, never read as false (or as true)
    allowed: StrictBool | None = None
    rules: tuple[str, ...] | None = None  # exactly these rule ids fire
    rules_include: tuple[str, ...] | None = None  # at least these fire
    rules_exclude: tuple[str, ...] | None = None  # none of these fires
    mutates: StrictBool | None = None  # the mutating webhook would send a patch at all
    patched: dict[str, Any] | None = None  # JSON pointer -> value in the object after mutation

    @field_validator("resource")
    @classmethod
    def _resource(cls, value: str) -> str:
        parts = value.split("/")
        if len(parts) not in (2, 3) or not all(parts):
            raise ValueError(f"expected KIND/NAMESPACE/NAME or KIND/NAME, got {value!r}")
        return value

    @field_validator("rules", "rules_include", "rules_exclude")
    @classmethod
    def _known(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        for rule in value or ():
            if rule not in KNOWN_RULES:
                raise ValueError(f"unknown rule id {rule!r}")
        return value

    @field_validator("patched")
    @classmethod
    def _pointers(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        for pointer in value or {}:
            if not pointer.startswith("/"):
                raise ValueError(f"{pointer!r} is not a JSON pointer (RFC 6901: starts with /)")
        return value

    @model_validator(mode="after")
    def _expects_something(self) -> Case:
        if self.rules is not None and self.rules_include is not None:
            raise ValueError("give rules (exactly these) or rulesInclude (at least these), "
                             "not both")
        if all(getattr(self, name) is None for name in
               ("allowed", "rules", "rules_include", "rules_exclude", "mutates", "patched")):
            raise ValueError("a case needs an expectation: allowed, rules, rulesInclude, "
                             "rulesExclude, mutates or patched")
        return self

    @property
    def key(self) -> tuple[str, str, str]:
        """(kind, namespace, name); KIND/NAME means the default namespace, as kubectl does.
        The kind is lowercased: `pod/ml/gpu` names a Pod, as in `gpupolicy explain`."""
        parts = self.resource.split("/")
        return (parts[0].lower(), "default", parts[1]) if len(parts) == 2 else (
            parts[0].lower(), parts[1], parts[2])


class Suite(_Strict):
    api_version: Literal["gpupolicy.io/v1alpha1"]
    kind: Literal["GPUPolicyTest"]
    metadata: Metadata
    policies: tuple[str, ...] | None = None  # files or directories; None: the bundled policies
    inventory: str | None = None
    namespaces: tuple[str, ...] = ()
    resources: tuple[str, ...] = Field(min_length=1)
    cases: tuple[Case, ...] = Field(min_length=1)

    @field_validator("policies")
    @classmethod
    def _some_policies(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is not None and not value:
            raise ValueError("an empty list tests nothing; leave policies out for the "
                             "bundled ones")
        return value


class SuiteError(ValueError):
    """An invalid suite; the message names file, line and field path."""


def is_suite(data: Any) -> bool:
    return isinstance(data, dict) and data.get("kind") == KIND


def parse(document: yamlpos.Document, file: str) -> Suite:
    """The suite in one document of `file`, validated; SuiteError names line and field."""
    data = document.data
    if isinstance(data, dict) and data.get("apiVersion") != API_VERSION:
        line, _ = document.position(("apiVersion",))
        raise SuiteError(f"{file}:{line}: apiVersion: expected {API_VERSION!r}, got "
                         f"{data.get('apiVersion')!r}")
    try:
        return Suite.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        # a list whose items failed is also "too short" to pydantic: say the items' problem
        kept = [e for e in errors if not (e["type"] == "too_short" and any(
            len(o["loc"]) > len(e["loc"]) and tuple(o["loc"][:len(e["loc"])]) == tuple(e["loc"])
            for o in errors))]
        described = sorted(_describe(document, file, e) for e in kept)
        raise SuiteError("\n".join(text for _, text in described)) from None


def _describe(document: yamlpos.Document, file: str, error: Any) -> tuple[int, str]:
    loc: FieldPath = tuple(error["loc"])
    line, _ = document.position(loc)
    where = f" {to_display(loc)}:" if loc else ""
    return line, f"{file}:{line}:{where} {validation_message(error, Suite)}"


