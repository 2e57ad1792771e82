"""Helpers several rules share: reading resource sections and targeted GPU models."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from policies.resources import Container, classify


def sections(container: Container) -> Iterator[tuple[str, Mapping[str, Any]]]:
    resources = container.spec.get(container.resources_field)
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
