"""DRA device selectors in CEL, in the apiserver's environment (its base libraries, apiserver
pkg/cel/environment/base.go) on cel-expr-python (cel-cpp): cel-cpp brings the strings
extension (lowerAscii, split, format, ...), optionals (`.?x.orValue(y)`), `cel.bind`, RE2
`matches`, sets (`sets.contains`), lists v3 (sort, distinct, flatten, slice) and two-variable
comprehensions (`m.exists(k, v, ...)`); quantity() and semver() with their methods are here,
the Kubernetes lists/regex/URL/IP/CIDR libraries in cel_library.py. A selector whose
estimated cost is over the apiserver's limit is refused as it refuses it (cel_cost.py).

Compiled once per distinct expression; evaluated once per distinct device (drivers publish
many identical devices, so a 1,000-node cluster has a handful). Kubernetes behaviour kept:
bare attribute names sit under the driver's domain, an unknown domain is an empty map, an
unknown name inside a known domain is the runtime error "no such key", the result must be bool.

Quantities and versions cross into cel-cpp as one-entry maps tagged with a key no device
attribute can have (a "/" is not allowed in attribute names); the methods below unwrap them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from functools import lru_cache
from typing import Any, NamedTuple

from cel_expr_python import cel

from policies.dra import cel_library
from policies.dra.cel_cost import CEL_SELECTOR_MAX_COST, checked_ast, estimate, list_typed_use
from policies.dra.cel_library import CelError
from policies.dra.cel_library import safe as _safe
from policies.dra.objects import MAX_EXPRESSION, Device
from policies.dra.reader import bounded_quantity
from policies.dra.values import Version, parse_version
from policies.quantity import Number, QuantityError

_Q = "k8s/quantity"
_V = "k8s/semver"
_STRING_LITERAL = re.compile(r"'(?:[^'\\]|\\.)*'" + r'|"(?:[^"\\]|\\.)*"')
_NON_STRING_KEY = re.compile(
    r"(?<![\w.])device\s*\.\s*(attributes|capacity)\s*\[\s*(true|false|-?\d[\d.]*u?)\s*\]")
_DEVICE_FIELD = re.compile(r"(?<![\w.])device\s*\.\s*([A-Za-z_]\w*)")
# What `device` has in a DRA selector (reference/dra.md §4.1); anything else fails to compile.
DEVICE_FIELDS = frozenset({"driver", "attributes", "capacity", "allowMultipleAllocations"})
# Kubernetes enables cross-type numeric ordering (`1 < 2.5`); cel-cpp's checker refuses it
# and will not take a second declaration of `_<_`: such an expression is left unjudged.
_CROSS_NUMERIC = re.compile(r"no matching overload for '_(?:<|<=|>|>=)_' applied to "
                            r"'\((?:int|uint|double), (?:int|uint|double)\)'")
_DOMAIN_LITERAL = re.compile(r"""['"]([a-z0-9]([-a-z0-9.]*[a-z0-9])?\.[a-z0-9.-]+)['"]""")


def _quantity_value(number: Number) -> dict[str, str]:
    return {_Q: str(Fraction(number))}


def _version_value(version: Version) -> dict[str, str]:
    return {_V: str(version)}


@lru_cache(maxsize=4096)
def _fraction(text: str) -> Fraction:
    return Fraction(text)


def _unwrap(value: Any) -> Fraction | Version:
    if isinstance(value, Mapping):
        if _Q in value:
            return _fraction(str(value[_Q]))
        if _V in value:
            version = parse_version(str(value[_V]))
            if version is not None:
                return version
    raise CelError("no such overload")


def _compare(a: Any, b: Any) -> int:
    left, right = _unwrap(a), _unwrap(b)
    if isinstance(left, Version) and isinstance(right, Version):
        return left.compare(right)
    if isinstance(left, Fraction) and isinstance(right, Fraction):
        return (left > right) - (left < right)
    raise CelError("no such overload: a quantity compared with a semver")


def _quantity(text: str, parse: Callable[[str], Number] = bounded_quantity) -> dict[str, str]:
    try:
        return _quantity_value(parse(text))
    except QuantityError as exc:
        raise CelError(f"invalid quantity {text[:64]!r}") from exc


def _is_quantity(text: str, parse: Callable[[str], Number] = bounded_quantity) -> bool:
    try:
        parse(text)
    except QuantityError:
        return False
    return True


def _semver(text: str, normalize: bool = False) -> dict[str, str]:
    version = parse_version(text, normalize)
    if version is None:
        raise CelError(f"invalid semver {text[:64]!r}")
    return _version_value(version)


