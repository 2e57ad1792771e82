"""review(obj, context) -> Decision: the one function that decides, for the webhook, the linter
and the audit alike.

The object is first mutated as the governing policies' `inject` asks (the mutating webhook's
job), then every rule looks at the result (the validating webhook's job), so a Deployment and
the Pods it will create get the same verdict.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from policies import allowed_models
from policies.claimfit import (
    allocation_text,
    asks_dra_served,
    claim_verdicts,
    judged,
    pod_verdicts,
)
from policies.cluster import ClusterFinding, ClusterView
from policies.context import Context
from policies.decision import Decision, Finding, Unresolved, Violation
from policies.dra.claims import gpu_demand
from policies.dra.demand import claim_uses, unknown_claims
from policies.dra.served import served_lookup, served_uses
from policies.hardware import SCALE_UP, PoolVerdict, catalog_pools, now, pool_verdicts
from policies.model import GPUPolicy
from policies.mutate import inject, plan_for
from policies.patch import Patch
from policies.paths import FieldPath, to_display
from policies.resources import PodDemand, demand, with_metadata
from policies.rules import (
    CLUSTER_RULES,
    FACTS,
    INTRINSIC_CLAIM_RULES,
    POLICY_CLAIM_RULES,
    for_families,
    visible_devices_bypass,
)
from policies.rules._common import accelerator_sections
from policies.scheduling.request import NO_DEFAULTS, pod_requests
from policies.view import ClaimView, PodView, targeted_products
from policies.workloads import (
    POD_FIELDS,
    Carrier,
    carriers,
    metadata_path,
    unlisted_pod_template,
)

if TYPE_CHECKING:  # the DRA object model loads only for inputs that hold DRA objects
    from policies.dra.pools import DraInventory

_MODE_RANK = {"Enforce": 0, "Warn": 1, "Audit": 2}
CLAIM_KINDS = frozenset({"ResourceClaim", "ResourceClaimTemplate"})


def review(
    obj: Any,
    context: Context,
    *,
    namespace: str | None = None,
    operation: str = "CREATE",
    subresource: str = "",
    judge: bool = True,
) -> Decision:
    """What the webhooks would do with `obj`: the patch, and whether it may be admitted.
    `judge=False` is the mutating webhook's question, the patch alone: its answer carries
    nothing else (refusing and warning are the validating webhook's, which sees the final
    object), so the rules that find violations are not run; injection's own findings stay."""
    if operation not in ("CREATE", "UPDATE") or not isinstance(obj, dict):
        return Decision(allowed=True, mutated=obj)
    if is_claim(obj):  # never mutated: only judged
        return _review_claim(obj, context, namespace_of(obj, namespace)) if judge \
            else Decision(allowed=True, mutated=obj)
    specs = list(carriers(obj, context.workload_kinds))
    if not specs:
        skipped = unlisted_pod_template(obj, context.workload_kinds)
        if skipped:
            return Decision(allowed=True, mutated=obj, skipped=skipped)
    namespace = namespace_of(obj, namespace)
    policies = context.governing(namespace) if specs else ()
    if not policies:
        return Decision(allowed=True, mutated=obj)
    if subresource == "ephemeralcontainers":  # never mutated: only judged
        return _ephemeral(obj, specs, policies, context, namespace) if judge \
            else Decision(allowed=True, mutated=obj)
    if subresource:  # status, resize, binding...: not a change of what the pod asks for
        return Decision(allowed=True, mutated=obj)

    injected: list[str] = []
    patch, found, views = _mutate(obj, specs, policies, namespace, context, injected)
    for view in views if judge else ():
        found += _check(view, policies, context)
    # (most admissions find nothing: the empty cases cost no generator)
    violations = tuple([_violation(policy, f) for policy, f in found]) if found else ()
    creating = operation == "CREATE"
    unresolved = tuple(_unknown_claims(views, context))
    notes = (*_not_injected(views, specs, policies), *injected) if injected \
        else tuple(_not_injected(views, specs, policies))
    if judge:
        scale_up = [note for v in views if (note := v.memo.get(SCALE_UP))]
        if scale_up:
            notes = (*notes, *scale_up)
    return Decision(
        notes=(*notes, *(u.note for u in unresolved)) if unresolved else notes,
        unresolved=unresolved,
        allowed=not violations or not any(v.denies for v in violations),
        patch=tuple(patch.json_patch) if creating else (),
        mutated=patch.doc if creating else obj,
        violations=violations,
        gpu=any([v.demand.gpu for v in views]),
        policies=tuple([p.name for p in policies]),
        ops=tuple(patch.ops) if creating else (),
    )


