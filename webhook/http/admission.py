"""AdmissionReview v1 in and out (reference/webhook-contract.md §1-2). No Flask, no policy:
reading a body into a typed request, checked once here so nothing behind this seam meets a
field of the wrong type, and shaping the engine's Decision into the response the apiserver
accepts, bounded in size whatever the object held."""

from __future__ import annotations

import base64
import re
import unicodedata
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, NotRequired, TypedDict, cast

import orjson

from policies import jsonbudget
from policies.decision import Decision, Violation

API_VERSION = "admission.k8s.io/v1"
KIND = "AdmissionReview"
OPERATIONS = frozenset({"CREATE", "UPDATE", "DELETE", "CONNECT"})
# Operations whose `object` may be null (DELETE sends only oldObject; CONNECT may carry none).
OBJECT_OPTIONAL = frozenset({"DELETE", "CONNECT"})

WARNING_MAX = 120  # the docs' advice per warning
WARNING_BUDGET = 4096  # runes across all warnings before the apiserver truncates (contract §2.2)
# A denial lists the first violations, then counts the rest: 10,000 broken containers must not
# make a 3.5 MB Status message (kubectl prints it, the apiserver logs and audits it).
DENIAL_SHOWN = 20
DENIAL_BUDGET = 4096
AUDIT_VALUE_BUDGET = 2048  # per annotation key; audit events are kept and shipped
# The largest review the apiserver can send (docs/hardening.md): an object is at most 1.5 MiB
# in etcd, and its JSON at most twice that (the apiserver's own reasoning for its 3 MiB request
# cap); an UPDATE carries the object and the old one, and the envelope (userInfo, options) is
# a few KiB.
MAX_OBJECT = 3 * 1024 * 1024
MAX_BODY = 2 * MAX_OBJECT + 256 * 1024
# Values (keys included) one review may hold. Real reviews, compact as the apiserver sends
# them, spend 10-17 bytes per value (the corpus' densest: 9.8, the API's own round-trip
# fixture; tests/server/test_memory.py), so a MAX_BODY review of them holds fewer than this.
# Each value is 50-170 bytes of Python: the budget caps one parse, whatever the body is made of.
MAX_VALUES = MAX_BODY // 9
# Deeper than orjson's own limit (1024 levels, enforced in C as it parses) is refused too.
ITEM_MAX = 512  # one violation's text (it may quote a value the user wrote at any length)
AUDIT_KEY_MAX = 63
_AUDIT_KEY_BAD = re.compile(r"[^-A-Za-z0-9_.]+")
AUDIT_KEY = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")


class GroupVersionKind(TypedDict):
    group: NotRequired[str]
    version: NotRequired[str]
    kind: str


class GroupVersionResource(TypedDict):
    group: NotRequired[str]
    version: NotRequired[str]
    resource: NotRequired[str]


class UserInfo(TypedDict, total=False):
    username: str
    uid: str
    groups: list[str]
    extra: dict[str, list[str]]


class AdmissionRequest(TypedDict):
    """`request` of an AdmissionReview v1, as far as this webhook reads or echoes it. Fields
    the apiserver always sends but the webhook never needs may be absent (hand-made reviews)."""

    uid: str
    kind: GroupVersionKind
    operation: Literal["CREATE", "UPDATE", "DELETE", "CONNECT"]
    resource: NotRequired[GroupVersionResource]
    subResource: NotRequired[str]
    requestKind: NotRequired[GroupVersionKind]
    requestResource: NotRequired[GroupVersionResource]
    requestSubResource: NotRequired[str]
    name: NotRequired[str]
    namespace: NotRequired[str]
    userInfo: NotRequired[UserInfo]
    object: NotRequired[dict[str, Any] | None]
    oldObject: NotRequired[dict[str, Any] | None]
    dryRun: NotRequired[bool | None]
    options: NotRequired[dict[str, Any] | None]


class Status(TypedDict):
    code: int
    reason: str
    status: str
    message: str


