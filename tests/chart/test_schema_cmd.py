"""`gpupolicy schema`: the JSON Schema editors and CI can use, and the CRD the chart ships."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from policies.model import GPUPolicy
from tests.chart.schema_sync import schema_output
from webhook import cli

BUNDLED = Path(__file__).resolve().parents[2] / "policies" / "defaults"


def _policy(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": "gpupolicy.io/v1alpha1", "kind": "GPUPolicy",
            "metadata": {"name": "p"}, "spec": spec}


def test_json_is_the_models_schema() -> None:
    schema = json.loads(schema_output("json"))
    assert schema.pop("$schema") == "https://json-schema.org/draft/2020-12/schema"
    assert schema == GPUPolicy.model_json_schema(by_alias=True)


def test_json_is_the_default_format() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert cli.run(["schema"], out, err) == 0
    assert out.getvalue() == schema_output("json")


def test_unknown_format_is_a_usage_error() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert cli.run(["schema", "--format", "openapi"], out, err) == 2
    assert "--format openapi: unknown format; choose one of json, crd" in err.getvalue()


@pytest.mark.parametrize(
    ("document", "valid"),
    [
        (_policy(), True),
        (_policy(mode="Warn", rules={"maxGPUsPerPod": 4}), True),
        (_policy(mode="Block"), False),
        (_policy(rules={"maxGPUsPerPd": 4}), False),
        (_policy(rules={"maxGPUsPerPod": -1}), False),
        (_policy(inject={"tolerations": [{"operator": "Sometimes"}]}), False),
    ],
)
def test_json_and_crd_schemas_agree_with_the_model(document: dict[str, Any], valid: bool) -> None:
    """The JSON Schema says what pydantic says. The CRD (the API server prunes unknown fields
    rather than refusing them) agrees on everything but unknown keys."""
    try:
        GPUPolicy.model_validate(document)
        model_ok = True
    except ValueError:
        model_ok = False
    assert model_ok is valid
    json_ok = jsonschema.Draft202012Validator(json.loads(schema_output("json"))).is_valid(document)
    assert json_ok is valid
    crd = yaml.safe_load(schema_output("crd"))["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    crd_ok = jsonschema.Draft4Validator(crd).is_valid(document)
    unknown_key = "maxGPUsPerPd" in json.dumps(document)
    assert crd_ok is (valid or unknown_key)


def test_bundled_defaults_validate_against_both() -> None:
    json_schema = json.loads(schema_output("json"))
    crd = yaml.safe_load(schema_output("crd"))["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    docs = [d for p in sorted(BUNDLED.glob("*.yaml"))
            for d in yaml.safe_load_all(p.read_text(encoding="utf-8")) if d]
    assert docs
    for doc in docs:
        jsonschema.validate(doc, json_schema)
        jsonschema.Draft4Validator(crd).validate(doc)


def _without_description(node: object, path: str = "") -> list[str]:
    """Every property of a schema node, at any depth, that carries no description."""
    if isinstance(node, list):
        return [p for item in node for p in _without_description(item, path)]
    if not isinstance(node, dict):
        return []
    missing = []
    for name, sub in (node.get("properties") or {}).items():
        here = f"{path}.{name}" if path else name
        if not (isinstance(sub, dict) and (sub.get("description") or "$ref" in sub)):
            missing.append(here)
        missing += _without_description(sub, here)
    for key in ("items", "additionalProperties", "anyOf"):
        if key in node:
            missing += _without_description(node[key], path)
    return missing


def test_every_field_of_the_crd_is_described() -> None:
    """`kubectl explain gpupolicy.spec.rules` prints each field's description from the CRD."""
    import yaml

    out, err = io.StringIO(), io.StringIO()
    assert cli.run(["schema", "-o", "crd"], out, err) == 0
    root = yaml.safe_load(out.getvalue())["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    spec = root["properties"]["spec"]
    assert _without_description(spec, "spec") == []
    assert "maxGPUsPerPod" in spec["properties"]["rules"]["properties"]
    assert spec["properties"]["rules"]["properties"]["maxGPUsPerPod"]["description"].startswith(
        "At most this many whole GPUs per pod")


def test_every_field_of_the_json_schema_is_described() -> None:
    out, err = io.StringIO(), io.StringIO()
    assert cli.run(["schema"], out, err) == 0
    schema = json.loads(out.getvalue())
    missing = [f"{name}: {p}" for name, definition in schema["$defs"].items()
               for p in _without_description(definition)]
    assert missing == []
    assert _without_description(schema) == []
