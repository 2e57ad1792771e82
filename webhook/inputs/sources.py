"""Files and the cluster's own objects -> the engine's Context. The one way in for every front
door: `review`, `lint`, `explain`, `audit` and `serve` read files here, through the one
hardened reader (policies/yamlpos.py: duplicate keys, alias bombs and over-deep nesting are
refused the same way everywhere), and build their Context here.

Fail safe, never silent: a policy source with no policy, an inventory with no node and a path
that cannot be read are errors (SourceError), never "no policies" or "a cluster of no nodes".
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from policies.apiserver import KINDS as API_KINDS
from policies.apiserver import ApiObjects
from policies.catalog import Catalog
from policies.context import DEFAULT_EXCLUDED_NAMESPACES, Context
from policies.engine import CLAIM_KINDS
from policies.inventory import Inventory
from policies.loading import PolicyLoadError, PolicyProblem, check_unique, parse_policies
from policies.model import API_VERSION, KIND, GPUPolicy
from policies.scheduling.occupancy import Occupancy
from policies.scheduling.request import limit_range_defaults
from policies.scheduling.templates import is_template, read_templates, with_templates
from policies.workloads import WORKLOAD_KINDS, KindTable, KindTableError, parse_kind_table
from webhook.inputs.reading import (
    CONTEXT_KINDS,
    SourceError,
    describe,
    labels_of,
    manifest_files,
    metadata_of,
    read_bytes,
    read_objects,
    read_stream,
)

if TYPE_CHECKING:  # the DRA object model loads only for inputs that hold DRA objects
    from policies.dra.objects import Claim

PACKAGE_DIR = Path(__file__).resolve().parents[2] / "policies"
BUNDLED_POLICIES = PACKAGE_DIR / "defaults"
CATALOG_FILE = PACKAGE_DIR / "data" / "catalog.yaml"
CUDA_FILE = PACKAGE_DIR / "data" / "cuda.yaml"
# Kinds that describe the cluster rather than a workload: read from the inputs of every door.
# (ResourceClaimTemplate too: the scan looks for substrings.)
CLUSTER_KINDS = ("Namespace", "Node", "GPUPolicy", "ResourceSlice", "DeviceClass",
                 "DeviceTaintRule", "ResourceClaim", *API_KINDS)
# The kinds whose apiVersion must be one the apiserver serves them in (policies/dra/reader.py).
DRA_CLUSTER_KINDS = ("ResourceSlice", "DeviceClass")


# ---- the engine's inputs --------------------------------------------------------------------

def load_catalog(path: Path | str = CATALOG_FILE) -> Catalog:
    stream = read_stream(path)
    if stream.problems or not stream.documents:
        raise SourceError(describe(path, stream.problems) if stream.problems
                          else f"{path}: empty GPU catalog")
    cuda = read_stream(CUDA_FILE)  # shipped with the package: NVIDIA's driver table
    if cuda.problems or not cuda.documents:
        raise SourceError(describe(CUDA_FILE, cuda.problems) if cuda.problems
                          else f"{CUDA_FILE}: empty CUDA table")
    return Catalog.from_data(stream.documents[0].data, cuda.documents[0].data)


def load_policies(path: Path | str | None = None) -> list[GPUPolicy]:
    """Policies from a file or directory; the bundled defaults when `path` is None. A source
    with no policy in it is an error: an empty or half-written directory must never mean
    "nothing is governed". Raises SourceError / PolicyLoadError."""
    root = Path(path) if path is not None else BUNDLED_POLICIES
    loaded: list[tuple[str, GPUPolicy]] = []
    problems: list[PolicyProblem] = []
    files = manifest_files(root)
    for file in files:
        found, trouble = read_policy_file(file)
        loaded += found
        problems += trouble
    if problems:
        raise PolicyLoadError(problems)
    if not loaded:
        what = "no policy files" if not files else "no GPUPolicy documents"
        raise SourceError(f"{root}: {what} (refusing to run with no policies)")
    check_unique(loaded)
    return [p for _, p in loaded]


def read_policy_file(file: Path) -> tuple[list[tuple[str, GPUPolicy]], list[PolicyProblem]]:
    """The policies of one file and every problem in it: what the hardened reader refuses
    (repeated keys, alias bombs...), then what the model refuses. Raises SourceError when
    the file cannot be read at all."""
    try:
        return [(str(file), p) for p in parse_policies(read_bytes(file), str(file))], []
    except PolicyLoadError as exc:
        return [], list(exc.problems)


def load_workload_kinds(path: Path | str | None = None) -> KindTable:
    """The bundled workload-kinds table, extended by the file at `path` (same form; the
    chart renders `webhooks.workloadKinds` into one). Raises SourceError listing every error."""
    if path is None:
        return WORKLOAD_KINDS
    stream = read_stream(path)
    if stream.problems:
        raise SourceError(describe(path, stream.problems))
    data = [doc.data for doc in stream.documents]
    try:
        extra = parse_kind_table(data[0] if len(data) == 1 else data, str(path),
                                 base=WORKLOAD_KINDS)
    except KindTableError as exc:
        raise SourceError(str(exc)) from None
    return WORKLOAD_KINDS.extended(extra)


def load_inventory(path: Path | str, catalog: Catalog) -> Inventory:
    """Nodes, and the ResourceSlices and DeviceClasses of DRA drivers, from one stream:
    `kubectl get nodes,resourceslices,deviceclasses -o yaml`."""
    return read_cluster_file(path).inventory(catalog)


def read_cluster_file(path: Path | str) -> ClusterObjects:
    """An --inventory file: the cluster's objects (nodes, DRA slices and classes, and the
    ResourceClaims and templates pods name), all read; one with no Node is an error."""
    found = ClusterObjects()
    for obj in read_objects(path):
        if obj.get("kind") == "Pod":  # pods bound to nodes: what they hold, summed per node
            if found.occupancy is None:
                found.occupancy = Occupancy()
            found.occupancy.add_pod(obj)
            continue
        if obj.get("kind") in DRA_CLUSTER_KINDS:  # the DRA readers load for DRA objects only
            from policies.dra.reader import unserved_dra_version
            unserved = unserved_dra_version(obj)
            if unserved:  # its devices would be lost: every claim would be judged wrongly
                raise SourceError(f"{path}: {unserved}")
        found.add(obj)
    if not found.nodes and not found.templates:
        # What a failed `kubectl get nodes -o yaml > nodes.yaml` leaves: not "no nodes".
        raise SourceError(f"{path}: no Node objects (expected `kubectl get nodes -o yaml`)")
    return found


def load_namespaces(paths: Iterable[Path | str]) -> dict[str, dict[str, str]]:
    """Namespace name -> labels, from files of Namespace objects. A file that holds none is an
    error: a wrong file must not mean "no namespace has labels"."""
    found: dict[str, dict[str, str]] = {}
    for path in paths:
        labels = namespace_labels(read_objects(path))
        if not labels:
            raise SourceError(f"{path}: no Namespace objects (give a file of Namespace objects, "
                              "e.g. from kubectl get namespaces -o yaml)")
        found.update(labels)
    return found


def namespace_labels(objects: Iterable[Mapping[str, Any]]) -> dict[str, dict[str, str]]:
    """Name -> labels of the Namespace objects among `objects`; malformed ones are skipped
    (labels that are not a mapping of strings cannot select anything)."""
    found: dict[str, dict[str, str]] = {}
    for obj in objects:
        if obj.get("kind", "Namespace") != "Namespace":
            continue
        meta = obj.get("metadata")
        if not isinstance(meta, dict) or not isinstance(meta.get("name"), str):
            continue
        if isinstance(meta.get("labels") or {}, dict):
            found[meta["name"]] = labels_of(obj)
    return found


def merge_policies(
    files: Sequence[GPUPolicy], resources: Iterable[GPUPolicy]
) -> tuple[list[GPUPolicy], dict[str, str]]:
    """Policies from files, then GPUPolicy objects (cluster resources, or documents among the
    inputs). A name clash keeps the file's; the skipped object is returned as a problem."""
    merged = list(files)
    taken = {p.name for p in merged}
    problems: dict[str, str] = {}
    for policy in resources:
        if policy.name in taken:
            problems[policy.name] = (f"GPUPolicy/{policy.name}: a policy file already defines "
                                     f"{policy.name!r}; the file's version is used")
            continue
        taken.add(policy.name)
        merged.append(policy)
    return merged, problems


