"""`rules.allowedModels` where the pod lands: the required node affinity that keeps a pod on
the models its policies allow, so that policy and scheduler agree (an unpinned pod under
`allowedModels: [NVIDIA-A100-SXM4-80GB]` would otherwise be placed on any GPU node, an L4
among them, and the scheduler would never hear of the policy).

The requirement is `nvidia.com/gpu.product In [...]` (`aliyun.accelerator/nvidia_name` for a
pod asking for Alibaba's aliyun.com/ resources, whose nodes name their model there) over the
product label values of the allowed models: every spelling the inventory's nodes carry (GFD's
`-SHARED` and `-MIG-…` variants included) and the catalog's spellings of the model (the
labels a node that is not there yet will carry). One requirement, ANDed into every term of the
pod's required affinity, over the values every policy that sets allowedModels allows
(credited to the first of them); none when they allow no model in common
(gpu-no-matching-hardware then says no pool is left).

It is asked only of a pod that gets its GPUs from a device plugin resource and pins no product
itself: a pod pinned to a product is judged by gpu-model-not-allowed instead, and a pod whose
GPUs come from DRA (claims, or an extended resource a DeviceClass serves) is placed by its
devices' attributes, on nodes that need not carry the product label at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from policies.catalog import Catalog, models_equal
from policies.context import Context
from policies.inventory import Inventory
from policies.model import GPUPolicy
from policies.resources import PodDemand

PRODUCT = "nvidia.com/gpu.product"
# Alibaba ACK's GPU nodes name their model here (GFD's label may be absent): a pod asking for
# aliyun.com/ resources is pinned by it
ACK_PRODUCT = "aliyun.accelerator/nvidia_name"
_CACHE: dict[tuple[tuple[str, ...], str, int, int], tuple[Any, Any, tuple[str, ...]]] = {}


def requirements(context: Context, policies: Sequence[GPUPolicy], demand: PodDemand
                 ) -> tuple[tuple[dict[str, Any], str], ...]:
    """The (requirement, policy name) of the governing policies' allowedModels, when the pod
    takes its GPUs from a device plugin resource; () otherwise."""
    if demand.served or not any(c.gpu for c in demand.containers):
        return ()
    inventory = context.inventory
    if inventory is not None and inventory.dra_served and not inventory.dra_served.isdisjoint(
            name for c in demand.containers for name in c.amounts):
        return ()  # some node serves them from DRA devices, without the label
    key = ACK_PRODUCT if any(name.startswith("aliyun.com/") for c in demand.containers
                             for name in c.amounts) else PRODUCT
    values: set[str] | None = None
    by = ""
    for policy in policies:
        allowed = policy.spec.rules.allowed_models
        if allowed is None:
            continue
        mine = set(products(tuple(allowed), inventory, context.catalog, key))
        values, by = (mine, policy.name) if values is None else (values & mine, by)
    if not values:  # no policy sets allowedModels, or no model is allowed by all of them
        return ()
    return (({"key": key, "operator": "In", "values": sorted(values)}, by),)


def products(allowed: tuple[str, ...], inventory: Inventory | None, catalog: Catalog,
             label: str = PRODUCT) -> tuple[str, ...]:
    """The values of the product `label` for the allowed models, sorted: the inventory's, and
    the catalog's spellings (an allowed name the catalog does not know stands as written)."""
    key = (allowed, label, id(inventory), id(catalog))
    cached = _CACHE.get(key)
    if cached is not None and cached[0] is inventory and cached[1] is catalog:
        return cached[2]
    # Only spellings that name an allowed model as gpu-model-not-allowed compares names: the
    # affinity written here must pass that rule on a second look.
    found: set[str] = set(allowed)
    for name in allowed:
        model = catalog.lookup(name)
        found.update(s for s in ((model.name, *model.products) if model is not None else ())
                     if any(models_equal(s, a) for a in allowed))
    for node in inventory.nodes if inventory is not None else ():
        value = node.labels.get(label)
        if value and value not in found and any(models_equal(value, a) for a in allowed):
            found.add(value)
    values = tuple(sorted(found))
    if len(_CACHE) > 256:  # a new inventory per change: forget the old ones
        _CACHE.clear()
    _CACHE[key] = (inventory, catalog, values)
    return values
