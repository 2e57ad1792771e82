"""Every JSON type in every top-level field (kind, apiVersion, metadata, spec, status) of a GPU
Pod, a Deployment, a TrainJob and a ResourceClaimTemplate: review() and explain() never raise,
and no front door (lint, review and explain commands, the webhook, the audit) shows a
traceback or a 500. A `kind: [Pod]` used to raise TypeError in policies/engine.py."""

from __future__ import annotations

import copy
import io
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from policies.context import Context
from policies.engine import explain, namespace_of, review
from tests.engine import casetable
from tests.server.harness import envelope, make_request
from tests.test_differential import Doors
from webhook.cli import run as cli_run

pytestmark = pytest.mark.fuzz

FIELDS = ("kind", "apiVersion", "metadata", "spec", "status")
JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**64), 2**64),
              st.floats(allow_nan=False, allow_infinity=False), st.text(max_size=8),
              st.sampled_from(["Pod", "v1", "resource.k8s.io/v1", "ResourceClaim"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.text(max_size=8), inner, max_size=3)),
    max_leaves=6)
# One of each JSON type first, so every field meets every type whatever hypothesis draws.
EVERY_TYPE = [None, True, 7, 1.5, "x", [], ["Pod"], {}, {"a": [1]}]
INVENTORY = casetable.inventory_file("dra-fleet")
GPU = {"name": "c", "image": "cuda", "resources": {"limits": {"nvidia.com/gpu": 1},
                                                    "claims": [{"name": "gpu"}]}}
POD_SPEC = {"containers": [GPU],
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]}
BASES: dict[str, dict[str, Any]] = {
    "Pod": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": POD_SPEC},
    "Deployment": {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
                   "spec": {"template": {"spec": POD_SPEC}}},
    "TrainJob": {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "TrainJob",
                 "metadata": {"name": "t"},
                 "spec": {"trainer": {"resourcesPerNode": {"limits": {"nvidia.com/gpu": 2}}}}},
    "ResourceClaimTemplate": {
        "apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "t"}, "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}}},
}


@pytest.fixture(scope="module")
def doors() -> Doors:
    case = casetable.Case(id="fuzz", object={}, policies=("defaults",), namespace="ml-train",
                          inventory="dra-fleet", allowed=True, rules=frozenset())
    return Doors(casetable.context_for(case))


def _object(base: str, field: str, value: Any) -> dict[str, Any]:
    obj = copy.deepcopy(BASES[base])
    obj[field] = copy.deepcopy(value)
    return obj


def _webhook(doors: Doors, obj: dict[str, Any], base: str) -> None:
    """The AdmissionReview names the resource the API server routed (the base kind's), and
    carries the object as sent."""
    req = make_request(BASES[base], namespace="ml-train", uid="fuzz")
    req["object"] = obj
    for route in ("/mutate", "/validate"):
        resp = doors.client.post(route, data=json.dumps(envelope(req)),
                                 content_type="application/json")
        assert resp.status_code == 200, resp.data
        assert resp.get_json()["response"]["uid"] == "fuzz"


def _through_every_door(doors: Doors, base: str, obj: dict[str, Any], tmp: Path) -> bool:
    context: Context = doors.context
    ns = namespace_of(obj, "ml-train")
    decision = review(obj, context, namespace=ns)
    explain(obj, context, namespace=ns)
    path = tmp / "doc.json"
    path.write_text(json.dumps(obj))
    doors.lint(path, "ml-train")
    doors.audit(path)
    _webhook(doors, obj, base)
    for command in ("review", "explain"):  # parsed as the command line parses them
        err = io.StringIO()
        code = cli_run([command, str(path), "--inventory", str(INVENTORY), "--namespace",
                        "ml-train"], io.StringIO(), err)
        assert code in (0, 1, 2), err.getvalue()
        assert "Traceback" not in err.getvalue()
    return decision.allowed


@pytest.mark.parametrize("field", FIELDS)
@pytest.mark.parametrize("base", sorted(BASES))
def test_every_json_type_in_every_top_level_field(doors: Doors, base: str, field: str,
                                                  tmp_path: Path) -> None:
    for value in EVERY_TYPE:
        _through_every_door(doors, base, _object(base, field, value), tmp_path)


# Every example goes through seven doors (~0.1 s): make fuzz's 5000 are capped at 1000.
@settings(suppress_health_check=[HealthCheck.function_scoped_fixture],
          max_examples=min(settings.default.max_examples, 1000))
@given(st.sampled_from(sorted(BASES)), st.sampled_from(FIELDS), JSON)
def test_any_json_in_a_top_level_field(doors: Doors, tmp_path: Path, base: str, field: str,
                                       value: Any) -> None:
    allowed = _through_every_door(doors, base, _object(base, field, value), tmp_path)
    event(f"{field}: {type(value).__name__}, {'allowed' if allowed else 'refused'}")
