"""Can one node satisfy every request of every claim of a pod at once? (reference/dra.md §3)

Per NodeGroup (nodes that see identical devices), the scheduler's allocator is replayed: class
selectors then request selectors, capacity requests, taints the request does not tolerate,
shared counters of partitionable devices, constraints, `firstAvailable` alternatives in order,
`allocationMode: All`, admin access. The search is exhaustive like the allocator's but bounded
by a step budget; past it the node is given the benefit of the doubt (never a false refusal).
Reasons read as the scheduler's missing explanation: "2 devices match class gpu.nvidia.com and
selector productName == 'NVIDIA H100 80GB HBM3', the claim asks for 4".
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from policies.dra.cel import compile_selector, evaluate
from policies.dra.objects import (
    Claim,
    Device,
    Request,
    RequestSlot,
    Selector,
)
from policies.dra.pools import DraInventory, NodeGroup
from policies.dra.problems import Problem, ProblemKind
from policies.dra.search import (
    MAX_DEVICES_PER_CLAIM,
    Alt,
    Budget,
    Exhausted,
    Flat,
    Search,
    consumption,
    devices_text,
)
from policies.paths import FieldPath
from policies.quantity import Number

_BLOCKING = frozenset({"NoSchedule", "NoExecute"})
_PREFIX = re.compile(r"""device\.(?:attributes|capacity)\[\s*(['"])[^'"]*\1\s*\]\.""")


@dataclass(frozen=True, slots=True)
class GroupVerdict:
    group: str  # the first node of the group
    nodes: tuple[str, ...]
    reasons: tuple[str, ...]
    # request slot ("claim/request") -> the alternative chosen ("req" or "req/sub")
    chosen: Mapping[str, str] = field(default_factory=dict)
    # request slot -> the devices the first solution takes (per-pod GPU counts, models and
    # MIG profiles for the rules; `All` shows every matching device)
    allocated: Mapping[str, tuple[Device, ...]] = field(default_factory=dict)
    problems: tuple[Problem, ...] = ()
    undecided: bool = False  # the search ran out of budget; counted as a fit
    # request slot -> "driver/pool/device" of the devices taken, as allocation results name them
    placed: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @property
    def fits(self) -> bool:
        return not self.reasons


def short(selectors: Sequence[Selector]) -> str:
    """Selectors as a reason quotes them, without the `device.attributes['d'].` noise."""
    return " && ".join(_PREFIX.sub("", s.expression).strip() for s in selectors)


def check(claims: Sequence[Claim], inventory: DraInventory) -> list[GroupVerdict]:
    """Every node group with the reasons it cannot take all `claims` together."""
    budget = Budget()
    return [check_group(claims, group, inventory, budget) for group in inventory.groups]


def any_fits(claims: Sequence[Claim], inventory: DraInventory) -> bool:
    budget = Budget()
    return any(check_group(claims, g, inventory, budget).fits for g in inventory.groups)


def check_group(claims: Sequence[Claim], group: NodeGroup, inventory: DraInventory,
                budget: Budget | None = None) -> GroupVerdict:
    return _Check(claims, group, inventory, budget or Budget()).run()


# ---------------------------------------------------------------- candidates


class _Unjudged(Exception):
    """A selector we cannot evaluate: no verdict for the group, so no refusal."""


class _Abort(Exception):
    """A CEL error or a missing class: the scheduler stops the pod, not just this device."""


class _Check:
    def __init__(self, claims: Sequence[Claim], group: NodeGroup, inventory: DraInventory,
                 budget: Budget):
        self.claims = claims
        self.group = group
        self.inventory = inventory
        self.flat: list[Flat] = []
        self.unusable: list[str] = []
        for index, pool in enumerate(group.pools):
            if pool.usable:
                self.flat.extend(Flat(pool, index, d) for d in pool.devices)
            else:
                self.unusable.append(pool.why_unusable())
        self.problems: list[Problem] = []
        self.several = sum(len(c.requests) for c in claims) > 1
        self.budget = budget

    def run(self) -> GroupVerdict:
        try:
            units = [self._alternatives(ci, slot) for ci, claim in enumerate(self.claims)
                     for slot in claim.requests]
        except _Abort as stop:
            return self._verdict((str(stop),))
        except _Unjudged:
            return self._verdict((), undecided=True)
        static = [self._static_reason(alts) for alts in units]
        static.append(self._claim_limit(units))
        if any(static):
            return self._verdict(tuple(r for r in static if r))
        crowded = self._pigeonhole(units)
        if crowded:
            return self._verdict((crowded,))
        search = Search(self.claims, self.flat, self.group.pools, self.budget, self._label, units)
        try:
            found = search.place(0)
        except Exhausted:
            return self._verdict((), undecided=True)
        if not found:
            return self._verdict((search.explain(),))
        chosen = {f"{self._slot_name(a)}": a.request.name for a in search.picked_alts}
        taken = {self._slot_name(a): tuple(self.flat[i].device for i in found)
                 for a, found in search.picked_devices.items()}
        placed = {self._slot_name(a): tuple(f"{self.flat[i].device.driver}/"
                                            f"{self.flat[i].pool.name}/"
                                            f"{self.flat[i].device.name}" for i in found)
                  for a, found in search.picked_devices.items()}
        return self._verdict((), chosen=chosen, taken=taken, placed=placed)

    def _claim_limit(self, units: list[list[Alt]]) -> str:
        """A claim's allocation holds at most 32 devices (the allocator's "exceeds the claim
        limit"): the fewest its requests can take, each at its smallest alternative."""
        least: dict[int, int] = {}
        for alts in units:
            smallest = min((len(a.candidates) if a.request.mode == "All" else a.request.count)
                           for a in alts)
            least[alts[0].claim] = least.get(alts[0].claim, 0) + smallest
        for index, total in least.items():
            if total > MAX_DEVICES_PER_CLAIM:
                claim = self.claims[index]
                return (f"claim {claim.name or '(unnamed)'} asks for {total} devices, which "
                        f"exceeds the claim limit of {MAX_DEVICES_PER_CLAIM}")
        return ""

    def _pigeonhole(self, units: list[list[Alt]]) -> str:
        """Single-alternative requests that need more distinct devices than all of them
        together match cannot fit; saying so up front spares the search n! orderings."""
        if any(len(alts) != 1 or alts[0].request.admin_access for alts in units):
            return ""
        exclusive = [a[0] for a in units if not any(
            self.flat[i].device.allow_multiple for i in a[0].candidates)]
        union = {i for alt in exclusive for i in alt.candidates}
        need = sum(len(a.candidates) if a.request.mode == "All" else a.request.count
                   for a in exclusive)
        if need <= len(union):
            return ""
        return (f"the requests together need {need} devices and only {len(union)} match "
                "any of them")

    def _verdict(self, reasons: tuple[str, ...], undecided: bool = False,
                 chosen: Mapping[str, str] | None = None,
                 taken: Mapping[str, tuple[Device, ...]] | None = None,
                 placed: Mapping[str, tuple[str, ...]] | None = None) -> GroupVerdict:
        if reasons and self.unusable:
            reasons = (*reasons, *(f"{u}, its devices are not usable" for u in self.unusable))
        return GroupVerdict(self.group.name, self.group.nodes, reasons, chosen or {},
                            taken or {}, tuple(self.problems), undecided, placed or {})

    def _slot_name(self, alt: Alt) -> str:
        claim = self.claims[alt.claim]
        return f"{claim.name}/{alt.slot}" if claim.name else alt.slot

    def _label(self, claim: Claim, request: Request) -> str:
        if not self.several:
            return ""
        return f"claim {claim.name or '(unnamed)'} request {request.name}: "

    def _alternatives(self, ci: int, slot: RequestSlot) -> list[Alt]:
        return [self._candidates(ci, slot, request) for request in slot.alternatives]

    def _static_reason(self, alts: list[Alt]) -> str:
        if any(not a.reason for a in alts):
            return ""
        if len(alts) == 1:
            return alts[0].reason
        slot = alts[0].slot
        parts = "; ".join(f"{a.request.name}: {a.reason}" for a in alts)
        return f"no alternative of request {slot} fits ({parts})"

    def _candidates(self, ci: int, slot: RequestSlot, request: Request) -> Alt:
        claim = self.claims[ci]
        label = self._label(claim, request)
        cls = self.inventory.classes.get(request.class_name)
        if cls is None:
            raise _Abort(f"{label}device class {request.class_name} does not exist")
        class_programs = [(s, compile_selector(s.expression), f"class {cls.name}")
                          for s in cls.selectors]
        request_programs = [(s, compile_selector(s.expression),
                             f"claim {claim.namespace}/{claim.name}" if claim.name else "claim")
                            for s in request.selectors]
        for selector, program, owner in (*class_programs, *request_programs):
            if program.unsupported:
                self.problems.append(Problem(selector.path, f"{owner}: selector "
                                             f"{_quote(selector.expression)} {program.error}",
                                             "advice"))
                raise _Unjudged
            if program.error:
                self.problems.append(Problem(selector.path, program.error, "selector-invalid"))
                raise _Abort(f"{label}{owner}: selector {_quote(selector.expression)} "
                             f"{program.error}")
        by_class = [i for i, f in enumerate(self.flat)
                    if self._passes(class_programs, f, claim, label)]
        by_selector = [i for i in by_class if self._passes(request_programs, self.flat[i],
                                                           claim, label)]
        by_capacity = [i for i in by_selector if _has_capacity(self.flat[i].device, request)]
        tolerated = [i for i in by_capacity if not _untolerated(self.flat[i].device, request)]
        alt = Alt(ci, slot.name, request, tolerated)
        what = f"class {cls.name}"
        if request.selectors:
            what += f" and selector {short(request.selectors)}"
        if request.mode == "All":
            alt.reason = self._all_reason(label, what, by_selector, by_capacity, tolerated,
                                          request)
            return alt
        need = request.count
        asks = f"the claim asks for {need}"
        if len(by_class) < need:
            alt.reason = f"{label}{_match(len(by_class))} {'class ' + cls.name}, {asks}"
        elif len(by_selector) < need:
            alt.reason = f"{label}{_match(len(by_selector))} {what}, {asks}"
        elif len(by_capacity) < need:
            alt.reason = (f"{label}{_match(len(by_capacity))} {what} and "
                          f"{'has' if len(by_capacity) == 1 else 'have'} the "
                          f"capacity requested ({_amounts(request.capacity)}), {asks}")
        elif len(tolerated) < need:
            taint = _first_taint(self.flat, by_capacity, request)
            alt.reason = (f"{label}{_match(len(tolerated))} {what} without a taint "
                          f"the request does not tolerate ({taint}), {asks}")
        return alt

    def _all_reason(self, label: str, what: str, matched: list[int], with_capacity: list[int],
                    tolerated: list[int], request: Request) -> str:
        if self.unusable:
            return f"{label}allocationMode All cannot be satisfied: {self.unusable[0]}"
        if not matched:
            return f"{label}allocationMode All: no device matches {what}"
        # All takes the matching devices that have the capacity requested (the allocator
        # leaves out those that lack it), and fails on any of them it may not take.
        if not with_capacity:
            return (f"{label}allocationMode All: none of the {len(matched)} devices matching "
                    f"{what} has the capacity requested ({_amounts(request.capacity)})")
        if len(tolerated) < len(with_capacity):
            taint = _first_taint(self.flat, with_capacity, request)
            return (f"{label}allocationMode All takes every device matching {what}, and "
                    f"{len(with_capacity) - len(tolerated)} of them carry a taint the request "
                    f"does not tolerate ({taint})")
        if len(with_capacity) > MAX_DEVICES_PER_CLAIM:
            return (f"{label}allocationMode All would take {len(with_capacity)} devices, a claim "
                    f"holds at most {MAX_DEVICES_PER_CLAIM}")
        return ""

    def _passes(self, programs: Sequence[tuple[Selector, Any, str]], flat: Flat, claim: Claim,
                label: str) -> bool:
        for index, (selector, program, owner) in enumerate(programs):
            outcome = evaluate(program, flat.device)
            if outcome.error:
                kind: ProblemKind = "advice" if outcome.error.startswith("no such key") \
                    else "selector-invalid"
                where = f"{flat.device.driver}/{flat.pool.name}/{flat.device.name}"
                message = (f"{owner}: selector #{index} on device {where}: CEL runtime error: "
                           f"{outcome.error}")
                self.problems.append(Problem(selector.path, message, kind))
                raise _Abort(label + message)
            if not outcome.matches:
                return False
        return True


def _match(n: int) -> str:
    return f"{devices_text(n)} {'matches' if n == 1 else 'match'}"


def _quote(expression: str) -> str:
    return repr(expression if len(expression) <= 120 else expression[:117] + "...")


def _amounts(amounts: Mapping[str, Number]) -> str:
    return ", ".join(f"{k}={_number(v)}" for k, v in sorted(amounts.items()))


def _number(value: Number) -> str:
    value_int = int(value)
    if value_int == value:
        for suffix, scale in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
            if value_int and value_int % scale == 0:
                return f"{value_int // scale}{suffix}"
        return str(value_int)
    return str(float(value))


def _has_capacity(device: Device, request: Request) -> bool:
    for name, amount in request.capacity.items():
        have = device.capacity.get(name)
        if have is None:
            return False
        consumed = consumption(device, name, amount, have)
        if consumed is None or consumed > have:
            return False
    return True


def _untolerated(device: Device, request: Request) -> str:
    for taint in device.taints:
        if taint.effect in _BLOCKING and not any(t.tolerates(taint)
                                                 for t in request.tolerations):
            return f"{taint.key}{'=' + taint.value if taint.value else ''}:{taint.effect}"
    return ""


def _first_taint(flat: Sequence[Flat], indexes: Iterable[int], request: Request) -> str:
    for i in indexes:
        found = _untolerated(flat[i].device, request)
        if found:
            return f"{flat[i].device.name}: {found}"
    return ""


def problems_of(verdicts: Iterable[GroupVerdict]) -> list[Problem]:
    """Distinct problems over all groups (a selector error repeats on every node)."""
    seen: dict[tuple[FieldPath, str], Problem] = {}
    for verdict in verdicts:
        for problem in verdict.problems:
            seen.setdefault((problem.path, problem.kind), problem)
    return list(seen.values())
