"""The workload-kinds table as data: the parser's answers and errors (each with its field
path), the chart's grouped form, extension and override, and the search for a pod template in
a kind the table does not list."""

from __future__ import annotations

from typing import Any

import pytest

from policies.kinds import BUNDLED
from policies.workloads import (
    WORKLOAD_KINDS,
    ContainerSlot,
    KindTableError,
    parse_kind_table,
    parse_path,
    pod_specs,
    unlisted_pod_template,
)


@pytest.mark.parametrize(("text", "steps"), [
    ("spec", ("spec",)),
    (".", ()),
    ("spec.workerGroupSpecs[].template.spec",
     ("spec", "workerGroupSpecs", "[]", "template", "spec")),
    ("spec.pytorchReplicaSpecs.*.template.spec",
     ("spec", "pytorchReplicaSpecs", "*", "template", "spec")),
])
def test_paths(text: str, steps: tuple[str, ...]) -> None:
    assert parse_path(text) == steps


@pytest.mark.parametrize("text", ["", "spec..x", ".spec", "spec.", "spec[].*[]", "a b", 3, None,
                                  "x" * 600])
def test_bad_paths(text: Any) -> None:
    with pytest.raises(ValueError):
        parse_path(text)


@pytest.mark.parametrize(("data", "errors"), [
    ({"kind": "X"}, ["expected a list of workload kinds"]),
    ([3], ["[0]: expected a map"]),
    ([{"kind": "x-y", "podSpecPaths": ["spec"]}], ["[0].kind: 'x-y' is not a kind name"]),
    ([{"kind": "Foo", "apiGroup": "Example.COM", "podSpecPaths": ["spec"]}],
     ["[0].apiGroup: 'Example.COM' is not an API group"]),
    ([{"kind": "Foo", "apiGroup": "example.com"}],
     ["[0].podSpecPaths: required (a list of dot paths)"]),
    ([{"kind": "Foo", "apiGroup": "example.com", "podSpecPaths": ["spec", "spec..t"]}],
     ["[0].podSpecPaths[1]: 'spec..t' is not a dot path (name, name[], *, joined by dots)"]),
    ([{"kind": "Foo", "podSpecPaths": ["spec"], "podFields": ["tolerations", "hostNetwork"]}],
     ["[0].podFields[1]: 'hostNetwork' is not one of affinity, nodeSelector, "
      "priorityClassName, runtimeClassName, tolerations"]),
    ([{"kind": "Foo", "podSpecPaths": ["spec"], "containerPaths": [{"path": ".", "x": 1}]}],
     ["[0].containerPaths[0]: unknown field 'x' (path, resourcesField, gpuField)"]),
    ([{"kind": "Foo", "podSpecPaths": ["spec"], "podSpecPath": ["spec"]}],
     ["[0].podSpecPath: unknown field (expected one of apiGroup, apiGroups, containerPaths, "
      "kind, kinds, name, podFields, podFieldsPath, podSpecPaths, resource, resources)"]),
    ([{"kind": "Foo", "podSpecPaths": ["spec"], "podFieldsPath": "spec.patches[manager]"}],
     ["[0].podFieldsPath: 'spec.patches[manager]' is not a dot path (name, name[key=value], "
      "joined by dots)"]),
    ([{"name": "w", "apiGroups": ["example.com"], "resources": ["widgets"],
       "podSpecPaths": ["spec.template.spec"]}],
     ["[0].resources[0]: no kind known for resource 'widgets' in group 'example.com': give "
      "`kinds`, one per resource"]),
    ([{"name": "w", "apiGroups": ["example.com"], "resources": ["a", "b"], "kinds": ["A"],
       "podSpecPaths": ["spec"]}], ["[0].kinds: expected one kind name per item of `resources`"]),
])
def test_errors_name_the_field(data: Any, errors: list[str]) -> None:
    with pytest.raises(KindTableError) as raised:
        parse_kind_table(data, "kinds.yaml", base=WORKLOAD_KINDS)
    assert raised.value.errors == errors
    assert str(raised.value).startswith("kinds.yaml: ")


