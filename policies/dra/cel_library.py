"""The Kubernetes CEL libraries of the apiserver's base environment that cel-cpp lacks, as
registered functions: lists (isSorted, sum, min, max), regex (find, findAll), URL, IP and CIDR
(apiserver pkg/cel/library). cel-cpp's own extensions bring sets, lists v3, two-variable
comprehensions, strings, optionals and cel.bind (cel.py builds the environment).

URL, IP and CIDR values cross into cel-cpp as one-entry maps tagged with a key no device
attribute can have (a "/" is not allowed in attribute names), like quantities and versions;
their canonical text is the value, so `ip('::1') == ip('0:0::1')` holds.

Not provided (cel-cpp refuses a second declaration of a function it already has): list
`indexOf`/`lastIndexOf` (the strings extension owns the names), `string(ip)`/`string(cidr)`,
the format and image libraries. Regexes run on RE2, as in Kubernetes: linear time.
"""

from __future__ import annotations

import ipaddress
import itertools
import re
from collections.abc import Callable, Mapping
from typing import Any

import re2
from cel_expr_python import cel


class CelError(Exception):
    """A runtime error inside one of our functions; cel-cpp reports it as an error value."""


URL = "k8s/url"
IP = "k8s/ip"
CIDR = "k8s/cidr"
MAX_REGEX = 1024  # longer patterns are refused rather than compiled (bounded work)


def safe(fn: Callable[..., Any]) -> Callable[..., Any]:
    """cel-cpp turns a Python exception into an error value; keep ours plain text."""
    def call(*args: Any) -> Any:
        try:
            return fn(*args)
        except CelError:
            raise
        except Exception as exc:  # any bug or odd input becomes a CEL runtime error
            raise CelError(str(exc)[:200]) from exc
    return call


def declare(name: str, overloads: list[tuple[Any, list[Any], Callable[..., Any], bool]]) -> Any:
    """One function with (return type, parameters, implementation, is member) overloads."""
    return cel.FunctionDecl(name, [
        cel.Overload(f"k8s_{name}_{i}", ret, params, is_member=member, impl=safe(impl))
        for i, (ret, params, impl, member) in enumerate(overloads)])


def _boxed(value: Any, tag: str) -> str:
    if isinstance(value, Mapping) and tag in value:
        return str(value[tag])
    raise CelError("no such overload")


# ---------------------------------------------------------------- lists


def _comparable(items: list[Any]) -> list[Any]:
    kinds = {bool if isinstance(x, bool) else (float if isinstance(x, int | float) else type(x))
             for x in items}
    if len(kinds) > 1 or kinds & {bool, dict, list, type(None)}:
        raise CelError("no such overload")
    return items


def _is_sorted(items: list[Any]) -> bool:
    values = _comparable(list(items))
    return all(a <= b for a, b in itertools.pairwise(values))


def _sum(items: list[Any]) -> Any:
    values = list(items)
    if any(isinstance(x, bool) or not isinstance(x, int | float) for x in values):
        raise CelError("no such overload")
    return sum(values, 0.0 if any(isinstance(x, float) for x in values) else 0)


def _extreme(pick: Callable[..., Any], name: str) -> Callable[[list[Any]], Any]:
    def run(items: list[Any]) -> Any:
        values = _comparable(list(items))
        if not values:
            raise CelError(f"{name} called on empty list")
        return pick(values)
    return run


# ---------------------------------------------------------------- regex


def _regex(pattern: str) -> Any:
    if len(pattern) > MAX_REGEX:
        raise CelError("regex too long")
    try:
        return re2.compile(pattern)
    except Exception as exc:
        raise CelError(f"invalid regex: {str(exc)[:100]}") from exc


def _find(text: str, pattern: str) -> str:
    match = _regex(pattern).search(text)
    return match.group(0) if match else ""


