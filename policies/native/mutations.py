"""A policy's `inject` as one MutatingAdmissionPolicy JSON patch (policies/mutate.py's plan for
this policy alone): tolerations, nodeSelector and node affinity are atomic in the Pod API, so
ApplyConfiguration may not change them; a JSON patch may. Each op looks at what is there first,
so a missing list or map is added whole, an entry already there is never added twice, and a
second run (reinvocation, or another policy's) finds nothing to do.

The expression is CEL returning a list of `JSONPatch{op:, path:, value:}`; pointers into
lists come from two-variable comprehensions and list-of-lists are flattened (Kubernetes 1.34,
where mutating admission policies start).
"""

from __future__ import annotations

from typing import Any

from policies.model import GPUPolicy
from policies.mutate import HIDDEN, VISIBLE_DEVICES, _dump, _toleration_key
from policies.native import cel_parts as p
from policies.shape import PREFERRED, REQUIRED
from policies.workloads import PodSpecLocation, WorkloadKind


def to_cel(value: Any) -> str:
    """A JSON value as a CEL literal. Kubernetes' CEL refuses a list or map literal whose items
    differ in type (HomogeneousAggregateLiterals): a map's values are each dyn(), and so are a
    list's items unless all are strings."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return p.lit(value)
    if isinstance(value, dict):
        return "{" + ", ".join(f"{p.lit(k)}: dyn({to_cel(v)})" for k, v in value.items()) + "}"
    if isinstance(value, list | tuple):
        if all(isinstance(v, str) for v in value):
            return "[" + ", ".join(p.lit(v) for v in value) + "]"
        return "[" + ", ".join(f"dyn({to_cel(v)})" for v in value) + "]"
    raise p.Unsupported(f"a value of type {type(value).__name__}")


def op(path: str, value: str) -> str:
    """One patch op (`path` a CEL string expression, `value` CEL)."""
    return f'JSONPatch{{op: "add", path: {path}, value: {value}}}'


def escape(step: str) -> str:
    return step.replace("~", "~0").replace("/", "~1")


def pointer(steps: tuple[str, ...]) -> str:
    return "".join("/" + escape(s) for s in steps)


def _same(h: str, toleration: dict[str, Any]) -> str:
    """Toleration `h` in the pod equals `toleration` as policies/mutate.py compares them."""
    key, operator, value, effect, seconds = _toleration_key(toleration)
    parts = [f"(has({h}.key) ? {h}.key : '') == {p.lit(key)}",
             f"(has({h}.operator) && {h}.operator != '' ? {h}.operator : 'Equal') == "
             f"{p.lit(operator)}",
             f"(has({h}.value) ? {h}.value : '') == {p.lit(value)}",
             f"(has({h}.effect) ? {h}.effect : '') == {p.lit(effect)}",
             f"has({h}.tolerationSeconds) && {h}.tolerationSeconds == {seconds}"
             if seconds is not None else f"!has({h}.tolerationSeconds)"]
    return "(" + " && ".join(parts) + ")"


def _at(at: str, rest: str) -> str:
    return at + " + " + p.lit(rest)


def _tolerations(policy: GPUPolicy, s: str, at: str) -> str:
    wanted: dict[tuple[Any, ...], dict[str, Any]] = {}
    for toleration in map(_dump, policy.spec.inject.tolerations):
        wanted.setdefault(_toleration_key(toleration), toleration)
    if not wanted:
        return ""
    items = list(wanted.values())
    append = _at(at, "/tolerations/-")
    each = " + ".join(f"(!{s}.tolerations.exists(h, {_same('h', t)}) ? "
                      f"[{op(append, to_cel(t))}] : [])" for t in items)
    whole = op(_at(at, "/tolerations"), to_cel(items))
    return f"(!has({s}.tolerations) ? [{whole}] : {each})"


def _node_selector(policy: GPUPolicy, s: str, at: str) -> str:
    selector = dict(sorted(policy.spec.inject.node_selector.items()))
    if not selector:
        return ""
    each = " + ".join(
        f"(!({p.lit(k)} in {s}.nodeSelector) ? "
        f"[{op(_at(at, '/nodeSelector/' + escape(k)), p.lit(v))}] : [])"
        for k, v in selector.items())
    whole = op(_at(at, "/nodeSelector"), to_cel(selector))
    return f"(!has({s}.nodeSelector) ? [{whole}] : {each})"


def _single(policy: GPUPolicy, s: str, at: str, fields: str) -> list[str]:
    out = []
    inject = policy.spec.inject
    for name, value in (("runtimeClassName", inject.runtime_class_name),
                        ("priorityClassName", inject.priority_class_name)):
        if value:
            set_it = op(_at(at, "/" + name), p.lit(value))
            out.append(f"({p.lit(name)} in {fields} && (!has({s}.{name}) || {s}.{name} == '') "
                       f"? [{set_it}] : [])")
    return out


def _same_requirement(h: str, r: dict[str, Any]) -> str:
    """Node selector requirement `h` in the pod equals `r` (policies/mutate.py compares the
    dicts: key, operator and values, an absent list being an empty one)."""
    values = to_cel(list(r.get("values", [])))
    return (f"({h}.key == {p.lit(r['key'])} && {h}.operator == {p.lit(r['operator'])} && "
            f"(has({h}.values) ? {h}.values : []) == {values})")


def _same_term(h: str, t: dict[str, Any]) -> str:
    """Preferred scheduling term `h` equals `t`: its weight, and each part of its preference
    requirement by requirement, in order."""
    parts = [f"{h}.weight == {t['weight']}"]
    preference = t.get("preference", {})
    for name in ("matchExpressions", "matchFields"):
        wanted = preference.get(name, [])
        have = f"{h}.preference.{name}"
        if not wanted:
            parts.append(f"(!has({h}.preference) || !has({have}) || size({have}) == 0)")
            continue
        same = " && ".join(_same_requirement(f"{have}[{i}]", r) for i, r in enumerate(wanted))
        parts.append(f"has({h}.preference) && has({have}) && size({have}) == {len(wanted)} "
                     f"&& {same}")
    return "(" + " && ".join(parts) + ")"


def _node_affinity(policy: GPUPolicy, s: str, at: str) -> str:
    """The policy's required requirements ANDed into every required term (a term list made
    when there is none), its preferred terms appended when not there."""
    wanted = policy.spec.inject.node_affinity
    if wanted is None or not (wanted.required or wanted.preferred):
        return ""
    required = [_dump(r) for r in wanted.required]
    preferred = [_dump(t) for t in wanted.preferred]
    whole: dict[str, Any] = {}
    if required:
        whole[REQUIRED] = {"nodeSelectorTerms": [{"matchExpressions": required}]}
    if preferred:
        whole[PREFERRED] = preferred
    na = f"{s}.affinity.nodeAffinity"
    base = "/affinity/nodeAffinity"
    parts = []
    if required:
        req, terms = f"{na}.{REQUIRED}", f"{na}.{REQUIRED}.nodeSelectorTerms"
        terms_at = f"{base}/{REQUIRED}/nodeSelectorTerms"
        fresh = to_cel([{"matchExpressions": required}])
        term_at = _at(at, terms_at + "/") + " + string(i) + "
        append = term_at + p.lit("/matchExpressions/-")
        per_term = " + ".join(
            f"(has(term.matchExpressions) ? (!term.matchExpressions.exists(h, "
            f"{_same_requirement('h', r)}) ? [{op(append, to_cel(r))}] : []) : [])"
            for r in required)
        made = op(term_at + p.lit("/matchExpressions"), to_cel(required))
        missing = f"(!has(term.matchExpressions) ? [{made}] : [])"
        parts.append(
            f"(!has({req}) ? [{op(_at(at, base + '/' + REQUIRED), to_cel(whole[REQUIRED]))}] : "
            f"!has({terms}) || size({terms}) == 0 ? [{op(_at(at, terms_at), fresh)}] : "
            f"{terms}.transformList(i, term, true, {missing} + {per_term}).flatten())")
    if preferred:
        pref = f"{na}.{PREFERRED}"
        each = " + ".join(
            f"(!{pref}.exists(h, {_same_term('h', t)}) ? "
            f"[{op(_at(at, base + '/' + PREFERRED + '/-'), to_cel(t))}] : [])" for t in preferred)
        parts.append(f"(!has({pref}) ? [{op(_at(at, base + '/' + PREFERRED), to_cel(preferred))}]"
                     f" : {each})")
    inside = " + ".join(parts)
    return (f"(!has({s}.affinity) ? [{op(_at(at, '/affinity'), to_cel({'nodeAffinity': whole}))}]"
            f" : !has({na}) ? [{op(_at(at, base), to_cel(whole))}] : {inside})")


def _limits(s: str, at: str) -> str:
    """A GPU asked for in a container's requests and not its limits gets the same limit: a
    missing `limits` is added empty first, then each name (ops apply in order)."""
    out = []
    for key in ("initContainers", "containers"):
        req = "c.resources.requests"
        missing = f"{p.accelerator('n')} && !(has(c.resources.limits) && n in c.resources.limits)"
        base = f"{at} + {p.lit('/' + key + '/')} + string(i) + '/resources/limits'"
        empty = op(base, "{}")
        each = op(f"{base} + '/' + jsonpatch.escapeKey(n)", f"{req}[n]")
        body = (f"(!has(c.resources.limits) && {req}.exists(n, {missing}) ? [{empty}] : []) + "
                f"{req}.filter(n, {missing}).map(n, {each})")
        out.append(f"({has_list(s, key)} ? {s}.{key}.transformList(i, c, has(c.resources) && "
                   f"has(c.resources.requests), {body}).flatten() : [])")
    return " + ".join(out)


def has_list(s: str, key: str) -> str:
    return f"has({s}.{key})"


def _hide(s: str, at: str) -> str:
    """Containers without a GPU get NVIDIA_VISIBLE_DEVICES=none (ephemeral ones aside)."""
    hidden = to_cel(HIDDEN)
    out = []
    for key in ("initContainers", "containers"):
        base = f"{at} + {p.lit('/' + key + '/')} + string(i) + '/env'"
        wanted = (f"!{p.gpu_container('c')} && !(has(c.env) && c.env.exists(e, has(e.name) && "
                  f"e.name == {p.lit(VISIBLE_DEVICES)}))")
        out.append(f"({has_list(s, key)} ? {s}.{key}.transformList(i, c, {wanted}, has(c.env) "
                   f"? {op(base + ' + ' + p.lit('/-'), hidden)} : {op(base, f'[{hidden}]')}) "
                   ": [])")
    return " + ".join(out)


def spec_ops(policy: GPUPolicy, s: str, at: str, fields: str, is_gpu: str) -> list[str]:
    """The ops for pod spec `s` found at pointer `at` (a CEL string expression), writing
    only the pod-level fields in the CEL list `fields`, as up to three lists of ops applied in
    turn (each its own expression, under the cost limit on its own): the hidden devices, the
    limits, the pod-level fields."""
    inject = policy.spec.inject
    out = [_hide(s, at)] if inject.hide_gpus_from_non_gpu_containers else []
    if inject.gpu_limits_from_requests:
        out.append(f"({is_gpu} ? {_limits(s, at)} : [])")
    fields_ops = []
    tolerations = _tolerations(policy, s, at)
    if tolerations:
        fields_ops.append(f"('tolerations' in {fields} ? {tolerations} : [])")
    selector = _node_selector(policy, s, at)
    if selector:
        fields_ops.append(f"('nodeSelector' in {fields} ? {selector} : [])")
    affinity = _node_affinity(policy, s, at)
    if affinity:
        fields_ops.append(f"('affinity' in {fields} ? {affinity} : [])")
    fields_ops += _single(policy, s, at, fields)
    if fields_ops:
        out.append(f"({is_gpu} ? {' + '.join(fields_ops)} : [])")
    return out


def _target(pointer_expr: str, spec: str, kind: WorkloadKind) -> str:
    return (f'{{"p": dyn({pointer_expr}), "s": dyn({spec}), '
            f'"f": dyn({p.lits(sorted(kind.pod_fields))})}}')


def location_targets(kind: WorkloadKind, location: PodSpecLocation) -> str:
    """The pod specs at `location`, each as {p: its JSON pointer, s: it, f: its kind's pod
    fields}."""
    many = [i for i, step in enumerate(location) if step in ("[]", "*")]
    if not many:
        guard, expr = p.chain("object", location)
        return f"(({guard}) ? [{_target(p.lit(pointer(location)), expr, kind)}] : [])"
    at = many[0]
    before, step, after = location[:at], location[at], location[at + 1:]
    guard, outer = p.chain("object", before)
    inner_guard, inner = p.chain("x", after)
    key = "string(i)" if step == "[]" else "jsonpatch.escapeKey(i)"
    where = f"{p.lit(pointer(before) + '/')} + {key} + {p.lit(pointer(after))}"
    return (f"(({guard}) ? {outer}.transformList(i, x, {inner_guard}, "
            f"{_target(where, inner, kind)}) : [])")


def supported(kind: WorkloadKind) -> str:
    """Why a kind's pod specs get no mutating policy here, or ""."""
    if kind.containers:
        return (f"{kind.kind} ({kind.group or 'core'}) has containers outside the pod spec's "
                "lists")
    return p.kind_supported(kind)


def found(kinds: tuple[WorkloadKind, ...]) -> str:
    """The `found` variable: every pod spec of the object, with where it is."""
    return p.dispatch(kinds, lambda kind: " + ".join(
        location_targets(kind, loc) for loc in kind.locations) or "[]")


def targets() -> str:
    """The `targets` variable: each of `found` with g, whether it asks for a GPU, worked out
    once for every patch."""
    is_gpu = f"({p.containers('t.s')}.exists(g, {p.gpu_container('g')}) || variables.kai)"
    return (f'variables.found.map(t, {{"p": dyn(t.p), "s": dyn(t.s), "f": dyn(t.f), '
            f'"g": dyn({is_gpu})}})')


def patch_expressions(policy: GPUPolicy) -> list[str]:
    """The JSON patches of `policy` over `variables.targets`, applied in turn; none when it
    injects nothing."""
    return [f"variables.targets.map(t, {ops}).flatten()"
            for ops in spec_ops(policy, "t.s", "t.p", "t.f", "t.g")]
