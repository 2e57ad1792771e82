"""CEL text for what every exported rule reads: the pod specs of an object, their containers,
the accelerator names and a container's effective amount of one, as policies/resources.py reads
them (limits win over requests; an unparsable or negative value is not an amount).

Everything is written against `object` as the API server hands it to an admission policy; the
expressions only use what Kubernetes 1.32 has (optionals are avoided, `has()` guards each step),
two-variable comprehensions included (an init container's place among the sidecars).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable

from policies.dra.claims import GPU_DRIVERS
from policies.resources import _FIXED, DEVICE_CLASS_PREFIX, KAI_DEVICES, KAI_FRACTION, KAI_MEMORY
from policies.workloads import PodSpecLocation, WorkloadKind

_IDENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_RESERVED = frozenset({"in", "as", "break", "const", "continue", "else", "for", "function", "if",
                       "import", "let", "loop", "package", "namespace", "return", "var", "void",
                       "while", "true", "false", "null"})
ACCELERATORS = tuple(sorted(_FIXED))
WHOLE = tuple(sorted(n for n, r in _FIXED.items() if r.family == "whole"))
NOT_GPU = tuple(sorted(n for n, r in _FIXED.items() if not r.counts_as_gpu))
CONTAINER_LISTS = ("initContainers", "containers", "ephemeralContainers")


class Unsupported(ValueError):
    """What CEL here cannot say; the message is the reason, for the export's notes."""


def lit(text: str) -> str:
    """A CEL string literal (JSON's escapes are CEL's)."""
    return json.dumps(text, ensure_ascii=False)


def lits(texts: Iterable[str]) -> str:
    return "[" + ", ".join(lit(t) for t in texts) + "]"


def has(expr: str, name: str) -> str:
    """`has(expr.name)`, or `"name" in expr` for a name CEL cannot write after a dot."""
    if _IDENT.match(name) and name not in _RESERVED:
        return f"has({expr}.{name})"
    return f"{lit(name)} in {expr}"


def field(expr: str, name: str) -> str:
    if _IDENT.match(name) and name not in _RESERVED:
        return f"{expr}.{name}"
    return f"{expr}[{lit(name)}]"


def chain(expr: str, steps: tuple[str, ...]) -> tuple[str, str]:
    """(the guard that every step is there, the expression of the last one)."""
    guards = []
    for step in steps:
        guards.append(has(expr, step))
        expr = field(expr, step)
    return (" && ".join(guards) or "true"), expr


def located(root: str, location: PodSpecLocation, var: str = "x") -> str:
    """A CEL list of the values at `location` (a kinds-table path) under `root`; one level of
    `[]` or `*` at most (every bundled kind's paths have at most one)."""
    many = [i for i, step in enumerate(location) if step in ("[]", "*")]
    if len(many) > 1:
        raise Unsupported("a path with more than one `[]` or `*`")
    if not many:
        guard, expr = chain(root, location)
        return f"({guard} ? [{expr}] : [])"
    at = many[0]
    before, step, after = location[:at], location[at], location[at + 1:]
    guard, outer = chain(root, before)
    item = var if step == "[]" else f"{outer}[{var}]"
    inner_guard, inner = chain(item, after)
    return f"({guard} ? {outer}.filter({var}, {inner_guard}).map({var}, {inner}) : [])"


def kind_supported(kind: WorkloadKind) -> str:
    """Why the pod specs of `kind` cannot be read here, or ""."""
    for slot in kind.containers:
        if slot.gpu_field or slot.resources_field != "resources":
            return (f"{kind.kind} ({kind.group or 'core'}) keeps a container's GPUs under "
                    f"`{slot.gpu_field or slot.resources_field}`")
    if kind.fields_at:
        return f"{kind.kind} ({kind.group or 'core'}) keeps its pod fields apart"
    try:
        for location in kind.locations:
            located("object", location)
        for slot in kind.containers:
            located("s", slot.location)
    except Unsupported as exc:
        return f"{kind.kind} ({kind.group or 'core'}) has {exc}"
    return ""


def request_is(kind: WorkloadKind) -> str:
    return f"{RESOURCE} == {lit(kind.group + '/' + kind.resource)}"


