"""kube-scheduler's first filter, NodeUnschedulable: explain lists cordoned nodes as a pool of
their own whose first words are the scheduler's, unless the pod tolerates the cordon; the
admission counts them only for a pod that tolerates the cordon (as the scheduler does)."""

from __future__ import annotations

from typing import Any

import pytest

from policies.engine import explain, review
from policies.hardware import NODE_UNSCHEDULABLE
from tests.engine.casetable import Case, context_for, expand

CORDONED = "gke-a100-mig-3"  # tests/engine/fixtures/nodes.yaml: cordoned, tainted as kubectl does
TOLERATE = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists",
            "effect": "NoSchedule"}


def _pod(tolerations: list[dict[str, Any]]) -> dict[str, Any]:
    pod = expand({"containers": [{"limits": {"nvidia.com/mig-1g.10gb": 1}}]})
    pod["spec"]["nodeSelector"] = {"kubernetes.io/hostname": CORDONED}
    pod["spec"]["tolerations"] = tolerations
    return pod


@pytest.mark.parametrize(("tolerations", "words", "first", "admitted"), [
    ([], NODE_UNSCHEDULABLE, "the node is cordoned (spec.unschedulable)", False),
    # tolerated: NodeUnschedulable and TaintToleration pass; it fits there, and is admitted
    ([TOLERATE], "", None, True),
])
def test_cordoned_nodes(tolerations: list[dict[str, Any]], words: str, first: str | None,
                        admitted: bool) -> None:
    pod = _pod(tolerations)
    context = context_for(Case("cordoned", pod, ("defaults",), "ml-train", "cluster", False,
                               frozenset()))
    [(_, verdicts)] = explain(pod, context, namespace="ml-train")
    [cordoned] = [v for v in verdicts if v.pool == CORDONED]
    assert cordoned.scheduler == words
    assert (cordoned.reasons[0] if cordoned.reasons else None) == first
    decision = review(pod, context, namespace="ml-train")
    refused = "gpu-no-matching-hardware" in {v.rule for v in decision.violations}
    assert refused is not admitted