def explain(
    obj: Any, context: Context, *, namespace: str | None = None
) -> list[tuple[FieldPath, list[PoolVerdict]]]:
    """For each GPU pod spec of `obj` (after injection): every pool and why it cannot take it,
    its ResourceClaims included; for a claim of its own, every DRA node group.

    Without an inventory the pools are the catalog's GPU models, amounts unchecked."""
    if not isinstance(obj, dict):
        return []
    ns = namespace_of(obj, namespace)
    inventory = context.inventory
    dra = judged(inventory)
    if is_claim(obj):
        from policies.dra.parse_claims import parse_claim
        claim = parse_claim(obj)
        return [] if dra is None else [((*claim.base, "devices"), [
            PoolVerdict(f"node {v.group}", len(v.nodes), "", v.reasons,
                        allocation=allocation_text(v, claim))
            for v in claim_verdicts(claim, dra)])]
    specs = list(carriers(obj, context.workload_kinds))
    # A Pod that exists (it has a status: the audit's, one read from the cluster) is judged as
    # it is: the webhook's injection is what a new pod gets, not what this one has.
    policies = () if _exists(obj) else context.governing(ns)
    _, _, views = _mutate(obj, specs, policies, ns, context)
    allowed = context.allowed_models(ns)
    # cordoned nodes too: explain says the scheduler's NodeUnschedulable words of them
    pools = (inventory.pools + inventory.cordoned) if inventory is not None \
        else catalog_pools(context.catalog)
    out = []
    for view in views:
        if not view.demand.gpu and (inventory is None or not _extended(view.spec)):
            continue  # explained: GPU pods, and pods asking for any extended resource
        if dra is not None and inventory is not None and (
                view.demand.claims or asks_dra_served(view, dra)):
            out.append((view.prefix, pod_verdicts(view, inventory, dra, allowed)))
        else:
            defaults = inventory.limits.get(ns, NO_DEFAULTS) if inventory is not None \
                else NO_DEFAULTS
            pairs = pool_verdicts(view, (*pools, *inventory.templates) if inventory is not None
                                  else pools, allowed_models=allowed,
                                  amounts_known=inventory is not None, defaults=defaults)
            if inventory is not None and inventory.occupancy is not None:
                out.append((view.prefix, now(view, pairs, inventory, defaults)))
            else:
                out.append((view.prefix, [v for _, v in pairs]))
    return out


def _extended(spec: Mapping[str, Any]) -> bool:
    """The pod asks for some extended resource (`example.com/gpu`, `rdma/...`): what no node
    may serve, so explain says where it fits even when it is not a GPU pod."""
    return any("/" in name and amount > 0 for name, amount in pod_requests(spec).items())


def is_claim(obj: Mapping[str, Any]) -> bool:
    """A ResourceClaim or ResourceClaimTemplate (DRA), reviewed as an object of its own."""
    kind, api = obj.get("kind"), obj.get("apiVersion")
    # any JSON value may stand in a field: a list or a map is not a kind (nor hashable)
    return isinstance(kind, str) and kind in CLAIM_KINDS and isinstance(api, str) \
        and api.startswith("resource.k8s.io/")


