"""Where pod specs live in each workload kind: a data table (policies/kinds.py),
which users extend or override without code (`--workload-kinds FILE`, the chart's
`webhooks.workloadKinds`).

A location is a path pattern: `*` stands for every value of a map (Kubeflow replica specs),
`[]` for every item of a list (Ray worker groups, JobSet replicated jobs, Volcano tasks). Kinds
are looked up by API group and kind; an object of an older group version of a kind listed once
(`extensions/v1beta1` Deployment) falls back to that kind.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from policies.kinds import BUNDLED
from policies.paths import FieldPath, to_display

PodSpecLocation = tuple[str, ...]
# One step of a podFieldsPath: (field, key, value) picks the item of list `field` whose `key`
# is `value` (made when absent); key "" steps into map member `field`.
FieldsStep = tuple[str, str, str]

# Pod-level fields `inject` can write, and so the ones a kind may restrict itself to.
POD_FIELDS = frozenset(
    {"tolerations", "nodeSelector", "affinity", "runtimeClassName", "priorityClassName"})
_PATH = re.compile(r"^[A-Za-z0-9_-]+(\[\])?(\.([A-Za-z0-9_-]+(\[\])?|\*))*$")
_FIELDS_STEP = re.compile(r"([A-Za-z0-9_-]+)(?:\[([A-Za-z0-9_-]+)=([A-Za-z0-9_./-]+)\])?")
_DNS_LABEL = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$")
_KIND = re.compile(r"^[A-Za-z][A-Za-z0-9]*$")
_MAX_ENTRIES = 1000
_MAX_PATHS = 64


class ContainerSlot(NamedTuple):
    """A container-like object inside a pod spec, besides its containers lists."""

    location: PodSpecLocation  # relative to the pod spec; () is the pod spec itself
    resources_field: str = "resources"  # where its ResourceRequirements are
    gpu_field: str = ""  # Spark: a `{name, quantity}` map instead of resources


class WorkloadKind(NamedTuple):
    kind: str
    group: str
    resource: str
    locations: tuple[PodSpecLocation, ...]
    containers: tuple[ContainerSlot, ...] = ()
    pod_fields: frozenset[str] = POD_FIELDS
    # Where the pod-level fields go when the kind keeps them apart from the GPU containers
    # (a Kubeflow Trainer TrainJob's runtimePatches), from the object's root; () when they
    # are the pod spec's own. The rest of that pod's spec is elsewhere (the runtime).
    fields_at: tuple[FieldsStep, ...] = ()

    @property
    def key(self) -> str:
        return f"{self.group}/{self.kind}"


@dataclass(frozen=True)
class KindTable:
    """The workload kinds that carry pod specs, looked up by group and kind."""

    kinds: tuple[WorkloadKind, ...]
    _by_key: dict[str, WorkloadKind] = field(init=False, repr=False, compare=False)
    _by_kind: dict[str, WorkloadKind | None] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        by_key = {k.key: k for k in self.kinds}
        by_kind: dict[str, WorkloadKind | None] = {}
        for k in by_key.values():
            by_kind[k.kind] = None if k.kind in by_kind else k  # None: ambiguous
        object.__setattr__(self, "_by_key", by_key)
        object.__setattr__(self, "_by_kind", by_kind)

    def __contains__(self, kind: object) -> bool:
        """A kind name (any group) is in the table."""
        return kind in self._by_kind

    def find(self, obj: Mapping[str, Any]) -> WorkloadKind | None:
        kind = obj.get("kind")
        if not isinstance(kind, str):
            return None
        api_version = obj.get("apiVersion")
        group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
        found = self._by_key.get(f"{group}/{kind}")
        if found is None and group:  # a core kind never stands in for a CRD's
            found = self._by_kind.get(kind)
        return found

    def by_resource(self, group: str, resource: str) -> WorkloadKind | None:
        return next((k for k in self.kinds if k.group == group and k.resource == resource),
                    None)

    def extended(self, other: KindTable) -> KindTable:
        """This table with `other`'s kinds added, replacing those of the same group and kind."""
        replaced = {k.key for k in other.kinds}
        return KindTable((*(k for k in self.kinds if k.key not in replaced), *other.kinds))


class KindTableError(ValueError):
    def __init__(self, source: str, errors: list[str]) -> None:
        super().__init__(f"{source}: " + "; ".join(errors))
        self.source = source
        self.errors = errors


