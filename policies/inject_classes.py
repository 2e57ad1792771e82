"""Injecting `priorityClassName` and `runtimeClassName` as the API server's own plugins would
have resolved them.

The Priority and RuntimeClass admission plugins run before the mutating webhooks. By the time
the webhook sees a Pod, Priority has written `spec.priority` and `spec.preemptionPolicy` (from
the global default class, or 0 and PreemptLowerPriority) and, with a global default, its name
in `priorityClassName`; RuntimeClass has added the named class's overhead, node selector and
tolerations. A patch that sets a class name alone leaves the pod at the old priority, without
its runtime's overhead: so a class is injected with what its plugin would have written, and a
class the listed classes do not define is not injected at all (a note says why). Where no
class of that kind was listed (lint without an inventory of them) the name alone is written,
and a note says what could not be resolved. If the mutating chain
is invoked again, Priority re-derives priority and preemptionPolicy from the name and refuses a
pod whose values differ; RuntimeClass's validation, after the webhooks, refuses an overhead
that differs from the class's. The values written here are the class's, so both agree.

For a workload's pod template only the name is written: the plugins resolve it when each pod
is created (a template that carried a priority would be refused once the class's value moves).
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Mapping
from typing import Any

from policies.apiserver import ApiObjects
from policies.decision import Finding
from policies.display import shown
from policies.patch import Patch
from policies.paths import FieldPath, to_display
from policies.shape import absent_or
from policies.workloads import POD_FIELDS

CONFLICT = "runtime-class-conflict"
_LIST_HINT = "(give an inventory with `kubectl get priorityclasses,runtimeclasses -o yaml`)"


def priority(patch: Patch, prefix: FieldPath, name: str, by: str, api: ApiObjects | None,
             pod: bool, notes: list[str]) -> None:
    """Set the pod's priority class to `name` where it names none (or the global default
    the Priority plugin put there), with the class's priority and preemptionPolicy."""
    at = (*prefix, "priorityClassName")
    current = patch.get(at)
    default = api.global_default() if api is not None else None
    if current not in (None, "") and not (
            pod and default is not None and current == default.name
            and patch.get((*prefix, "priority")) in (None, default.value)):
        return  # theirs
    if api is None or api.priority_classes is None:
        # Nothing to resolve it with: the name alone, as the policy asks; said, since on a
        # Pod the API server has already set a priority the name does not change.
        _put(patch, at, name, by)
        if pod:
            notes.append(f"{to_display(at)}: {name} is injected without its priority and "
                         f"preemptionPolicy: PriorityClasses are not known here {_LIST_HINT}")
        return
    found = api.priority_class(name)
    if found is None:
        why = f"PriorityClass {name} has no integer value" if name in api.unreadable \
            else f"no PriorityClass with name {name} was found"
        notes.append(f"{to_display(at)}: {name} (policy {by}) is not injected: {why}, so the "
                     "pod keeps the priority the API server gave it")
        return
    _put(patch, at, name, by)
    if pod:
        _put(patch, (*prefix, "priority"), found.value, by)
        _put(patch, (*prefix, "preemptionPolicy"), found.preemption_policy, by)


def runtime(patch: Patch, prefix: FieldPath, name: str, by: str, api: ApiObjects | None,
            pod: bool, notes: list[str], fields: Collection[str] = POD_FIELDS
            ) -> Iterator[Finding]:
    """Set `runtimeClassName` where the pod names none, with what the RuntimeClass plugin
    adds: the class's nodeSelector merged in, its tolerations appended and, on a Pod, its
    overhead. A class whose nodeSelector (or overhead) conflicts with the pod's is not
    injected: that is the plugin's refusal, in its words. Only the pod-level `fields` the
    kind has here are written (the plugin adds the rest when the pod is made)."""
    at = (*prefix, "runtimeClassName")
    if patch.get(at) not in (None, ""):
        return
    if api is None or api.runtime_classes is None:
        _put(patch, at, name, by)  # nothing to resolve it with: the name alone, said
        if pod:
            notes.append(f"{to_display(at)}: {name} is injected without the overhead and "
                         "scheduling its RuntimeClass may add: RuntimeClasses are not known "
                         f"here {_LIST_HINT}")
        return
    found = api.runtime_class(name)
    if found is None:
        notes.append(f"{to_display(at)}: {name} (policy {by}) is not injected: pod rejected: "
                     f'RuntimeClass "{name}" not found')
        return
    selector = patch.get((*prefix, "nodeSelector"))
    if not absent_or(selector, ("map", None)):
        return  # pod-field-invalid says so; nothing is written into it
    for key, value in found.node_selector.items():
        have = (selector or {}).get(key)
        if have is not None and have != value:
            yield Finding(CONFLICT, f"conflict: runtimeClass.scheduling.nodeSelector[{key}] = "
                          f"{value}; pod.spec.nodeSelector[{key}] = "
                          f"{have if isinstance(have, str) else shown(have)} (RuntimeClass "
                          f"{name}, injected by policy {by})", (*prefix, "nodeSelector", key))
            return
    overhead = patch.get((*prefix, "overhead"))
    if pod and overhead and found.overhead is not None and overhead != found.overhead:
        yield Finding(CONFLICT, "pod rejected: Pod's Overhead doesn't match RuntimeClass's "
                      f"defined Overhead (RuntimeClass {name}, injected by policy {by})",
                      (*prefix, "overhead"))
        return
    tolerations = patch.get((*prefix, "tolerations"))
    if not absent_or(tolerations, ("list", None)):
        return
    _put(patch, at, name, by)
    for key, value in found.node_selector.items() if "nodeSelector" in fields else ():
        _put(patch, (*prefix, "nodeSelector", key), value, by)
    for toleration in found.tolerations if "tolerations" in fields else ():
        have = patch.get((*prefix, "tolerations")) or []
        if not any(_covers(t, toleration) for t in have if isinstance(t, dict)):
            patch.append((*prefix, "tolerations"), dict(toleration), by=by)
    if pod and found.overhead is not None:
        _put(patch, (*prefix, "overhead"), dict(found.overhead), by)


def _put(patch: Patch, path: FieldPath, value: Any, by: str) -> None:
    # a second run over the output finds every value in place and writes nothing
    if patch.get(path) != value:
        patch.set(path, value, by=by)


def _covers(have: Mapping[str, Any], wanted: Mapping[str, Any]) -> bool:
    """`have` tolerates all that `wanted` does (MergeTolerations keeps only the wider one)."""
    if have == wanted:
        return True
    if (have.get("effect") or "") not in ("", wanted.get("effect") or ""):
        return False
    if have.get("tolerationSeconds") is not None \
            and have.get("tolerationSeconds") != wanted.get("tolerationSeconds"):
        return False
    if have.get("operator") == "Exists":
        return not have.get("key") or have.get("key") == wanted.get("key")
    return (have.get("key"), have.get("value") or "", have.get("operator") or "Equal") == (
        wanted.get("key"), wanted.get("value") or "", wanted.get("operator") or "Equal")
