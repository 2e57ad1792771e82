"""Helpers several rules share: reading resource sections and targeted GPU models."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from policies.resources import Container, classify
from policies.view import PodView

# (section, its values, the accelerator names among them)
Section = tuple[str, Mapping[str, Any], tuple[str, ...]]


def sections(container: Container) -> Iterator[tuple[str, Mapping[str, Any]]]:
    resources = container.spec.get(container.resources_field)
    if not isinstance(resources, dict):
        return
    for section in ("requests", "limits"):
        values = resources.get(section)
        if isinstance(values, dict):
            yield section, values


def accelerator_sections(view: PodView) -> list[tuple[Container, tuple[Section, ...]]]:
    """Every container that names an accelerator resource in its requests or limits (with
    any value, unparsable ones too), with its sections. Several rules read them on every GPU
    pod: the names are picked out of cpu, memory and the rest once per view."""
    found: list[tuple[Container, tuple[Section, ...]]] | None = view.memo.get("accelerators")
    if found is None:
        found = []
        for container in view.demand.containers:
            named = []
            asks = False
            for section, values in sections(container):
                names = tuple([n for n in values if classify(n) is not None])
                asks = asks or bool(names)
                named.append((section, values, names))
            if asks:
                found.append((container, tuple(named)))
        view.memo["accelerators"] = found
    return found


def requested_accelerators(
    view: PodView,
) -> Iterator[tuple[Container, str, Mapping[str, Any], Mapping[str, Any]]]:
    """(container, name, requests, limits) for each accelerator resource a container
    requests, in container order."""
    for container, named in accelerator_sections(view):
        found = {section: (values, names) for section, values, names in named}
        requests, names = found.get("requests", ({}, ()))
        limits = found.get("limits", ({}, ()))[0]
        for name in names:
            yield container, name, requests, limits


def accelerator_names(values: Mapping[str, Any]) -> Iterator[str]:
    return (name for name in values if classify(name) is not None)