def excluded_namespaces(given: Sequence[str] | None, own: str | None = None) -> frozenset[str]:
    """Namespaces no policy governs: as given, else kube-system (and the server's own)."""
    if given is not None:
        return frozenset(given)
    return DEFAULT_EXCLUDED_NAMESPACES | ({own} if own else set())


# ---- DRA claims -----------------------------------------------------------------------------

ClaimKey = tuple[str, str, str]  # (kind, namespace, name): how Context.claims is keyed


def claim_entry(obj: Mapping[str, Any], kind: str | None = None, namespace: str = "default"
                ) -> tuple[ClaimKey, Claim] | None:
    """The Context.claims key and parsed value of a ResourceClaim or ResourceClaimTemplate,
    `kind` given for list items (which come without one); `namespace` is where one that names
    none goes (a door's --namespace, as for the workloads beside it). None for an object
    without a name.

    A claim that says it was made for one pod (the annotation
    resource.kubernetes.io/pod-claim-name and a Pod controller reference) is kept like any
    other: both fields are the writer's to set, so they prove nothing, and a pod that names
    the claim by resourceClaimName is judged on what it holds."""
    kind = kind or str(obj.get("kind"))
    meta = metadata_of(obj)
    name, namespace = meta.get("name"), meta.get("namespace") or namespace
    if kind not in CLAIM_KINDS or not isinstance(name, str) or not isinstance(namespace, str):
        return None
    from policies.dra.parse_claims import parse_claim
    return (kind, namespace, name), parse_claim({**obj, "kind": kind})


