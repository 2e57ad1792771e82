"""dra-claim-invalid: fields of a ResourceClaim or template the API server would refuse
(a request with both `exactly` and `firstAvailable`, an unknown allocationMode, a count over
32, a malformed quantity...), and a container's `resources.claims` entry that names no entry
of the pod's `spec.resourceClaims` (refused too), each at its field path. An entry whose
`request` is not a request of the claim is accepted, and the pod never starts: also reported.
So is a Pod that sets `spec.nodeName` and has claims: it bypasses the scheduler, which is what
allocates claims and reserves them for the pod, so the kubelet never starts it. A
`spec.resourceClaims` entry must name exactly one of `resourceClaimName` and
`resourceClaimTemplateName` (the API server's words): the `source:` wrapper of Kubernetes
before 1.31 is no longer read, so such an entry is refused, whatever the claim it meant holds.

FAIL: `requests: [{name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 64}}]`;
  `resources.claims: [{name: gpus}]` in a pod whose resourceClaims name only `gpu`
  `resourceClaims: [{name: gpu, source: {resourceClaimTemplateName: one-gpu}}]`
PASS: `count: 8`; `resources.claims: [{name: gpu, request: gpu}]`;
  `resourceClaims: [{name: gpu, resourceClaimTemplateName: one-gpu}]`
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from policies.context import Context
from policies.decision import Finding
from policies.display import shown
from policies.model import GPUPolicy
from policies.paths import to_display
from policies.view import ClaimView, PodView

ID = "dra-claim-invalid"
INTRINSIC = True

EXAMPLES = """
- FAIL: a claim for 64 GPUs (the API server allows 32 per request)
  object:
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaim
    metadata: {name: gpus, namespace: ml-train}
    spec:
      devices:
        requests:
        - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 64}}
- PASS: a claim for 8
  object:
    apiVersion: resource.k8s.io/v1
    kind: ResourceClaim
    metadata: {name: gpus, namespace: ml-train}
    spec:
      devices:
        requests:
        - {name: gpu, exactly: {deviceClassName: gpu.nvidia.com, count: 8}}
"""
NATIVE = "The API server's own validation of resource.k8s.io refuses such a claim."
_SOURCES = ("resourceClaimName", "resourceClaimTemplateName")


def check(view: PodView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    refs = view.spec.get("resourceClaims")
    if not refs and not any(_lists_claims(c.spec) for c in view.demand.containers):
        return  # nothing names a claim (almost every GPU pod): nothing to check
    bound = view.spec.get("nodeName")
    if view.is_pod and not view.started and isinstance(bound, str) and bound \
            and isinstance(refs, list) and refs:
        yield Finding(ID, f"spec.nodeName {bound} bypasses the scheduler, and only the "
                      "scheduler allocates a pod's ResourceClaims: the kubelet will not start "
                      "it; select the node with nodeSelector kubernetes.io/hostname instead",
                      view.at("nodeName"))
    yield from source_problems(view)
    names = {n for r in refs if isinstance(r, dict) and isinstance(n := r.get("name"), str)} \
        if isinstance(refs, list) else set()
    requests = {u.name: {s.name for s in u.claim.requests} for u in view.demand.claims}
    for container in view.demand.containers:
        for index, entry in _entries(container.spec):
            name, request = entry.get("name"), entry.get("request")
            here = (*container.path, "resources", "claims", index)
            if not isinstance(name, str) or name not in names:
                listed = ", ".join(sorted(names)) or "empty"
                yield Finding(ID, f"container {shown(container.name)}: resources.claims[{index}]."
                              f"name {shown(name)} must be one of the names in "
                              f"spec.resourceClaims ({listed})", (*here, "name"))
            elif isinstance(request, str) and request and name in requests \
                    and request not in requests[name]:
                yield Finding(ID, f"container {shown(container.name)}: request {request} is not a "
                              f"request of the claim {name} names ("
                              f"{', '.join(sorted(requests[name])) or 'none'}): the pod "
                              "cannot start", (*here, "request"))


def source_problems(view: PodView) -> Iterator[Finding]:
    """Entries of spec.resourceClaims naming neither or both of the claim and the template,
    as the API server refuses them (validatePodResourceClaimSource)."""
    refs = view.spec.get("resourceClaims")
    for index, entry in enumerate(refs if isinstance(refs, list) else ()):
        if not isinstance(entry, dict):
            continue
        named = [k for k in _SOURCES if entry.get(k) is not None]
        here = view.at("resourceClaims", index)
        shown_at = to_display(here)
        if not named:
            old = entry.get("source")
            hint = (f"; the source: wrapper is not read since Kubernetes 1.31: write "
                    f"{_hint(old)} in the entry itself" if isinstance(old, dict) else "")
            yield Finding(ID, f"{shown_at}: must specify one of: `resourceClaimName`, "
                          f"`resourceClaimTemplateName`{hint}", here)
        elif len(named) > 1:
            yield Finding(ID, f"{shown_at}: at most one of `resourceClaimName` or "
                          "`resourceClaimTemplateName` may be specified", here)


def _hint(source: dict[Any, Any]) -> str:
    found = [f"{k}: {source[k]}" for k in _SOURCES
             if isinstance(source.get(k), str) and source[k].isprintable() and len(source[k]) < 254]
    return ", ".join(found) or "resourceClaimName or resourceClaimTemplateName"


def check_claim(view: ClaimView, policy: GPUPolicy, context: Context) -> Iterator[Finding]:
    for problem in view.claim.problems:
        if problem.kind == "malformed":
            yield Finding(ID, problem.message, problem.path)


def _lists_claims(container: Any) -> bool:
    resources = container.get("resources")
    return isinstance(resources, dict) and bool(resources.get("claims"))


def _entries(container: Any) -> Iterator[tuple[int, dict[str, Any]]]:
    resources = container.get("resources")
    listed = resources.get("claims") if isinstance(resources, dict) else None
    for index, entry in enumerate(listed if isinstance(listed, list) else ()):
        if isinstance(entry, dict):
            yield index, entry
