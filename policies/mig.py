"""Can a set of MIG instances be placed on N GPUs of a model?

Placement is per GPU: an instance of a profile occupies memory slots [start, start+size) for one
of the profile's allowed starts; instances may not overlap, their compute slices may not exceed
the GPU's, and at most one `+me` instance fits on a GPU.

Method: for each model, enumerate once every placement a single GPU can hold and keep the
maximal count vectors (a handful: ~40 for 7-slice parts). Fitting a request on N GPUs is then a
covering problem over those vectors, solved exactly by a memoised search on the remaining counts.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache

from policies.catalog import GPUModel, MigProfile

Counts = tuple[int, ...]


def _place(model: GPUModel) -> set[Counts]:
    """Every count vector (per profile, in table order) one GPU can hold."""
    profiles = model.profiles
    found: set[Counts] = set()
    counts = [0] * len(profiles)

    # Canonical order (profile index, then start, non-decreasing) visits each layout once.
    def walk(first: int, first_start: int, used: int, compute: int, media: int) -> None:
        found.add(tuple(counts))
        for i in range(first, len(profiles)):
            p = profiles[i]
            if compute + p.compute > model.mig_compute or (p.media and media):
                continue
            mask = (1 << p.size) - 1
            for start in p.starts:
                if i == first and start < first_start:
                    continue
                bits = mask << start
                if used & bits:
                    continue
                counts[i] += 1
                walk(i, start + p.size, used | bits, compute + p.compute, media + p.media)
                counts[i] -= 1

    walk(0, 0, 0, 0, 0)
    return found


def _maximal(vectors: set[Counts]) -> tuple[Counts, ...]:
    """Drop vectors dominated by another (any sub-multiset of a layout is a layout too)."""
    ordered = sorted(vectors, key=sum, reverse=True)
    kept: list[Counts] = []
    for v in ordered:
        if not any(all(a <= b for a, b in zip(v, k, strict=True)) for k in kept):
            kept.append(v)
    return tuple(kept)


@lru_cache(maxsize=64)
def _layouts(model: GPUModel) -> tuple[Counts, ...]:
    return _maximal(_place(model))


@lru_cache(maxsize=4096)
def _projected(model: GPUModel, indexes: tuple[int, ...]) -> tuple[Counts, ...]:
    """Maximal per-GPU layouts restricted to the requested profiles."""
    return _maximal({tuple(v[i] for i in indexes) for v in _layouts(model)})


def _lower_bound(model: GPUModel, picked: tuple[MigProfile, ...], need: Counts) -> int:
    """GPUs needed at least, by compute, memory slots, media engines and per-profile caps."""
    compute = sum(p.compute * n for p, n in zip(picked, need, strict=True))
    slots = sum(p.size * n for p, n in zip(picked, need, strict=True))
    media = sum(n for p, n in zip(picked, need, strict=True) if p.media)
    caps = max(-(-n // p.max_instances) for p, n in zip(picked, need, strict=True))
    return max(-(-compute // model.mig_compute), -(-slots // model.mig_slots), media, caps)


@lru_cache(maxsize=8192)
def _min_gpus(model: GPUModel, indexes: tuple[int, ...], need: Counts, limit: int) -> int:
    """Fewest GPUs holding `need` (counts of profiles `indexes`); limit+1 if over `limit`."""
    if not any(need):
        return 0
    picked = tuple(model.profiles[i] for i in indexes)
    floor = _lower_bound(model, picked, need)
    if limit <= 0 or floor > limit:
        return limit + 1
    best = limit + 1
    seen: set[Counts] = set()
    for layout in _projected(model, indexes):
        rest = tuple(max(n - c, 0) for n, c in zip(need, layout, strict=True))
        if rest == need or rest in seen:
            continue
        seen.add(rest)
        best = min(best, 1 + _min_gpus(model, indexes, rest, best - 2))
        if best <= floor:
            break
    return best


def _request(model: GPUModel, counts: Mapping[str, int]) -> tuple[tuple[int, ...], Counts] | None:
    """Profile indexes and counts, canonically ordered; None when a profile is unknown."""
    merged: dict[int, int] = {}
    for name, count in counts.items():
        if count <= 0:
            continue
        profile = model.profile(name)
        if profile is None:
            return None
        index = model.profiles.index(profile)
        merged[index] = merged.get(index, 0) + count
    indexes = tuple(sorted(merged))
    return indexes, tuple(merged[i] for i in indexes)


def min_gpus(model: GPUModel, counts: Mapping[str, int], limit: int = 64) -> int | None:
    """Fewest GPUs of `model` that hold these instances; None if impossible within `limit`."""
    request = _request(model, counts)
    if request is None:
        return None
    found = _min_gpus(model, *request, limit)
    return found if found <= limit else None


def fits(model: GPUModel, counts: Mapping[str, int], gpus: int) -> bool:
    """Whether the MIG instances `counts` (profile name -> count) fit on `gpus` GPUs of `model`.

    Unknown profile names never fit; zero counts are ignored.
    """
    request = _request(model, counts)
    if request is None:
        return False
    indexes, need = request
    if not indexes:
        return True
    if not model.mig_capable or gpus <= 0:
        return False
    return _min_gpus(model, indexes, need, gpus) <= gpus


def max_instances(model: GPUModel, profile_name: str, gpus: int = 1) -> int:
    """Most instances of one profile on `gpus` GPUs, derived from the placements."""
    profile = model.profile(profile_name)
    if profile is None or gpus <= 0:
        return 0
    index = model.profiles.index(profile)
    return max(v[0] for v in _projected(model, (index,))) * gpus