def _arith(a: Any, b: Any, sign: int) -> dict[str, str]:
    left = _unwrap(a)
    right = Fraction(b) if isinstance(b, int) and not isinstance(b, bool) else _unwrap(b)
    if not isinstance(left, Fraction) or not isinstance(right, Fraction):
        raise CelError("no such overload")
    return _quantity_value(left + sign * right)


def _as_integer(a: Any) -> int:
    value = _unwrap(a)
    if not isinstance(value, Fraction) or value.denominator != 1 or abs(value) >= 2**63:
        raise CelError("cannot convert value to integer")
    return int(value)


def _part(index: int) -> Callable[[Any], int]:
    def get(a: Any) -> int:
        value = _unwrap(a)
        if not isinstance(value, Version):
            raise CelError("no such overload")
        return (value.major, value.minor, value.patch)[index]
    return get


def _env(extended: bool, variables: tuple[str, ...] = ("device",),
         more: tuple[Any, ...] = (), parse: Callable[[str], Number] = bounded_quantity) -> Any:
    """The environment; `variables` (all dyn), `more` functions and the quantity parser
    (`parse`: a pod's quantities are read as the engine reads them, exponents wrapping as in
    the apiserver) for other uses than DRA selectors (policies/native/evaluate.py)."""
    t = cel.Type
    box = t.Map(t.STRING, t.DYN)

    def fn(name: str, ret: Any, params: list[Any], impl: Callable[..., Any],
           member: bool = False) -> Any:
        suffix = "_".join(p.name().lower() for p in params)
        return cel.FunctionDecl(name, [cel.Overload(
            f"k8s_{name}_{suffix}_{int(member)}", ret, params, is_member=member,
            impl=_safe(impl))])

    def methods(name: str, ret: Any, impl: Callable[..., Any],
                extra: list[Any] | None = None) -> Any:
        return fn(name, ret, [box, *(extra or [])], impl, member=True)

    functions = [
        fn("quantity", box, [t.STRING], lambda text: _quantity(text, parse)),
        fn("isQuantity", t.BOOL, [t.STRING], lambda text: _is_quantity(text, parse)),
        cel.FunctionDecl("semver", [
            cel.Overload("k8s_semver_string", box, [t.STRING], impl=_safe(_semver)),
            cel.Overload("k8s_semver_string_bool", box, [t.STRING, t.BOOL],
                         impl=_safe(_semver)),
        ]),
        cel.FunctionDecl("isSemver", [
            cel.Overload("k8s_is_semver_string", t.BOOL, [t.STRING],
                         impl=_safe(lambda s: parse_version(s) is not None)),
            cel.Overload("k8s_is_semver_string_bool", t.BOOL, [t.STRING, t.BOOL],
                         impl=_safe(lambda s, n: parse_version(s, n) is not None)),
        ]),
        methods("compareTo", t.INT, _compare, [box]),
        methods("isGreaterThan", t.BOOL, lambda a, b: _compare(a, b) > 0, [box]),
        methods("isLessThan", t.BOOL, lambda a, b: _compare(a, b) < 0, [box]),
        cel.FunctionDecl("add", [
            cel.Overload("k8s_add_q_q", box, [box, box], is_member=True,
                         impl=_safe(lambda a, b: _arith(a, b, 1))),
            cel.Overload("k8s_add_q_int", box, [box, t.INT], is_member=True,
                         impl=_safe(lambda a, b: _arith(a, b, 1))),
        ]),
        cel.FunctionDecl("sub", [
            cel.Overload("k8s_sub_q_q", box, [box, box], is_member=True,
                         impl=_safe(lambda a, b: _arith(a, b, -1))),
            cel.Overload("k8s_sub_q_int", box, [box, t.INT], is_member=True,
                         impl=_safe(lambda a, b: _arith(a, b, -1))),
        ]),
        methods("asInteger", t.INT, _as_integer),
        methods("isInteger", t.BOOL, lambda a: _unwrap(a) == int(_unwrap(a))),  # type: ignore[arg-type]
        methods("asApproximateFloat", t.DOUBLE, lambda a: float(_unwrap(a))),  # type: ignore[arg-type]
        methods("sign", t.INT, lambda a: (_unwrap(a) > 0) - (_unwrap(a) < 0)),  # type: ignore[operator]
        methods("major", t.INT, _part(0)),
        methods("minor", t.INT, _part(1)),
        methods("patch", t.INT, _part(2)),
    ]
    # cel-cpp's own extensions that the apiserver's base environment has (sets 1.29,
    # two-variable comprehensions 1.32, lists v3 1.34), named as cel-cpp's config knows them.
    config = cel.NewEnvConfigFromYaml(
        "name: dra-selectors\nextensions:\n- name: sets\n- name: lists\n"
        "- name: two-var-comprehensions\n")
    extensions = []
    if extended:
        from cel_expr_python.ext import ext_bindings, ext_optional, ext_strings
        extensions = [ext_bindings.ExtBindings(), ext_strings.ExtStrings(),
                      ext_optional.ExtOptional()]
    return cel.NewEnv(
        config=config,
        variables=dict.fromkeys(variables, t.DYN),
        extensions=extensions,
        functions=[*functions, *cel_library.functions(), *more],
    )


