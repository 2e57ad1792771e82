"""What the issue asks of the webhook, stated outright (tests/server/policies: Enforce in
team-*, Warn in lab-*, Audit where gpupolicy.io/audit=true, i.e. `sandbox`)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.server import contract
from tests.server.harness import Server, envelope, make_request
from tests.server.test_contract import GENERATED
from tests.server.test_observability import samples, value

OBJECTS = dict(GENERATED)

# (case, namespace, webhook, allowed, patched, words in the denial, warning rules, audit keys)
BEHAVIOUR: list[tuple[str, str, str, bool, bool, tuple[str, ...], tuple[str, ...],
                      tuple[str, ...]]] = [
    ("gpu-pod", "team-a", "mutate", True, True, (), (), ()),
    ("gpu-pod", "team-a", "validate", True, False, (), (), ()),
    ("three-gpus", "team-a", "validate", False, False,
     ("gpu-max-per-pod at spec.containers:", "at most 2 allowed",
      "gpu-max-per-container at spec.containers[0].resources.limits['nvidia.com/gpu']:"), (), ()),
    ("three-gpus", "team-a", "mutate", True, True, (), (), ()),  # mutate never refuses
    ("three-gpus", "lab-1", "validate", True, False, (), ("gpu-max-per-pod",), ()),
    ("three-gpus", "sandbox", "validate", True, False, (), (), ("gpu-max-per-pod",)),
    ("three-gpus", "sandbox", "mutate", True, False, (), (), ()),  # audit on /validate only
    ("three-gpus", "default", "validate", True, False, (), (), ()),  # no policy governs it
    ("three-gpus", "kube-system", "validate", True, False, (), (), ()),  # excluded
    ("three-gpus", "gpupolicy", "validate", True, False, (), (), ()),  # the server's own
    ("gpu-pod", "kube-system", "mutate", True, False, (), (), ()),
    ("gpu-pod", "gpupolicy", "mutate", True, False, (), (), ()),
    ("non-gpu", "team-a", "mutate", True, False, (), (), ()),
    ("non-gpu", "team-a", "validate", True, False, (), (), ()),
    ("ephemeral-bypass", "team-a", "validate", False, False,
     ("visible-devices-bypass at spec.ephemeralContainers[0]", "NVIDIA_VISIBLE_DEVICES"), (), ()),
    ("ephemeral-bypass", "team-a", "mutate", True, False, (), (), ()),
    ("ephemeral-plain", "team-a", "validate", True, False, (), (), ()),
    ("ephemeral-plain", "team-a", "mutate", True, False, (), (), ()),
    ("delete", "team-a", "validate", True, False, (), (), ()),
    ("delete", "team-a", "mutate", True, False, (), (), ()),
    ("connect-exec", "team-a", "validate", True, False, (), (), ()),
    ("connect-exec", "team-a", "mutate", True, False, (), (), ()),
]


def _request(case: str, namespace: str, **extra: Any) -> dict[str, Any]:
    spec = copy.deepcopy(OBJECTS[case])
    obj, old = spec.pop("object"), spec.pop("old", None)
    spec.update(extra)
    return make_request(obj, namespace=namespace, uid=f"b-{case}-{namespace}", old=old, **spec)


@pytest.mark.parametrize(
    ("case", "namespace", "webhook", "allowed", "patched", "words", "warned", "audited"),
    BEHAVIOUR, ids=[f"{b[0]}-{b[1]}-{b[2]}" for b in BEHAVIOUR],
)
def test_behaviour(server: Server, case: str, namespace: str, webhook: str, allowed: bool,
                   patched: bool, words: tuple[str, ...], warned: tuple[str, ...],
                   audited: tuple[str, ...]) -> None:
    req = _request(case, namespace)
    reply = server.post(f"/{webhook}", envelope(req))
    assert contract.problems(req, reply, webhook) == []
    response = reply.json["response"]
    assert response["allowed"] is allowed
    assert ("patch" in response) is patched
    if not allowed:
        assert response["status"]["code"] == 403
        for word in words:
            assert word in response["status"]["message"]
    assert [w.split(" ")[0] for w in response.get("warnings", [])] == list(warned)
    assert sorted(response.get("auditAnnotations", {})) == sorted(audited)


def test_patch_adds_the_toleration(server: Server) -> None:
    req = _request("gpu-pod", "team-a")
    response = server.post("/mutate", envelope(req)).json["response"]
    mutated = contract.apply(req, response)
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in (
        mutated["spec"]["tolerations"])


@pytest.mark.parametrize(("dry_run", "counted"), [(False, 1), (True, 0)])
def test_audit_metric_and_dry_run(server: Server, dry_run: bool, counted: int) -> None:
    """Audit-mode findings are counted in metrics; a dry run gets the same answer, uncounted."""
    labels = {"policy": "sandbox-audit", "rule": "gpu-max-per-pod", "mode": "Audit"}
    before = value(samples(server), "gpupolicy_policy_violations_total", **labels)
    req = _request("three-gpus", "sandbox", dry_run=dry_run)
    response = server.post("/validate", envelope(req)).json["response"]
    assert "gpu-max-per-pod" in response["auditAnnotations"]
    after = value(samples(server), "gpupolicy_policy_violations_total", **labels)
    assert after - before == counted