class AdmissionResponse(TypedDict):
    uid: str
    allowed: bool
    patchType: NotRequired[Literal["JSONPatch"]]
    patch: NotRequired[str]
    status: NotRequired[Status]
    warnings: NotRequired[list[str]]
    auditAnnotations: NotRequired[dict[str, str]]


class AdmissionReview(TypedDict):
    apiVersion: str
    kind: str
    response: AdmissionResponse


class BadReview(ValueError):
    """The body is not an AdmissionReview v1 we can answer; the message says why (one line)."""


class TooLarge(BadReview):
    """The body is over a size budget (bytes or values): refused before it is parsed."""


# --- reading ---------------------------------------------------------------------------------

def _is_str(v: Any) -> bool:
    return isinstance(v, str)


def _is_dict(v: Any) -> bool:
    return isinstance(v, dict)


def _is_dict_or_null(v: Any) -> bool:
    return v is None or isinstance(v, dict)


def _is_bool_or_null(v: Any) -> bool:
    return v is None or isinstance(v, bool)


_STRING = ("a string", _is_str)
# Optional top-level fields: (what it must be, the check). Absent is always fine.
_FIELDS: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "subResource": _STRING,
    "requestSubResource": _STRING,
    "name": _STRING,
    "namespace": _STRING,
    "object": ("an object or null", _is_dict_or_null),
    "oldObject": ("an object or null", _is_dict_or_null),
    "options": ("an object or null", _is_dict_or_null),
    "dryRun": ("a boolean or null", _is_bool_or_null),
    "userInfo": ("an object", _is_dict),
}
_GVK = ("group", "version", "kind")
_GVR = ("group", "version", "resource")


def read_review(body: bytes, max_values: int = MAX_VALUES) -> AdmissionRequest:
    """The `request` stanza of an AdmissionReview v1 body, every field the webhook reads or
    echoes checked for its type; raises BadReview naming the first field that is wrong, and
    TooLarge, before anything is built, for a body of more than `max_values` JSON values. The
    byte limit is the reader's (webhook/http/server.py), which refuses before reading. Depth is
    orjson's: over 1024 levels it stops as it parses ("not valid JSON")."""
    found = jsonbudget.over_budget(body, max_values)
    if found is not None:
        raise TooLarge(f"body holds {found} JSON values, more than the {max_values} "
                       f"the largest real AdmissionReview needs")
    try:
        review = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise BadReview(f"body is not valid JSON: {_one_line(str(exc))}") from None
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
        raise BadReview(f"request.uid: expected a non-empty string, got {_short(uid)}")
    gvk = request.get("kind")
    if not isinstance(gvk, dict) or not isinstance(gvk.get("kind"), str) or not gvk["kind"]:
        raise BadReview(f"request.kind: expected a {{group, version, kind}} object with a "
                        f"non-empty kind, got {_short(gvk)}")
    _check_strings(gvk, _GVK, "request.kind")
    operation = request.get("operation")
    if not isinstance(operation, str) or operation not in OPERATIONS:
        raise BadReview(f"request.operation: expected one of CREATE, UPDATE, DELETE, CONNECT, "
                        f"got {_short(operation)}")
    for key, (what, ok) in _FIELDS.items():
        if key in request and not ok(request[key]):
            raise BadReview(f"request.{key}: expected {what}, got {_short(request[key])}")
    if request.get("object") is None and operation not in OBJECT_OPTIONAL:
        raise BadReview(f"request.object: missing or null on {operation}")
    for key, parts in (("requestKind", _GVK), ("resource", _GVR), ("requestResource", _GVR)):
        if key in request:
            if not isinstance(request[key], dict):
                raise BadReview(f"request.{key}: expected an object, got {_short(request[key])}")
            _check_strings(request[key], parts, f"request.{key}")
    if "userInfo" in request:
        _check_user(request["userInfo"])
    return cast(AdmissionRequest, request)


