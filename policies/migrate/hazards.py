"""What a move does to the cluster as a whole: the cluster-scope rules on the target (GPUs
advertised twice, extended resources served twice or both ways), and the policies whose
`allowedResources`, `mig.allowedProfiles` or `allowedModels` match something today that the
target no longer has."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase

from policies.catalog import Catalog
from policies.cluster import ClusterView
from policies.context import Context
from policies.engine import review_cluster
from policies.inventory import Inventory
from policies.model import GPUPolicy
from policies.resources import mig_profile

POLICY_STALE = "policy-stops-matching"


@dataclass(frozen=True)
class Hazard:
    rule: str
    severity: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return {"rule": self.rule, "severity": self.severity, "message": self.message}


def hazards(now: Context, target: Context) -> list[Hazard]:
    found = [Hazard(f.rule, f.severity, f.message)
             for f in review_cluster(ClusterView(target), target)]
    if now.inventory is not None and target.inventory is not None:
        found += policy_hazards(target.policies, now.inventory, target.inventory,
                                target.catalog)
    return sorted(found, key=lambda h: (h.severity != "error", h.rule, h.message))


def policy_hazards(policies: Sequence[GPUPolicy], now: Inventory, target: Inventory,
                   catalog: Catalog) -> list[Hazard]:
    before, after = _served(now), _served(target)
    profiles_before, profiles_after = _profiles(now), _profiles(target)
    models_before, models_after = _models(now, catalog), _models(target, catalog)
    out = []
    for policy in policies:
        rules = policy.spec.rules
        for pattern in rules.allowed_resources or ():
            if _any(pattern, before) and not _any(pattern, after):
                out.append(_stale(policy, "allowedResources", pattern,
                                  "no node serves a matching resource after the move (GPUs "
                                  "asked through claims are counted by class, see "
                                  "rules.dra.allowedDeviceClasses)"))
        mig = rules.mig
        for pattern in (mig.allowed_profiles or ()) if mig is not None else ():
            if _any(pattern, profiles_before) and not _any(pattern, profiles_after):
                out.append(_stale(policy, "mig.allowedProfiles", pattern,
                                  "no node has such a MIG device after the move"))
        for model in rules.allowed_models or ():
            key = catalog.normalize(model)
            if key in models_before and key not in models_after:
                out.append(_stale(policy, "allowedModels", model,
                                  "no node has this model after the move"))
    return out


def _stale(policy: GPUPolicy, field: str, value: str, why: str) -> Hazard:
    return Hazard(POLICY_STALE, "warning",
                  f"GPUPolicy {policy.name}: rules.{field} {value!r} matches what the cluster "
                  f"serves today; {why}")


def _any(pattern: str, names: Iterable[str]) -> bool:
    return any(fnmatchcase(n, pattern) for n in names)


def _served(inventory: Inventory) -> set[str]:
    return {name for node in inventory.nodes for name, n in node.allocatable.items() if n > 0}


def _profiles(inventory: Inventory) -> set[str]:
    found = {p for name in _served(inventory) if (p := mig_profile(name))}
    if inventory.dra is not None:
        for group in inventory.dra.groups:
            for _, device in group.devices():
                value = device.attributes.get(f"{device.driver}/profile")
                if isinstance(value, str):
                    found.add(value)
    return found


def _models(inventory: Inventory, catalog: Catalog) -> set[str]:
    found = {catalog.normalize(n.product) for n in inventory.nodes if n.product}
    if inventory.dra is not None:
        for group in inventory.dra.groups:
            for _, device in group.devices():
                value = device.attributes.get(f"{device.driver}/productName")
                if isinstance(value, str):
                    found.add(catalog.normalize(value))
    return found