# The request's group/resource: a variable of every exported policy, the key of dispatch().
RESOURCE_EXPRESSION = "request.resource.group + '/' + request.resource.resource"
RESOURCE = "variables.resource"


def dispatch(kinds: Iterable[WorkloadKind], branch: Callable[[WorkloadKind], str]) -> str:
    """`branch(kind)` for whichever of `kinds` the request is, else []: a balanced tree of
    conditionals on the resource (one branch evaluated, the nesting shallow: cel-cpp stops at
    32 levels)."""
    items = sorted({f"{k.group}/{k.resource}": k for k in kinds}.items())
    if not items:
        return "[]"

    def tree(part: list[tuple[str, WorkloadKind]]) -> str:
        if len(part) == 1:
            key, kind = part[0]
            return f"({RESOURCE} == {lit(key)} ? {branch(kind)} : [])"
        middle = len(part) // 2
        return (f"({RESOURCE} < {lit(part[middle][0])} ? {tree(part[:middle])} : "
                f"{tree(part[middle:])})")
    return tree(items)


def specs(kinds: Iterable[WorkloadKind]) -> str:
    """The pod specs of the object, whichever of `kinds` it is."""
    return dispatch(kinds, lambda kind: " + ".join(
        located("object", loc) for loc in kind.locations) or "[]")


def _meta(loc: PodSpecLocation) -> PodSpecLocation:
    return (*loc[:-1], "metadata") if loc and loc[-1] == "spec" else (*loc, "metadata")


def metadata(kinds: Iterable[WorkloadKind]) -> str:
    """The metadata of each pod template of the object (beside its `spec`)."""
    return dispatch(kinds, lambda kind: " + ".join(
        located("object", _meta(loc)) for loc in kind.locations) or "[]")


def kai(meta: str) -> str:
    """The pod asks for a GPU share by KAI Scheduler annotations (any of the three keys)."""
    keys = lits((KAI_FRACTION, KAI_MEMORY, KAI_DEVICES))
    return f"{meta}.exists(m, has(m.annotations) && {keys}.exists(k, k in m.annotations))"


def containers(spec: str, kind_slots: str = "") -> str:
    """Every container of the pod spec `spec`: its three lists, then the kind's slots."""
    parts = [f"({has(spec, name)} ? {field(spec, name)} : [])" for name in CONTAINER_LISTS]
    if kind_slots:
        parts.append(kind_slots)
    return "(" + " + ".join(parts) + ")"


def slots_of(kinds: Iterable[WorkloadKind], spec: str) -> str:
    """The container-like slots of the object's kind inside pod spec `spec` (KServe `model`,
    Argo `container`...); "" when no kind has any."""
    with_slots = [k for k in kinds if k.containers]
    if not with_slots:
        return ""
    return dispatch(with_slots, lambda kind: "(" + " + ".join(
        located(spec, slot.location, "y") for slot in kind.containers) + ")")


def valid(value: str) -> str:
    """`value` is an amount: a quantity (a string, or a number in a custom resource), not
    negative. (A list or map there is refused by the schema before admission.)"""
    return f"(isQuantity(string({value})) && !string({value}).startsWith('-'))"


def _sections(c: str) -> tuple[tuple[str, str], tuple[str, str]]:
    res = f"{c}.resources"
    return ((f"has({c}.resources) && has({res}.limits)", f"{res}.limits"),
            (f"has({c}.resources) && has({res}.requests)", f"{res}.requests"))


def raw(c: str, n: str) -> str:
    """The text of container `c`'s effective amount of `n` ("0" when it has none): its limit,
    else its request. The API server has checked both are quantities (a Pod's, a template's;
    a custom resource's quantity that is not one makes the expression fail, and
    `failurePolicy: Fail` refuses the object, as the webhook's quantity rule does)."""
    (lg, lim), (rg, req) = _sections(c)
    return (f"(({lg} && {n} in {lim}) ? string({lim}[{n}]) : "
            f"({rg} && {n} in {req}) ? string({req}[{n}]) : '0')")


def amount(c: str, n: str) -> str:
    """Container `c`'s effective amount of `n` as a quantity (0 when it has none)."""
    return f"quantity({raw(c, n)})"