def _find_all(text: str, pattern: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    found = [m.group(0) for m in _regex(pattern).finditer(text)]
    return found if limit < 0 else found[:limit]


# ---------------------------------------------------------------- URL


# RFC 3986 appendix B: scheme, authority, path, query, fragment (policies/ stays off urllib,
# a networking package by name: tests/test_layering.py).
_URL_PARTS = re.compile(r"^(?:([A-Za-z][A-Za-z0-9+.-]*):)?(?://([^/?#]*))?([^?#]*)"
                        r"(?:\?([^#]*))?(?:#(.*))?$", re.DOTALL)


class _Parts:
    def __init__(self, text: str):
        match = _URL_PARTS.match(text)
        groups = match.groups() if match else (None, None, text, None, None)
        self.scheme = groups[0] or ""
        self.netloc = groups[1] or ""
        self.path = groups[2] or ""
        self.query = groups[3] or ""
        self.fragment = groups[4] or ""


def urlsplit(text: str) -> _Parts:
    return _Parts(text)


def _unquote(text: str) -> str:
    text = text.replace("+", " ")
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), text)


def parse_qs(query: str, keep_blank_values: bool = True) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for pair in query.split("&"):
        if not pair:
            continue
        key, _, value = pair.partition("=")
        out.setdefault(_unquote(key), []).append(_unquote(value))
    return out


def _parse_url(text: str) -> Any:
    """What Go's url.ParseRequestURI accepts: an absolute URL or an absolute path."""
    if not text or any(c in text for c in " \t\n\r\x00") or len(text) > 4096:
        raise CelError(f"URL parse error during conversion from string: {text[:64]!r}")
    parts = urlsplit(text)
    if not parts.scheme and not text.startswith("/"):
        raise CelError(f"URL parse error during conversion from string: {text[:64]!r}: "
                       "invalid URI for request")
    if parts.fragment:
        raise CelError("URL parse error during conversion from string: fragments are not "
                       "allowed")
    return parts


def _url(text: str) -> dict[str, str]:
    _parse_url(text)
    return {URL: text}


def _is_url(text: str) -> bool:
    try:
        _parse_url(text)
    except CelError:
        return False
    return True


def _url_part(part: str) -> Callable[[Any], Any]:
    def get(value: Any) -> Any:
        parts = urlsplit(_boxed(value, URL))
        if part == "scheme":
            return parts.scheme
        if part == "host":
            return parts.netloc.rpartition("@")[2]
        if part == "hostname":
            host = parts.netloc.rpartition("@")[2]
            if host.startswith("["):
                return host[1:].partition("]")[0]
            return host.rpartition(":")[0] if ":" in host else host
        if part == "port":
            host = parts.netloc.rpartition("@")[2]
            tail = host.rpartition("]")[2] if host.startswith("[") else host
            return tail.rpartition(":")[2] if ":" in tail else ""
        if part == "path":
            return parts.path
        return {k: v for k, v in parse_qs(parts.query, keep_blank_values=True).items()}
    return get


# ---------------------------------------------------------------- IP and CIDR