def claim_view(obj: Any, context: Context, namespace: str) -> ClaimView:
    from policies.dra.parse_claims import parse_claim
    claim = parse_claim(obj)
    dra = context.inventory.dra if context.inventory is not None else None
    return ClaimView(claim, namespace, tuple(gpu_demand(claim, dra)))


def _review_claim(obj: Mapping[str, Any], context: Context, namespace: str) -> Decision:
    """A claim is not mutated; its GPU requests are checked, once per object, as a pod's are.
    A claim the API server would refuse is checked too: the request it cannot read (both
    `exactly` and `firstAvailable`, an unknown allocationMode) is not there to say GPU."""
    policies = context.governing(namespace)
    if not policies:
        return Decision(allowed=True, mutated=obj)
    view = claim_view(obj, context, namespace)
    if not view.gpu and not any(p.kind == "malformed" for p in view.claim.problems) \
            and all(d.matched for d in view.demands):  # no device at all: never runnable
        return Decision(allowed=True, mutated=obj)
    strictest = min(policies, key=lambda p: _MODE_RANK[p.spec.mode])
    found = [(strictest, f) for rule in INTRINSIC_CLAIM_RULES
             for f in rule.check_claim(view, strictest, context)]
    found += [(policy, f) for policy in policies for rule in POLICY_CLAIM_RULES
              for f in rule.check_claim(view, policy, context)]
    violations = tuple(_violation(policy, f) for policy, f in found)
    return Decision(allowed=not any(v.denies for v in violations), mutated=obj,
                    violations=violations, gpu=True, policies=tuple(p.name for p in policies))


def review_cluster(view: ClusterView, context: Context) -> list[ClusterFinding]:
    """What the cluster-scope rules find in a whole cluster's running pods (the audit)."""
    return [f for rule in CLUSTER_RULES for f in rule.check_cluster(view, context)]


def namespace_of(obj: Mapping[str, Any], namespace: str | None) -> str:
    """The object's own namespace, else the one given, else `default` (as kubectl does)."""
    meta = obj.get("metadata")
    own = meta.get("namespace") if isinstance(meta, dict) else None
    return own if isinstance(own, str) and own else namespace or "default"


def _violation(policy: GPUPolicy, finding: Finding) -> Violation:
    return Violation(finding.rule, finding.message, finding.path, policy.name,
                     policy.spec.mode, finding.level, finding.rule in FACTS)


def _mutate(
    obj: Mapping[str, Any], specs: Sequence[Carrier],
    policies: Sequence[GPUPolicy], namespace: str, context: Context,
    notes: list[str] | None = None,
) -> tuple[Patch, list[tuple[GPUPolicy, Finding]], list[PodView]]:
    """Inject into every pod spec, then view each as it is after injection; `notes` gets
    what was not injected, and why."""
    patch = Patch(obj)
    found: list[tuple[GPUPolicy, Finding]] = []
    before = []
    dra = context.inventory.dra if context.inventory is not None else None
    served = served_lookup(dra)
    for carrier in specs:
        prefix = carrier.path
        meta_at = metadata_path(prefix)
        found_demand = with_metadata(demand(carrier.spec, prefix, slots=carrier.kind.containers,
                                            served=served), _get(obj, meta_at), meta_at)
        if context.claims:  # GPUs asked for through ResourceClaims (DRA) make a GPU pod too
            uses = claim_uses(carrier.spec, prefix, namespace, context.claims, dra)
            if uses:
                found_demand = replace(found_demand, claims=uses)
        found_demand = _with_served(found_demand, dra, prefix)
        before.append(found_demand)
        models = allowed_models.requirements(context, policies, found_demand) \
            if policies and found_demand.gpu else ()
        found += inject(patch, prefix, before[-1], policies, carrier.kind.pod_fields,
                        carrier.kind.fields_at, api=context.api, notes=notes, models=models,
                        pod=obj.get("kind") == "Pod" and prefix == ("spec",))
    return patch, found, list(_views(patch, specs, before, obj, namespace, dra))


