"""What review() does per admission operation and subresource (webhook-contract.md §1, §8)."""

from __future__ import annotations

from typing import Any

import pytest

from policies.context import Context
from policies.engine import review
from webhook.inputs.sources import load_catalog, load_policies

GPU_POD: dict[str, Any] = {
    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "ml"},
    "spec": {"containers": [{"name": "c", "image": "cuda",
                             "resources": {"limits": {"nvidia.com/gpu": "1"}}}]},
}


def with_debug_container(env_value: str) -> dict[str, Any]:
    pod = {**GPU_POD, "spec": {**GPU_POD["spec"], "ephemeralContainers": [
        {"name": "debugger", "image": "cuda",
         "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": env_value}]}]}}
    return pod


@pytest.fixture(scope="module")
def context() -> Context:
    return Context(policies=load_policies(), catalog=load_catalog())


@pytest.mark.parametrize(
    ("obj", "operation", "subresource", "allowed", "patched", "rules"),
    [
        (GPU_POD, "CREATE", "", True, True, []),
        # Pods are immutable where it matters: UPDATE is checked, never patched.
        (GPU_POD, "UPDATE", "", True, False, []),
        (None, "DELETE", "", True, False, []),
        (GPU_POD, "DELETE", "", True, False, []),
        ({"kind": "PodExecOptions", "command": ["sh"]}, "CONNECT", "exec", True, False, []),
        (GPU_POD, "UPDATE", "status", True, False, []),
        # kubectl debug: only the ephemeral containers are judged (§7 #10).
        (with_debug_container("all"), "UPDATE", "ephemeralcontainers", False, False,
         ["visible-devices-bypass"]),
        (with_debug_container("none"), "UPDATE", "ephemeralcontainers", True, False, []),
        ({**GPU_POD, "spec": {**GPU_POD["spec"], "containers": [
            {"name": "c", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "0.5"}}}]}},
         "UPDATE", "ephemeralcontainers", True, False, []),
    ],
)
def test_operation(context: Context, obj: Any, operation: str, subresource: str,
                   allowed: bool, patched: bool, rules: list[str]) -> None:
    decision = review(obj, context, operation=operation, subresource=subresource)
    assert decision.allowed is allowed
    assert bool(decision.patch) is patched
    assert [v.rule for v in decision.violations] == rules
