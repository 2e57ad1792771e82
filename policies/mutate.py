"""The changes `inject` asks for, written as patch ops against one pod spec.

Every change first looks at what is there, so a second run finds nothing to do. Lists are
merged over all governing policies; single values come from the first policy (lowest priority,
then name) that sets them.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from policies.decision import Finding
from policies.model import GPUPolicy
from policies.patch import Patch, PatchConflict
from policies.paths import FieldPath
from policies.resources import PodDemand

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"
VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"


def inject(
    patch: Patch, prefix: FieldPath, demand: PodDemand, policies: Sequence[GPUPolicy]
) -> Iterator[tuple[GPUPolicy, Finding]]:
    """Apply every policy's `inject` to the pod spec at `prefix`; yield conflicts found."""
    if any(p.spec.inject.hide_gpus_from_non_gpu_containers for p in policies):
        _hide_devices(patch, demand)
    if not demand.gpu:
        return
    try:
        _limits_from_requests(patch, demand, policies)
        _tolerations(patch, prefix, policies)
        yield from _node_selector(patch, prefix, policies)
        _node_affinity(patch, prefix, policies)
        for field, attr in (("runtimeClassName", "runtime_class_name"),
                            ("priorityClassName", "priority_class_name")):
            value = next((getattr(p.spec.inject, attr) for p in policies
                          if getattr(p.spec.inject, attr)), None)
            if value is not None and not patch.get((*prefix, field)):
                patch.set((*prefix, field), value)
    except PatchConflict as exc:
        yield policies[0], Finding("pod-spec-malformed", str(exc), prefix)


_DUMPS: dict[int, tuple[Any, dict[str, Any]]] = {}


def _dump(model: Any) -> dict[str, Any]:
    """The model as the pod would carry it; computed once per (frozen) policy part. Callers get
    the shared dict and must not change it (Patch copies what it writes)."""
    cached = _DUMPS.get(id(model))
    if cached is not None and cached[0] is model:
        return cached[1]
    # JSON mode gives lists, not tuples, so values compare equal to what the pod carries.
    dumped: dict[str, Any] = model.model_dump(
        mode="json", by_alias=True, exclude_none=True, exclude_defaults=True
    )
    _DUMPS[id(model)] = (model, dumped)
    return dumped


def _limits_from_requests(patch: Patch, demand: PodDemand, policies: Sequence[GPUPolicy]) -> None:
    if not any(p.spec.inject.gpu_limits_from_requests for p in policies):
        return
    for container in demand.containers:
        resources = container.spec.get("resources")
        if not isinstance(resources, dict) or not isinstance(resources.get("requests"), dict):
            continue
        limits = resources.get("limits")
        limits = limits if isinstance(limits, dict) else {}
        for name in container.amounts:
            if name in resources["requests"] and name not in limits:
                value = resources["requests"][name]
                patch.set((*container.path, "resources", "limits", name), value)


def _toleration_key(t: Mapping[str, Any]) -> tuple[Any, ...]:
    operator = t.get("operator") or "Equal"
    return (t.get("key") or "", operator, t.get("value") or "", t.get("effect") or "",
            t.get("tolerationSeconds"))


def _tolerations(patch: Patch, prefix: FieldPath, policies: Sequence[GPUPolicy]) -> None:
    path = (*prefix, "tolerations")
    current = patch.get(path)
    seen = {_toleration_key(t) for t in current if isinstance(t, dict)} if isinstance(
        current, list) else set()
    for policy in policies:
        for toleration in policy.spec.inject.tolerations:
            value = _dump(toleration)
            key = _toleration_key(value)
            if key not in seen:
                seen.add(key)
                patch.append(path, value)


def _node_selector(
    patch: Patch, prefix: FieldPath, policies: Sequence[GPUPolicy]
) -> Iterator[tuple[GPUPolicy, Finding]]:
    path = (*prefix, "nodeSelector")
    decided: set[str] = set()
    for policy in policies:
        for key, value in policy.spec.inject.node_selector.items():
            if key in decided:
                continue
            decided.add(key)
            current = patch.get((*path, key))
            if current is None:
                patch.set((*path, key), value)
            elif current != value:
                yield policy, Finding(
                    "node-selector-conflict",
                    f"nodeSelector {key}={current} conflicts with {key}={value} "
                    f"that policy {policy.name} requires",
                    (*path, key),
                )


def _node_affinity(patch: Patch, prefix: FieldPath, policies: Sequence[GPUPolicy]) -> None:
    required: list[dict[str, Any]] = []
    preferred: list[dict[str, Any]] = []
    for policy in policies:
        affinity = policy.spec.inject.node_affinity
        if affinity is None:
            continue
        required += [r for r in map(_dump, affinity.required) if r not in required]
        preferred += [p for p in map(_dump, affinity.preferred) if p not in preferred]
    base = (*prefix, "affinity", "nodeAffinity")
    if required:
        terms_path = (*base, REQUIRED, "nodeSelectorTerms")
        terms = patch.get(terms_path)
        if not isinstance(terms, list) or not terms:
            patch.set(terms_path, [{"matchExpressions": required}])
        else:
            # Terms are ORed: the requirement must hold in each of them.
            for index, term in enumerate(terms):
                expressions = term.get("matchExpressions") if isinstance(term, dict) else None
                have = expressions if isinstance(expressions, list) else []
                for requirement in required:
                    if requirement not in have:
                        patch.append((*terms_path, index, "matchExpressions"), requirement)
    if preferred:
        path = (*base, PREFERRED)
        current = patch.get(path)
        have = current if isinstance(current, list) else []
        for term in preferred:
            if term not in have:
                patch.append(path, term)


def _hide_devices(patch: Patch, demand: PodDemand) -> None:
    for container in demand.containers:
        if container.gpu or container.role == "ephemeral":
            continue
        env = container.spec.get("env")
        if isinstance(env, list) and any(
            isinstance(e, dict) and e.get("name") == VISIBLE_DEVICES for e in env
        ):
            continue
        patch.append((*container.path, "env"), {"name": VISIBLE_DEVICES, "value": "none"})
