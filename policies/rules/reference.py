"""The rules reference: what `gpupolicy rules` lists and docs/rules.md shows, read from the
registry (each rule module's attributes, docstring and `EXAMPLES`), so a rule added to the
registry is documented by being added. The format of `EXAMPLES` is in this package's
docstring (policies/rules/__init__.py).
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from types import ModuleType
from typing import Any

import yaml

from policies.rules import CLUSTER_RULES, FACTS, OTHER_RULE_IDS, RULES

# Prefix of a rule id -> its category, when the module names none (`CATEGORY`).
_CATEGORIES = (
    ("dra-", "dra"), ("mig-", "mig"), ("shared-", "sharing"), ("gpushare-", "sharing"),
    ("gpu-fraction", "sharing"), ("gpu-sharing", "sharing"), ("extended-resource", "cluster"),
    ("visible-devices", "security"), ("privileged-", "security"), ("pod-", "input"),
    ("gpu-", "resources"),
)
RESULTS = ("PASS", "FAIL")


@dataclass(frozen=True)
class Example:
    """One PASS or FAIL example of a rule, as the tests run it through the engine."""

    result: str  # PASS | FAIL
    title: str
    object: Mapping[str, Any] | None  # what is reviewed (pod-scope and claim rules)
    policy: Mapping[str, Any] | None  # a GPUPolicy spec; None: the bundled default policy
    nodes: tuple[Mapping[str, Any], ...]  # the inventory: Node objects (and DRA objects)
    pods: tuple[Mapping[str, Any], ...]  # running pods a cluster-scope rule reads
    namespace: str


@dataclass(frozen=True)
class RuleDoc:
    id: str
    severity: str  # error (under an Enforce policy), error (fact), warning
    category: str
    door: str  # which front doors see it
    summary: str  # one line
    text: str  # the whole docstring
    examples: tuple[Example, ...]
    native: str | None  # "" exported as a ValidatingAdmissionPolicy, else why not; None: unsaid


# The rules that are no module: what mutation and the reader find.
_OTHER_SUMMARIES = {
    "node-selector-conflict": "a policy injects a nodeSelector value the pod already sets "
                              "otherwise: the pod could never schedule",
    "pod-spec-malformed": "a pod spec the engine cannot read (a field of the wrong type)",
    "runtime-class-conflict": "a policy injects a runtimeClassName whose nodeSelector conflicts "
                              "with the pod's, or whose overhead differs from the one the pod "
                              "carries: the RuntimeClass admission plugin would refuse the pod, "
                              "so the class is not injected",
}
_SCHEDULING = frozenset({"node-selector-conflict", "runtime-class-conflict"})


def rule_ids() -> list[str]:
    return sorted({*RULES, *OTHER_RULE_IDS})


def rule_doc(rule: str) -> RuleDoc | None:
    """One rule's documentation; None for an unknown id."""
    if rule in RULES:
        return describe(RULES[rule])
    if rule in OTHER_RULE_IDS:
        category = "scheduling" if rule in _SCHEDULING else "input"
        return RuleDoc(rule, "error", category, "all", _OTHER_SUMMARIES.get(rule, ""), "", (),
                       None)
    return None


def rule_docs() -> list[RuleDoc]:
    """Every rule, sorted by id."""
    return [doc for rule in rule_ids() if (doc := rule_doc(rule)) is not None]


def describe(module: ModuleType) -> RuleDoc:
    text = inspect.cleandoc(module.__doc__ or "")
    return RuleDoc(
        id=module.ID,
        severity=severity(module),
        category=getattr(module, "CATEGORY", "") or _category(module.ID),
        door=door(module),
        summary=summary(module.ID, text),
        text=text,
        examples=examples(module),
        native=getattr(module, "NATIVE", None),
    )


def severity(module: ModuleType) -> str:
    declared = getattr(module, "SEVERITY", None)
    if declared:
        return str(declared)
    if module.ID in FACTS or (module in CLUSTER_RULES and module.INTRINSIC):
        return "error (fact)"
    return "warning" if module in CLUSTER_RULES else "error"


def door(module: ModuleType) -> str:
    """`all`: review, lint, the webhook and the audit; `audit`: only a whole cluster shows it."""
    return "audit" if module in CLUSTER_RULES else "all"


def _category(rule: str) -> str:
    return next((name for prefix, name in _CATEGORIES if rule.startswith(prefix)), "other")


def summary(rule: str, text: str) -> str:
    """The docstring's first sentence, without the leading `rule-id (...):`."""
    first = " ".join(text.split("\n\n", 1)[0].split())
    head, colon, rest = first.partition(": ")
    if colon and head.split(" ", 1)[0].strip("`") == rule:
        first = rest
    end = first.find(". ")
    return first if end < 0 else first[:end + 1]


def examples(module: ModuleType) -> tuple[Example, ...]:
    raw = getattr(module, "EXAMPLES", None)
    if not raw:
        return ()
    data = yaml.safe_load(raw)
    if not isinstance(data, list):
        raise ValueError(f"{module.ID}: EXAMPLES must be a YAML list")
    return tuple(_example(module.ID, item) for item in data)


def _example(rule: str, item: Any) -> Example:
    if not isinstance(item, dict):
        raise ValueError(f"{rule}: an example must be a mapping")
    given = [r for r in RESULTS if r in item]
    if len(given) != 1:
        raise ValueError(f"{rule}: an example says PASS: or FAIL: (one of them)")
    unknown = set(item) - {*RESULTS, "object", "policy", "nodes", "pods", "namespace"}
    if unknown:
        raise ValueError(f"{rule}: unknown example keys {sorted(unknown)}")
    return Example(
        result=given[0],
        title=str(item[given[0]]),
        object=item.get("object"),
        policy=item.get("policy"),
        nodes=tuple(item.get("nodes") or ()),
        pods=tuple(item.get("pods") or ()),
        namespace=str(item.get("namespace", "default")),
    )


def example_yaml(example: Example) -> str:
    """The example as a person reads it: the reviewed object, with what it needs."""
    parts: list[str] = []
    if example.policy is not None:
        parts.append("# policy spec\n" + yaml.safe_dump(dict(example.policy), sort_keys=False))
    if example.nodes:
        parts.append("# inventory\n" + yaml.safe_dump_all(
            [dict(n) for n in example.nodes], sort_keys=False))
    if example.pods:
        parts.append("# running pods\n" + "---\n".join(_runs(example.pods)))
    if example.object is not None:
        parts.append(yaml.safe_dump(dict(example.object), sort_keys=False))
    return "---\n".join(parts)


def _runs(items: tuple[Mapping[str, Any], ...]) -> list[str]:
    """Each item as YAML; a run of equal items (an example's YAML alias repeated) once, with
    its count: 21 pods on one GPU read as one pod times 21."""
    shown: list[str] = []
    i = 0
    while i < len(items):
        n = 1
        while i + n < len(items) and items[i + n] == items[i]:
            n += 1
        text = yaml.safe_dump(dict(items[i]), sort_keys=False)
        shown.append(f"# {n} times:\n{text}" if n > 1 else text)
        i += n
    return shown