def _check_strings(obj: Mapping[str, Any], keys: Iterable[str], where: str) -> None:
    for key in keys:
        if key in obj and not isinstance(obj[key], str):
            raise BadReview(f"{where}.{key}: expected a string, got {_short(obj[key])}")


def _check_user(user: Mapping[str, Any]) -> None:
    _check_strings(user, ("username", "uid"), "request.userInfo")
    groups = user.get("groups")
    if groups is not None:
        _check_string_list(groups, "request.userInfo.groups")
    extra = user.get("extra")
    if extra is None:
        return
    if not isinstance(extra, dict):
        raise BadReview(f"request.userInfo.extra: expected an object, got {_short(extra)}")
    for key, values in extra.items():
        if values is not None:
            _check_string_list(values, f"request.userInfo.extra[{_short(key)}]")


def _check_string_list(values: Any, where: str) -> None:
    if not isinstance(values, list):
        raise BadReview(f"{where}: expected a list of strings, got {_short(values)}")
    for i, value in enumerate(values):
        if not isinstance(value, str):
            raise BadReview(f"{where}[{i}]: expected a string, got {_short(value)}")


def _metadata(request: AdmissionRequest) -> Iterator[dict[str, Any]]:
    """The metadata of the object, then of the old object (a DELETE carries only that)."""
    for obj in (request.get("object"), request.get("oldObject")):
        meta = obj.get("metadata") if obj is not None else None
        if isinstance(meta, dict):
            yield meta


def request_name(request: AdmissionRequest) -> str:
    name = request.get("name")
    if name:
        return name
    for meta in _metadata(request):
        found = meta.get("name") or meta.get("generateName")
        if isinstance(found, str):
            return found
    return ""


# --- answering -------------------------------------------------------------------------------

def envelope(response: AdmissionResponse) -> AdmissionReview:
    return {"apiVersion": API_VERSION, "kind": KIND, "response": response}


def encode(review: Mapping[str, Any]) -> bytes:
    """Compact UTF-8 JSON of an answer (or error) body."""
    return orjson.dumps(review)


def encode_patch(ops: Iterable[dict[str, Any]]) -> str:
    """Standard, padded base64 of the JSON array (what Go's []byte decoding expects)."""
    return base64.b64encode(orjson.dumps(list(ops))).decode()


def build_response(request: AdmissionRequest, decision: Decision, webhook: str
                   ) -> AdmissionReview:
    """The AdmissionReview answer for /mutate (`webhook="mutate"`) or /validate.

    The mutating answer only carries the patch: refusing, warning and auditing are the
    validating webhook's job, which sees the final object (contract §4 good practice), and
    doing them twice would duplicate every warning and audit entry.
    """
    uid = request["uid"]
    if webhook == "mutate":
        response: AdmissionResponse = {"uid": uid, "allowed": True}
        # A patch on an operation without an object is a 500 for the user (contract §2.4).
        if decision.patch and request.get("object") is not None:
            response["patchType"] = "JSONPatch"
            response["patch"] = encode_patch(decision.patch)
        return envelope(response)
    response = {"uid": uid, "allowed": bool(decision.allowed)}
    if not decision.allowed:
        response["status"] = {
            "code": 403, "reason": "Forbidden", "status": "Failure",
            "message": denial_message(decision.denials),
        }
    warnings = shape_warnings(decision.warnings)
    if warnings:
        response["warnings"] = warnings
    annotations = audit_annotations(decision.audited)
    if annotations:
        response["auditAnnotations"] = annotations
    return envelope(response)


def denial_message(denials: Iterable[Violation]) -> str:
    """The first violations, one clean line each, then how many more: bounded whatever the
    count (DENIAL_SHOWN items, DENIAL_BUDGET characters)."""
    shown, rest = _bounded(denials, DENIAL_SHOWN, DENIAL_BUDGET)
    if not shown:
        return "denied by GPU policy"
    return "; ".join(shown) + (f"; … and {rest} more" if rest else "")