@dataclass
class ClusterObjects:
    """The cluster-describing objects found among a door's inputs (or listed from a cluster)."""

    namespaces: dict[str, dict[str, str]] = field(default_factory=dict)
    nodes: list[dict[str, Any]] = field(default_factory=list)
    policies: list[GPUPolicy] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # invalid GPUPolicy objects
    slices: list[dict[str, Any]] = field(default_factory=list)  # DRA ResourceSlices
    classes: list[dict[str, Any]] = field(default_factory=list)  # DRA DeviceClasses
    taint_rules: list[dict[str, Any]] = field(default_factory=list)  # DRA DeviceTaintRules
    # ResourceClaims and ResourceClaimTemplates by (kind, namespace, name), for pods' claims
    claims: dict[ClaimKey, Claim] = field(default_factory=dict)
    # The namespace of a claim that names none: the door's --namespace, which the workloads
    # beside it that name none get too (a pod finds its template in its own namespace).
    namespace: str = "default"
    # Capacity that can appear: Karpenter NodePools, Cluster API node groups, and Node objects
    # given as templates (--node-templates)
    templates: list[dict[str, Any]] = field(default_factory=list)
    node_templates: list[dict[str, Any]] = field(default_factory=list)
    limit_ranges: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    occupancy: Occupancy | None = None  # an --inventory file's pods, summed per node
    # PriorityClasses, RuntimeClasses, ResourceQuotas (policies/apiserver.py), as listed
    api_objects: list[dict[str, Any]] = field(default_factory=list)

    def api(self) -> ApiObjects | None:
        """What the API server's Priority, RuntimeClass and quota plugins read; None when
        none of it was listed."""
        return ApiObjects.read(self.api_objects) if self.api_objects else None

    def add(self, obj: Mapping[str, Any]) -> None:
        kind = obj.get("kind")
        if not isinstance(kind, str):  # a list or a map in `kind` is no kind at all
            return
        if kind == "LimitRange":
            namespace = metadata_of(obj).get("namespace") or self.namespace
            if isinstance(namespace, str):
                self.limit_ranges.setdefault(namespace, []).append(dict(obj))
        elif is_template(obj):
            self.templates.append(dict(obj))
        elif kind == "Namespace":
            self.namespaces.update(namespace_labels([obj]))
        elif kind == "Node":
            self.nodes.append(dict(obj))
        elif kind == "ResourceSlice":
            self.slices.append(dict(obj))
        elif kind == "DeviceClass":
            self.classes.append(dict(obj))
        elif kind == "DeviceTaintRule":
            self.taint_rules.append(dict(obj))
        elif kind in CLAIM_KINDS:
            entry = claim_entry(obj, namespace=self.namespace)
            if entry is not None:
                self.claims[entry[0]] = entry[1]
        elif kind in API_KINDS:
            self.api_objects.append(dict(obj))
        elif kind == "GPUPolicy":
            checked = gpupolicy(obj)
            if isinstance(checked, Invalid):
                self.problems.append(f"skipping invalid {checked.message}")
            else:
                self.policies.append(checked)


    def inventory(self, catalog: Catalog) -> Inventory:
        found = inventory_of(self.nodes, self.slices, self.classes, catalog, self.taint_rules)
        if self.templates or self.node_templates:
            found = with_templates(found, read_templates(self.templates, catalog,
                                                         self.node_templates))
        if self.limit_ranges or self.occupancy is not None:
            found = replace(found, occupancy=self.occupancy, limits={
                ns: limit_range_defaults(items) for ns, items in self.limit_ranges.items()})
        return found