# cel-cpp ships each of these extensions as a shared library of its own (5-7 MB, about 8 MB
# resident for the three): a selector that names none of their functions, macros or syntax
# (`?` of optionals) compiles the same without them, so they load when one does, or when an
# expression fails without them (its message is then the full environment's, as Kubernetes').
_EXTENSION_WORDS = re.compile(
    r"\?|\b(?:bind|charAt|indexOf|lastIndexOf|lowerAscii|upperAscii|replace|split|join|"
    r"substring|trim|format|quote|reverse|optional|of|ofNonZeroValue|none|hasValue|value|"
    r"orValue|or|optMap|optFlatMap|unwrapOpt)\b")
_ENVS: dict[bool, Any] = {}


def _environment(extended: bool) -> Any:
    env = _ENVS.get(extended)
    if env is None:
        env = _ENVS[extended] = _env(extended)
    return env


def _compile(expression: str) -> Any:
    if _EXTENSION_WORDS.search(expression) is None:
        try:
            return _environment(False).compile(expression)
        except Exception:
            pass  # judged again with the extensions, whose absence may be the reason
    return _environment(True).compile(expression)


class Program(NamedTuple):
    expression: str
    compiled: Any  # cel-expr-python Expression; None when `error` is set
    error: str  # the compiler's message, "" when it compiled
    domains: tuple[str, ...]  # domain literals: an unknown one must read as an empty map
    # cel-cpp refused it for nesting deeper than its fixed limit of 32, which Kubernetes
    # (cel-go) allows: we cannot judge it, so it is neither invalid nor evaluated.
    unsupported: bool = False
    cost: int = 0  # the estimated worst-case cost (cel_cost.py); 0 when not compiled
    # What the apiserver's compiler says of it in a new object (its NewExpressions
    # environment, at 1.37's default gates): a list-typed use of an attribute needs the alpha
    # DRAListTypeAttributes gate. A stored object's expression (a class, a claim already
    # there) compiles in the StoredExpressions environment, which has them, and the
    # scheduler evaluates it as such: `compiled` stays usable. "" when there is nothing.
    new_error: str = ""

    @property
    def admission_error(self) -> str:
        """Why the apiserver refuses a new object with this selector; "" when it does not."""
        return self.error or self.new_error


@lru_cache(maxsize=2048)
def compile_selector(expression: str) -> Program:
    """Compile once per distinct expression; `error` carries the compiler's message."""
    domains = tuple(sorted({m.group(1) for m in _DOMAIN_LITERAL.finditer(expression)}))
    if len(expression) > MAX_EXPRESSION:
        return Program(expression, None, f"Too long: may not be more than {MAX_EXPRESSION} "
                       "bytes", domains)
    unknown = _unknown_device_field(expression)
    if unknown:
        return Program(expression, None, unknown, domains)
    try:
        compiled = _compile(expression)
        returned = compiled.return_type()
    except Exception as exc:
        text = str(exc)
        if "recursion" in text.lower():
            return Program(expression, None, "nested deeper than gpupolicy's CEL engine can "
                           "follow (32 levels); not checked", domains, unsupported=True)
        if _CROSS_NUMERIC.search(text):
            return Program(expression, None, "orders numbers of different types (int, uint, "
                           "double), which Kubernetes allows and gpupolicy's CEL engine "
                           "cannot type-check; not checked", domains, unsupported=True)
        return Program(expression, None, _compiler_message(text), domains)
    if returned.name() not in ("bool", "BOOL", "dyn", "DYN"):
        return Program(expression, None, "must evaluate to bool or the unknown type, not "
                       f"{returned.name().lower()}", domains)
    try:
        ast = checked_ast(compiled.serialize())
    except Exception:  # an AST we cannot read: judge it by evaluating, as before
        ast = None
    listed = list_typed_use(ast) if ast is not None else ""
    estimated = estimate(ast) if ast is not None else 0
    if estimated > CEL_SELECTOR_MAX_COST:
        return Program(expression, None, "Forbidden: too complex, exceeds cost limit",
                       domains, cost=estimated)
    return Program(expression, compiled, "", domains, cost=estimated, new_error=listed)


