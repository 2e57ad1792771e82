"""Values safety and the chart's generated parts: typos fail `helm template`, the CRD and the
policy schema match `gpupolicy schema`, and the rendered policies load with `gpupolicy policy
check` (the same loader the server uses on the mounted ConfigMap)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from policies.model import GPUPolicy
from tests.chart.helm import CHART, CI_VALUES, one, render, template
from tests.chart.schema_sync import CRD_FILE, VALUES_SCHEMA, chart_defs, schema_output
from webhook import cli

BUNDLED = Path(__file__).resolve().parents[2] / "policies" / "defaults"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--set", "replicaCont=3"), "additional properties 'replicaCont' not allowed"),
        (("--set", "webhooks.timeoutSecnds=3"), "'timeoutSecnds' not allowed"),
        (("--set", "webhooks.timeoutSeconds=31"), "maximum"),
        (("--set", "webhooks.validate.failurePolicy=fail"), "must be one of"),
        (("--set", "webhooks.mutate.reinvocationPolicy=Always"), "must be one of"),
        (("--set", "webhooks.mutate.operations=UPDATE"), "'operations' not allowed"),
        (("--set", "certs.mode=self-signed"), "must be one of"),
        (("--set", "certs.selfSigned.caValidityDay=10"), "'caValidityDay' not allowed"),
        (("--set", "image.digest=latest"), "does not match pattern"),
        (("--set", "podAntiAffinity=required"), "must be one of"),
        (("--set", "metrics.serviceMonitor.enable=true"), "'enable' not allowed"),
        (("--set", "networkPolicy.enable=true"), "'enable' not allowed"),
        (("--set", "metrics.port=0"), "minimum"),
        (("--set", "service.metricsPort=70000"), "maximum"),
        (("--set", "rbac.audit.subject[0].name=x"), "'subject' not allowed"),
        (("--set", "rbac.audit.subjects[0].name=x"), "missing property 'kind'"),
        (("--set", "shutdown.preStopSecond=5"), "'preStopSecond' not allowed"),
        (("--set", "webhooks.workloadKinds[0].podSpecPaths[0]=spec..template"), "pattern"),
        (("--set", "webhooks.gpuDeviceClass[0]=gpu.*"), "'gpuDeviceClass' not allowed"),
        (("--set-json", "webhooks.gpuDeviceClasses=[]"), "minItems"),
        (("--set", "webhooks.gpuDeviceClasses[0]=GPU.example.com"), "does not match pattern"),
        (("--set", "webhooks.gpuDeviceClasses[0]=gpu.(nvidia|amd).com"), "does not match pattern"),
        (("--set", "webhooks.validate.claim=false"), "'claim' not allowed"),
        (("--set", "webhooks.validate.claims=no"), "got string, want boolean"),
        # A typo inside a policy fails at install, not as a crash-looping server.
        (("--set", "policies.gpu-defaults.rules.maxGPUsPerPd=3"), "'maxGPUsPerPd' not allowed"),
        (("--set", "policies.gpu-defaults.mode=Enforcing"), "must be one of"),
        (("--set", "policies.Bad_Name.mode=Warn"), "does not match pattern"),
        # Combinations the schema cannot express: a template `fail` with a plain message.
        (("--set", "certs.mode=secret"), "certs.mode=secret needs certs.secretName"),
        (("--set", "certs.mode=secret", "--set", "certs.secretName=x"),
         "certs.caBundle is required with certs.mode=secret"),
        (("--set", "certs.caBundle=abc"), "certs.caBundle is only used with certs.mode=secret"),
        (("--set", "webhooks.mutate.templates=true", "--set", "webhooks.matchConditions=false"),
         "webhooks.mutate.templates needs matchConditions"),
        (("--set", "webhooks.mutate.templates=true", "--kube-version", "1.27.0"),
         "webhooks.mutate.templates needs matchConditions"),
    ],
)
def test_bad_values_fail_helm_template(args: tuple[str, ...], message: str) -> None:
    result = template(*args)
    assert result.returncode != 0
    assert message in result.stderr


def test_every_value_is_commented() -> None:
    """Every chart-defined setting has a comment right above it in values.yaml, or sits in a
    group whose key has one (resources, probe timings)."""
    text = (CHART / "values.yaml").read_text(encoding="utf-8")
    lines = text.splitlines()
    schema = json.loads(VALUES_SCHEMA.read_text(encoding="utf-8"))
    bare: list[str] = []

    def walk(node: yaml.MappingNode, props: dict[str, Any], where: str) -> None:
        for key_node, value_node in node.value:
            sub = props.get(key_node.value, {})
            path = f"{where}{key_node.value}"
            if lines[key_node.start_mark.line - 1].strip().startswith("#"):
                continue
            if "properties" in sub and isinstance(value_node, yaml.MappingNode):
                walk(value_node, sub["properties"], path + ".")
            else:
                bare.append(path)

    root = yaml.compose(text)
    assert isinstance(root, yaml.MappingNode)
    walk(root, schema["properties"], "")
    assert bare == []


def test_schema_forbids_unknown_keys_everywhere() -> None:
    """Every object the chart itself defines in values.schema.json closes its key set."""
    schema = json.loads(VALUES_SCHEMA.read_text(encoding="utf-8"))
    open_objects: list[str] = []

    def walk(node: dict[str, Any], where: str) -> None:
        if "properties" in node and node.get("additionalProperties") is not False:
            open_objects.append(where)
        for name, sub in (node.get("properties") or {}).items():
            walk(sub, f"{where}.{name}")
        if isinstance(node.get("items"), dict):
            walk(node["items"], f"{where}[]")

    walk(schema, "values")
    assert open_objects == []
    assert schema["additionalProperties"] is False


def test_crd_copy_matches_gpupolicy_schema() -> None:
    assert CRD_FILE.read_text(encoding="utf-8") == schema_output("crd"), (
        "charts/gpupolicy/files/crd-gpupolicies.yaml drifted: run python -m tests.chart.schema_sync")


def test_policy_schema_copy_matches_the_model() -> None:
    schema = json.loads(VALUES_SCHEMA.read_text(encoding="utf-8"))
    assert schema["$defs"] == chart_defs(), (
        "values.schema.json $defs drifted: run python -m tests.chart.schema_sync")


def test_rendered_crd_is_the_generated_one() -> None:
    crd = one(render(), "CustomResourceDefinition")
    generated = yaml.safe_load(schema_output("crd"))
    assert crd["spec"] == generated["spec"]
    assert crd["metadata"]["name"] == "gpupolicies.gpupolicy.io"


def _structural_problems(node: dict[str, Any], where: str) -> list[str]:
    """The rules of a structural schema (apiextensions v1) that JSON Schema output breaks."""
    problems = []
    for banned in ("$ref", "anyOf", "oneOf", "allOf", "$defs", "const", "prefixItems"):
        if banned in node:
            problems.append(f"{where}: {banned}")
    if node.get("additionalProperties") is False:
        problems.append(f"{where}: additionalProperties: false")
    if "properties" in node and "additionalProperties" in node:
        problems.append(f"{where}: properties with additionalProperties")
    if "type" not in node and not node.get("x-kubernetes-preserve-unknown-fields"):
        problems.append(f"{where}: no type")
    if node.get("default", 0) is None:
        problems.append(f"{where}: default null")
    for name, sub in (node.get("properties") or {}).items():
        problems += _structural_problems(sub, f"{where}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), dict):
            problems += _structural_problems(node[key], f"{where}.{key}")
    return problems


def test_crd_schema_is_structural() -> None:
    version = one(render(), "CustomResourceDefinition")["spec"]["versions"][0]
    schema = version["schema"]["openAPIV3Schema"]
    assert _structural_problems(schema, "openAPIV3Schema") == []
    assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
    columns = {c["name"]: c["jsonPath"] for c in version["additionalPrinterColumns"]}
    assert columns["Mode"] == ".spec.mode" and columns["Priority"] == ".spec.priority"
    assert one(render(), "CustomResourceDefinition")["spec"]["scope"] == "Cluster"


@pytest.mark.parametrize(
    "policy",
    [
        # the DESIGN.md §2 example, field for field
        {"namespaces": ["ml-train", "team-*"], "namespaceSelector": {"matchLabels": {"a": "b"}},
         "mode": "Warn", "priority": 3,
         "inject": {"tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists",
                                     "effect": "NoSchedule"}],
                    "nodeSelector": {"workload": "gpu"},
                    "nodeAffinity": {"required": [{"key": "k", "operator": "In",
                                                   "values": ["v"]}]},
                    "runtimeClassName": "nvidia", "gpuLimitsFromRequests": True,
                    "hideGPUsFromNonGPUContainers": True},
         "rules": {"allowedResources": ["nvidia.com/gpu"], "maxGPUsPerPod": 8,
                   "mig": {"allowedProfiles": ["1g.10gb"], "maxInstancesPerPod": 4},
                   "shared": {"maxMemoryGiBPerContainer": 16, "maxPodsPerGPU": 20},
                   "denyPrivilegedGPUContainers": True, "denyVisibleDevicesBypass": True}},
    ],
)
def test_a_valid_policy_is_accepted_by_values_and_crd_schemas(policy: dict[str, Any]) -> None:
    """The two copies accept what the model accepts (CRD checked as JSON Schema)."""
    import jsonschema

    GPUPolicy.model_validate({"apiVersion": "gpupolicy.io/v1alpha1", "kind": "GPUPolicy",
                              "metadata": {"name": "p"}, "spec": policy})
    result = template("--set-json", f"policies.p={json.dumps(policy)}", "--show-only",
                      "templates/policies-configmap.yaml")
    assert result.returncode == 0, result.stderr
    crd_schema = yaml.safe_load(schema_output("crd"))["spec"]["versions"][0]["schema"]
    jsonschema.validate({"apiVersion": "gpupolicy.io/v1alpha1", "kind": "GPUPolicy",
                         "metadata": {"name": "p"}, "spec": policy},
                        crd_schema["openAPIV3Schema"])


def test_default_policies_are_the_bundled_defaults() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text(encoding="utf-8"))
    bundled = {}
    for path in sorted(BUNDLED.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            if doc:
                bundled[doc["metadata"]["name"]] = doc["spec"]
    assert bundled, "policies/defaults is empty"
    assert values["policies"] == bundled


@pytest.mark.parametrize("values", CI_VALUES)
def test_rendered_policies_pass_gpupolicy_policy_check(values: str, tmp_path: Path) -> None:
    configmap = next(o for o in render(values) if o["kind"] == "ConfigMap"
                     and o["metadata"]["name"] == "rel-gpupolicy-policies")
    for name, text in (configmap.get("data") or {}).items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    code = cli.run(["policy", "check", str(tmp_path)], out, err)
    assert code == 0, out.getvalue() + err.getvalue()
    expected = {"full": ["training"]}.get(values, ["gpu-defaults"])
    assert sorted(p.removesuffix(".yaml") for p in configmap["data"]) == expected
    assert f"({', '.join(expected)})" in out.getvalue()
