"""The apiserver's rules for the names a policy injects: label keys and taint keys (qualified
names), label values, and object names such as a RuntimeClass or PriorityClass (DNS subdomains).

Each check returns what is wrong, in words, or None. A value the apiserver refuses, injected
by the webhook, makes every GPU pod in scope fail validation, so the policy is refused first.
Lengths are checked before any pattern, so the work per value stays bounded.
"""

from __future__ import annotations

import re

NAME_MAX = 63
SUBDOMAIN_MAX = 253

_NAME = re.compile(r"[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?")
_DNS_LABEL = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = re.compile(rf"{_DNS_LABEL}(?:\.{_DNS_LABEL})*")

_ENDS = "starting and ending with a letter or digit"
_NAME_CHARS = f"letters, digits, '-', '_' or '.', {_ENDS}"
_SUBDOMAIN_CHARS = f"lowercase letters, digits, '-' or '.', {_ENDS}"


def qualified_name(value: str) -> str | None:
    """Label keys, taint keys: `[prefix/]name`, the prefix a DNS subdomain."""
    parts = value.split("/")
    if len(parts) > 2:
        return "has more than one '/' (the form is an optional DNS subdomain prefix, '/', a name)"
    name = parts[-1]
    if len(parts) == 2:
        prefix = parts[0]
        if not prefix:
            return "the prefix before '/' is empty"
        problem = dns_subdomain(prefix)
        if problem is not None:
            return f"the prefix {prefix!r} {problem}"
    if not name:
        return "the name part is empty"
    if len(name) > NAME_MAX:
        return f"the name part is longer than {NAME_MAX} characters"
    if not _NAME.fullmatch(name):
        return f"the name part must be {_NAME_CHARS}"
    return None


def taint_key(value: str) -> str | None:
    """Empty (with operator Exists) tolerates every taint; otherwise a qualified name."""
    return qualified_name(value) if value else None


def label_value(value: str) -> str | None:
    if len(value) > NAME_MAX:
        return f"is longer than {NAME_MAX} characters"
    if value and not _NAME.fullmatch(value):
        return f"must be empty or {_NAME_CHARS}"
    return None


def dns_subdomain(value: str) -> str | None:
    if not value:
        return "is empty"
    if len(value) > SUBDOMAIN_MAX:
        return f"is longer than {SUBDOMAIN_MAX} characters"
    if not _SUBDOMAIN.fullmatch(value):
        return f"must be {_SUBDOMAIN_CHARS}"
    return None


def integer(value: str) -> str | None:
    """Gt/Lt node selector values: the scheduler parses them as 64-bit integers."""
    if len(value) > 20 or not re.fullmatch(r"[-+]?[0-9]+", value) or not (
        -(2**63) <= int(value) < 2**63
    ):
        return "must be an integer (Gt and Lt compare numbers)"
    return None
