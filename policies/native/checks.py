"""The exported rules as ValidatingAdmissionPolicy validations: for each, the CEL that holds
when the object passes and the message the engine would give when it does not.

Every check walks `variables.specs` (the object's pod specs) and their containers (`Where`
says where those are). A translator returns None when the policy
does not set the rule, raises cel_parts.Unsupported when it cannot be said in CEL here.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from fractions import Fraction
from typing import NamedTuple

from policies.catalog import Catalog
from policies.inventory import PRODUCT_LABELS
from policies.model import GPUPolicy
from policies.native import cel_parts as p
from policies.resources import _FIXED
from policies.rules.gpu_sharing_modes_mixed import _NAMES as MODE_NAMES
from policies.rules.shared_memory_over_policy import TO_GIB
from policies.rules.visible_devices_bypass import NAME as VISIBLE
from policies.rules.visible_devices_bypass import NO_DEVICES
from policies.shape import REQUIRED

normalize = Catalog.normalize


class Check(NamedTuple):
    rule: str
    expression: str  # true: the object passes
    message: str  # a CEL expression giving the engine's words for what failed


class Where(NamedTuple):
    """Where a check reads: the object's pod specs, the containers of pod spec `s`, whether
    the object asks for a GPU share by annotation."""

    specs: str = "variables.specs"
    slots: str = ""  # the container-like slots of pod spec `s` (policies.kinds)
    containers: str = p.containers("s")
    kai: str = "variables.kai"
    # (label, value) the policies before this one (priority, then name) inject: their value
    # wins, and the engine reports the clash under them, not under this one
    earlier: tuple[tuple[str, str], ...] = ()


def _name(c: str) -> str:
    return f"(has({c}.name) ? '\"' + string({c}.name) + '\"' : '\"\"')"


def _join(lists: str) -> str:
    return f"{lists}.filter(t, t != '').join('; ')"


def _per_name(where: Where, rule: str, bad: Callable[[str, str], str],
              words: Callable[[str, str], str]) -> Check:
    """A rule over each (container, resource name) pair."""
    def each(c: str) -> str:
        return f"{p.names(c)}.filter(n, {bad(c, 'n')}).map(n, {words(c, 'n')}).join('; ')"
    cs = where.containers
    expression = (f"!{where.specs}.exists(s, {cs}.exists(c, {p.names('c')}.exists(n, "
                  f"{bad('c', 'n')})))")
    per_container = _join(f"{cs}.map(c, {each('c')})")
    message = _join(f"{where.specs}.map(s, {per_container})")
    return Check(rule, expression, message)


def gpu_specs(where: Where) -> str:
    """The `gpu` variable: whether each pod spec asks for a GPU (policies.resources.PodDemand
    .gpu, DRA claims aside), worked out once for every check that asks."""
    return f"{where.specs}.map(s, {where.containers}.exists(g, {p.gpu_container('g')}) || " \
           f"{where.kai})"


def gpu_spec(where: Where) -> str:
    """Pod spec `s`, the `i`th, asks for a GPU."""
    return "variables.gpu[i]"


def _per_fixed(where: Where, rule: str, names: tuple[str, ...],
               bad: Callable[[str, str], str], words: Callable[[str, str], str]) -> Check:
    """A rule over each container and each of a fixed list of resource names."""
    listed = p.lits(names)
    cs = where.containers
    each = f"{listed}.filter(n, {bad('c', 'n')}).map(n, {words('c', 'n')}).join('; ')"
    per_container = _join(f"{cs}.map(c, {each})")
    return Check(rule, f"!{where.specs}.exists(s, {cs}.exists(c, {listed}.exists(n, "
                 f"{bad('c', 'n')})))", _join(f"{where.specs}.map(s, {per_container})"))


def max_per_container(policy: GPUPolicy, where: Where) -> Check | None:
    limit = policy.spec.rules.max_gpus_per_container
    if limit is None:
        return None
    # whole devices by the device plugin; DRA's (claims, DeviceClass names) the webhook counts
    return _per_fixed(
        where, "gpu-max-per-container", p.WHOLE,
        lambda c, n: f"{p.amount(c, n)}.isGreaterThan(quantity('{limit}'))",
        lambda c, n: f"'container ' + {_name(c)} + ' asks for ' + {p.raw(c, n)} + ' ' + {n} + "
                     f"'; at most {limit} allowed'")


def max_per_pod(policy: GPUPolicy, where: Where) -> list[Check] | None:
    limit = policy.spec.rules.max_gpus_per_pod
    if limit is None:
        return None
    whole = p.lits(p.WHOLE)
    out = []
    for over, total in p.total_over("s", "n", f"{float(limit)!r}", where.slots):
        # each name's total worked out once (in the names' order), then the ones over the limit
        totals = f"{whole}.map(n, {total})"
        words = (f"{totals}.transformList(k, v, v > {float(limit)!r}, 'the pod holds ' + "
                 f"{p.count_text('v')} + ' ' + {whole}[k] + ' at once; at most {limit} "
                 "allowed').join('; ')")
        out.append(Check(
            "gpu-max-per-pod", f"!{where.specs}.exists(s, {whole}.exists(n, {over}))",
            _join(f"{where.specs}.map(s, {words})")))
    return out


def resource_not_allowed(policy: GPUPolicy, where: Where) -> Check | None:
    allowed = policy.spec.rules.allowed_resources
    if allowed is None:
        return None
    matches = " || ".join(p.glob(g, "n") for g in allowed) or "false"
    listed = ", ".join(allowed)
    return _per_name(
        where, "gpu-resource-not-allowed",
        lambda c, n: f"{p.accelerator(n)} && {p.amount(c, n)}.sign() > 0 && !({matches})",
        lambda c, n: f"{n} + ' is not allowed here; allowed: ' + {p.lit(listed)}")


def mig_profile_not_allowed(policy: GPUPolicy, where: Where) -> Check | None:
    mig = policy.spec.rules.mig
    if mig is None or mig.allowed_profiles is None:
        return None
    allowed = {q.replace(".me", "+me") for q in mig.allowed_profiles}
    # the names whose profile (policies.resources.mig_profile) is allowed
    names = sorted({f"nvidia.com/mig-{q}" for q in allowed}
                   | {f"nvidia.com/mig-{q[:-3]}.me" for q in allowed if q.endswith("+me")})
    listed = ", ".join(mig.allowed_profiles)
    profile = ("(n.endsWith('.me') ? n.substring(15, size(n) - 3) + '+me' : n.substring(15))")
    return _per_name(
        where, "mig-profile-not-allowed",
        lambda c, n: f"{n}.startsWith('nvidia.com/mig-') && {p.amount(c, n)}.sign() > 0 && "
                     f"!({n} in {p.lits(names)})",
        lambda c, n: f"'MIG profile ' + {profile} + ' is not allowed here; allowed: ' + "
                     f"{p.lit(listed)}")


def shared_memory(policy: GPUPolicy, where: Where) -> Check | None:
    shared = policy.spec.rules.shared
    if shared is None or shared.max_memory_gib_per_container is None:
        return None
    limit = shared.max_memory_gib_per_container
    over = " || ".join(
        f"({{n}} == {p.lit(name)} && {{a}}.isGreaterThan(quantity('{_text(limit / factor)}')))"
        for name, factor in TO_GIB.items())
    return _per_fixed(
        where, "shared-memory-over-policy", tuple(TO_GIB),
        lambda c, n: "(" + over.replace("{n}", n).replace("{a}", p.amount(c, n)) + ")",
        lambda c, n: f"'container ' + {_name(c)} + ' asks for ' + {p.raw(c, n)} + ' ' + {n} + "
                     f"' (' + '%.1f'.format([{p.amount(c, n)}.asApproximateFloat() * "
                     f"{_factor(n)}]) + ' GiB); at most {limit} GiB allowed'")


def _factor(n: str) -> str:
    """GiB per unit of resource `n` (one of TO_GIB's), as a CEL double."""
    out = "0.0"
    for name, factor in reversed(TO_GIB.items()):
        out = f"({n} == {p.lit(name)} ? {float(factor)!r} : {out})"
    return out


def _text(value: Fraction) -> str:
    if value.denominator != 1:
        raise p.Unsupported(f"{value} is not a whole amount")
    return str(value.numerator)


def visible_devices(policy: GPUPolicy, where: Where) -> Check | None:
    if not policy.spec.rules.deny_visible_devices_bypass:
        return None
    none = p.lits(sorted(NO_DEVICES))
    value = "(type(e.value) == string ? e.value : string(e.value))"
    bad_env = (f"has(e.name) && e.name == {p.lit(VISIBLE)} && has(e.value) && e.value != null "
               f"&& !({value}.trim().lowerAscii() in {none})")
    bad = f"!{p.gpu_container('c')} && has(c.env) && c.env.exists(e, {bad_env})"
    cs = where.containers
    words = (f"c.env.filter(e, {bad_env}).map(e, 'container ' + {_name('c')} + ' requests no "
             f"GPU but sets {VISIBLE}=' + {value} + ': request a GPU resource or set it to "
             "none').join('; ')")
    per_container = _join(f"{cs}.filter(c, {bad}).map(c, {words})")
    return Check("visible-devices-bypass", f"!{where.specs}.exists(s, {cs}.exists(c, {bad}))",
                 _join(f"{where.specs}.map(s, {per_container})"))


def privileged(policy: GPUPolicy, where: Where) -> Check | None:
    if not policy.spec.rules.deny_privileged_gpu_containers:
        return None
    bad = ("has(c.securityContext) && has(c.securityContext.privileged) && "
           "c.securityContext.privileged == true")
    cs = where.containers
    return Check(
        "privileged-gpu-container",
        f"!{where.specs}.exists(i, s, {gpu_spec(where)} && {cs}.exists(c, {bad}))",
        _join(f"{where.specs}.transformList(i, s, {gpu_spec(where)} ? {cs}.filter(c, {bad}).map(c, "
              f"'container ' + {_name('c')} + ' is privileged in a GPU pod; it would see every "
              "GPU of the node').join('; ') : '')"))


def node_selector_conflict(policy: GPUPolicy, where: Where) -> Check | None:
    """The pod names another value for a label the policy's nodeSelector injection sets (the
    mutating policy has added the label where it was missing). A value an earlier policy
    injects is that policy's to judge (policies/mutate.py: the first policy per key wins)."""
    selector = policy.spec.inject.node_selector
    if not selector:
        return None

    def clash(k: str, v: str) -> str:
        theirs = sorted({value for key, value in where.earlier if key == k})
        have = f"s.nodeSelector[{p.lit(k)}]"
        spared = f" && !({have} in {p.lits(theirs)})" if theirs else ""
        return f"({p.lit(k)} in s.nodeSelector && {have} != {p.lit(v)}{spared})"
    clashes = " || ".join(clash(k, v) for k, v in sorted(selector.items()))
    words = " + ".join(
        f"({clash(k, v)} ? 'nodeSelector {k}=' + string(s.nodeSelector[{p.lit(k)}]) + "
        f"' conflicts with {k}={v} that policy {policy.name} requires; ' : '')"
        for k, v in sorted(selector.items()))
    bad = f"{gpu_spec(where)} && has(s.nodeSelector) && ({clashes})"
    return Check("node-selector-conflict", f"!{where.specs}.exists(i, s, {bad})",
                 _join(f"{where.specs}.transformList(i, s, {bad} ? {words} : '')"))


def _model_regex(allowed: Sequence[str], joined: bool = False) -> str:
    """What a product label value must match to be one of the models `allowed`
    (policies.catalog.models_equal: case, surrounding spaces, spaces for dashes, one `nvidia-`
    prefix and the `-MIG-...` and `-SHARED` suffixes GPU feature discovery writes). `joined`:
    a list of values joined by commas, every one of them a model allowed (a label value has no
    comma, so the suffix stops at one)."""
    def one(model: str) -> str:
        body = "[- ]".join(re.escape(part) for part in model.split("-"))
        return f"nvidia[- ]{body}" if model.startswith("nvidia-") else f"(nvidia[- ])?{body}"
    models = "|".join(one(normalize(a)) for a in allowed)
    value = f"\\s*({models})(([- ]mig[- ][^,]*)|[- ]mig)?([- ]shared)?\\s*"
    return f"(?i)^{value}(,{value})*$" if joined else f"(?i)^{value}$"


def model_not_allowed(policy: GPUPolicy, where: Where) -> Check | None:
    """The models a GPU pod pins itself to (policies.view.targeted_products: the product
    labels of its nodeSelector, `In` values of its required node affinity) are allowed."""
    allowed = policy.spec.rules.allowed_models
    if allowed is None:
        return None

    pattern = p.lit(_model_regex(allowed)) if allowed else ""
    every = p.lit(_model_regex(allowed, joined=True)) if allowed else ""

    def ok(v: str) -> str:
        return f"{v}.matches({pattern})" if allowed else "false"
    labels = p.lits(PRODUCT_LABELS)
    required = f"s.affinity.nodeAffinity.{REQUIRED}"
    terms = (f"(has(s.affinity) && has(s.affinity.nodeAffinity) && has({required}) && "
             f"has({required}.nodeSelectorTerms) ? {required}.nodeSelectorTerms : [])")
    pins = f"e.key in {labels} && e.operator == 'In' && has(e.values)"
    selected = f"(has(s.nodeSelector) ? {labels}.filter(k, k in s.nodeSelector) : [])"
    bad_selector = f"{selected}.exists(k, !({ok('s.nodeSelector[k]')}))"
    all_ok = f"(size(e.values) == 0 || e.values.join(',').matches({every}))" if allowed \
        else "size(e.values) == 0"
    bad_terms = (f"{terms}.exists(t, has(t.matchExpressions) && t.matchExpressions.exists(e, "
                 f"{pins} && !{all_ok}))")
    bad = f"{gpu_spec(where)} && ({bad_selector} || {bad_terms})"
    said = f"' is not allowed here; allowed: ' + {p.lit(', '.join(allowed))}"
    from_selector = (f"{selected}.filter(k, !({ok('s.nodeSelector[k]')})).map(k, 'GPU model ' "
                     f"+ s.nodeSelector[k] + {said})")
    # one regex over each requirement's values joined: per value would cost ten times more
    from_terms = (f"{terms}.map(t, has(t.matchExpressions) ? t.matchExpressions.filter(e, "
                  f"{pins} && !{all_ok}).map(e, 'GPU model ' + e.values.join(' or ') + "
                  f"{said}).join('; ') : '')")
    words = _join(f"({from_selector} + {from_terms})")
    # (the message leaves out the GPU test the expression made: its cost would double)
    return Check("gpu-model-not-allowed", f"!{where.specs}.exists(i, s, {bad})",
                 _join(f"{where.specs}.map(s, {words})"))


# The sharing families gpu-sharing-modes-mixed tells apart, in its (sorted) order.
FAMILIES = ("gpushare", "hami", "volcano-gpushare", "volcano-vgpu", "whole")


def families(where: Where) -> str:
    """The `families` variable: per pod spec, whether it asks for a positive amount of each of
    FAMILIES (policies.resources.PodDemand.families), in that order."""
    def member(family: str, n: str) -> str:
        listed = p.lits(sorted(k for k, r in _FIXED.items() if r.family == family))
        if family == "whole":  # partitioned MI300 names are whole devices too
            return f"({n} in {listed} || ({n}.startsWith('amd.com/') && {n}.contains('_nps')))"
        return f"{n} in {listed}"
    flags = ", ".join(
        f"{where.containers}.exists(c, {p.names('c')}.exists(n, {member(f, 'n')} && "
        f"{p.amount('c', 'n')}.sign() > 0))" for f in FAMILIES)
    return f"{where.specs}.map(s, [{flags}])"


def sharing_modes_mixed(policy: GPUPolicy, where: Where) -> Check | None:
    """A fact: one pod asks for two sharing families (HAMi counts GPUs with whole-GPU names)."""
    flags = "variables.families[i]"
    whole, hami = FAMILIES.index("whole"), FAMILIES.index("hami")
    counted = " + ".join(
        f"({flags}[{k}] && !{flags}[{hami}] ? 1 : 0)" if k == whole else f"({flags}[{k}] ? 1 : 0)"
        for k in range(len(FAMILIES)))
    bad = f"({counted}) > 1"
    modes = ", ".join(
        f"{flags}[{k}] && !{flags}[{hami}] ? {p.lit(MODE_NAMES[f])} : ''" if k == whole
        else f"{flags}[{k}] ? {p.lit(MODE_NAMES[f])} : ''" for k, f in enumerate(FAMILIES))
    words = f"'the pod mixes ' + [{modes}].filter(m, m != '').join(' and ') + '; use one'"
    return Check("gpu-sharing-modes-mixed", f"!{where.specs}.exists(i, s, {bad})",
                 _join(f"{where.specs}.transformList(i, s, {bad} ? {words} : '')"))


# Facts (INTRINSIC rules): every governed GPU pod is held to them, whatever the policy sets.
FACT_TRANSLATORS: dict[str, Callable[[GPUPolicy, Where], Check | list[Check] | None]] = {
    "gpu-sharing-modes-mixed": sharing_modes_mixed,
}


# rule id -> translator, in the engine's report order
TRANSLATORS: dict[str, Callable[[GPUPolicy, Where], Check | list[Check] | None]] = {
    "gpu-resource-not-allowed": resource_not_allowed,
    "gpu-max-per-pod": max_per_pod,
    "gpu-max-per-container": max_per_container,
    "gpu-model-not-allowed": model_not_allowed,
    "mig-profile-not-allowed": mig_profile_not_allowed,
    "shared-memory-over-policy": shared_memory,
    "visible-devices-bypass": visible_devices,
    "privileged-gpu-container": privileged,
    "node-selector-conflict": node_selector_conflict,
}
