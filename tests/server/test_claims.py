"""DRA ResourceClaims and ResourceClaimTemplates reach the engine through the real server (the
chart's claims.validate webhook sends them to /validate): nothing at the HTTP edge filters
them by kind or resource, and the answer is a well-formed AdmissionReview."""

from __future__ import annotations

from typing import Any

import pytest

from tests.server.harness import Server, envelope, make_request

REQUESTS = [{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2}}]
CLAIM = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
         "metadata": {"name": "two-gpus"}, "spec": {"devices": {"requests": REQUESTS}}}
TEMPLATE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": "two-gpus"}, "spec": {"spec": {"devices": {"requests": REQUESTS}}}}
V1BETA1 = {"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim",
           "metadata": {"name": "flat"}, "spec": {"devices": {"requests": [
               {"name": "gpu", "deviceClassName": "gpu.nvidia.com"}]}}}
HOSTILE = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
           "metadata": {"name": "odd"}, "spec": {"devices": {"requests": "all of them"}}}


@pytest.mark.parametrize(
    ("obj", "operation"),
    [(CLAIM, "CREATE"), (TEMPLATE, "CREATE"), (CLAIM, "UPDATE"), (V1BETA1, "CREATE"),
     (HOSTILE, "CREATE")],
    ids=["claim", "template", "claim update", "v1beta1 claim", "malformed claim"],
)
def test_a_claim_gets_a_well_formed_answer(server: Server, obj: dict[str, Any],
                                           operation: str) -> None:
    uid = f"claim-{obj['kind']}-{operation}".lower()
    req = make_request(obj, namespace="ml-train", operation=operation, uid=uid,
                       old=obj if operation == "UPDATE" else None)
    assert req["resource"]["resource"] in ("resourceclaims", "resourceclaimtemplates")
    reply = server.post("/validate", envelope(req))
    assert reply.status == 200
    body = reply.json
    assert (body["apiVersion"], body["kind"]) == ("admission.k8s.io/v1", "AdmissionReview")
    response = body["response"]
    assert response["uid"] == uid
    assert isinstance(response["allowed"], bool)
    assert "patch" not in response  # validation never patches
    if not response["allowed"]:
        assert response["status"]["message"]
