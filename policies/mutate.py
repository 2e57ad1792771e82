"""The changes `inject` asks for, written as patch ops against one pod spec.

Every change first looks at what is there, so a second run finds nothing to do. Lists are
merged over all governing policies; single values come from the first policy (lowest priority,
then name) that sets them. What the policies ask is worked out once per set of policies (a
Plan), so an admission only compares and writes. Each item of the plan carries the name of
the policy that asked for it (for an item several ask for, the first of them), and every
patch op is written for that policy: one op never mixes what two policies asked for.
Nothing is written into a part of the spec that has the wrong type (policies/shape.py):
pod-field-invalid reports it, and the patch must apply to what the user sent.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping, Sequence
from typing import Any, NamedTuple

from policies import inject_classes
from policies.apiserver import ApiObjects
from policies.decision import Finding
from policies.display import shown
from policies.dra.demand import by_name, claims_gpu
from policies.model import GPUPolicy
from policies.patch import Patch, PatchConflict
from policies.paths import FieldPath, to_pointer
from policies.resources import PodDemand
from policies.shape import NODE_AFFINITY, PREFERRED, REQUIRED, TERM, absent_or
from policies.view import targeted_products
from policies.workloads import POD_FIELDS, FieldsStep

VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"
HIDDEN = {"name": VISIBLE_DEVICES, "value": "none"}


class Plan(NamedTuple):
    """The merged `inject` of the policies governing one namespace, as the pod would carry it.
    Its dicts are shared between admissions: nothing may change them (Patch copies)."""

    # (identity, toleration, policy name)
    tolerations: tuple[tuple[tuple[Any, ...], dict[str, Any], str], ...]
    node_selector: tuple[tuple[str, str, GPUPolicy], ...]  # first policy per key wins
    required: tuple[tuple[dict[str, Any], str], ...]  # (requirement, policy name)
    preferred: tuple[tuple[dict[str, Any], str], ...]
    # (field, value, policy name): runtimeClassName, priorityClassName
    single: tuple[tuple[str, str, str], ...]
    limits_from_requests: str | None  # the first policy that asks, if any
    hide_devices: str | None

    @property
    def fields(self) -> tuple[str, ...]:
        """The pod-level fields this plan may write."""
        return tuple(name for name, wanted in (
            ("tolerations", self.tolerations), ("nodeSelector", self.node_selector),
            ("affinity", self.required or self.preferred),
            *((name, True) for name, _, _ in self.single)) if wanted)


def inject(
    patch: Patch, prefix: FieldPath, demand: PodDemand, policies: Sequence[GPUPolicy],
    pod_fields: Collection[str] = POD_FIELDS, fields_at: Sequence[FieldsStep] = (), *,
    api: ApiObjects | None = None, pod: bool = False, notes: list[str] | None = None,
    models: Sequence[tuple[dict[str, Any], str]] = (),
) -> Iterator[tuple[GPUPolicy, Finding]]:
    """Apply every policy's `inject` to the pod spec at `prefix`, writing only the pod-level
    fields its kind has there (`pod_fields`), at `fields_at` when the kind keeps them apart
    (a TrainJob's runtime patch); yield conflicts found. `api`: the classes the injected
    priority and runtime class names resolve to (`pod`: the spec is a Pod's own, which the
    API server's plugins have already seen); `models`: the required product affinity each
    policy's allowedModels asks for (policies/allowed_models.py); `notes` gets what was not
    injected, and why."""
    if not policies:
        return
    plan = plan_for(policies)
    if plan.hide_devices:
        _hide_devices(patch, demand, plan.hide_devices)
    if not demand.gpu:
        return
    try:
        if plan.limits_from_requests:
            _limits_from_requests(patch, demand, plan.limits_from_requests)
        if fields_at:
            wanted = [f for f in plan.fields if f in pod_fields]
            at = _fields_prefix(patch, fields_at, policies, make=bool(wanted))
            if at is None:
                return
            prefix = at
        if plan.tolerations and "tolerations" in pod_fields:
            _tolerations(patch, (*prefix, "tolerations"), plan)
        if "nodeSelector" in pod_fields:
            yield from _node_selector(patch, (*prefix, "nodeSelector"), plan)
        if "affinity" in pod_fields:
            _node_affinity(patch, (*prefix, "affinity", "nodeAffinity"), plan)
            if models and not targeted_products(patch.get(prefix)):
                _node_affinity(patch, (*prefix, "affinity", "nodeAffinity"),
                               plan._replace(required=tuple(models), preferred=()))
        said = notes if notes is not None else []
        for field, value, by in plan.single:
            if field not in pod_fields:
                continue
            if field == "priorityClassName":
                inject_classes.priority(patch, prefix, value, by, api, pod, said)
            else:
                for finding in inject_classes.runtime(patch, prefix, value, by, api, pod, said,
                                                      pod_fields):
                    yield _policy(policies, by), finding
    except PatchConflict as exc:
        yield policies[0], Finding("pod-spec-malformed", str(exc), prefix)


def _fields_prefix(patch: Patch, steps: Sequence[FieldsStep], policies: Sequence[GPUPolicy],
                   *, make: bool) -> FieldPath | None:
    """Where the pod-level fields go along `steps` (from the object's root): found, or made
    (the missing maps and list item as one op, for the winning policy) when `make`. None
    when it is not there and not to be made, or a part has the wrong type."""
    path: FieldPath = ()
    node = patch.doc
    for index, (name, key, value) in enumerate(steps):
        child = node.get(name) if isinstance(node, dict) else None
        if not key:
            if child is None:
                return _made(patch, (*path, name), None, steps[index + 1:], policies, make)
            if not isinstance(child, dict):
                raise PatchConflict(f"cannot write under {to_pointer((*path, name))}: "
                                    "not an object")
            path, node = (*path, name), child
            continue
        if child is None:
            return _made(patch, (*path, name), (key, value), steps[index + 1:], policies, make)
        if not isinstance(child, list):
            raise PatchConflict(f"cannot write under {to_pointer((*path, name))}: "
                                "not a list")
        item = next((i for i, v in enumerate(child)
                     if isinstance(v, dict) and v.get(key) == value), None)
        if item is None:
            if not make:
                return None
            entry = {key: value, **_skeleton(steps[index + 1:])}
            item = len(child)  # appended last
            patch.append((*path, name), entry, by=_winner(policies))
            return _descend(patch, (*path, name, item), steps[index + 1:])
        path, node = (*path, name, item), child[item]
        if not isinstance(node, dict):
            raise PatchConflict(f"cannot write under {to_pointer(path)}: not an object")
    return path


def _made(patch: Patch, path: FieldPath, keyed: tuple[str, str] | None,
          rest: Sequence[FieldsStep], policies: Sequence[GPUPolicy], make: bool
          ) -> FieldPath | None:
    if not make:
        return None
    below = _skeleton(rest)
    if keyed is None:
        patch.set(path, below, by=_winner(policies))
        return _descend(patch, path, rest)
    patch.set(path, [{keyed[0]: keyed[1], **below}], by=_winner(policies))
    return _descend(patch, (*path, 0), rest)


def _skeleton(steps: Sequence[FieldsStep]) -> dict[str, Any]:
    """The maps (and one-item lists) `steps` go through, empty at the end."""
    if not steps:
        return {}
    (name, key, value), rest = steps[0], steps[1:]
    below = _skeleton(rest)
    return {name: [{key: value, **below}]} if key else {name: below}


def _descend(patch: Patch, path: FieldPath, rest: Sequence[FieldsStep]) -> FieldPath:
    """The path through a skeleton just made: every list in it has its one item at 0."""
    for name, key, _ in rest:
        path = (*path, name, 0) if key else (*path, name)
    return path


def _policy(policies: Sequence[GPUPolicy], name: str) -> GPUPolicy:
    return next((p for p in policies if p.name == name), policies[0])


def _winner(policies: Sequence[GPUPolicy]) -> str:
    return min(policies, key=lambda p: (p.spec.priority, p.name)).name


_PLANS: dict[tuple[int, ...], tuple[Sequence[GPUPolicy], Plan]] = {}


def plan_for(policies: Sequence[GPUPolicy]) -> Plan:
    key = tuple(map(id, policies))
    cached = _PLANS.get(key)
    # the same tuple (Context.governing hands out one per namespace): the same policies
    if cached is not None and (cached[0] is policies or all(
            a is b for a, b in zip(cached[0], policies, strict=True))):
        return cached[1]
    plan = _plan(policies)
    if len(_PLANS) > 1024:  # policy reloads make new objects: forget old sets
        _PLANS.clear()
    _PLANS[key] = (tuple(policies), plan)
    return plan


def _plan(policies: Sequence[GPUPolicy]) -> Plan:
    tolerations: dict[tuple[Any, ...], tuple[dict[str, Any], str]] = {}
    selector: dict[str, tuple[str, GPUPolicy]] = {}
    required: list[tuple[dict[str, Any], str]] = []
    preferred: list[tuple[dict[str, Any], str]] = []
    single: dict[str, tuple[str, str]] = {}
    # Whoever comes first wins a single value and is credited with a shared list item.
    ordered = sorted(policies, key=lambda p: (p.spec.priority, p.name))
    for policy in ordered:
        inject, name = policy.spec.inject, policy.name
        for toleration in map(_dump, inject.tolerations):
            tolerations.setdefault(_toleration_key(toleration), (toleration, name))
        for key, value in inject.node_selector.items():
            selector.setdefault(key, (value, policy))
        if inject.node_affinity is not None:
            required += [(r, name) for r in map(_dump, inject.node_affinity.required)
                         if all(r != have for have, _ in required)]
            preferred += [(p, name) for p in map(_dump, inject.node_affinity.preferred)
                          if all(p != have for have, _ in preferred)]
        for field, wanted in (("runtimeClassName", inject.runtime_class_name),
                              ("priorityClassName", inject.priority_class_name)):
            if wanted:
                single.setdefault(field, (wanted, name))
    return Plan(
        tolerations=tuple((k, t, by) for k, (t, by) in tolerations.items()),
        node_selector=tuple((k, v, p) for k, (v, p) in selector.items()),
        required=tuple(required),
        preferred=tuple(preferred),
        single=tuple((field, value, by) for field, (value, by) in single.items()),
        limits_from_requests=next(
            (p.name for p in ordered if p.spec.inject.gpu_limits_from_requests), None),
        hide_devices=next(
            (p.name for p in ordered if p.spec.inject.hide_gpus_from_non_gpu_containers), None),
    )


def _dump(model: Any) -> dict[str, Any]:
    # JSON mode gives lists, not tuples, so values compare equal to what the pod carries.
    return model.model_dump(  # type: ignore[no-any-return]
        mode="json", by_alias=True, exclude_none=True, exclude_defaults=True
    )


def _toleration_key(t: Mapping[str, Any]) -> tuple[Any, ...]:
    return (_part(t.get("key") or ""), _part(t.get("operator") or "Equal"),
            _part(t.get("value") or ""), _part(t.get("effect") or ""),
            _part(t.get("tolerationSeconds")))


def _part(value: Any) -> Any:
    # A pod may hold anything there (a list, a map): compare it by how it reads, hashably.
    return value if value is None or isinstance(value, (str, int, float)) \
        else ("!", shown(value))


def _limits_from_requests(patch: Patch, demand: PodDemand, by: str) -> None:
    for container in demand.containers:
        resources = container.spec.get(container.resources_field)
        if not isinstance(resources, dict) or not isinstance(resources.get("requests"), dict):
            continue
        limits = resources.get("limits")
        if not absent_or(limits, ("map", None)):
            continue
        limits = limits or {}
        for name in container.amounts:
            if name in resources["requests"] and name not in limits:
                value = resources["requests"][name]
                patch.set((*container.path, container.resources_field, "limits", name), value,
                          by=by)


def _tolerations(patch: Patch, path: FieldPath, plan: Plan) -> None:
    current = patch.get(path)
    if not absent_or(current, ("list", None)):
        return
    have = {_toleration_key(t) for t in current if isinstance(t, dict)} if current else set()
    for key, toleration, by in plan.tolerations:
        if key not in have:
            patch.append(path, toleration, by=by)


def _node_selector(
    patch: Patch, path: FieldPath, plan: Plan
) -> Iterator[tuple[GPUPolicy, Finding]]:
    if not plan.node_selector:
        return
    current = patch.get(path)
    if not absent_or(current, ("map", None)):
        return
    for key, value, policy in plan.node_selector:
        have = (current or {}).get(key)
        if have is None:
            patch.set((*path, key), value, by=policy.name)
        elif have != value:
            written = have if isinstance(have, str) else shown(have)
            yield policy, Finding(
                "node-selector-conflict",
                f"nodeSelector {key}={written} conflicts with {key}={value} "
                f"that policy {policy.name} requires",
                (*path, key),
            )


def _node_affinity(patch: Patch, base: FieldPath, plan: Plan) -> None:
    if not (plan.required or plan.preferred):
        return
    affinity_at = patch.get(base[:-1])
    current = affinity_at.get(base[-1]) if isinstance(affinity_at, dict) else None
    if not absent_or(affinity_at, ("object", None)) or not absent_or(current, NODE_AFFINITY):
        return
    if current is None:
        # Nothing there yet: one op adds all that the first policy asks for; what other
        # policies ask for follows in ops of their own.
        by = (plan.required or plan.preferred)[0][1]
        affinity: dict[str, Any] = {}
        required = [r for r, owner in plan.required if owner == by]
        if required:
            affinity[REQUIRED] = {"nodeSelectorTerms": [{"matchExpressions": required}]}
        preferred = [t for t, owner in plan.preferred if owner == by]
        if preferred:
            affinity[PREFERRED] = preferred
        patch.set(base, affinity, by=by)
        if len(required) == len(plan.required) and len(preferred) == len(plan.preferred):
            return  # one policy asked for all of it (the usual case)
    if plan.required and absent_or(patch.get((*base, REQUIRED)), ("object", None)):
        terms_path = (*base, REQUIRED, "nodeSelectorTerms")
        terms = patch.get(terms_path)
        if not terms:  # absent, null or []
            by = plan.required[0][1]
            patch.set(terms_path, [{"matchExpressions": [
                r for r, owner in plan.required if owner == by]}], by=by)
            terms = patch.get(terms_path)
        # Terms are ORed: the requirement must hold in each of them.
        for index, term in enumerate(terms if isinstance(terms, list) else ()):
            if not well_formed_term(term):
                continue
            have = term.get("matchExpressions") or []
            for requirement, by in plan.required:
                if requirement not in have:
                    patch.append((*terms_path, index, "matchExpressions"), requirement, by=by)
    if plan.preferred and absent_or(patch.get((*base, PREFERRED)), ("list", None)):
        path = (*base, PREFERRED)
        current = patch.get(path)
        have = current or []
        for term, by in plan.preferred:
            if term not in have:
                patch.append(path, term, by=by)


def well_formed_term(term: Any) -> bool:
    return isinstance(term, dict) and absent_or(term.get("matchExpressions"),
                                                TERM[1]["matchExpressions"])


def _hide_devices(patch: Patch, demand: PodDemand, by: str) -> None:
    named = by_name(demand.claims)
    for container in demand.containers:
        if container.gpu or container.role == "ephemeral" \
                or claims_gpu(container.spec, named):
            continue
        env = container.spec.get("env")
        if not absent_or(env, ("list", None)):
            continue
        if isinstance(env, list) and any(
            isinstance(e, dict) and e.get("name") == VISIBLE_DEVICES for e in env
        ):
            continue
        patch.append((*container.path, "env"), HIDDEN, by=by)