def _unknown_device_field(expression: str) -> str:
    """`device` is declared as an object in Kubernetes, so a field it lacks is a compile error
    there; cel-cpp sees a dyn here, so we check the names ourselves (outside string literals)."""
    code = _STRING_LITERAL.sub(lambda m: " " * len(m.group(0)), expression)
    # device.attributes and device.capacity are maps keyed by domain strings
    for match in _NON_STRING_KEY.finditer(code):
        kind = "bool" if match.group(2) in ("true", "false") else \
            ("double" if "." in match.group(2) else "int")
        return (f"compilation failed: ERROR: <input>:1:{match.start(2)}: found no matching "
                f"overload for '_[_]' applied to '(map(string, map(string, any)), {kind})'")
    for match in _DEVICE_FIELD.finditer(code):
        if match.group(1) not in DEVICE_FIELDS:
            column = match.start(1) + 1
            return (f"compilation failed: ERROR: <input>:1:{column}: undefined field "
                    f"'{match.group(1)}'")
    return ""


def _compiler_message(text: str) -> str:
    text = text.removeprefix("INVALID_ARGUMENT: ").strip()
    text = re.sub(r"\s*\[INVALID_ARGUMENT\]$", "", text)
    return "compilation failed: " + text[:1000]


def device_data(device: Device, domains: tuple[str, ...] = ()) -> dict[str, Any]:
    """What `device` is in a selector: driver, attributes and capacity by domain."""
    attributes: dict[str, dict[str, Any]] = {d: {} for d in domains}
    for name, value in device.attributes.items():
        domain, _, short = name.rpartition("/")
        attributes.setdefault(domain, {})[short] = (
            _version_value(value) if isinstance(value, Version) else value
        )
    capacity: dict[str, dict[str, Any]] = {d: {} for d in domains}
    for name, amount in device.capacity.items():
        domain, _, short = name.rpartition("/")
        capacity.setdefault(domain or device.driver, {})[short] = _quantity_value(amount)
    return {"driver": device.driver, "attributes": attributes, "capacity": capacity,
            "allowMultipleAllocations": device.allow_multiple}


class Outcome(NamedTuple):
    matches: bool
    error: str = ""  # a runtime error: the scheduler aborts the pod on it


def evaluate(program: Program, device: Device) -> Outcome:
    """One selector on one device; memoised by the device's CEL-visible content."""
    return _evaluate(program, device.cel_id, device)


_CACHE: dict[tuple[str, int], Outcome] = {}
_CACHE_LIMIT = 1 << 16


def _evaluate(program: Program, key: int, device: Device) -> Outcome:
    slot = (program.expression, key)
    found = _CACHE.get(slot)
    if found is not None:
        return found
    outcome = _run(program, device) if program.compiled is not None else \
        Outcome(False, program.error)
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()  # bounded; a new inventory refills it in one pass
    _CACHE[slot] = outcome
    return outcome


def _run(program: Program, device: Device) -> Outcome:
    try:
        value = program.compiled.eval(data={"device": device_data(device, program.domains)})
        kind = value.type().name().lower()
        result = value.value()
    except Exception as exc:
        return Outcome(False, _runtime_message(str(exc)))
    if kind == "bool":
        return Outcome(bool(result))
    if kind == "error":
        return Outcome(False, _runtime_message(str(result)))
    return Outcome(False, f"must evaluate to bool, not {kind}")


def _runtime_message(text: str) -> str:
    match = re.search(r'Key not found in map\s*:\s*"?([^"\s]*)"?', text)
    if match:
        return f"no such key: {match.group(1)}"
    text = re.sub(r"^[A-Z_]+: ", "", text.strip())
    return text[:300]


def library_cost_probe() -> Callable[[], None]:
    """One raw cel-expr-python evaluation of a typical selector (for bench/bench_dra.py)."""
    program = compile_selector(
        "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3'")
    data = {"device": {"driver": "gpu.nvidia.com", "attributes": {"gpu.nvidia.com": {
        "productName": "NVIDIA H100 80GB HBM3", "type": "gpu"}}, "capacity": {}}}
    compiled = program.compiled

    def run() -> None:
        compiled.eval(data=data)
    return run
