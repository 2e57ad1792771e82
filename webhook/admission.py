"""AdmissionReview v1 in and out (reference/webhook-contract.md §1-2). No Flask, no policy:
reading a body into a request, and shaping the engine's Decision into the response the
apiserver accepts."""

from __future__ import annotations

import base64
import json
import re
import unicodedata
from collections.abc import Iterable, Iterator
from typing import Any

from policies.decision import Decision, Violation

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
# Operations whose `object` may be null (DELETE sends only oldObject; CONNECT may carry none).
OBJECT_OPTIONAL = frozenset({"DELETE", "CONNECT"})

WARNING_MAX = 120  # the docs' advice per warning
WARNING_BUDGET = 4096  # runes across all warnings before the apiserver truncates
AUDIT_KEY_MAX = 63
_AUDIT_KEY_BAD = re.compile(r"[^-A-Za-z0-9_.]+")
AUDIT_KEY = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


class BadReview(ValueError):
    """The body is not an AdmissionReview v1 we can answer; the message says why (one line)."""


def read_review(body: bytes) -> dict[str, Any]:
    """The `request` stanza of an AdmissionReview v1 body, checked; raises BadReview."""
    try:
        review = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadReview(f"body is not valid JSON: {_one_line(str(exc))}") from None
    except RecursionError:
        raise BadReview("body is not valid JSON: nested too deeply") from None
    if not isinstance(review, dict):
        raise BadReview("body is not a JSON object (expected an AdmissionReview)")
    api_version, kind = review.get("apiVersion"), review.get("kind")
    if kind != KIND or api_version != API_VERSION:
        raise BadReview(
            f"expected apiVersion {API_VERSION!r} and kind {KIND!r}, "
            f"got {_short(api_version)} and {_short(kind)}"
        )
    request = review.get("request")
    if not isinstance(request, dict):
        raise BadReview("request: missing or not an object")
    uid = request.get("uid")
    if not isinstance(uid, str) or not uid:
        raise BadReview("request.uid: missing or not a non-empty string")
    gvk = request.get("kind")
    if not isinstance(gvk, dict) or not isinstance(gvk.get("kind"), str) or not gvk["kind"]:
        raise BadReview("request.kind: missing or not a {group, version, kind} object")
    operation = request.get("operation")
    if operation not in OPERATIONS:
        raise BadReview(
            f"request.operation: {_short(operation)} is not one of CREATE, UPDATE, DELETE, CONNECT"
        )
    obj = request.get("object")
    if obj is None and operation not in OBJECT_OPTIONAL:
        raise BadReview(f"request.object: missing or null on {operation}")
    if obj is not None and not isinstance(obj, dict):
        raise BadReview("request.object: not a JSON object")
    for key in ("namespace", "name", "subResource"):
        if request.get(key) is not None and not isinstance(request[key], str):
            raise BadReview(f"request.{key}: not a string")
    if request.get("dryRun") is not None and not isinstance(request["dryRun"], bool):
        raise BadReview("request.dryRun: not a boolean")
    return request


def _metadata(request: dict[str, Any]) -> Iterator[dict[str, Any]]:
    """The metadata of the object, then of the old object (a DELETE carries only that)."""
    for key in ("object", "oldObject"):
        obj = request.get(key)
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if isinstance(meta, dict):
            yield meta


def request_namespace(request: dict[str, Any]) -> str | None:
    """The namespace to judge in: the request's, else the object's own (cluster-scoped: None)."""
    ns = request.get("namespace")
    if ns:
        return str(ns)
    for meta in _metadata(request):
        if isinstance(meta.get("namespace"), str):
            return str(meta["namespace"])
    return None


def request_name(request: dict[str, Any]) -> str:
    name = request.get("name")
    if name:
        return str(name)
    for meta in _metadata(request):
        found = meta.get("name") or meta.get("generateName")
        if isinstance(found, str):
            return found
    return ""