def _with_served(found: PodDemand, dra: DraInventory | None, prefix: FieldPath) -> PodDemand:
    """The demand with the scheduler's claim for the names DeviceClasses serve."""
    uses = served_uses(found, dra, (*prefix, "containers"))
    return replace(found, served=uses) if uses or found.served else found


def _views(
    patch: Patch, specs: Sequence[Carrier], before: Sequence[PodDemand],
    original: Mapping[str, Any], namespace: str, dra: DraInventory | None = None,
) -> Iterator[PodView]:
    kind = str(original.get("kind", ""))
    started = kind == "Pod" and _started(original)
    admitted = kind == "Pod" and _exists(original)
    for carrier, found in zip(specs, before, strict=True):
        prefix = carrier.path
        spec = patch.get(prefix)
        original = _spec_before(patch, prefix)
        if spec is not original and not _same_containers(spec, original, carrier):
            # Copy on write: a container no op went into is the same object as before, and
            # its amounts carry over.
            again = demand(spec, prefix, found, carrier.kind.containers, served_lookup(dra))
            # the same totals (every amount lent by `found`): the same served claim
            found = again if again.totals is found.totals else _with_served(again, dra, prefix)
        # pod-level fields kept apart (a TrainJob's runtime patch) are not all the pod's: its
        # runtime has the rest, so its scheduling is not judged as if they were
        fields = frozenset() if carrier.kind.fields_at else carrier.kind.pod_fields
        # Only the rules of a pod with accelerator amounts, claims or a GPU share read the
        # products it pins itself to: most pods have none of these.
        asks = bool(found.present or found.claims or found.fraction is not None)
        yield PodView(kind, spec, prefix, found, kind == "Pod", namespace,
                      products=targeted_products(spec) if asks else (), pod_fields=fields,
                      started=started, admitted=admitted)


def _same_containers(spec: Mapping[str, Any], before: Mapping[str, Any],
                     carrier: Carrier) -> bool:
    """Mutation wrote only pod-level fields (tolerations, selectors...): every container list
    is the object it was, so the demand read before mutation holds as it is. A kind with
    container-like slots elsewhere in its spec is read again."""
    return not carrier.kind.containers and all(
        spec.get(key) is before.get(key)
        for key in ("containers", "initContainers", "ephemeralContainers"))


def _exists(obj: Mapping[str, Any]) -> bool:
    """A Pod the API server holds: its status has a phase."""
    status = obj.get("status")
    return obj.get("kind") == "Pod" and isinstance(status, dict) \
        and isinstance(status.get("phase"), str) and bool(status["phase"])


def _started(pod: Mapping[str, Any]) -> bool:
    """A Pod the kubelet has started (the audit reads them): what only matters before a
    pod runs is moot."""
    status = pod.get("status")
    return isinstance(status, dict) and status.get("phase") in ("Running", "Succeeded",
                                                                "Failed")


def _get(obj: Any, path: FieldPath) -> Any:
    for part in path:
        if isinstance(obj, dict) and isinstance(part, str):
            obj = obj.get(part)
        elif isinstance(obj, list) and isinstance(part, int) and part < len(obj):
            obj = obj[part]
        else:
            return None
    return obj


def _not_injected(views: Sequence[PodView], specs: Sequence[Carrier],
                  policies: Sequence[GPUPolicy]) -> Iterator[str]:
    """Say where a GPU pod spec's kind has no place for what the policies inject."""
    for view, carrier in zip(views, specs, strict=True):
        taken = carrier.kind.pod_fields
        if taken >= POD_FIELDS or not view.demand.gpu:
            continue  # a kind with every pod-level field takes every injection
        missing = [name for name in plan_for(policies).fields if name not in taken]
        if missing:
            yield (f"{to_display(view.prefix)}: {view.kind} has no {', '.join(missing)} "
                   "here, so the policies' injection of it is left out (add it to the pod "
                   "template the workload's runtime provides)")