def _parse_ip(text: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    if "%" in text:
        raise CelError(f"IP Address {text[:64]!r} with zone value is not allowed")
    try:
        address = ipaddress.ip_address(text)
    except ValueError as exc:
        raise CelError(f"IP Address {text[:64]!r} parse error during conversion from "
                       "string") from exc
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        raise CelError(f"IPv4-mapped IPv6 address {text[:64]!r} is not allowed")
    return address


def _ip(text: str) -> dict[str, str]:
    return {IP: str(_parse_ip(text))}


def _is_ip(text: str) -> bool:
    try:
        _parse_ip(text)
    except CelError:
        return False
    return True


def _ip_of(value: Any) -> ipaddress.IPv4Address | ipaddress.IPv6Address:
    return ipaddress.ip_address(_boxed(value, IP))


def _global_unicast(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    # Go's IsGlobalUnicast: private ranges count; broadcast, multicast, link-local do not.
    if address.is_unspecified or address.is_loopback or address.is_multicast \
            or address.is_link_local:
        return False
    return not (isinstance(address, ipaddress.IPv4Address)
                and address == ipaddress.IPv4Address("255.255.255.255"))


def _parse_cidr(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    address, slash, length = text.partition("/")
    if not slash or not length.isdigit() or "%" in text:
        raise CelError(f"network address parse error during conversion from string: "
                       f"{text[:64]!r}")
    _parse_ip(address)
    try:
        return ipaddress.ip_network(text, strict=False)
    except ValueError as exc:
        raise CelError(f"network address parse error during conversion from string: "
                       f"{text[:64]!r}") from exc


def _cidr(text: str) -> dict[str, str]:
    _parse_cidr(text)
    return {CIDR: text}


def _is_cidr(text: str) -> bool:
    try:
        _parse_cidr(text)
    except CelError:
        return False
    return True


def _network(value: Any) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(_boxed(value, CIDR), strict=False)


def _contains_ip(value: Any, other: Any) -> bool:
    address = _parse_ip(other) if isinstance(other, str) else _ip_of(other)
    return address in _network(value)


def _contains_cidr(value: Any, other: Any) -> bool:
    inner = _parse_cidr(other) if isinstance(other, str) else _network(other)
    outer = _network(value)
    return inner.version == outer.version and inner.subnet_of(outer)  # type: ignore[arg-type]


def _cidr_ip(value: Any) -> dict[str, str]:
    return {IP: str(ipaddress.ip_address(_boxed(value, CIDR).partition("/")[0]))}


def _masked(value: Any) -> dict[str, str]:
    return {CIDR: str(_network(value))}


def functions() -> list[Any]:
    t = cel.Type
    box = t.Map(t.STRING, t.DYN)
    items = t.List(t.DYN)
    s = t.STRING

    def member(name: str, ret: Any, impl: Callable[..., Any], *extra: Any) -> Any:
        return declare(name, [(ret, [box, *extra], impl, True)])

    ip_test = {
        "isUnspecified": lambda a: a.is_unspecified,
        "isLoopback": lambda a: a.is_loopback,
        "isLinkLocalMulticast": lambda a: a.is_multicast and (
            a in ipaddress.ip_network("224.0.0.0/24") if a.version == 4
            else a in ipaddress.ip_network("ff02::/16")),
        "isLinkLocalUnicast": lambda a: a.is_link_local and not a.is_multicast,
        "isGlobalUnicast": _global_unicast,
    }
    return [
        declare("isSorted", [(t.BOOL, [items], _is_sorted, True)]),
        declare("sum", [(t.DYN, [items], _sum, True)]),
        declare("min", [(t.DYN, [items], _extreme(min, "min"), True)]),
        declare("max", [(t.DYN, [items], _extreme(max, "max"), True)]),
        declare("find", [(s, [s, s], _find, True)]),
        declare("findAll", [(t.List(s), [s, s], _find_all, True),
                            (t.List(s), [s, s, t.INT], _find_all, True)]),
        declare("url", [(box, [s], _url, False)]),
        declare("isURL", [(t.BOOL, [s], _is_url, False)]),
        member("getScheme", s, _url_part("scheme")),
        member("getHost", s, _url_part("host")),
        member("getHostname", s, _url_part("hostname")),
        member("getPort", s, _url_part("port")),
        member("getEscapedPath", s, _url_part("path")),
        member("getQuery", t.Map(s, t.List(s)), _url_part("query")),
        declare("ip", [(box, [s], _ip, False), (box, [box], _cidr_ip, True)]),
        declare("isIP", [(t.BOOL, [s], _is_ip, False)]),
        declare("ip.isCanonical", [(t.BOOL, [s], lambda x: str(_parse_ip(x)) == x, False)]),
        member("family", t.INT, lambda v: _ip_of(v).version),
        *(member(name, t.BOOL, lambda v, test=test: bool(test(_ip_of(v))))
          for name, test in ip_test.items()),
        declare("cidr", [(box, [s], _cidr, False)]),
        declare("isCIDR", [(t.BOOL, [s], _is_cidr, False)]),
        declare("containsIP", [(t.BOOL, [box, s], _contains_ip, True),
                               (t.BOOL, [box, box], _contains_ip, True)]),
        declare("containsCIDR", [(t.BOOL, [box, s], _contains_cidr, True),
                                 (t.BOOL, [box, box], _contains_cidr, True)]),
        member("masked", box, _masked),
        member("prefixLength", t.INT, lambda v: _network(v).prefixlen),
    ]