def parse_path(text: Any) -> PodSpecLocation:
    """`spec.workerGroupSpecs[].template.spec` -> ("spec", "workerGroupSpecs", "[]", ...);
    `.` is the empty path. Raises ValueError on anything else."""
    if text == ".":
        return ()
    if not isinstance(text, str) or len(text) > 512 or not _PATH.match(text):
        raise ValueError(f"{text!r} is not a dot path (name, name[], *, joined by dots)")
    steps: list[str] = []
    for part in text.split("."):
        if part.endswith("[]"):
            steps += [part[:-2], "[]"]
        else:
            steps.append(part)
    return tuple(steps)


def parse_fields_path(text: Any) -> tuple[FieldsStep, ...]:
    """`spec.patches[manager=me].spec` -> (("spec", "", ""), ("patches", "manager", "me"),
    ("spec", "", "")). Raises ValueError on anything else."""
    if not isinstance(text, str) or len(text) > 512:
        raise ValueError(f"{text!r} is not a dot path (name, name[key=value], joined by dots)")
    steps: list[FieldsStep] = []
    at = 0
    while True:
        found = _FIELDS_STEP.match(text, at)
        if found is None:
            raise ValueError(f"{text!r} is not a dot path (name, name[key=value], joined by "
                             "dots)")
        steps.append((found[1], found[2] or "", found[3] or ""))
        at = found.end()
        if at == len(text):
            return tuple(steps)
        if text[at] != ".":
            raise ValueError(f"{text!r} is not a dot path (name, name[key=value], joined by "
                             "dots)")
        at += 1


def parse_kind_table(data: Any, source: str, base: KindTable | None = None) -> KindTable:
    """A kind table from parsed YAML: a list of entries, each either one kind
    (`kind`, `apiGroup`, `resource`, `podSpecPaths`, optional `containerPaths`, `podFields`)
    or the chart's grouped form (`apiGroups`, `resources`, `podSpecPaths`, optional `kinds`
    paired with `resources`; without `kinds` each resource is found in `base`). Fields an
    entry leaves out come from the `base` entry of the same kind. Every error is collected
    with its field path; KindTableError lists them all."""
    errors: list[str] = []
    if isinstance(data, Mapping) and "workloadKinds" in data:
        data = data["workloadKinds"]
    if not isinstance(data, list):
        raise KindTableError(source, ["expected a list of workload kinds"])
    if len(data) > _MAX_ENTRIES:
        raise KindTableError(source, [f"more than {_MAX_ENTRIES} entries"])
    kinds: list[WorkloadKind] = []
    for index, entry in enumerate(data):
        kinds += _entry(entry, (index,), base, errors)
    if errors:
        raise KindTableError(source, errors)
    return KindTable(tuple(kinds))


def _entry(
    entry: Any, at: FieldPath, base: KindTable | None, errors: list[str]
) -> list[WorkloadKind]:
    def err(path: FieldPath, message: str) -> None:
        errors.append(f"{to_display(path) or '[]'}: {message}")

    if not isinstance(entry, Mapping):
        err(at, "expected a map")
        return []
    known = {"kind", "kinds", "apiGroup", "apiGroups", "resource", "resources", "name",
             "podSpecPaths", "containerPaths", "podFields", "podFieldsPath"}
    for key in entry:
        if key not in known:
            err((*at, str(key)), f"unknown field (expected one of {', '.join(sorted(known))})")
    pairs = _kinds_of(entry, at, base, err)
    locations = _paths(entry, "podSpecPaths", at, err)
    containers = _slots(entry, at, err) if "containerPaths" in entry else None
    pod_fields = _pod_fields(entry, at, err) if "podFields" in entry else None
    fields_at: tuple[FieldsStep, ...] | None = None
    if "podFieldsPath" in entry:
        try:
            fields_at = parse_fields_path(entry["podFieldsPath"])
        except ValueError as exc:
            err((*at, "podFieldsPath"), str(exc))
    out = []
    for group, resource, kind in pairs:
        inherited = base.find({"apiVersion": f"{group}/v1" if group else "v1", "kind": kind}) \
            if base is not None else None
        if inherited is not None and inherited.group != group:
            inherited = None
        if locations is None and inherited is None:
            err((*at, "podSpecPaths"), "required (a list of dot paths)")
            continue
        out.append(WorkloadKind(
            kind=kind, group=group, resource=resource or (inherited.resource if inherited
                                                          else kind.lower() + "s"),
            locations=locations if locations is not None else inherited.locations,  # type: ignore[union-attr]
            containers=containers if containers is not None
            else (inherited.containers if inherited else ()),
            pod_fields=pod_fields if pod_fields is not None
            else (inherited.pod_fields if inherited else POD_FIELDS),
            fields_at=fields_at if fields_at is not None
            else (inherited.fields_at if inherited else ()),
        ))
    return out