def inventory_of(nodes: Iterable[Mapping[str, Any]], slices: Iterable[Any],
                 classes: Iterable[Any], catalog: Catalog,
                 taint_rules: Iterable[Any] = ()) -> Inventory:
    """Nodes in name order, as the API server lists them (the same answer from a dump in any
    order), with what their DRA devices serve. Slices and classes may come parsed already;
    DeviceTaintRules taint the devices they pick."""
    ordered = sorted(nodes, key=_name)
    slices, classes = list(slices), list(classes)
    dra = None
    if slices or classes:
        from policies.dra.pools import DraInventory
        dra = DraInventory.build(slices, classes, nodes={_name(n): labels_of(n) for n in ordered},
                                 taint_rules=taint_rules)
    return Inventory.from_nodes(ordered, catalog, dra)


def inventory_and_claims(found: ClusterObjects, inventory: Path | str | None,
                         catalog: Catalog) -> tuple[Inventory | None, dict[Any, Claim]]:
    """The inventory (the --inventory file, else the nodes among the inputs) and the
    ResourceClaims pods may name (the file's, then the inputs'). DeviceClasses among the
    inputs join an inventory that lists DRA objects, as they will be once applied (an
    input's class replaces the inventory's of that name). Raises SourceError."""
    if inventory:
        cluster = read_cluster_file(inventory)
        # the file's classes and quotas are the cluster's: they join what the door reads
        found.api_objects = [*cluster.api_objects, *found.api_objects]
        if cluster.slices or cluster.classes:
            cluster.classes = with_classes(cluster.classes, found.classes)
        cluster.node_templates.extend(found.node_templates)
        cluster.templates.extend(found.templates)
        return cluster.inventory(catalog), {**cluster.claims, **found.claims}
    return (found.inventory(catalog) if found.nodes or found.templates
            or found.node_templates else None), dict(found.claims)


def read_node_templates(path: Path | str, found: ClusterObjects) -> None:
    """--node-templates FILE: Node objects that stand for nodes an autoscaler can start, and
    NodePools or Cluster API node groups; a file with none of them is an error."""
    before = len(found.templates) + len(found.node_templates)
    for obj in read_objects(path):
        if obj.get("kind") == "Node":
            found.node_templates.append(dict(obj))
        elif is_template(obj):
            found.templates.append(dict(obj))
    if len(found.templates) + len(found.node_templates) == before:
        raise SourceError(f"{path}: no Node, NodePool or Cluster API node group objects "
                          "(expected node templates)")


