"""The allocator's search: requests in claim order, each request's alternatives in order,
devices in first-fit order (increasing indexes, so each set of devices is tried once), with
shared counters, consumable capacity and constraints kept as it goes. The first solution wins,
as in the scheduler; a step budget bounds what one question may cost."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from policies.dra.objects import Claim, Device, Request, typed_value
from policies.dra.pools import Pool
from policies.quantity import Number

STEP_BUDGET = 20_000
MAX_DEVICES_PER_CLAIM = 32  # devices one claim's allocation may hold (AllocationResultsMaxSize)


class Budget:
    """Search steps one question may spend over all node groups, so a hostile claim costs a
    bounded amount however many groups the cluster has."""

    def __init__(self, steps: int = STEP_BUDGET):
        self.steps = steps


@dataclass(eq=False)
class Alt:
    """One request alternative with the devices that could serve it, in first-fit order."""

    claim: int
    slot: str
    request: Request
    candidates: list[int]
    reason: str = ""  # why it cannot be served at all, "" when the search may try it


@dataclass
class Flat:
    pool: Pool
    pool_index: int
    device: Device


class Exhausted(Exception):
    pass


class Search:
    """Backtracking over requests (in claim order), alternatives (in order) and devices (in
    first-fit order, increasing indexes so each set of devices is tried once)."""

    def __init__(self, claims: Sequence[Claim], flat: list[Flat], pools: Sequence[Pool],
                 budget: Budget, label: Callable[[Claim, Request], str],
                 units: list[list[Alt]]):
        self.claims = claims
        self.flat = flat
        self.budget = budget
        self.label = label
        self.units = units
        self.used: dict[int, int] = {}
        # (claim, device) -> times taken: one claim never gets a device twice, admin access
        # or not (only separate claims share a device through admin access)
        self.in_claim: dict[tuple[int, int], int] = {}
        self.counters: dict[tuple[int, str], dict[str, Number]] = {}
        for index, pool in enumerate(pools):
            for name, amounts in pool.counters.items():
                self.counters[(index, name)] = dict(amounts)
        self.capacity: dict[int, dict[str, Number]] = {}
        # claim index -> constraint index -> chosen typed values
        self.values: dict[tuple[int, int], list[Any]] = {}
        # devices each claim holds so far, and the fewest the claim's later requests need:
        # an alternative that would take the claim past its limit is not tried at all
        self.held: dict[int, int] = {}
        self.later: list[int] = []
        for unit in range(len(units)):
            claim = units[unit][0].claim
            self.later.append(sum(min(_need(a) for a in units[u]) for u in
                                  range(unit + 1, len(units)) if units[u][0].claim == claim))
        self.picked_alts: list[Alt] = []
        self.picked_devices: dict[Alt, tuple[int, ...]] = {}
        self.deepest = -1
        self.blocked: dict[str, int] = {}

    # The allocator takes the first solution; so do we.
    def place(self, unit: int) -> bool:
        if unit == len(self.units):
            return True
        self.deepest = max(self.deepest, unit)
        for alt in self.units[unit]:
            if alt.reason:
                continue
            need = _need(alt)
            held = self.held.get(alt.claim, 0)
            if held + need + self.later[unit] > MAX_DEVICES_PER_CLAIM:
                self._block("claim-limit")
                continue
            self.picked_alts.append(alt)
            self.held[alt.claim] = held + need
            if self._pick(unit, alt, need, 0, []):
                return True
            self.held[alt.claim] = held
            self.picked_alts.pop()
        return False

    def _pick(self, unit: int, alt: Alt, need: int, start: int, taken: list[int]) -> bool:
        if need == 0:
            if self.place(unit + 1):
                self.picked_devices[alt] = tuple(taken)
                return True
            return False
        candidates = alt.candidates
        every = alt.request.mode == "All"
        for position in range(start, len(candidates)):
            if len(candidates) - position < need:
                return False
            self.budget_step()
            index = candidates[position]
            undo = self._take(alt, index)
            if undo is None:
                if every:
                    return False  # All must take each matching device
                continue
            taken.append(index)
            if self._pick(unit, alt, need - 1, position + 1, taken):
                return True
            taken.pop()
            undo()
            if every:
                return False
        return False

    def budget_step(self) -> None:
        self.budget.steps -= 1
        if self.budget.steps <= 0:
            raise Exhausted

    def _block(self, why: str) -> None:
        self.blocked[why] = self.blocked.get(why, 0) + 1

    def _take(self, alt: Alt, index: int) -> Any:
        """Allocate device `index` to `alt`; an undo function, or None if it cannot."""
        flat = self.flat[index]
        device = flat.device
        request = alt.request
        admin = request.admin_access
        if not device.allow_multiple and (
                self.in_claim.get((alt.claim, index)) or (not admin and self.used.get(index))):
            self._block("taken")
            return None
        consumed: dict[str, Number] = {}
        if device.allow_multiple and not admin:
            left = self.capacity.setdefault(index, dict(device.capacity))
            for name, total in device.capacity.items():
                amount = consumption(device, name, request.capacity.get(name), total)
                consumed[name] = total if amount is None else amount
                if consumed[name] > left.get(name, 0):
                    self._block("capacity")
                    return None
        # A device consumes its counters once, however many requests share it.
        first_use = not admin and not self.used.get(index)
        if first_use:
            for counter_set, amounts in device.consumes:
                have = self.counters.get((flat.pool_index, counter_set), {})
                for name, amount in amounts.items():
                    if have.get(name, 0) < amount:
                        self._block(f"counter:{flat.pool.name}:{counter_set}:{name}")
                        return None
        touched = self._constraints(alt, device)
        if touched is None:
            return None
        mine = (alt.claim, index)
        self.in_claim[mine] = self.in_claim.get(mine, 0) + 1
        if not admin:
            self.used[index] = self.used.get(index, 0) + 1
        if first_use:
            for counter_set, amounts in device.consumes:
                have = self.counters[(flat.pool_index, counter_set)]
                for name, amount in amounts.items():
                    have[name] -= amount
        for name, amount in consumed.items():
            self.capacity[index][name] -= amount

        def undo() -> None:
            for key in touched:
                self.values[key].pop()
            self.in_claim[mine] -= 1
            if admin:
                return
            self.used[index] -= 1
            if first_use:
                for counter_set, amounts in device.consumes:
                    have = self.counters[(flat.pool_index, counter_set)]
                    for name, amount in amounts.items():
                        have[name] += amount
            for name, amount in consumed.items():
                self.capacity[index][name] += amount
        return undo

    def _constraints(self, alt: Alt, device: Device) -> list[tuple[int, int]] | None:
        claim = self.claims[alt.claim]
        touched: list[tuple[int, int]] = []
        for ci, constraint in enumerate(claim.constraints):
            names = constraint.requests
            if names and alt.request.name not in names and alt.slot not in names:
                continue
            attribute = constraint.match_attribute or constraint.distinct_attribute or ""
            raw = device.attributes.get(attribute)
            key = (alt.claim, ci)
            seen = self.values.setdefault(key, [])
            value = typed_value(raw) if raw is not None else None
            ok = value is not None and (
                (constraint.match_attribute is not None and (not seen or seen[0] == value))
                or (constraint.distinct_attribute is not None and value not in seen)
            )
            if not ok:
                for k in touched:
                    self.values[k].pop()
                kind = "matchAttribute" if constraint.match_attribute else "distinctAttribute"
                self._block(f"constraint:{kind} {attribute}")
                return None
            seen.append(value)
            touched.append(key)
        return touched

    def explain(self) -> str:
        unit = self.units[min(max(self.deepest, 0), len(self.units) - 1)]
        alt = next((a for a in unit if not a.reason), unit[0])
        label = self.label(self.claims[alt.claim], alt.request)
        constraint = next((k for k in self.blocked if k.startswith("constraint:")), None)
        counter = next((k for k in self.blocked if k.startswith("counter:")), None)
        if constraint is not None:
            return (f"{label}no set of devices for the claim's requests satisfies "
                    f"{constraint.removeprefix('constraint:')}")
        if counter is not None:
            _, pool, counter_set, name = counter.split(":", 3)
            return (f"{label}shared counter {name} of counter set {counter_set} in pool "
                    f"{pool} is exhausted: the partitions requested overlap")
        if "claim-limit" in self.blocked:
            return (f"{label}no choice of alternatives keeps the claim within "
                    f"{MAX_DEVICES_PER_CLAIM} devices")
        if "capacity" in self.blocked:
            return f"{label}the devices' remaining capacity does not cover the requests"
        return (f"{label}the requests together need more devices than match "
                f"({devices_text(len(alt.candidates))} for {alt.request.name})")


def _need(alt: Alt) -> int:
    return len(alt.candidates) if alt.request.mode == "All" else alt.request.count


def devices_text(n: int) -> str:
    return "1 device" if n == 1 else f"{n} devices"


def consumption(device: Device, name: str, requested: Number | None,
              total: Number) -> Number | None:
    policy = device.request_policies.get(name)
    if policy is None or not device.allow_multiple:
        return total if requested is None else requested
    return policy.consumed(requested, total)