def names(c: str) -> str:
    """Every resource name container `c` gives in limits or requests, once."""
    (lg, lim), (rg, req) = _sections(c)
    return (f"((({lg}) ? {lim}.map(k, k) : []) + (({rg}) ? {req}.filter(k, !(({lg}) && "
            f"k in {lim})) : []))")


def _served_class(n: str) -> str:
    """A deviceclass.resource.kubernetes.io/<class> name whose class reads as GPUs or MIG
    devices (policies.dra.claims._named_kinds; every GPU driver's name but Gaudi's says gpu).
    The prefix is lowercase, so the class's tests can read the whole name lowercased."""
    low = f"{n}.lowerAscii()"
    gaudi = sorted(d for d in GPU_DRIVERS if "gpu" not in d)
    tests = [f"{low}.startsWith({lit(DEVICE_CLASS_PREFIX + 'mig.')})", f"{low}.contains('.mig.')",
             f"{low}.contains('-mig')", f"{low}.contains('gpu')",
             *(f"{low} == {lit(DEVICE_CLASS_PREFIX + d)}" for d in gaudi)]
    return f"({n}.startsWith({lit(DEVICE_CLASS_PREFIX)}) && ({' || '.join(tests)}))"


def accelerator(n: str) -> str:
    """`n` names an accelerator resource (policies.resources.classify)."""
    return (f"({n} in {lits(ACCELERATORS)} || {n}.startsWith('nvidia.com/mig-') || "
            f"({n}.startsWith('amd.com/') && {n}.contains('_nps')) || {_served_class(n)})")


def counts(n: str) -> str:
    """An accelerator whose amount > 0 makes a GPU pod."""
    return f"({accelerator(n)} && !({n} in {lits(NOT_GPU)}))"


def gpu_container(c: str) -> str:
    return f"{names(c)}.exists(n, {counts('n')} && {amount(c, 'n')}.sign() > 0)"


def sidecar(c: str) -> str:
    return f"(has({c}.restartPolicy) && {c}.restartPolicy == 'Always')"


def total_over(spec: str, n: str, limit: str, slots: str = ""
               ) -> tuple[tuple[str, str], tuple[str, str]]:
    """The pod's amount of `n` is over `limit` (a double), as two (test, amount) pairs, each
    test under the cost limit where one would not be: app containers and sidecars summed; an
    init container plus the sidecars started before it (the amount: the largest such)."""
    def value(c: str) -> str:
        return f"{amount(c, n)}.asApproximateFloat()"
    inits = f"({has(spec, 'initContainers')} ? {spec}.initContainers : [])"
    apps = f"({has(spec, 'containers')} ? {spec}.containers : [])"
    if slots:  # a kind's container-like slots run as app containers
        apps = f"({apps} + {slots})"
    # [0.0] first: an empty list's sum is 0 of no type here, 0.0 in the typed apiserver
    running = (f"([0.0] + {apps}.map(c, {value('c')}) + {inits}.filter(c, {sidecar('c')})"
               f".map(c, {value('c')})).sum()")
    before = (f"([0.0] + {inits}.transformList(j, d, j < i && {sidecar('d')}, {value('d')}))"
              ".sum()")
    peak = f"{inits}.exists(i, c, !{sidecar('c')} && {before} + {value('c')} > {limit})"
    largest = (f"([0.0] + {inits}.transformList(i, c, !{sidecar('c')}, {before} + "
               f"{value('c')})).max()")
    return (f"({running} > {limit})", running), (f"({peak})", largest)


def count_text(value: str) -> str:
    """A count (a double) as the engine writes it: a whole number, unless too big for one."""
    return f"({value} < 9.0e15 ? string(int({value})) : string({value}))"


def glob(pattern: str, n: str) -> str:
    """`n` matches the fnmatch glob `pattern` (`*`, `?`); a class `[...]` is refused."""
    if "[" in pattern:
        raise Unsupported(f"glob {pattern!r} uses a character class, which is not exported")
    if "*" not in pattern and "?" not in pattern:
        return f"{n} == {lit(pattern)}"
    if pattern.endswith("*") and "*" not in pattern[:-1] and "?" not in pattern:
        return f"{n}.startsWith({lit(pattern[:-1])})"
    regex = "^" + "".join(".*" if ch == "*" else "." if ch == "?" else re.escape(ch)
                          for ch in pattern) + "$"
    return f"{n}.matches({lit(regex)})"