def test_every_error_is_reported_at_once() -> None:
    with pytest.raises(KindTableError) as raised:
        parse_kind_table([{"kind": "1"}, {"kind": "Ok", "podSpecPaths": "spec"}], "f")
    assert len(raised.value.errors) == 3


def test_bundled_table_is_the_file_form() -> None:
    assert parse_kind_table(BUNDLED, "bundled") == WORKLOAD_KINDS
    keys = [k.key for k in WORKLOAD_KINDS.kinds]
    assert len(keys) == len(set(keys))


def test_chart_grouped_form_finds_kinds_by_resource() -> None:
    table = parse_kind_table([{
        "name": "argo-workflows", "apiGroups": ["argoproj.io"],
        "resources": ["workflows", "cronworkflows"],
        "podSpecPaths": ["spec.templates[]", "spec.workflowSpec.templates[]"],
    }], "values", base=WORKLOAD_KINDS)
    assert [k.key for k in table.kinds] == ["argoproj.io/Workflow", "argoproj.io/CronWorkflow"]
    # Fields the entry leaves out come from the bundled kind.
    assert table.kinds[0].containers[0] == ContainerSlot(("container",))
    assert "runtimeClassName" not in table.kinds[0].pod_fields


def test_a_user_kind_extends_and_overrides() -> None:
    extra = parse_kind_table([
        {"kind": "Trainer", "apiGroup": "example.com", "podSpecPaths": ["spec.pod.spec"]},
        {"kind": "Notebook", "apiGroup": "kubeflow.org", "podSpecPaths": ["spec.tpl.spec"]},
    ], "extra.yaml", base=WORKLOAD_KINDS)
    table = WORKLOAD_KINDS.extended(extra)
    pod = {"spec": {"containers": [{"name": "c"}]}}
    trainer = {"apiVersion": "example.com/v1", "kind": "Trainer", "spec": {"pod": pod}}
    notebook = {"apiVersion": "kubeflow.org/v1", "kind": "Notebook", "spec": {"tpl": pod,
                                                                              "template": pod}}
    assert [p for p, _ in pod_specs(trainer, table)] == [("spec", "pod", "spec")]
    assert [p for p, _ in pod_specs(notebook, table)] == [("spec", "tpl", "spec")]
    assert len(table.kinds) == len(WORKLOAD_KINDS.kinds) + 1


@pytest.mark.parametrize(("obj", "found"), [
    ({"apiVersion": "example.com/v1", "kind": "Run",
      "spec": {"worker": {"template": {"spec": {"containers": [{"name": "c"}]}}}}},
     "spec.worker.template.spec"),
    ({"apiVersion": "example.com/v1", "kind": "Run",
      "spec": {"groups": [{"pod": {"containers": [{"name": "c"}]}}]}}, "spec.groups[0].pod"),
    ({"apiVersion": "example.com/v1", "kind": "Run", "spec": {"containers": "no"}}, ""),
    ({"apiVersion": "v1", "kind": "ConfigMap", "data": {"containers": "x"}}, ""),
    ({"apiVersion": "apps/v1", "kind": "Deployment",
      "spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}, ""),  # listed
    ({"kind": "Run", "spec": {"a": {"b": {"c": {"d": {"e": {"f": {"g": {"h": {
        "containers": [{}]}}}}}}}}}}, ""),  # deeper than any CRD puts one: not searched
])
def test_unlisted_pod_templates(obj: dict[str, Any], found: str) -> None:
    reason = unlisted_pod_template(obj, WORKLOAD_KINDS)
    if not found:
        assert reason == ""
    else:
        assert f"holds a pod spec at {found}: not reviewed" in reason
        assert reason.startswith(f"kind example.com/{obj['kind']} is not in the workload-kinds")


def test_search_is_bounded_by_size() -> None:
    wide = {"apiVersion": "x/v1", "kind": "Wide",
            "spec": {f"k{i}": {"a": {"b": [1] * 10}} for i in range(5000)}}
    assert unlisted_pod_template(wide, WORKLOAD_KINDS) == ""