def _kinds_of(
    entry: Mapping[str, Any], at: FieldPath, base: KindTable | None, err: Any
) -> list[tuple[str, str, str]]:
    """(group, resource, kind) for each kind the entry stands for."""
    if "kind" in entry:
        kind, group = entry.get("kind"), entry.get("apiGroup", "")
        ok = True
        if not isinstance(kind, str) or not _KIND.match(kind):
            err((*at, "kind"), f"{kind!r} is not a kind name")
            ok = False
        if not isinstance(group, str) or (group and not _DNS_LABEL.match(group)):
            err((*at, "apiGroup"), f"{group!r} is not an API group")
            ok = False
        resource = entry.get("resource", "")
        if not isinstance(resource, str) or (resource and not _DNS_LABEL.match(resource)):
            err((*at, "resource"), f"{resource!r} is not a resource name")
            ok = False
        return [(str(group), str(resource), str(kind))] if ok else []
    groups, resources = entry.get("apiGroups"), entry.get("resources")
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups) or not groups:
        err((*at, "apiGroups" if "apiGroups" in entry else "kind"),
            "give `kind` (and `apiGroup`), or `apiGroups` and `resources`")
        return []
    if not isinstance(resources, list) or not all(isinstance(r, str) for r in resources) \
            or not resources:
        err((*at, "resources"), "expected a list of resource names")
        return []
    names = entry.get("kinds")
    if names is not None and (not isinstance(names, list) or len(names) != len(resources)
                              or not all(isinstance(n, str) and _KIND.match(n) for n in names)):
        err((*at, "kinds"), "expected one kind name per item of `resources`")
        return []
    out = []
    for group in groups:
        for i, resource in enumerate(resources):
            if names is not None:
                out.append((group, resource, names[i]))
                continue
            found = base.by_resource(group, resource) if base is not None else None
            if found is None:
                err((*at, "resources", i), f"no kind known for resource {resource!r} in group "
                    f"{group!r}: give `kinds`, one per resource")
            else:
                out.append((group, resource, found.kind))
    return out


def _paths(
    entry: Mapping[str, Any], key: str, at: FieldPath, err: Any
) -> tuple[PodSpecLocation, ...] | None:
    raw = entry.get(key)
    if raw is None:
        return None
    if not isinstance(raw, list) or not raw or len(raw) > _MAX_PATHS:
        err((*at, key), f"expected a list of 1 to {_MAX_PATHS} dot paths")
        return None
    out = []
    for i, text in enumerate(raw):
        try:
            out.append(parse_path(text))
        except ValueError as exc:
            err((*at, key, i), str(exc))
    return tuple(out)


def _slots(entry: Mapping[str, Any], at: FieldPath, err: Any) -> tuple[ContainerSlot, ...]:
    raw = entry.get("containerPaths")
    if not isinstance(raw, list) or len(raw) > _MAX_PATHS:
        err((*at, "containerPaths"), f"expected a list of at most {_MAX_PATHS} items")
        return ()
    out = []
    for i, item in enumerate(raw):
        where = (*at, "containerPaths", i)
        spec = item if isinstance(item, Mapping) else {"path": item}
        extra = set(spec) - {"path", "resourcesField", "gpuField"}
        if extra:
            err(where, f"unknown field {sorted(extra)[0]!r} (path, resourcesField, gpuField)")
            continue
        try:
            location = parse_path(spec.get("path"))
        except ValueError as exc:
            err(where, str(exc))
            continue
        resources, gpu = spec.get("resourcesField", "resources"), spec.get("gpuField", "")
        if not isinstance(resources, str) or not isinstance(gpu, str):
            err(where, "resourcesField and gpuField are field names")
            continue
        out.append(ContainerSlot(location, resources, gpu))
    return tuple(out)


def _pod_fields(entry: Mapping[str, Any], at: FieldPath, err: Any) -> frozenset[str]:
    raw = entry.get("podFields")
    if not isinstance(raw, list):
        err((*at, "podFields"), "expected a list")
        return POD_FIELDS
    for i, name in enumerate(raw):
        if name not in POD_FIELDS:
            err((*at, "podFields", i),
                f"{name!r} is not one of {', '.join(sorted(POD_FIELDS))}")
    return frozenset(n for n in raw if n in POD_FIELDS)


