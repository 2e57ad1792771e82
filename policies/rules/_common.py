"""Helpers several rules share: reading resource sections and targeted GPU models."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from policies.resources import Container, classify

PRODUCT_LABELS = ("nvidia.com/gpu.product", "aliyun.accelerator/nvidia_name")


def sections(container: Container) -> Iterator[tuple[str, Mapping[str, Any]]]:
    resources = container.spec.get("resources")
    if not isinstance(resources, dict):
        return
    for section in ("requests", "limits"):
        values = resources.get(section)
        if isinstance(values, dict):
            yield section, values


def requested_accelerators(
    container: Container,
) -> Iterator[tuple[str, Mapping[str, Any], Mapping[str, Any]]]:
    """(name, requests, limits) for each accelerator resource the container requests."""
    found = dict(sections(container))
    requests, limits = found.get("requests", {}), found.get("limits", {})
    for name in accelerator_names(requests):
        yield name, requests, limits


def accelerator_names(values: Mapping[str, Any]) -> Iterator[str]:
    return (name for name in values if classify(name) is not None)


def targeted_products(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """GPU product names the pod pins itself to (nodeSelector or required affinity `In`)."""
    found: list[str] = []
    selector = spec.get("nodeSelector")
    if isinstance(selector, dict):
        found += [str(selector[k]) for k in PRODUCT_LABELS if k in selector]
    affinity = spec.get("affinity")
    node_affinity = affinity.get("nodeAffinity") if isinstance(affinity, dict) else None
    required = (node_affinity or {}).get("requiredDuringSchedulingIgnoredDuringExecution")
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    for term in terms if isinstance(terms, list) else ():
        for expr in (term or {}).get("matchExpressions") or ():
            if (isinstance(expr, dict) and expr.get("key") in PRODUCT_LABELS
                    and expr.get("operator") == "In"):
                found += [str(v) for v in expr.get("values") or ()]
    return tuple(dict.fromkeys(found))
