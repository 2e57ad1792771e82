"""One workload judged against today's inventory and the target's, by the same `review()` and
`explain()` every door uses, and sorted into what the move does to it:

- `unchanged`: it runs (or fails) after as before, on the same kind of node;
- `runs-via-extended-resource`: it now lands on nodes where a DeviceClass's
  `extendedResourceName` serves what it asks (no change to the manifest needed);
- `needs-claim`: nothing serves what it asks by name, but the same devices asked through a
  ResourceClaim fit (the rewrite is checked by a second review);
- `breaks`: nothing in the target can run it (memory units of the sharing schedulers,
  replicas beyond the physical GPUs, a model or profile the target lacks);
- `newly-refused`: a policy rule refuses it on the target that admitted it before.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from policies.context import Context
from policies.decision import Decision
from policies.engine import explain, namespace_of, review
from policies.hardware import PoolVerdict, closest
from policies.migrate.rewrite import Rewrite, apply, claim_rewrite
from policies.resources import demand
from policies.workloads import carriers

OUTCOMES = ("unchanged", "runs-via-extended-resource", "needs-claim", "breaks",
            "newly-refused")
# The rules that say "no node can run it": the move changes their answer by design, so they
# are read through the pools, not counted as a policy refusing it anew.
FIT_RULES = frozenset({"gpu-no-matching-hardware", "dra-no-matching-device"})


@dataclass(frozen=True)
class Fit:
    fits: bool
    pool: str = ""  # where it would land (the first pool that fits)
    via_dra: bool = False  # served there through a DeviceClass's extendedResourceName
    moved: bool = False  # that pool's GPUs are the DRA driver's (no device plugin left)
    reasons: tuple[str, ...] = ()  # the closest pools' reasons, when nothing fits
    # every pool's verdict, "pool X: ..." (for saying why the pool it ran on no longer fits)
    by_pool: Mapping[str, str] = field(default_factory=dict)

    def why(self, pool: str) -> tuple[str, ...]:
        """Why `pool` (where it ran before) cannot take it now, else the closest pools."""
        return (self.by_pool[pool],) if pool in self.by_pool else self.reasons


@dataclass(frozen=True)
class Move:
    kind: str
    namespace: str
    name: str
    outcome: str
    before: str
    after: str
    reasons: tuple[str, ...]
    pool: str
    rewrite: Rewrite | None = None

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "namespace": self.namespace, "name": self.name,
                "before": self.before, "after": self.after, "outcome": self.outcome,
                "reasons": list(self.reasons), "pool": self.pool}


def judge(obj: Mapping[str, Any], now: Context, target: Context,
          namespace: str | None = None) -> Move | None:
    """The move's effect on `obj`; None when it is no GPU workload before or after."""
    ns = namespace_of(obj, namespace)
    before, after = review(obj, now, namespace=ns), review(obj, target, namespace=ns)
    if not (before.gpu or after.gpu):
        return None
    meta = obj.get("metadata")
    name = str(meta.get("name") or "?") if isinstance(meta, dict) else "?"
    kind = str(obj.get("kind") or "?")
    fit0, fit1 = fit(obj, now, ns), fit(obj, target, ns)

    def move(outcome: str, reasons: Sequence[str], pool: str = fit1.pool,
             rewrite: Rewrite | None = None, after_text: str = "") -> Move:
        return Move(kind, ns, name, outcome, _state(before, fit0),
                    after_text or _state(after, fit1), tuple(reasons), pool, rewrite)

    old = {(v.rule, v.path) for v in before.denials}
    new = [v for v in after.denials if (v.rule, v.path) not in old and v.rule not in FIT_RULES]
    if new:
        return move("newly-refused", [v.describe() for v in new])
    if fit1.fits:
        blockers = claim_rewrite(obj, ns, target.workload_kinds).blockers if fit1.moved else []
        if blockers:
            return move("breaks", [f"pool {fit1.pool} moves to DRA: {b}" for b in blockers])
        if fit1.via_dra and not (fit0.fits and fit0.via_dra):
            return move("runs-via-extended-resource",
                        [f"served on pool {fit1.pool} through a DeviceClass's "
                         "extendedResourceName"])
        return move("unchanged", [])
    if not fit0.fits:
        return move("unchanged", ["fits no pool before the move either", *fit1.reasons])
    lost = (*fit1.why(fit0.pool), *_replicas(now, fit0.pool))
    rewrite = claim_rewrite(obj, ns, target.workload_kinds)
    if rewrite.blockers or not rewrite.ops:
        return move("breaks", [*rewrite.blockers, *lost])
    claimed = apply(obj, rewrite.ops)
    with_claims = with_templates(target, rewrite.templates)
    refit = fit(claimed, with_claims, ns)
    if not refit.fits:
        return move("breaks", [*lost, "asked through a ResourceClaim it still fits no pool: "
                               + "; ".join(refit.why(fit0.pool))], rewrite=rewrite)
    refused = [v for v in review(claimed, with_claims, namespace=ns).denials
               if (v.rule, v.path) not in old and v.rule not in FIT_RULES]
    if refused:  # the claim it needs is one a policy refuses (rules.dra.allowedDeviceClasses)
        return move("newly-refused", [*lost, *(f"asked through a ResourceClaim: {v.describe()}"
                                               for v in refused)], pool=refit.pool,
                    rewrite=rewrite)
    asked = sorted({r["exactly"]["deviceClassName"] for t in rewrite.templates
                    for r in t["spec"]["spec"]["devices"]["requests"]})
    return move("needs-claim", [
        *(f"nothing serves it by name: {r}" for r in fit1.why(refit.pool)),
        f"asked through a ResourceClaim on {', '.join(asked)} it fits pool {refit.pool}"],
        pool=refit.pool, rewrite=rewrite,
        after_text=f"fits pool {refit.pool} once it claims its devices")