class Carrier(NamedTuple):
    """One pod spec found in an object, and how its kind shapes it."""

    path: FieldPath
    spec: dict[str, Any]
    kind: WorkloadKind


def carriers(obj: Mapping[str, Any], table: KindTable) -> Iterator[Carrier]:
    """Every pod spec in `obj` with its own path; missing or mistyped parts yield nothing."""
    kind = table.find(obj)
    if kind is None:
        return
    for location in kind.locations:
        for path, spec in walk(obj, location, ()):
            yield Carrier(path, spec, kind)


def metadata_path(pod_spec: FieldPath) -> FieldPath:
    """Where the metadata of the pod at `pod_spec` lives: beside a template's `spec`, or
    inside the pod spec for kinds whose pod spec is not called `spec` (Argo templates)."""
    if pod_spec and pod_spec[-1] == "spec":
        return (*pod_spec[:-1], "metadata")
    return (*pod_spec, "metadata")


def pod_specs(
    obj: Mapping[str, Any], table: KindTable | None = None
) -> Iterator[tuple[FieldPath, dict[str, Any]]]:
    for found in carriers(obj, table if table is not None else WORKLOAD_KINDS):
        yield found.path, found.spec


def locations_for(
    obj: Mapping[str, Any], table: KindTable | None = None
) -> tuple[PodSpecLocation, ...]:
    found = (table if table is not None else WORKLOAD_KINDS).find(obj)
    return found.locations if found is not None else ()


def walk(
    node: Any, location: PodSpecLocation, path: FieldPath
) -> Iterator[tuple[FieldPath, dict[str, Any]]]:
    if not location:
        if isinstance(node, dict):
            yield path, node
        return
    step, rest = location[0], location[1:]
    if step == "*":
        if isinstance(node, dict):
            for key, child in node.items():
                yield from walk(child, rest, (*path, key))
    elif step == "[]":
        if isinstance(node, list):
            for index, child in enumerate(node):
                yield from walk(child, rest, (*path, index))
    elif isinstance(node, dict) and step in node:
        yield from walk(node[step], rest, (*path, step))


# How deep and how many nodes the search for an unlisted kind's pod template may look at: a
# pod template sits a few levels down in every CRD seen, and the work stays bounded by size.
_SEARCH_DEPTH = 8
_SEARCH_NODES = 2000


def unlisted_pod_template(obj: Mapping[str, Any], table: KindTable) -> str:
    """Why `obj` is not reviewed although it holds a pod spec (a map with a `containers` list
    of maps), or "" when its kind is in the table or it holds none."""
    if table.find(obj) is not None:
        return ""
    kind = obj.get("kind")
    if not isinstance(kind, str) or kind == "List":
        return ""
    found = _find_pod_spec(obj.get("spec"), ("spec",))
    if found is None:
        return ""
    api_version = obj.get("apiVersion")
    group = api_version.rpartition("/")[0] if isinstance(api_version, str) else ""
    named = f"{group}/{kind}" if group else kind
    return (f"kind {named} is not in the workload-kinds table but holds a pod spec at "
            f"{to_display(found)}: not reviewed (add the kind with --workload-kinds or the "
            "chart's webhooks.workloadKinds)")


def _find_pod_spec(node: Any, path: FieldPath) -> FieldPath | None:
    budget = [_SEARCH_NODES]
    queue: list[tuple[Any, FieldPath]] = [(node, path)]
    while queue:  # breadth first: the shallowest pod spec is the one to name
        current, at = queue.pop(0)
        budget[0] -= 1
        if budget[0] < 0:
            return None
        if isinstance(current, dict):
            containers = current.get("containers")
            if isinstance(containers, list) and containers and all(
                    isinstance(c, dict) for c in containers[:16]):
                return at
            if len(at) < _SEARCH_DEPTH:
                queue += [(v, (*at, str(k))) for k, v in current.items()
                          if isinstance(v, dict | list)]
        elif isinstance(current, list) and len(at) < _SEARCH_DEPTH:
            queue += [(v, (*at, i)) for i, v in enumerate(current[:64])
                      if isinstance(v, dict | list)]
    return None


WORKLOAD_KINDS: KindTable = parse_kind_table(BUNDLED, "policies/kinds.py")
