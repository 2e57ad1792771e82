"""The engine's case table: YAML files under tests/engine/cases/, shared by every front door's
tests (review, lint, the webhook, the audit), so all of them are held to the same verdicts.

A case file has optional `policies:` (name -> GPUPolicy spec) and `cases:`. A case gives the
object either whole (`object:`) or as a pod shorthand (`pod:`, wrapped into `kind:` when given),
the policies by name (`defaults` = the bundled ones), `inventory: NAME` for the fixture nodes
of tests/engine/fixtures/NAME.yaml (`cluster`: nodes.yaml),
`namespace`, and `expect`: `allowed`, the exact set of `rules` violated, `mutated` (JSON
pointer -> value in the object after mutation; null means absent), `skipped` (the object is
reported as not reviewed), `notes` (substrings of the decision's notes: "fits NodePool x on
scale-up") and `message` (a substring, or a list of them, that the violations'
messages must contain: a refusal's per-pool reasons). `ref` names the row of
reference/gpu-ecosystem.md §7 (or reference/dra.md) the case comes from.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from policies.apiserver import ApiObjects
from policies.context import Context
from policies.inventory import Inventory
from policies.loading import parse_policies
from policies.model import GPUPolicy
from webhook.inputs.sources import (
    load_catalog,
    load_inventory,
    load_policies,
    read_cluster_file,
)

HERE = Path(__file__).parent
CASES = HERE / "cases"
NODES = HERE / "fixtures" / "nodes.yaml"
NAMESPACES = {
    "ml-train": {"gpu-tier": "training"},
    "team-a": {"gpu-tier": "shared"},
    "gpu-operator": {},
    "dra-admin": {"resource.kubernetes.io/admin-access": "true"},
}


@dataclass(frozen=True)
class Case:
    id: str
    object: dict[str, Any]
    policies: tuple[str, ...]
    namespace: str
    inventory: str | None
    allowed: bool
    rules: frozenset[str]
    mutated: dict[str, Any] = field(default_factory=dict)
    ref: str = ""
    source: str = ""
    skipped: bool = False  # the engine reports the object as not reviewed (an unlisted kind)
    messages: tuple[str, ...] = ()  # substrings the violations' messages must contain
    notes: tuple[str, ...] = ()  # substrings the decision's notes must contain (a scale-up)


@cache
def _catalog() -> Any:
    return load_catalog()


def inventory_file(name: str) -> Path:
    path = NODES if name == "cluster" else HERE / "fixtures" / f"{name}.yaml"
    if not path.is_file():
        raise ValueError(f"unknown inventory {name!r}")
    return path


@cache
def _inventory(name: str) -> Inventory:
    return load_inventory(inventory_file(name), _catalog())


@cache
def _named_policies() -> dict[str, tuple[GPUPolicy, ...]]:
    named: dict[str, tuple[GPUPolicy, ...]] = {"defaults": tuple(load_policies())}
    for path in sorted(CASES.glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        for name, spec in (data.get("policies") or {}).items():
            doc = {"apiVersion": "gpupolicy.io/v1alpha1", "kind": "GPUPolicy",
                   "metadata": {"name": name}, "spec": spec}
            named[name] = tuple(parse_policies(yaml.safe_dump(doc), f"{path.name}:{name}"))
    return named


@cache
def _claims(name: str) -> dict[tuple[str, str, str], Any]:
    """ResourceClaims and templates in an inventory file, as serve --inventory reads them."""
    return read_cluster_file(inventory_file(name)).claims


@cache
def _api(name: str) -> ApiObjects | None:
    """PriorityClasses, RuntimeClasses and ResourceQuotas in an inventory file."""
    return read_cluster_file(inventory_file(name)).api()


def context_for(case: Case) -> Context:
    named = _named_policies()
    policies = [p for name in case.policies for p in named[name]]
    inventory = _inventory(case.inventory) if case.inventory else None
    claims = _claims(case.inventory) if case.inventory else {}
    return Context(policies=policies, catalog=_catalog(), inventory=inventory,
                   namespaces=NAMESPACES, claims=claims,
                   api=_api(case.inventory) if case.inventory else None)


def load_cases() -> list[Case]:
    cases: list[Case] = []
    for path in sorted(CASES.glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        for raw in data.get("cases") or []:
            expect = raw.get("expect") or {}
            obj = raw["object"] if "object" in raw else expand(raw["pod"], raw.get("kind", "Pod"))
            cases.append(Case(
                id=f"{path.stem}:{raw['name']}",
                object=obj,
                policies=tuple(raw.get("policies", ["defaults"])),
                namespace=raw.get("namespace", "ml-train"),
                inventory=raw.get("inventory"),
                allowed=bool(expect.get("allowed", True)),
                rules=frozenset(expect.get("rules") or ()),
                mutated=expect.get("mutated") or {},
                ref=str(raw.get("ref", "")),
                source=path.name,
                skipped=bool(expect.get("skipped", False)),
                messages=_strings(expect.get("message")),
                notes=_strings(expect.get("notes")),
            ))
    return cases


def _strings(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    return (value,) if isinstance(value, str) else tuple(str(v) for v in value)


def expand(pod: dict[str, Any], kind: str = "Pod") -> dict[str, Any]:
    """Pod shorthand: containers given as {limits, requests, env: {NAME: value}, ...}."""
    spec = copy.deepcopy(pod)
    for key in ("containers", "initContainers", "ephemeralContainers"):
        items = spec.get(key)
        if items is None:
            continue
        spec[key] = [_container(c, f"{key[:1]}{i}") for i, c in enumerate(items)]
    spec.setdefault("containers", [])
    metadata = {"name": "case"}
    if kind == "Pod":
        return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}
    template = {"metadata": {"labels": {"app": "case"}}, "spec": spec}
    if kind == "CronJob":
        return {"apiVersion": "batch/v1", "kind": "CronJob", "metadata": metadata,
                "spec": {"schedule": "* * * * *", "jobTemplate": {"spec": {"template": template}}}}
    if kind == "PyTorchJob":
        return {"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": metadata,
                "spec": {"pytorchReplicaSpecs": {
                    "Master": {"replicas": 1, "template": template},
                    "Worker": {"replicas": 2, "template": copy.deepcopy(template)}}}}
    group = "batch/v1" if kind == "Job" else "apps/v1"
    body: dict[str, Any] = {"template": template}
    if kind not in ("Job", "DaemonSet"):
        body["selector"] = {"matchLabels": {"app": "case"}}
    if kind == "DaemonSet":
        body["selector"] = {"matchLabels": {"app": "case"}}
    return {"apiVersion": group, "kind": kind, "metadata": metadata, "spec": body}


def _container(short: dict[str, Any], default_name: str) -> dict[str, Any]:
    container = {"name": short.pop("name", default_name), "image": short.pop("image", "cuda:12")}
    resources = {k: short.pop(k) for k in ("limits", "requests") if k in short}
    if resources:
        container["resources"] = resources
    env = short.pop("env", None)
    if isinstance(env, dict):
        container["env"] = [{"name": k, "value": str(v)} for k, v in env.items()]
    container.update(short)
    return container


def pointer_get(doc: Any, pointer: str) -> Any:
    """The value at an RFC 6901 pointer, or None when absent."""
    if pointer == "":
        return doc
    for raw in pointer.lstrip("/").split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(doc, list):
            index = int(part)
            doc = doc[index] if index < len(doc) else None
        elif isinstance(doc, dict):
            doc = doc.get(part)
        else:
            return None
        if doc is None:
            return None
    return doc
