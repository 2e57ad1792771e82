"""Capacity that can appear: node templates an autoscaler would start a node from.

Three sources, each read into template Pools (policies/inventory.py `Pool`, `template` set):

- Karpenter `NodePool` (karpenter.sh/v1): one pool per catalog instance type its
  `spec.template.spec.requirements` allow (instance type, family, GPU name and count, ...), with
  the template's labels, its `taints` (not its `startupTaints`: Karpenter expects those to go
  away and pods need not tolerate them), and the labels Karpenter puts on the node. A
  requirement `In` several values (capacity type, zone) gives the pool one label set per
  combination, so a pod that selects any one of them matches. A NodePool whose `spec.limits`
  (less `status.resources`) leave no room for an instance type cannot start it.
- Cluster API `MachineDeployment`, `MachineSet`, `MachinePool` marked for cluster-autoscaler
  (`cluster.x-k8s.io/cluster-api-autoscaler-node-group-{min,max}-size`) with its
  scale-from-zero annotations `capacity.cluster-autoscaler.kubernetes.io/{cpu, memory,
  ephemeral-disk, maxPods (110 when absent), gpu-type, gpu-count, labels, taints}`: the node
  as the autoscaler imagines it, allocatable = those capacities.
- Node objects given as templates (`--node-templates FILE`, for any other autoscaler).

What cannot be read (an unknown instance type, a malformed annotation or requirement) is a
TemplateProblem with its path, and never capacity. Work is bounded: at most MAX_REQUIREMENTS
requirements (Karpenter's own CRD limit) and MAX_LABEL_SETS label sets per pool.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import replace
from typing import Any, NamedTuple

from policies.catalog import Catalog, InstanceType
from policies.inventory import Inventory, Node, Pool
from policies.quantity import Number, QuantityError, parse_quantity
from policies.selectors import Taint, requirement_matches

MAX_REQUIREMENTS = 100  # karpenter.sh/v1 NodePool: requirements maxItems
MAX_LABEL_SETS = 32
KARPENTER = "karpenter.sh"
CAPI_KINDS = frozenset({"MachineDeployment", "MachineSet", "MachinePool"})
TEMPLATE_KINDS = CAPI_KINDS | {"NodePool"}
CAPACITY = "capacity.cluster-autoscaler.kubernetes.io/"
MIN_SIZE = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-min-size"
MAX_SIZE = "cluster.x-k8s.io/cluster-api-autoscaler-node-group-max-size"
CAPACITY_TYPE = "karpenter.sh/capacity-type"
INSTANCE_TYPE = "node.kubernetes.io/instance-type"
# Keys a NodePool leaves open when it does not constrain them: the node gets whichever value
# the pod asks for (Karpenter picks the zone, the architecture of the instance type...).
OPEN_KEYS = frozenset({"topology.kubernetes.io/zone", "topology.kubernetes.io/region",
                       "kubernetes.io/hostname"})
_NODE_CLASS_CLOUD = {"karpenter.k8s.aws": "aws", "karpenter.azure.com": "azure"}
_GIB = 2**30
_MIB = 2**20


class TemplateProblem(NamedTuple):
    """A template that cannot be read as capacity: which object, where, and why."""

    source: str  # "NodePool gpu-l4-spot", "MachineDeployment capi/gpu-md-0"
    path: str  # "spec.template.spec.requirements[2].values[0]"
    message: str

    def describe(self) -> str:
        return f"{self.source}: {self.path}: {self.message}"


class Templates(NamedTuple):
    pools: tuple[Pool, ...] = ()
    problems: tuple[TemplateProblem, ...] = ()


def is_template(obj: Mapping[str, Any]) -> bool:
    """A NodePool of Karpenter, or a Cluster API node group (kind alone: its annotations are
    read later, a malformed one reported)."""
    kind = obj.get("kind")
    if kind == "NodePool":
        version = obj.get("apiVersion")
        return isinstance(version, str) and version.startswith(KARPENTER + "/")
    return kind in CAPI_KINDS


def read_templates(objects: Iterable[Mapping[str, Any]], catalog: Catalog,
                   nodes: Iterable[Mapping[str, Any]] = ()) -> Templates:
    """Template pools of NodePools and node groups among `objects`, and of Node objects given
    as templates (`nodes`)."""
    pools: list[Pool] = []
    problems: list[TemplateProblem] = []
    for obj in objects:
        if not isinstance(obj, Mapping):
            continue
        if obj.get("kind") == "NodePool":
            found = _node_pool(obj, catalog)
        elif obj.get("kind") in CAPI_KINDS:
            found = _node_group(obj, catalog)
        else:
            continue
        pools.extend(found.pools)
        problems.extend(found.problems)
    for obj in nodes:
        if isinstance(obj, Mapping):
            node = Node.from_object(obj, catalog)
            pools.append(_pool_of(f"template {node.name or '?'}", node.name or "?", node))
    return Templates(tuple(pools), tuple(problems))


def with_templates(inventory: Inventory, templates: Templates) -> Inventory:
    """The inventory with these templates beside its nodes."""
    return replace(inventory, templates=(*inventory.templates, *templates.pools),
                   template_problems=(*inventory.template_problems, *templates.problems))


def _pool_of(template: str, name: str, node: Node, *,
             label_sets: tuple[Mapping[str, str], ...] = (), blocked: str = "") -> Pool:
    variants = label_sets or ({},)
    names = tuple(f"{name}#{i}" if len(variants) > 1 else name for i in range(len(variants)))
    return Pool(
        name=name, node_names=names, labels=node.labels, taints=node.taints,
        allocatable=node.allocatable, model=node.model, product=node.product,
        gpu_count=node.gpu_count, mig_strategy=node.mig_strategy,
        node_labels=dict(zip(names, variants, strict=True)) if len(variants) > 1 else {},
        template=template, blocked=blocked)


# ---- Karpenter ----------------------------------------------------------------------------

def _name(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) and name else "?"


def _dict(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, dict) else {}


def _node_pool(obj: Mapping[str, Any], catalog: Catalog) -> Templates:
    name = _name(obj)
    source = f"NodePool {name}"
    problems: list[TemplateProblem] = []
    template = _dict(_dict(obj.get("spec")).get("template"))
    spec = _dict(template.get("spec"))
    base = "spec.template.spec"
    labels = {str(k): str(v) for k, v in _dict(_dict(template.get("metadata")).get("labels"))
              .items()}
    taints = _taints(spec.get("taints"), f"{base}.taints", source, problems)
    raw = spec.get("requirements")
    requirements: list[tuple[int, Mapping[str, Any]]] = []
    if isinstance(raw, list):
        if len(raw) > MAX_REQUIREMENTS:
            return Templates((), (TemplateProblem(
                source, f"{base}.requirements",
                f"{len(raw)} requirements; a NodePool holds at most {MAX_REQUIREMENTS}, so "
                "the API server refuses it and Karpenter starts nothing from it"),))
        for index, req in enumerate(raw):
            path = f"{base}.requirements[{index}]"
            if not isinstance(req, dict) or not isinstance(req.get("key"), str) \
                    or req.get("operator") not in ("In", "NotIn", "Exists", "DoesNotExist",
                                                    "Gt", "Lt"):
                problems.append(TemplateProblem(source, path, "not a requirement Karpenter "
                                                "reads (key, and operator In, NotIn, Exists, "
                                                "DoesNotExist, Gt or Lt)"))
                continue
            requirements.append((index, req))
    elif raw is not None:
        problems.append(TemplateProblem(source, f"{base}.requirements", "must be a list"))
    cloud = _NODE_CLASS_CLOUD.get(str(_dict(spec.get("nodeClassRef")).get("group")), "")
    candidates = [t for t in catalog.instances.values() if not cloud or t.cloud == cloud]
    for index, req in requirements:  # instance types named that the catalog does not know
        if req["key"] == INSTANCE_TYPE and req["operator"] == "In":
            values = req.get("values")
            for i, value in enumerate(values if isinstance(values, list) else []):
                if catalog.instance(str(value)) is None:
                    problems.append(TemplateProblem(
                        source, f"{base}.requirements[{index}].values[{i}]",
                        f"instance type {value} is not in the GPU catalog: what it holds is "
                        "not known, so no pod is judged to fit it"))
    remaining = _remaining(obj, source, problems)
    pools: list[Pool] = []
    for itype in candidates:
        known = _instance_labels(itype)
        if not all(requirement_matches(req, known) for _, req in requirements
                   if req["key"] in known):
            continue
        node_labels = {**known, **labels, "karpenter.sh/nodepool": name}
        options: dict[str, list[str]] = {CAPACITY_TYPE: ["on-demand"]}
        for _, req in requirements:
            key = req["key"]
            values = [str(v) for v in req.get("values") or [] if isinstance(v, str)]
            if key not in known and req["operator"] == "In" and values:
                options[key] = values[:MAX_LABEL_SETS]
        label_sets = _combinations(options)
        if len(label_sets) == 1:  # one value per key: plain labels
            node_labels, label_sets = {**node_labels, **label_sets[0]}, ()
        allocatable = _karpenter_allocatable(itype)
        node = Node(f"{name}/{itype.name}", node_labels, taints, allocatable, itype.model,
                    itype.model.name, itype.gpus, "")
        pools.append(_pool_of(source, f"{name}/{itype.name}", node, label_sets=label_sets,
                              blocked=_over_limits(allocatable, remaining)))
    return Templates(tuple(pools), tuple(problems))


def _combinations(options: Mapping[str, list[str]]) -> tuple[dict[str, str], ...]:
    keys = list(options)
    combos = itertools.islice(itertools.product(*(options[k] for k in keys)), MAX_LABEL_SETS)
    return tuple(dict(zip(keys, combo, strict=True)) for combo in combos)


def _instance_labels(itype: InstanceType) -> dict[str, str]:
    """The labels Karpenter knows of an instance type before it starts one (its well-known
    labels: karpenter.sh docs, "Well-Known Labels")."""
    labels = {INSTANCE_TYPE: itype.name, "kubernetes.io/arch": "amd64",
              "kubernetes.io/os": "linux"}
    if itype.cloud == "aws":
        labels.update({
            "karpenter.k8s.aws/instance-family": itype.family,
            "karpenter.k8s.aws/instance-gpu-name": itype.gpu_name,
            "karpenter.k8s.aws/instance-gpu-count": str(itype.gpus),
            "karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
            "karpenter.k8s.aws/instance-gpu-memory": str(itype.model.memory_mib),
            "karpenter.k8s.aws/instance-cpu": str(itype.vcpus),
            "karpenter.k8s.aws/instance-memory": str(itype.memory_gib * 1024),
        })
    return labels


def _karpenter_allocatable(itype: InstanceType) -> dict[str, Number]:
    """Capacity less what the kubelet keeps back, as Karpenter estimates it for the EKS AMI:
    CPU reserved 6% of the first core, 1% of the second, 0.5% of the next two, 0.25% of
    the rest; memory less 7.5% VM overhead, 11 MiB per pod + 255 MiB, and the 100 MiB
    eviction threshold; 110 pods."""
    cores = itype.vcpus
    reserved = (60 + 10 * (cores >= 2) + 5 * min(max(cores - 2, 0), 2)
                + 2.5 * max(cores - 4, 0))
    cpu = math.floor(cores * 1000 - reserved)
    memory = math.floor(itype.memory_gib * _GIB * 0.925) - (255 + 11 * 110 + 100) * _MIB
    return {"cpu": parse_quantity(f"{cpu}m"), "memory": memory, "pods": 110,
            "nvidia.com/gpu": itype.gpus}


def _remaining(obj: Mapping[str, Any], source: str,
               problems: list[TemplateProblem]) -> dict[str, Number]:
    limits = _quantities(_dict(obj.get("spec")).get("limits"), "spec.limits", source, problems)
    used = _quantities(_dict(obj.get("status")).get("resources"), "status.resources", source,
                       problems)
    return {k: v - used.get(k, 0) for k, v in limits.items()}


def _over_limits(allocatable: Mapping[str, Number], remaining: Mapping[str, Number]) -> str:
    for name, left in remaining.items():
        have = allocatable.get(name)
        if have is not None and have > left:
            return (f"the NodePool's limits leave {max(left, 0)} {name} and one such node "
                    f"has {have}: Karpenter cannot start it")
    return ""


def _quantities(value: Any, path: str, source: str,
                problems: list[TemplateProblem]) -> dict[str, Number]:
    found: dict[str, Number] = {}
    for key, raw in _dict(value).items():
        try:
            found[str(key)] = parse_quantity(raw)
        except QuantityError as exc:
            problems.append(TemplateProblem(source, f"{path}.{key}", str(exc)))
    return found


def _taints(value: Any, path: str, source: str,
            problems: list[TemplateProblem]) -> tuple[Taint, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        problems.append(TemplateProblem(source, path, "must be a list of taints"))
        return ()
    found = []
    for i, raw in enumerate(value):
        if not isinstance(raw, dict) or not isinstance(raw.get("key"), str) \
                or raw.get("effect") not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            problems.append(TemplateProblem(source, f"{path}[{i}]",
                                            "a taint needs a key and an effect"))
            continue
        found.append(Taint.from_dict(raw))
    return tuple(found)


# ---- Cluster API and cluster-autoscaler ------------------------------------------------------

def _node_group(obj: Mapping[str, Any], catalog: Catalog) -> Templates:
    meta = _dict(obj.get("metadata"))
    kind = str(obj.get("kind"))
    namespace = meta.get("namespace") if isinstance(meta.get("namespace"), str) else "default"
    source = f"{kind} {namespace}/{_name(obj)}"
    annotations = {str(k): v for k, v in _dict(meta.get("annotations")).items()}
    if MIN_SIZE not in annotations and MAX_SIZE not in annotations:
        return Templates()  # not a node group the autoscaler manages
    problems: list[TemplateProblem] = []

    def at(key: str) -> str:
        return f"metadata.annotations[{key}]"

    sizes = {}
    for key in (MIN_SIZE, MAX_SIZE):
        raw = annotations.get(key)
        if not isinstance(raw, str) or not raw.isascii() or not raw.isdigit():
            problems.append(TemplateProblem(source, at(key), f"{raw!r} is not a whole number"))
        else:
            sizes[key] = int(raw)
    if len(sizes) < 2:
        return Templates((), tuple(problems))
    capacity: dict[str, Number] = {}
    for resource, key in (("cpu", "cpu"), ("memory", "memory"),
                          ("ephemeral-storage", "ephemeral-disk")):
        raw = annotations.get(CAPACITY + key)
        if raw is None:
            continue
        try:
            capacity[resource] = parse_quantity(raw)
        except QuantityError as exc:
            problems.append(TemplateProblem(source, at(CAPACITY + key), str(exc)))
    if "cpu" not in capacity or "memory" not in capacity:
        problems.append(TemplateProblem(
            source, at(CAPACITY + "cpu"),
            "no cpu and memory capacity annotations: cluster-autoscaler cannot scale this "
            "group from zero, and what its nodes hold is not known"))
        return Templates((), tuple(problems))
    for resource, key in (("pods", "maxPods"), ("gpu", "gpu-count")):
        raw = annotations.get(CAPACITY + key)
        if raw is None:
            continue
        if not isinstance(raw, str) or not raw.isascii() or not raw.isdigit():
            problems.append(TemplateProblem(source, at(CAPACITY + key),
                                            f"{raw!r} is not a whole number"))
            return Templates((), tuple(problems))
        capacity[resource] = int(raw)
    capacity.setdefault("pods", 110)
    gpus = int(capacity.pop("gpu", 0))
    gpu_type = annotations.get(CAPACITY + "gpu-type") or "nvidia.com/gpu"
    if gpus:
        capacity[str(gpu_type)] = gpus
    labels = _pairs(annotations.get(CAPACITY + "labels"), at(CAPACITY + "labels"), source,
                    problems)
    template_labels = _dict(_dict(_dict(obj.get("spec")).get("template")).get("metadata")) \
        .get("labels")
    for key, value in _dict(template_labels).items():
        if _propagated(str(key)):  # the labels Cluster API puts on the Node
            labels.setdefault(str(key), str(value))
    taints = tuple(_capi_taints(annotations.get(CAPACITY + "taints"), at(CAPACITY + "taints"),
                                source, problems))
    product = labels.get("nvidia.com/gpu.product", "")
    model = catalog.lookup(product) if product else None
    itype = catalog.instance(labels.get(INSTANCE_TYPE, ""))
    if model is None and itype is not None:
        model, product = itype.model, itype.model.name
    if any(p.path in (at(CAPACITY + "labels"), at(CAPACITY + "taints")) for p in problems):
        return Templates((), tuple(problems))  # half-read labels or taints are not a node
    replicas = _dict(obj.get("spec")).get("replicas")
    blocked = ""
    if sizes[MAX_SIZE] == 0 or (isinstance(replicas, int) and replicas >= sizes[MAX_SIZE]):
        blocked = (f"the node group is at its max size ({sizes[MAX_SIZE]}): the autoscaler "
                   "starts no node in it")
    node = Node(_name(obj), labels, taints, capacity, model, product, gpus, "")
    return Templates((_pool_of(source, f"{namespace}/{_name(obj)}", node, blocked=blocked),),
                     tuple(problems))


def _propagated(key: str) -> bool:
    domain = key.split("/")[0]
    return (domain == "node-role.kubernetes.io"
            or domain.endswith(("node-restriction.kubernetes.io", "node.cluster.x-k8s.io")))


def _pairs(raw: Any, path: str, source: str, problems: list[TemplateProblem]) -> dict[str, str]:
    """`key=value,key2=value2`, as cluster-autoscaler reads its labels annotation."""
    found: dict[str, str] = {}
    if raw is None or raw == "":
        return found
    if not isinstance(raw, str):
        problems.append(TemplateProblem(source, path, "must be a string key=value,..."))
        return found
    for part in raw.split(","):
        key, sep, value = part.strip().partition("=")
        if not sep or not key:
            problems.append(TemplateProblem(source, path, f"{part!r} is not key=value"))
            continue
        found[key] = value
    return found


def _capi_taints(raw: Any, path: str, source: str,
                 problems: list[TemplateProblem]) -> Iterator[Taint]:
    """`key=value:Effect,key2:Effect`, as cluster-autoscaler reads its taints annotation."""
    if raw is None or raw == "":
        return
    if not isinstance(raw, str):
        problems.append(TemplateProblem(source, path, "must be a string key=value:Effect,..."))
        return
    for part in raw.split(","):
        head, sep, effect = part.strip().rpartition(":")
        key, _, value = head.partition("=")
        if not sep or not key or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
            problems.append(TemplateProblem(source, path, f"{part!r} is not key=value:Effect"))
            continue
        yield Taint(key, value, effect)
