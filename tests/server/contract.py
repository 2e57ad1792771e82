"""The rules of webhook-contract.md §7 (what the apiserver checks, what it silently drops),
as one function that lists every way an answer breaks them."""

from __future__ import annotations

import base64
import binascii
import copy
import json
import re
from typing import Any

import jsonpatch

from policies.quantity import parse_quantity
from policies.workloads import pod_specs
from tests.server.harness import Reply

AUDIT_KEY = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")
B64 = re.compile(r"^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$")


def decode_patch(text: str) -> list[dict[str, Any]]:
    ops = json.loads(base64.b64decode(text, validate=True))
    assert isinstance(ops, list), "patch is not a JSON array"
    return ops


def problems(request: dict[str, Any], reply: Reply, webhook: str) -> list[str]:
    """Empty when `reply` is an answer the apiserver accepts and uses as meant."""
    found: list[str] = []
    if reply.status != 200:
        return [f"HTTP {reply.status}, want 200: {reply.body[:200]!r}"]
    if not reply.headers.get("content-type", "").startswith("application/json"):
        found.append(f"content-type {reply.headers.get('content-type')!r}")
    review = reply.json
    if review.get("apiVersion") != "admission.k8s.io/v1" or review.get("kind") != "AdmissionReview":
        found.append("apiVersion/kind not echoed")
    response = review.get("response")
    if not isinstance(response, dict):
        return [*found, "no response"]
    if response.get("uid") != request["uid"]:
        found.append(f"uid {response.get('uid')!r} != {request['uid']!r}")
    if not isinstance(response.get("allowed"), bool):
        found.append("allowed missing or not a bool")
    has_patch, has_type = "patch" in response, "patchType" in response
    if webhook == "validate" and (has_patch or has_type):
        found.append("validating answer carries patch/patchType")
    if has_patch != has_type:
        found.append("patch and patchType not together")
    if has_patch:
        found += _patch_problems(request, response)
    if response.get("allowed") is False:
        status = response.get("status") or {}
        if not (400 <= int(status.get("code", 0)) <= 599):
            found.append(f"denial code {status.get('code')!r}")
        if not str(status.get("message", "")).strip():
            found.append("denial without a message")
    total = 0
    for text in response.get("warnings", []):
        total += len(text)
        if not text or any(ord(c) < 32 or 0x7F <= ord(c) < 0xA0 for c in text):
            found.append(f"warning with control characters or empty: {text!r}")
        if len(text) > 120:
            found.append(f"warning longer than 120: {text!r}")
    if total > 4096:
        found.append(f"warnings total {total} runes > 4096")
    for key, value in (response.get("auditAnnotations") or {}).items():
        if not AUDIT_KEY.match(key):
            found.append(f"audit annotation key {key!r} invalid")
        if not isinstance(value, str):
            found.append(f"audit annotation {key!r} value not a string")
    return found


def _patch_problems(request: dict[str, Any], response: dict[str, Any]) -> list[str]:
    if response.get("patchType") != "JSONPatch":
        return [f"patchType {response.get('patchType')!r}"]
    text = response["patch"]
    if not isinstance(text, str) or not B64.match(text):
        return ["patch is not standard padded base64"]
    try:
        ops = decode_patch(text)
    except (binascii.Error, ValueError, AssertionError) as exc:
        return [f"patch undecodable: {exc}"]
    if not ops:
        return ["empty patch sent (omit it instead)"]
    if request.get("object") is None:
        return ["patch on a request without an object"]
    try:
        patched = jsonpatch.apply_patch(copy.deepcopy(request["object"]), ops)
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
        return [f"patch does not apply strictly (RFC 6902): {exc}"]
    # The patch must not make the object fail the apiserver's own checks (contract §6).
    before = set(builtin_problems(request["object"]))
    return [f"patch breaks built-in validation: {p}"
            for p in builtin_problems(patched) if p not in before]


def _extended(name: str) -> bool:
    return "/" in name and "kubernetes.io/" not in name and not name.startswith("requests.")


def builtin_problems(obj: Any) -> list[str]:
    """What the apiserver's validation says about extended resources (webhook-contract.md §6),
    after its Pod defaulting (missing requests copied from limits; Pods only)."""
    found: list[str] = []
    if not isinstance(obj, dict):
        return found
    for path, spec in pod_specs(obj):
        for key in ("initContainers", "containers"):
            containers = spec.get(key)
            # Malformed parts (fuzzed input) are the engine's violations, not the apiserver's.
            for index, container in enumerate(containers if isinstance(containers, list) else []):
                where = ".".join(map(str, (*path, key, index)))
                resources = _dict(container.get("resources")) if isinstance(container, dict) else {}
                limits = _dict(resources.get("limits"))
                requests = _dict(resources.get("requests"))
                if obj.get("kind") == "Pod":
                    requests = {**limits, **requests}
                for name in sorted({*limits, *requests}):
                    if not _extended(name):
                        continue
                    values = {}
                    for side, table in (("limits", limits), ("requests", requests)):
                        if name in table:
                            try:
                                values[side] = parse_quantity(table[name])
                            except (ValueError, TypeError):
                                found.append(f"{where}.{side}[{name}] not a quantity")
                                continue
                            if values[side] < 0 or values[side] != int(values[side]):
                                found.append(f"{where}.{side}[{name}] must be an integer >= 0")
                    if "requests" in values and "limits" not in values and name not in limits:
                        found.append(f"{where}.limits[{name}] required")
                    if len(values) == 2 and values["limits"] != values["requests"]:
                        found.append(f"{where}.requests[{name}] must equal the limit")
    return found


def _dict(value: Any) -> dict[str, Any]:
    return dict(value) if isinstance(value, dict) else {}


def apply(request: dict[str, Any], response: dict[str, Any]) -> Any:
    if "patch" not in response:
        return request["object"]
    return jsonpatch.apply_patch(copy.deepcopy(request["object"]), decode_patch(response["patch"]))
