"""The admission policies' CEL on cel-expr-python: the Kubernetes environment policies/dra/cel.py
builds (quantity, lists, strings, optionals, two-variable comprehensions), with the variables an
admission policy sees (`object`, `oldObject`, `namespaceObject`, `request`, `variables`) and
`jsonpatch.escapeKey`. Used to hold each exported expression to the API server's cost limit,
and by the tests to evaluate exported policies against the engine.

cel-cpp cannot declare Kubernetes' `JSONPatch` object type, so a patch expression is read with
`JSONPatch{op: a, path: b, value: c}` written as the map `{"op": a, "path": b, "value": c}`:
the generator (mutations.py) writes exactly that form, so the rewrite is textual.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from cel_expr_python import cel

from policies.dra import cel as dra_cel
from policies.dra.cel_cost import cost
from policies.dra.cel_library import safe
from policies.quantity import parse_quantity

# celconfig.PerCallLimit: the most one expression may cost (k8s.io/apiserver/pkg/apis/cel).
PER_CALL_LIMIT = 1_000_000
# celconfig.RuntimeCELCostBudget: what one policy's expressions may cost together.
RUNTIME_BUDGET = 10_000_000
# The estimate's bound on a list or map the schema leaves unbounded (pod specs per object,
# containers per pod spec, resource names and env entries per container): the runtime cost
# of a bigger object grows with it, and the API server stops an expression at PER_CALL_LIMIT.
ESTIMATED_ITEMS = 10
VARIABLES = ("object", "oldObject", "namespaceObject", "request", "variables", "params")


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


@lru_cache(maxsize=1)
def environment() -> Any:
    escape = cel.FunctionDecl("jsonpatch.escapeKey", [cel.Overload(
        "k8s_jsonpatch_escape_key", cel.Type.STRING, [cel.Type.STRING], impl=safe(_escape))])
    return dra_cel._env(True, VARIABLES, (escape,), parse_quantity)


def as_maps(expression: str) -> str:
    return (expression.replace("JSONPatch{op: ", '{"op": ').replace(", path: ", ', "path": ')
            .replace(", value: ", ', "value": '))


@lru_cache(maxsize=512)
def compiled(expression: str) -> Any:
    """The compiled expression, or None when it does not compile."""
    try:
        return environment().compile(as_maps(expression))
    except Exception:
        return None


def estimated_cost(expression: str) -> int | None:
    """The worst-case cost (policies/dra/cel_cost.py's model); None when it does not compile."""
    program = compiled(expression)
    if program is None:
        return None
    try:
        return cost(program.serialize(), ESTIMATED_ITEMS)
    except Exception:
        return 0


class CelFailure(Exception):
    """A runtime error: the API server applies the policy's failurePolicy (Fail: refused)."""


def run(expression: str, data: dict[str, Any]) -> Any:
    program = compiled(expression)
    if program is None:
        raise CelFailure(f"does not compile: {expression[:200]}")
    try:
        value = program.eval(data=data)
    except Exception as exc:
        raise CelFailure(str(exc)) from exc
    if value.type().name().lower() == "error":
        raise CelFailure(str(value.value()))
    return _plain(value.value())


def _plain(value: Any) -> Any:
    """cel-expr-python values as JSON-like Python."""
    if hasattr(value, "value") and hasattr(value, "type"):
        return _plain(value.value())
    if isinstance(value, dict):
        return {_plain(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
