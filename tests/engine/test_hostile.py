"""What the case table cannot carry (JSON has only string keys) and what it does not check
(the wording): hostile values in the engine's messages, written as the user wrote them."""

from __future__ import annotations

import gc
import time
from typing import Any

import pytest

from policies import yamlpos
from policies.display import shown
from policies.engine import explain, review
from tests.engine import casetable
from webhook.commands import lint


def _context(inventory: str | None = None) -> Any:
    return casetable.context_for(casetable.Case(
        id="hostile", object={}, policies=("defaults", "hostile-full"), namespace="ml-train",
        inventory=inventory, allowed=True, rules=frozenset()))


def _pod(spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "x"}, "spec": spec}


def _gpu(**extra: Any) -> dict[str, Any]:
    return _pod({"containers": [{"name": "a", "image": "cuda",
                                 "resources": {"limits": {"nvidia.com/gpu": 1}}}], **extra})


def _lines(obj: dict[str, Any], inventory: str | None = None) -> list[str]:
    return [v.describe() for v in review(obj, _context(inventory)).violations]


@pytest.mark.parametrize(("value", "expected"), [
    (None, "null"), (True, "true"), (False, "false"), ("8", '"8"'), (8, "8"), (0.5, "0.5"),
    (float("nan"), "NaN"), (float("inf"), "Infinity"), (float("-inf"), "-Infinity"),
    ([1, "a"], '[1, "a"]'), ({"a": None}, '{"a": null}'), ("x" * 5000, None),
    (10**5000, "(a number of about 5001 digits)"),
], ids=lambda v: repr(v)[:20] if not isinstance(v, int) else f"int{v.bit_length()}")
def test_values_are_shown_as_written(value: Any, expected: str | None) -> None:
    text = shown(value)
    assert len(text) < 100
    if expected is not None:
        assert text == expected


@pytest.mark.parametrize(("quantity", "message"), [
    (None, "null is not a quantity"),
    (True, "true is not a quantity"),
    ("²", '"²" is not a quantity'),
    (" 1", '" 1" is not a quantity'),
    (float("nan"), "NaN is not a quantity"),
    (float("inf"), "Infinity is not a quantity"),
    (float("-inf"), "-Infinity is not a quantity"),
    ("-1", '"-1": must be greater than or equal to 0'),
    ("1e-999999", '"1e-999999": must be an integer'),
])
def test_quantity_messages_quote_the_value(quantity: Any, message: str) -> None:
    obj = _pod({"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": quantity}}}]})
    lines = _lines(obj)
    assert any(message in line for line in lines), lines
    assert not any("None" in line or "True" in line for line in lines), lines


def test_wrong_type_has_the_apiservers_wording() -> None:
    obj = _gpu(affinity={"nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": "gpu"}}})
    assert ("pod-field-invalid at spec.affinity.nodeAffinity."
            "requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms: "
            "must be a list, got a string") in _lines(obj)


def test_unquoted_label_value_says_label_values_are_strings() -> None:
    obj = _gpu(nodeSelector={"nvidia.com/gpu.count": 8})
    lines = _lines(obj, "cluster")
    assert any('label values are strings, quote it ("8")' in line for line in lines), lines
    assert not any("gpu.count=8 does not match" in line for line in lines), lines
    [(_, pools)] = explain(obj, _context("cluster"))
    assert all("8 is an integer, and label values are strings" in p.describe() for p in pools)


@pytest.mark.parametrize("key", [1, None, True, 2.5])
def test_keys_that_are_not_strings(key: Any) -> None:
    """YAML can write `1:`, `null:`, `true:` as keys; JSON cannot, so these are not case rows."""
    for obj in (_gpu(nodeSelector={key: "x"}),
                _pod({"containers": [{"name": "a", "resources": {
                    "limits": {"nvidia.com/gpu": 1, key: 2}}}]}),
                _gpu(tolerations=[{key: "x"}])):
        decision = review(obj, _context("cluster"))
        paths = [v.field for v in decision.violations if v.rule == "pod-field-invalid"]
        if isinstance(obj["spec"].get("tolerations"), list):
            assert paths == []  # unknown fields of a toleration are not read
        else:
            assert paths and shown(key) in paths[0], paths