def _replicas(context: Context, pool_name: str) -> list[str]:
    """Why a time-sliced pool shrinks: it advertised each GPU several times."""
    pools = context.inventory.pools if context.inventory is not None else ()
    pool = next((p for p in pools if p.name == pool_name), None)
    replicas = pool.labels.get("nvidia.com/gpu.replicas", "") if pool is not None else ""
    if not replicas.isdigit() or int(replicas) <= 1:
        return []
    return [f"pool {pool_name} time-sliced each GPU into {replicas} replicas; the DRA driver "
            "gives whole GPUs (several pods share one only by naming one ResourceClaim)"]


def with_templates(context: Context, templates: Sequence[Mapping[str, Any]]) -> Context:
    """`context` holding `templates` too (the claims a rewrite adds)."""
    from policies.dra.parse_claims import parse_claim

    claims = dict(context.claims)
    for t in templates:
        meta = t["metadata"]
        claims[("ResourceClaimTemplate", meta["namespace"], meta["name"])] = parse_claim(t)
    return replace(context, claims=claims)


def fit(obj: Mapping[str, Any], context: Context, namespace: str) -> Fit:
    """Whether some pool can take every GPU pod spec of `obj`, and which."""
    answers = explain(obj, context, namespace=namespace)
    if not answers:
        return Fit(True)
    asked = _asked(obj, context)
    pools = {p.name: p for p in context.inventory.pools} if context.inventory else {}
    chosen: PoolVerdict | None = None
    by_pool: dict[str, str] = {}
    for _path, verdicts in answers:
        by_pool.update((v.pool, v.describe()) for v in verdicts if not v.fits)
        fitting = [v for v in verdicts if v.fits]
        if not fitting:
            shown, more = closest(verdicts)
            tail = [f"and {more} more pool{'s' * (more != 1)}"] if more else []
            return Fit(False, reasons=tuple([v.describe() for v in shown] + tail)
                       or ("no GPU node pool",), by_pool=by_pool)
        # a pool the device plugin serves is as good as before: prefer it
        ranked = sorted(fitting, key=lambda v: _served(pools, v, asked))
        chosen = chosen or ranked[0]
    assert chosen is not None
    pool = pools.get(_pool_name(chosen))
    return Fit(True, chosen.pool, _served(pools, chosen, asked),
               pool is not None and bool(pool.dra_served), by_pool=by_pool)


def _pool_name(verdict: PoolVerdict) -> str:
    return verdict.pool.split(" (node ", 1)[0]


def _served(pools: Mapping[str, Any], verdict: PoolVerdict, asked: frozenset[str]) -> bool:
    pool = pools.get(_pool_name(verdict))
    return pool is not None and not asked.isdisjoint(pool.dra_served)


def _asked(obj: Mapping[str, Any], context: Context) -> frozenset[str]:
    names: set[str] = set()
    for carrier in carriers(obj, context.workload_kinds):
        found = demand(carrier.spec, carrier.path, slots=carrier.kind.containers)
        names.update(n for n, v in found.totals.items() if v > 0)
    return frozenset(names)


def _state(decision: Decision, where: Fit) -> str:
    if not decision.allowed:
        rules = sorted({v.rule for v in decision.denials})
        return "refused (" + ", ".join(rules) + ")"
    if not where.fits:
        return "fits no pool"
    return f"runs on pool {where.pool}" if where.pool else "admitted"