def envelope(uid: str, response: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": API_VERSION, "kind": KIND, "response": {"uid": uid, **response}}


def encode_patch(ops: Iterable[dict[str, Any]]) -> str:
    """Standard, padded base64 of the JSON array (what Go's []byte decoding expects)."""
    return base64.b64encode(json.dumps(list(ops), separators=(",", ":")).encode()).decode()


def build_response(request: dict[str, Any], decision: Decision, webhook: str) -> dict[str, Any]:
    """The AdmissionReview answer for /mutate (`webhook="mutate"`) or /validate.

    The mutating answer only carries the patch: refusing, warning and auditing are the
    validating webhook's job, which sees the final object (contract §4 good practice), and
    doing them twice would duplicate every warning and audit entry.
    """
    uid = request["uid"]
    if webhook == "mutate":
        response: dict[str, Any] = {"allowed": True}
        # A patch on an operation without an object is a 500 for the user (contract §2.4).
        if decision.patch and request.get("object") is not None:
            response["patchType"] = "JSONPatch"
            response["patch"] = encode_patch(decision.patch)
        return envelope(uid, response)
    response = {"allowed": bool(decision.allowed)}
    if not decision.allowed:
        response["status"] = {
            "code": 403, "reason": "Forbidden", "status": "Failure",
            "message": denial_message(decision),
        }
    warnings = shape_warnings(decision.warnings)
    if warnings:
        response["warnings"] = warnings
    annotations = audit_annotations(decision.audited)
    if annotations:
        response["auditAnnotations"] = annotations
    return envelope(uid, response)


def denial_message(decision: Decision) -> str:
    denials = decision.denials
    if not denials:
        return "denied by GPU policy"
    return "; ".join(_clean(v.describe()) for v in denials)


def error_response(request: dict[str, Any], webhook: str) -> dict[str, Any]:
    """Answer when the engine raised: never patch (a bug must not corrupt an object); the
    validating webhook refuses with 500 so the failure is visible and not silently allowed."""
    if webhook == "mutate":
        return envelope(request["uid"], {"allowed": True})
    return envelope(request["uid"], {
        "allowed": False,
        "status": {
            "code": 500, "reason": "InternalError", "status": "Failure",
            "message": f"gpupolicy could not evaluate this object (internal error, "
                       f"request uid {request['uid']}); see the webhook logs",
        },
    })


def shape_warnings(texts: Iterable[str]) -> list[str]:
    """Warnings the apiserver keeps: no control characters, ≤120 characters each, no
    duplicates, and together within the 4096-rune budget (contract §2.2)."""
    out: list[str] = []
    seen: set[str] = set()
    total = 0
    for text in texts:
        line = _clean(text)
        if len(line) > WARNING_MAX:
            line = line[: WARNING_MAX - 1].rstrip() + "…"
        if not line or line in seen:
            continue
        if total + len(line) > WARNING_BUDGET:
            break
        seen.add(line)
        total += len(line)
        out.append(line)
    return out


def audit_key(rule: str) -> str:
    """`<rule>` made a valid audit-annotation key (qualified-name part, no `/`, ≤63)."""
    key = _AUDIT_KEY_BAD.sub("-", rule)[:AUDIT_KEY_MAX].strip("-_.")
    return key if AUDIT_KEY.match(key) else "violation"


def audit_annotations(violations: Iterable[Violation]) -> dict[str, str]:
    """One key per rule; several findings of a rule are joined, so a key never repeats with
    another value (the apiserver would drop it)."""
    grouped: dict[str, list[str]] = {}
    for v in violations:
        grouped.setdefault(audit_key(v.rule), []).append(_clean(v.describe()))
    return {key: "; ".join(dict.fromkeys(texts)) for key, texts in sorted(grouped.items())}


def _clean(text: str) -> str:
    """One printable line: control characters (newlines, tabs, …) become spaces."""
    cleaned = "".join(" " if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c
                      for c in text)
    return " ".join(cleaned.split())


def _one_line(text: str) -> str:
    return _clean(text)[:200]


def _short(value: Any) -> str:
    text = json.dumps(value) if value is not None else "nothing"
    return text if len(text) <= 60 else text[:57] + "..."