@pytest.mark.parametrize("text", ["1e99999999", "1e-99999999", "1" * 100_000,
                                  "0." + "0" * 100_000 + "1", "1" * 100_000 + "Ei"],
                         ids=lambda v: f"{v[:12]}…{len(v)}")
def test_huge_quantities_cost_what_their_text_does(text: str) -> None:
    obj = _pod({"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": text}}}]})
    context = _context("cluster")
    gc.collect()
    gc.disable()  # a collection of the heap earlier tests left is not this review's work
    try:
        started = time.perf_counter()
        review(obj, context)
        elapsed = time.perf_counter() - started
    finally:
        gc.enable()
    assert elapsed < 0.5


@pytest.mark.parametrize("written", [".nan", ".inf", "-.inf", ".NaN"])
def test_yaml_nan_and_infinity_through_lint(written: str) -> None:
    """JSON has no NaN: only YAML brings these, so they are checked here, not in the case table
    (whose rows also go through the webhook)."""
    text = ("apiVersion: v1\nkind: Pod\nmetadata: {name: x, namespace: ml-train}\nspec:\n"
            "  containers:\n  - name: a\n    resources:\n"
            f"      limits: {{nvidia.com/gpu: {written}}}\n")
    result = lint.Result()
    lint.lint_stream("x.yaml", yamlpos.read_stream(text.encode()), _context(), result,
                     namespace="ml-train")
    found = [(f.rule, f.severity, f.line) for f in result.findings]
    assert ("gpu-quantity-not-integer", "error", 8) in found, found


def test_namespaces_a_request_names_cannot_grow_the_context_without_bound() -> None:
    """The namespace comes with the request (any client that reaches the port chooses it):
    what the Context keeps per namespace stays bounded."""
    from policies.context import _CACHED_NAMESPACES, Context
    from policies.engine import review
    from webhook.inputs.sources import load_catalog, load_policies

    context = Context(policies=load_policies(), catalog=load_catalog())
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"containers": [{"name": "c", "image": "x"}]}}
    for i in range(_CACHED_NAMESPACES + 100):
        review(pod, context, namespace=f"ns-{i}")
    assert len(context._governing_cache) <= _CACHED_NAMESPACES


def test_many_containers_each_asking_another_resource_cost_what_their_size_does() -> None:
    """A pod's totals take one pass over what its containers ask for (it was names times
    containers: 4,000 containers with a MIG profile each took seconds)."""
    from policies.resources import demand

    def spec(n: int) -> dict[str, Any]:
        return {"initContainers": [{"name": "i", "resources": {"limits": {
                    "nvidia.com/mig-1g.5gb": 2}}}],
                "containers": [{"name": f"c{i}", "resources": {"limits": {
                    f"nvidia.com/mig-{i}g.5gb": 1, "nvidia.com/mig-1g.5gb": 1}}}
                    for i in range(n)]}

    def cost(n: int) -> float:
        obj = spec(n)
        started = time.perf_counter()
        found = demand(obj, ("spec",))
        elapsed = time.perf_counter() - started
        assert found.totals["nvidia.com/mig-1g.5gb"] == n  # the init container's 2 is less
        return elapsed

    # a collection of the whole heap (whatever earlier tests left in it) is not the engine's
    # work: measured without it, best of five
    gc.collect()
    gc.disable()
    try:
        small, large = min(cost(500) for _ in range(5)), min(cost(2000) for _ in range(5))
    finally:
        gc.enable()
    assert large < small * 8, (small, large)  # 4x the containers: linear is ~4x, not 16x
