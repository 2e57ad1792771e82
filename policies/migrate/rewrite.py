"""A workload's extended-resource GPU requests rewritten as DRA claims: each container that
asks for `nvidia.com/gpu` or `nvidia.com/mig-<profile>` gets a ResourceClaimTemplate of its own
(one request per resource, on the NVIDIA driver's classes), a `resources.claims` entry, and the
pod spec a `resourceClaims` entry naming the template; the extended resources are removed.

What no claim can stand for (GPU memory units of the sharing schedulers, time-sliced replicas,
KAI fractions) is a blocker, named with its field path.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from policies.decision import PatchOp
from policies.migrate.derive import DRIVER, GPU_CLASS, MIG_CLASS
from policies.paths import FieldPath, to_display
from policies.resources import SHARED_FAMILIES, Container, demand, mig_profile, with_metadata
from policies.view import targeted_products
from policies.workloads import KindTable, carriers, metadata_path

_DNS = re.compile(r"[^a-z0-9-]+")
_LABEL_MAX = 63


@dataclass
class Rewrite:
    ops: list[PatchOp] = field(default_factory=list)  # on the workload, RFC 6902 order
    templates: list[dict[str, Any]] = field(default_factory=list)
    blockers: list[str] = field(default_factory=list)

    @property
    def useful(self) -> bool:
        return bool(self.ops) and not self.blockers


def claim_rewrite(obj: Mapping[str, Any], namespace: str, table: KindTable) -> Rewrite:
    out = Rewrite()
    meta = obj.get("metadata")
    workload = str(meta.get("name") or "") if isinstance(meta, dict) else ""
    for carrier in carriers(obj, table):
        found = demand(carrier.spec, carrier.path, slots=carrier.kind.containers)
        pod_meta = _get(obj, metadata_path(carrier.path))
        found = with_metadata(found, pod_meta, metadata_path(carrier.path))
        if found.fraction is not None:
            out.blockers.append(f"{to_display(found.fraction.path)}: a KAI GPU fraction is "
                                "shared out by the device plugin's nvidia.com/gpu; the DRA "
                                "driver gives no fraction of a GPU to a claim")
        entries: list[dict[str, Any]] = []
        single = _single_profile(carrier.spec)
        for container in found.containers:
            requests = _requests(container, out.blockers, single)
            if not requests:
                continue
            claim = _dns(f"{container.name or 'c'}-gpu")
            template = _dns(f"{workload}-{container.name or 'c'}-gpu"[-_LABEL_MAX:])
            entries.append({"name": claim, "resourceClaimTemplateName": template})
            out.templates.append(_template(template, namespace, requests))
            res = (*container.path, container.resources_field)
            for name in requests_names(container):
                for part in ("limits", "requests"):
                    section = _get(obj, (*res, part))
                    if isinstance(section, dict) and name in section:
                        out.ops.append(PatchOp("remove", (*res, part, name), None, ""))
            claims = _get(obj, (*res, "claims"))
            if isinstance(claims, list):
                out.ops.append(PatchOp("add", (*res, "claims", "-"), {"name": claim}, ""))
            elif isinstance(_get(obj, res), dict):
                out.ops.append(PatchOp("add", (*res, "claims"), [{"name": claim}], ""))
            else:
                out.ops.append(PatchOp("add", res, {"claims": [{"name": claim}]}, ""))
        if entries:
            listed = carrier.spec.get("resourceClaims")
            if isinstance(listed, list):
                out.ops += [PatchOp("add", (*carrier.path, "resourceClaims", "-"), e, "")
                            for e in entries]
            else:
                out.ops.append(PatchOp("add", (*carrier.path, "resourceClaims"), entries, ""))
    return out


def requests_names(container: Container) -> list[str]:
    return [n for n, a in container.amounts.items()
            if a.value > 0 and (n == "nvidia.com/gpu" or a.resource.family == "mig")]


def _single_profile(spec: Mapping[str, Any]) -> str | None:
    """The MIG profile a pod pinned to a `single`-strategy pool (gpu.product
    `<model>-MIG-<profile>`) got as `nvidia.com/gpu`: what its claim must ask for."""
    for product in targeted_products(spec):
        _, marker, profile = product.partition("-MIG-")
        if marker and profile and profile != "INVALID":
            return profile.removesuffix("-SHARED").lower()
    return None


def _requests(container: Container, blockers: list[str],
              single: str | None = None) -> list[dict[str, Any]]:
    out = []
    for name, amount in sorted(container.amounts.items()):
        if amount.value <= 0:
            continue
        family = amount.resource.family
        where = to_display(amount.path)
        if name == "nvidia.com/gpu.shared":
            blockers.append(f"{where}: time-sliced replicas ({name}) have no DRA form: the "
                            "driver shares a GPU through one claim several pods name, not "
                            "through replicas")
        elif family in SHARED_FAMILIES:
            blockers.append(f"{where}: {name} ({family}) asks for a share of GPU memory or "
                            "cores, which the NVIDIA DRA driver does not serve")
        elif name == "nvidia.com/gpu" or family == "mig":
            count = int(amount.value)
            if count != amount.value:
                blockers.append(f"{where}: {name} is not a whole number")
                continue
            profile = mig_profile(name) or (single if name == "nvidia.com/gpu" else None)
            request: dict[str, Any] = {"deviceClassName": GPU_CLASS, "count": count}
            if profile is not None:
                request = {"deviceClassName": MIG_CLASS, "count": count, "selectors": [
                    {"cel": {"expression":
                             f"device.attributes['{DRIVER}'].profile == '{profile}'"}}]}
            out.append({"name": _dns(profile or "gpu"), "exactly": request})
    return out


def _template(name: str, namespace: str, requests: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": requests}}}}


def _dns(text: str) -> str:
    cleaned = _DNS.sub("-", text.lower().replace(".", "-")).strip("-")
    return cleaned[:_LABEL_MAX].rstrip("-") or "gpu"


def _get(obj: Any, path: FieldPath) -> Any:
    for part in path:
        if isinstance(obj, dict) and isinstance(part, str):
            obj = obj.get(part)
        elif isinstance(obj, list) and isinstance(part, int) and 0 <= part < len(obj):
            obj = obj[part]
        else:
            return None
    return obj


def apply(obj: Any, ops: list[PatchOp]) -> Any:
    """`obj` with `ops` applied, on a copy (the engine's input is never changed)."""
    import copy

    doc = copy.deepcopy(obj)
    for op in ops:
        parent = _get(doc, op.path[:-1])
        last = op.path[-1]
        if op.op == "remove":
            del parent[last]
        elif isinstance(parent, list):
            parent.insert(len(parent) if last == "-" else int(last), copy.deepcopy(op.value))
        else:
            parent[last] = copy.deepcopy(op.value)
    return doc
