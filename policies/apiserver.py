"""What the API server's own admission plugins read about a pod: PriorityClasses, RuntimeClasses
and ResourceQuotas, as `kubectl get priorityclasses,runtimeclasses,resourcequotas -A -o yaml`
lists them (or as `serve` watches them).

The Priority and RuntimeClass plugins run before the mutating webhooks, and ResourceQuota runs
last of all, so a patch that names a class must bring what those plugins would have written, and
a pod's GPUs must fit its namespace's quota as the quota plugin counts them.

A kind that was never listed is not known: `priority_classes` and `runtime_classes` are None
then, and nothing is judged against them ("no PriorityClass with name x" is only said where the
classes were listed). The two system classes the API server creates itself are always known.
Objects are input: a field of the wrong type reads as absent, a quantity that does not parse is
left out of the quota (and said in `problems`), never an exception.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from policies.quantity import Number, QuantityError, parse_quantity

__all__ = ["KINDS", "ApiObjects", "PriorityClass", "Quota", "RuntimeClass"]

KINDS = ("PriorityClass", "RuntimeClass", "ResourceQuota")
PREEMPT_LOWER = "PreemptLowerPriority"  # what the API server defaults a class's policy to


class PriorityClass(NamedTuple):
    name: str
    value: int
    preemption_policy: str
    global_default: bool = False


# scheduling.SystemPriorityClasses(): created by the API server at start, in every cluster
SYSTEM_CLASSES = MappingProxyType({
    "system-node-critical": PriorityClass("system-node-critical", 2000001000, PREEMPT_LOWER),
    "system-cluster-critical": PriorityClass("system-cluster-critical", 2000000000,
                                             PREEMPT_LOWER),
})


class RuntimeClass(NamedTuple):
    name: str
    overhead: Mapping[str, Any] | None  # overhead.podFixed as written (the pod gets it as is)
    node_selector: Mapping[str, str]
    tolerations: tuple[Mapping[str, Any], ...]


class Scope(NamedTuple):
    """One scope of a quota: `scopes: [X]` reads as (X, "Exists", ())."""

    name: str
    operator: str
    values: tuple[str, ...]


class Quota(NamedTuple):
    name: str
    namespace: str
    # status.hard, as the quota plugin reads it (spec.hard for a quota listed without status:
    # a hand-written inventory)
    hard: Mapping[str, Number]
    used: Mapping[str, Number]  # status.used
    shown: Mapping[str, str]  # resource -> the quantity as written, for hard and used alike
    scopes: tuple[Scope, ...] = ()
    synced: bool = True  # it has a status.hard: the quota controller has counted it


@dataclass(frozen=True)
class ApiObjects:
    """PriorityClasses and RuntimeClasses by name (None: not listed), ResourceQuotas by
    namespace, and what could not be read."""

    priority_classes: Mapping[str, PriorityClass] | None = None
    runtime_classes: Mapping[str, RuntimeClass] | None = None
    quotas: Mapping[str, tuple[Quota, ...]] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    # PriorityClasses listed with a value that is no integer: defined (a pod may name them)
    # but not resolvable (never injected)
    unreadable: frozenset[str] = frozenset()

    @classmethod
    def read(cls, objects: Iterable[Mapping[str, Any]]) -> ApiObjects:
        """From the objects of the KINDS (others are skipped)."""
        priority: dict[str, PriorityClass] | None = None
        runtime: dict[str, RuntimeClass] | None = None
        quotas: dict[str, list[Quota]] = {}
        problems: list[str] = []
        unreadable: set[str] = set()
        for obj in objects:
            kind, meta = obj.get("kind"), _map(obj.get("metadata"))
            name = meta.get("name")
            if not isinstance(name, str) or not name:
                continue
            if kind == "PriorityClass":
                priority = priority if priority is not None else {}
                found = _priority_class(obj, name)
                if found is None:
                    problems.append(f"PriorityClass/{name}: value: not an integer; not "
                                    "injected")
                    unreadable.add(name)
                else:
                    priority[name] = found
            elif kind == "RuntimeClass":
                runtime = runtime if runtime is not None else {}
                runtime[name] = _runtime_class(obj, name)
            elif kind == "ResourceQuota":
                namespace = meta.get("namespace")
                namespace = namespace if isinstance(namespace, str) and namespace else "default"
                quota = _quota(obj, name, namespace, problems)
                quotas.setdefault(namespace, []).append(quota)
        return cls(priority, runtime, {ns: tuple(sorted(q, key=lambda x: x.name))
                                       for ns, q in quotas.items()}, tuple(problems),
                   frozenset(unreadable))

    @property
    def listed(self) -> bool:
        return bool(self.priority_classes is not None or self.runtime_classes is not None
                    or self.quotas)

    def priority_class(self, name: str) -> PriorityClass | None:
        """The class of `name`; None when it is not defined, or classes were not listed."""
        if self.priority_classes is None:
            return None
        return self.priority_classes.get(name) or SYSTEM_CLASSES.get(name)

    def defines(self, name: str) -> bool:
        """Whether a PriorityClass of `name` exists (read or not); True when not listed."""
        return self.priority_classes is None or name in self.unreadable \
            or self.priority_class(name) is not None

    def global_default(self) -> PriorityClass | None:
        """The class the Priority plugin gives a pod that names none: of those marked
        globalDefault, the lowest value (as the plugin picks after a race)."""
        marked = [c for c in (self.priority_classes or {}).values() if c.global_default]
        return min(marked, key=lambda c: c.value) if marked else None

    def runtime_class(self, name: str) -> RuntimeClass | None:
        return None if self.runtime_classes is None else self.runtime_classes.get(name)


def _map(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _priority_class(obj: Mapping[str, Any], name: str) -> PriorityClass | None:
    value = obj.get("value")
    if isinstance(value, bool) or not isinstance(value, int):
        return None
    policy = obj.get("preemptionPolicy")
    return PriorityClass(name, value, policy if isinstance(policy, str) and policy
                         else PREEMPT_LOWER, obj.get("globalDefault") is True)


def _runtime_class(obj: Mapping[str, Any], name: str) -> RuntimeClass:
    fixed = _map(obj.get("overhead")).get("podFixed")
    scheduling = _map(obj.get("scheduling"))
    selector = {str(k): str(v) for k, v in _map(scheduling.get("nodeSelector")).items()
                if isinstance(v, str)}
    listed = scheduling.get("tolerations")
    tolerations = tuple(t for t in listed if isinstance(t, dict)) \
        if isinstance(listed, list) else ()
    return RuntimeClass(name, dict(fixed) if isinstance(fixed, dict) and fixed else None,
                        selector, tolerations)


def _quota(obj: Mapping[str, Any], name: str, namespace: str, problems: list[str]) -> Quota:
    spec, status = _map(obj.get("spec")), _map(obj.get("status"))
    shown: dict[str, str] = {}
    where = f"ResourceQuota/{namespace}/{name}"
    synced = bool(_map(status.get("hard")))
    hard = _amounts(_map(status.get("hard")) or _map(spec.get("hard")), shown, where, problems)
    used = _amounts(_map(status.get("used")), {}, where, problems)
    scopes: list[Scope] = [Scope(s, "Exists", ()) for s in spec.get("scopes") or ()
                           if isinstance(s, str)] if isinstance(spec.get("scopes"), list) else []
    expressions = _map(spec.get("scopeSelector")).get("matchExpressions")
    for expr in expressions if isinstance(expressions, list) else ():
        if isinstance(expr, dict) and isinstance(expr.get("scopeName"), str):
            values = expr.get("values")
            scopes.append(Scope(expr["scopeName"], str(expr.get("operator") or ""),
                                tuple(str(v) for v in values)
                                if isinstance(values, list) else ()))
    return Quota(name, namespace, hard, used, shown, tuple(scopes), synced)


def _amounts(raw: Mapping[str, Any], shown: dict[str, str], where: str,
             problems: list[str]) -> dict[str, Number]:
    out: dict[str, Number] = {}
    for key, value in raw.items():
        try:
            out[str(key)] = parse_quantity(value)
        except QuantityError as exc:
            problems.append(f"{where}: {key}: {exc}")
            continue
        shown[str(key)] = str(value)
    return out