def _bounded(violations: Iterable[Violation], count: int, budget: int) -> tuple[list[str], int]:
    """Distinct cleaned descriptions while they fit, and how many violations were left out."""
    shown: list[str] = []
    seen: set[str] = set()
    rest = 0
    used = 0
    for v in violations:
        if len(shown) >= count:
            rest += 1
            continue
        line = clean(v.describe())
        if line in seen:
            continue
        if shown and used + len(line) + 2 > budget:
            rest += 1
            count = len(shown)  # full: only count from here on
            continue
        seen.add(line)
        shown.append(line)
        used += len(line) + 2
    return shown, rest


def error_response(request: AdmissionRequest, webhook: str) -> AdmissionReview:
    """Answer when the engine raised: never patch (a bug must not corrupt an object); the
    validating webhook refuses with 500 so the failure is visible and not silently allowed."""
    uid = request["uid"]
    if webhook == "mutate":
        return envelope({"uid": uid, "allowed": True})
    return envelope({
        "uid": uid, "allowed": False,
        "status": {
            "code": 500, "reason": "InternalError", "status": "Failure",
            "message": f"gpupolicy could not evaluate this object (internal error, "
                       f"request uid {clean(uid)}); see the webhook logs",
        },
    })


def shape_warnings(texts: Iterable[str]) -> list[str]:
    """Warnings the apiserver keeps: no control characters, ≤120 characters each, no
    duplicates, and together within the 4096-rune budget (contract §2.2); when they do not
    all fit, the last one says how many were left out."""
    out: list[str] = []
    seen: set[str] = set()
    total = 0
    rest = 0
    budget = WARNING_BUDGET - 40  # room for the "… and N more" line
    for text in texts:
        if rest:
            rest += 1
            continue
        line = clean(text[: WARNING_MAX * 4])
        if len(line) > WARNING_MAX:
            line = line[: WARNING_MAX - 1].rstrip() + "…"
        if not line or line in seen:
            continue
        if total + len(line) > budget:
            rest = 1
            continue
        seen.add(line)
        total += len(line)
        out.append(line)
    if rest:
        out.append(f"… and {rest} more warnings not shown")
    return out


def audit_key(rule: str) -> str:
    """`<rule>` made a valid audit-annotation key (qualified-name part, no `/`, ≤63)."""
    key = _AUDIT_KEY_BAD.sub("-", rule)[:AUDIT_KEY_MAX].strip("-_.")
    return key if AUDIT_KEY.match(key) else "violation"


def audit_annotations(violations: Iterable[Violation]) -> dict[str, str]:
    """One key per rule; several findings of a rule are joined (bounded, then counted), so a
    key never repeats with another value (the apiserver would drop it)."""
    grouped: dict[str, list[Violation]] = {}
    for v in violations:
        grouped.setdefault(audit_key(v.rule), []).append(v)
    out: dict[str, str] = {}
    for key, found in sorted(grouped.items()):
        shown, rest = _bounded(found, len(found), AUDIT_VALUE_BUDGET)
        out[key] = "; ".join(shown) + (f"; … and {rest} more" if rest else "")
    return out


def clean(text: str) -> str:
    """One printable line of at most ITEM_MAX characters: control and format characters
    (newlines, tabs, bidi marks…) become spaces, runs of spaces one."""
    if len(text) > ITEM_MAX:
        text = text[: ITEM_MAX - 1] + "…"
    if not text.isprintable():  # rare: only then look at each character
        text = "".join(" " if unicodedata.category(c) in ("Cc", "Cf", "Zl", "Zp") else c
                       for c in text)
    return " ".join(text.split())


def _one_line(text: str) -> str:
    return clean(text)[:200]


def _short(value: Any) -> str:
    if value is None:
        return "nothing"
    try:
        text = orjson.dumps(value).decode()
    except TypeError:  # nested deeper than orjson writes: say what it is
        return f"a {type(value).__name__} nested too deeply to quote"
    return text if len(text) <= 60 else text[:57] + "..."