def with_classes(listed: Sequence[dict[str, Any]], given: Sequence[dict[str, Any]]
                 ) -> list[dict[str, Any]]:
    """The DeviceClasses `listed` (an inventory's) with those `given` (among the inputs)
    added, a given class replacing a listed one of the same name."""
    names = {_name(c) for c in given}
    return [*(c for c in listed if _name(c) not in names), *given]


def context_objects(objects: Iterable[Mapping[str, Any]], namespace: str | None = None
                    ) -> ClusterObjects:
    """The CONTEXT_KINDS documents among `objects`; `namespace` (--namespace) is that of the
    claims that name none."""
    found = ClusterObjects(namespace=namespace or "default")
    for obj in objects:
        if obj.get("kind") in CONTEXT_KINDS:
            found.add(obj)
    return found


class Invalid(NamedTuple):
    """A GPUPolicy object that did not validate; kept so it can be reported until fixed."""

    name: str
    message: str


def gpupolicy(obj: Mapping[str, Any]) -> GPUPolicy | Invalid:
    """A GPUPolicy object (a cluster resource or a document among the inputs), validated."""
    meta = metadata_of(obj)
    name = str(meta.get("name") or "?")
    # list items come without kind/apiVersion; managedFields is server bookkeeping
    doc = {"apiVersion": API_VERSION, "kind": KIND, **obj,
           "metadata": {k: v for k, v in meta.items() if k != "managedFields"}}
    try:
        (policy,) = parse_policies(json.dumps(doc, default=str), source=f"GPUPolicy/{name}")
    except PolicyLoadError as exc:
        reasons = "; ".join(f"{p.path}: {p.message}" if p.path else p.message
                            for p in exc.problems)
        return Invalid(name, f"GPUPolicy/{name}: {reasons}")
    return policy


def build_context(
    args: argparse.Namespace, found: ClusterObjects | None = None, *,
    catalog: Catalog | None = None, own_namespace: str | None = None,
) -> tuple[Context, list[str]]:
    """The Context of a CLI door from its flags and the cluster objects among its inputs (or
    listed from a cluster): files first, then `found`. Returns the Context and the warnings
    to show (GPUPolicy objects skipped). Raises SourceError / PolicyLoadError."""
    found = found or ClusterObjects()
    catalog = catalog or load_catalog()
    policies, clashes = merge_policies(load_policies(args.policies), found.policies)
    namespaces = load_namespaces(args.namespaces)
    namespaces.update(found.namespaces)
    templates = getattr(args, "node_templates", None)
    if templates:
        read_node_templates(templates, found)
    inventory, claims = inventory_and_claims(found, args.inventory, catalog)
    api = found.api()
    context = Context(
        policies=policies, catalog=catalog, inventory=inventory, namespaces=namespaces,
        excluded_namespaces=excluded_namespaces(args.exclude_namespace, own_namespace),
        workload_kinds=load_workload_kinds(getattr(args, "workload_kinds", None)),
        claims=claims, api=api,
    )
    # a class or quota that cannot be read is said, as an invalid GPUPolicy is
    unread = [f"skipping unreadable {p}" for p in api.problems] if api is not None else []
    # node templates that cannot be read: each door says them its own way (the audit as the
    # node-template-invalid finding, the others with template_warnings())
    return context, [*found.problems, *clashes.values(), *unread]


def template_warnings(context: Context) -> list[str]:
    """The node templates that could not be read as capacity, each with its path."""
    inventory = context.inventory
    return [f"skipping node template {p.describe()}"
            for p in (inventory.template_problems if inventory is not None else ())]


def _name(obj: Mapping[str, Any]) -> str:
    return str(metadata_of(obj).get("name") or "")
