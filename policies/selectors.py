"""Kubernetes label-selector, node-affinity and toleration matching, on raw camelCase dicts.

Semantics follow Kubernetes exactly (apimachinery `labels`, component-helpers
`scheduling/corev1/nodeaffinity`, core/v1 `Toleration.ToleratesTaint`): an empty LabelSelector
matches everything, an empty NodeSelectorTerm matches nothing, NotIn holds when the key is
absent, Gt/Lt compare integers and fail when the label is absent or not an integer.
Malformed input (unknown operator, Gt without exactly one integer, a part of the wrong type)
matches nothing, as the API server would have refused it or the scheduler would treat it as an
error; it never raises.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple, TypeVar

from policies.shape import REQUIRED

SCHEDULING_EFFECTS = frozenset({"NoSchedule", "NoExecute"})


class Taint(NamedTuple):
    key: str
    value: str = ""
    effect: str = ""

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any]) -> Taint:
        return cls(str(raw.get("key") or ""), str(raw.get("value") or ""),
                   str(raw.get("effect") or ""))

    def as_dict(self) -> dict[str, str]:
        out = {"key": self.key, "effect": self.effect}
        if self.value:
            out["value"] = self.value
        return out


def _values(raw: Mapping[str, Any]) -> Sequence[Any]:
    values = raw.get("values")
    return values if isinstance(values, (list, tuple)) else ()


def _expression_matches(expr: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """A LabelSelectorRequirement (In, NotIn, Exists, DoesNotExist)."""
    if not isinstance(expr, dict):
        return False
    key = expr.get("key")
    op = expr.get("operator")
    if not isinstance(key, str):
        return False
    if op == "In":
        return key in labels and labels[key] in _values(expr)
    if op == "NotIn":
        return key not in labels or labels[key] not in _values(expr)
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    return False


def label_selector_matches(selector: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """metav1.LabelSelector: matchLabels and matchExpressions ANDed; `{}` matches everything."""
    if not isinstance(selector, dict):
        return False
    match_labels = selector.get("matchLabels") or {}
    expressions = selector.get("matchExpressions") or []
    if not isinstance(match_labels, dict) or not isinstance(expressions, (list, tuple)):
        return False
    for key, value in match_labels.items():
        if labels.get(key) != value:
            return False
    return all(_expression_matches(e, labels) for e in expressions)


def _integer(text: Any) -> int | None:
    # Go's strconv.ParseInt(s, 10, 64): optional sign, decimal digits, nothing else.
    if not isinstance(text, str):
        return None
    body = text[1:] if text[:1] in ("+", "-") else text
    if not body.isascii() or not body.isdigit():
        return None
    return int(text)


def requirement_matches(req: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """core/v1 NodeSelectorRequirement against node labels."""
    if not isinstance(req, dict):
        return False
    op = req.get("operator")
    if op in ("Gt", "Lt"):
        key = req.get("key")
        values = _values(req)
        if not isinstance(key, str) or len(values) != 1 or key not in labels:
            return False
        bound = _integer(values[0])
        have = _integer(labels[key])
        if bound is None or have is None:
            return False
        return have > bound if op == "Gt" else have < bound
    return _expression_matches(req, labels)


def _field_matches(req: Mapping[str, Any], node_name: str) -> bool:
    # The scheduler supports only metadata.name in matchFields, with In / NotIn.
    if not isinstance(req, dict) or req.get("key") != "metadata.name":
        return False
    op = req.get("operator")
    if op == "In":
        return node_name in _values(req)
    if op == "NotIn":
        return node_name not in _values(req)
    return False


def term_matches(
    term: Mapping[str, Any], labels: Mapping[str, str], *, node_name: str = ""
) -> bool:
    """NodeSelectorTerm: every expression and field requirement holds; an empty term: never."""
    if not isinstance(term, dict):
        return False
    expressions = term.get("matchExpressions") or []
    fields = term.get("matchFields") or []
    if not isinstance(expressions, (list, tuple)) or not isinstance(fields, (list, tuple)):
        return False
    if not expressions and not fields:
        return False
    return all(requirement_matches(r, labels) for r in expressions) and all(
        _field_matches(f, node_name) for f in fields
    )


def node_affinity_matches(
    affinity: Mapping[str, Any] | None, labels: Mapping[str, str], node_name: str = ""
) -> bool:
    """Required node affinity: nodeSelectorTerms ORed; an empty term list matches nothing.

    Takes a NodeAffinity, or a whole pod `affinity` (its `nodeAffinity` is used). No affinity,
    or none required, matches every node; a part of the wrong type matches none.
    """
    if not affinity:
        return True
    if not isinstance(affinity, dict):
        return False
    if "nodeAffinity" in affinity:
        affinity = affinity["nodeAffinity"]
        if not affinity:
            return True
        if not isinstance(affinity, dict):
            return False
    required = affinity.get(REQUIRED)
    if required is None:
        return True
    terms = required.get("nodeSelectorTerms") if isinstance(required, dict) else None
    if not isinstance(terms, list | None):
        return False
    return any(term_matches(t, labels, node_name=node_name) for t in terms or ())


def node_selector_matches(selector: Mapping[str, str] | None, labels: Mapping[str, str]) -> bool:
    """spec.nodeSelector: every key present with exactly that value."""
    if not selector:
        return True
    if not isinstance(selector, dict):
        return False
    return all(labels.get(k) == v for k, v in selector.items())


TaintT = TypeVar("TaintT", Taint, Mapping[str, Any])


def _taint_parts(taint: Taint | Mapping[str, Any]) -> tuple[str, str, str]:
    if isinstance(taint, Taint):
        return taint.key, taint.value, taint.effect
    return (str(taint.get("key") or ""), str(taint.get("value") or ""),
            str(taint.get("effect") or ""))


def tolerates(toleration: Mapping[str, Any], taint: Taint | Mapping[str, Any]) -> bool:
    """core/v1 Toleration.ToleratesTaint."""
    if not isinstance(toleration, dict):
        return False
    key, value, effect = _taint_parts(taint)
    t_effect = toleration.get("effect") or ""
    if t_effect and t_effect != effect:
        return False
    t_key = toleration.get("key") or ""
    if t_key and t_key != key:
        return False
    op = toleration.get("operator") or "Equal"
    if op == "Exists":
        return True
    if op == "Equal":
        return (toleration.get("value") or "") == value
    return False


def untolerated(
    tolerations: Iterable[Mapping[str, Any]] | None, taints: Iterable[TaintT]
) -> list[TaintT]:
    """NoSchedule / NoExecute taints that no toleration tolerates (PreferNoSchedule is ignored)."""
    tols = tuple(tolerations or ())
    return [
        taint
        for taint in taints
        if _taint_parts(taint)[2] in SCHEDULING_EFFECTS
        and not any(tolerates(t, taint) for t in tols)
    ]
