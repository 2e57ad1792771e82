"""Issue 27 through the real server over TLS: a pending pod's UPDATE that only adds a GPU share
by annotation or label (what the chart's spec-or-scheduling-changed matchCondition sends) is
judged like the pod it makes. team-a's policy allows 2 GPUs a pod and a container (Enforce)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.harness import Server, envelope, make_request


def _pod(annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None,
         limits: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "pending", "annotations": annotations or {},
                            "labels": labels or {}}
    container: dict[str, Any] = {"name": "c", "image": "cuda:12"}
    if limits:
        container["resources"] = {"limits": limits}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta,
            "spec": {"schedulerName": "kai-scheduler", "containers": [container]},
            "status": {"phase": "Pending"}}


UPDATES = [
    # (old, new, allowed, rules)
    ("KAI share of 16 GPUs added", _pod(), _pod({"gpu-fraction": "1",
                                                "gpu-fraction-num-devices": "16"}),
     False, {"gpu-max-per-pod", "gpu-max-per-container"}),
    ("KAI share of half of 2 GPUs added", _pod(), _pod({"gpu-fraction": "0.5",
                                                       "gpu-fraction-num-devices": "2"}),
     True, set()),
    ("gpushare memory spread over 4 cards", _pod(limits={"aliyun.com/gpu-mem": 8}),
     _pod(labels={"aliyun.com/gpu-count": "4"}, limits={"aliyun.com/gpu-mem": 8}),
     False, {"gpu-max-per-pod", "gpu-max-per-container"}),
]


@pytest.mark.parametrize(("old", "new", "allowed", "rules"), [u[1:] for u in UPDATES],
                         ids=[u[0] for u in UPDATES])
def test_an_update_that_adds_a_share_is_judged(server: Server, old: dict[str, Any],
                                               new: dict[str, Any], allowed: bool,
                                               rules: set[str]) -> None:
    req = make_request(new, namespace="team-a", operation="UPDATE", old=old, uid="share")
    reply = server.post("/validate", envelope(req))
    assert reply.status == 200
    response = reply.json["response"]
    assert response["allowed"] is allowed, response
    said = response.get("status", {}).get("message", "")
    assert all(rule in said for rule in rules), said