def _unknown_claims(views: Sequence[PodView], context: Context) -> Iterator[Unresolved]:
    for view in views:
        if "resourceClaims" in view.spec:
            yield from unknown_claims(view.spec, view.prefix, view.namespace, context.claims)


def _spec_before(patch: Patch, prefix: FieldPath) -> Any:
    node = patch.original
    for part in prefix:
        node = node[part]
    return node


def _check(
    view: PodView, policies: Sequence[GPUPolicy], context: Context
) -> Iterator[tuple[GPUPolicy, Finding]]:
    gpu_claims = bool(view.demand.claims) and any(u.gpu or u.doubtful
                                                  for u in view.demand.claims)
    if not gpu_claims and (not view.demand.containers or not _accelerator_related(view)) \
            and not _unreadable_claims(view.spec):
        for policy in policies:
            for finding in visible_devices_bypass.check(view, policy, context):
                yield policy, finding
        return
    # Facts (the apiserver's own checks, catalog facts) are reported once, under the
    # strictest policy: they hold whatever the policies say.
    strictest = min(policies, key=lambda p: _MODE_RANK[p.spec.mode])
    claimed = _claimed(view.demand)
    intrinsic, policy_rules = for_families(view.demand.present | claimed if claimed
                                           else view.demand.present)
    for rule in intrinsic:
        for finding in rule.check(view, strictest, context):
            yield strictest, finding
    for policy in policies:
        for rule in policy_rules:
            for finding in rule.check(view, policy, context):
                yield policy, finding


def _claimed(found: PodDemand) -> frozenset[str]:
    """The families a pod's ResourceClaims bring: DRA, and whole GPUs or MIG devices."""
    if not found.claims and not found.served:  # almost every pod: no generator made
        return frozenset()
    uses = (*found.claims, *found.served)
    if not any(u.gpu or u.doubtful for u in uses):
        return frozenset()
    kinds = {"whole" if k == "gpu" else k for u in uses for d in u.demands for k in d.kinds}
    return frozenset({"dra", *kinds})


def _unreadable_claims(spec: Mapping[str, Any]) -> bool:
    """An entry of spec.resourceClaims that names no claim (the pre-1.31 `source:` form): the
    GPUs it meant cannot be seen, and the API server refuses it, so the pod's facts are
    checked as an unreadable accelerator resource's are."""
    refs = spec.get("resourceClaims")
    return isinstance(refs, list) and any(
        isinstance(r, dict) and r.get("resourceClaimName") is None
        and r.get("resourceClaimTemplateName") is None for r in refs)


def _accelerator_related(view: PodView) -> bool:
    """Any accelerator resource key (even unparsable) in any container's own resources field,
    or a GPU share asked for by annotation."""
    if view.demand.fraction is not None or any(c.amounts for c in view.demand.containers):
        return True
    # the rules of an accelerator pod read the same names again: picked once per view
    return bool(accelerator_sections(view))


def _ephemeral(
    obj: Mapping[str, Any], specs: Sequence[Carrier],
    policies: Sequence[GPUPolicy], context: Context, namespace: str,
) -> Decision:
    """`kubectl debug`: only the ephemeral containers are new; they can carry no resources,
    so the one thing to check is whether they reach for GPUs through the environment."""
    found: list[Violation] = []
    kind = str(obj.get("kind", ""))
    for carrier in specs:
        prefix, spec = carrier.path, carrier.spec
        ephemeral = tuple(c for c in demand(spec, prefix).containers if c.role == "ephemeral")
        if not ephemeral:
            continue
        only = PodView(kind, spec, prefix, PodDemand(ephemeral, {}), kind == "Pod", namespace,
                       "ephemeralcontainers")
        for policy in policies:
            found += [_violation(policy, f)
                      for f in visible_devices_bypass.check(only, policy, context)]
    return Decision(allowed=not any(v.denies for v in found), mutated=obj,
                    violations=tuple(found), policies=tuple(p.name for p in policies))

