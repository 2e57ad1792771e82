"""Properties every decision must have, over every corpus document and every case:
review never raises; the patch applies with a strict RFC 6902 implementation and gives the
mutated object; mutating the mutated object changes nothing; and what the webhook lets through
is an object the apiserver accepts: it validates against the Kubernetes 1.33 schema and, for
Pods after the apiserver's limit->request defaulting, passes the extended-resource rules of
webhook-contract.md §6."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonpatch
import kubernetes_validate
import pytest
import yaml

from policies.context import Context
from policies.engine import review
from policies.quantity import QuantityError, parse_quantity
from policies.resources import classify, iter_containers
from policies.workloads import pod_specs
from tests.engine.casetable import context_for, load_cases
from webhook.inputs.sources import load_catalog, load_inventory, load_policies

NODES = Path(__file__).parent / "fixtures" / "nodes.yaml"
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def corpus_documents(corpus: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    for path in sorted(corpus.rglob("*.y*ml")):
        try:
            docs = list(yaml.load_all(path.read_text(encoding="utf-8"), Loader=_Loader))
        except (yaml.YAMLError, UnicodeDecodeError):
            continue
        for index, doc in enumerate(docs):
            if isinstance(doc, dict):
                yield f"{path.relative_to(corpus)}#{index}", doc


@pytest.fixture(scope="module")
def corpus_context() -> Context:
    catalog = load_catalog()
    return Context(policies=load_policies(), catalog=catalog,
                   inventory=load_inventory(NODES, catalog))


def _map(value: Any) -> dict[str, Any]:
    # Parts of the wrong type are the apiserver's decoding errors (pod-field-invalid), not §6.
    return value if isinstance(value, dict) else {}


def apiserver_defaulted(obj: dict[str, Any]) -> dict[str, Any]:
    """SetDefaults_Pod: each limit missing from requests is copied, for v1 Pods only."""
    if obj.get("kind") != "Pod":
        return obj
    out = copy.deepcopy(obj)
    for _, _, container in iter_containers(out.get("spec") or {}, ()):
        resources = _map(container.get("resources"))
        limits = _map(resources.get("limits"))
        if limits and isinstance(resources.setdefault("requests", {}), dict):
            requests = resources["requests"]
            for name, value in limits.items():
                requests.setdefault(name, value)
    return out


def extended_resource_errors(obj: dict[str, Any]) -> list[str]:
    """webhook-contract.md §6, for accelerator resources."""
    errors = []
    for prefix, spec in pod_specs(obj):
        for path, _, container in iter_containers(spec, prefix):
            resources = _map(container.get("resources"))
            requests, limits = _map(resources.get("requests")), _map(resources.get("limits"))
            for section in (requests, limits):
                for name, raw in section.items():
                    if classify(name) is None:
                        continue
                    try:
                        value = parse_quantity(raw)
                    except QuantityError:
                        errors.append(f"{path} {name}: not a quantity")
                        continue
                    if value < 0 or value.denominator != 1:
                        errors.append(f"{path} {name}: must be a non-negative integer")
            for name in requests:
                if classify(name) is None:
                    continue
                if name not in limits:
                    errors.append(f"{path} {name}: Limit must be set")
                elif parse_quantity(requests[name]) != parse_quantity(limits[name]):
                    errors.append(f"{path} {name}: must be equal to limit")
    return errors


def schema_error(obj: dict[str, Any]) -> str | None:
    try:
        kubernetes_validate.validate(obj, "1.33", strict=True)
    except kubernetes_validate.utils.ValidationError as exc:
        return str(exc).splitlines()[0]
    except kubernetes_validate.utils.SchemaNotFoundError:
        return None  # custom resources: no schema to hold them to
    return None


def check_properties(obj: dict[str, Any], context: Context, namespace: str | None) -> None:
    decision = review(obj, context, namespace=namespace)
    assert jsonpatch.apply_patch(obj, list(decision.patch)) == decision.mutated
    again = review(decision.mutated, context, namespace=namespace)
    assert again.patch == ()
    if not decision.patch:
        return
    before = schema_error(apiserver_defaulted(obj))
    if before is None:  # only objects the apiserver took before are held to it after
        assert schema_error(apiserver_defaulted(decision.mutated)) is None
    if decision.allowed:
        assert extended_resource_errors(apiserver_defaulted(decision.mutated)) == []


@pytest.mark.corpus
def test_corpus_documents(corpus_dir: Path, corpus_context: Context) -> None:
    count = patched = 0
    for name, doc in corpus_documents(corpus_dir):
        try:
            check_properties(doc, corpus_context, None)
        except AssertionError as exc:
            raise AssertionError(f"{name}: {exc}") from None
        count += 1
        patched += bool(review(doc, corpus_context).patch)
    assert count > 1000 and patched > 20


@pytest.mark.parametrize("case", load_cases(), ids=lambda c: c.id)
def test_case_properties(case: Any) -> None:
    check_properties(case.object, context_for(case), case.namespace)
