"""What `gpupolicy policy check` warns of in a valid policy: injections that work against the
pools they are meant for. A hostname in an injected selector or affinity ties every GPU pod
the policy governs to named machines; an injected toleration of every taint lets them onto
every dedicated pool; and, given the cluster's nodes, an injected label no node carries leaves
every governed GPU pod Pending."""

from __future__ import annotations

from collections.abc import Iterator

from policies.gpunodes import HOSTNAME_KEY
from policies.inventory import Inventory
from policies.model import GPUPolicy, NodeSelectorRequirement
from policies.paths import FieldPath

INJECT: FieldPath = ("spec", "inject")
_HOSTNAME = (f"selects {HOSTNAME_KEY}: every GPU pod this policy governs is tied to named "
             "machines; select a pool or GPU label (nvidia.com/gpu.product, the node pool)")


def advice(policy: GPUPolicy, inventory: Inventory | None = None
           ) -> Iterator[tuple[FieldPath, str]]:
    """(path in the policy document, warning) for each injection that works against its
    purpose."""
    inject = policy.spec.inject
    for key, value in inject.node_selector.items():
        path = (*INJECT, "nodeSelector", key)
        if key == HOSTNAME_KEY:
            yield path, f"nodeSelector {_HOSTNAME}"
        elif inventory is not None and inventory.nodes \
                and not any(n.labels.get(key) == value for n in inventory.nodes):
            yield path, (f"nodeSelector {key}={value}: no node of the inventory carries this "
                         "label, so every GPU pod this policy governs would stay Pending")
    affinity = inject.node_affinity
    if affinity is not None:
        for index, req in enumerate(affinity.required):
            path = (*INJECT, "nodeAffinity", "required", index)
            if req.key == HOSTNAME_KEY:
                yield (*path, "key"), f"required node affinity {_HOSTNAME}"
            elif inventory is not None and inventory.nodes and not _carried(req, inventory):
                yield path, (f"required node affinity {req.key} {req.operator} "
                             f"{', '.join(req.values)}: no node of the inventory matches, so "
                             "every GPU pod this policy governs would stay Pending")
        for index, term in enumerate(affinity.preferred):
            where = (*INJECT, "nodeAffinity", "preferred", index, "preference")
            for i, req in enumerate(term.preference.match_expressions):
                if req.key == HOSTNAME_KEY:
                    yield (*where, "matchExpressions", i, "key"), \
                        f"preferred node affinity {_HOSTNAME}"
            for i, _ in enumerate(term.preference.match_fields):
                yield (*where, "matchFields", i), ("preferred node affinity on metadata.name "
                                                   "prefers named machines; prefer a pool "
                                                   "or GPU label")
    for index, toleration in enumerate(inject.tolerations):
        if toleration.operator == "Exists" and not toleration.key:
            effect = f"every {toleration.effect} taint" if toleration.effect else "every taint"
            yield (*INJECT, "tolerations", index), (
                f"tolerates {effect} (operator Exists, no key): every GPU pod this policy "
                "governs may land on any dedicated pool; tolerate the GPU taints by key")


def _carried(req: NodeSelectorRequirement, inventory: Inventory) -> bool:
    """Some node satisfies a selecting requirement (In, Exists); the others exclude nodes and
    are not judged here."""
    if req.operator == "In":
        return any(n.labels.get(req.key) in req.values for n in inventory.nodes)
    if req.operator == "Exists":
        return any(req.key in n.labels for n in inventory.nodes)
    return True
