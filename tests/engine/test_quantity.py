"""Quantities read as the apiserver reads them (apimachinery resource.ParseQuantity), checked
row by row against that behaviour, and against the `kubernetes` client's parse_quantity where
the two agree; the rows where they differ are listed with the reason."""

from __future__ import annotations

import time
from fractions import Fraction
from typing import Any

import pytest
from kubernetes.utils import parse_quantity as client_parse

from policies.quantity import CAP, QuantityError, parse_quantity

N = Fraction(1, 10**9)
INVALID = None

# (as written, the apiserver's value or INVALID)
TABLE: list[tuple[Any, Any]] = [
    ("0", 0), ("1", 1), ("+1", 1), ("-1", -1), ("01", 1), ("00", 0), ("-0", 0), ("007", 7),
    ("1000m", 1), ("500m", Fraction(1, 2)), ("1.5", Fraction(3, 2)), ("1.", 1),
    (".5", Fraction(1, 2)), ("0.5", Fraction(1, 2)), ("-.5", Fraction(-1, 2)),
    ("1n", N), ("1u", Fraction(1, 10**6)), ("1m", Fraction(1, 1000)), ("1k", 1000),
    ("1M", 10**6), ("1G", 10**9), ("1T", 10**12), ("1P", 10**15), ("1E", 10**18),
    ("1Ki", 2**10), ("1Mi", 2**20), ("1Gi", 2**30), ("1Ti", 2**40), ("1Pi", 2**50),
    ("1Ei", 2**60), ("1.5Gi", 3 * 2**29), ("0.5Ki", 512), ("2Gi", 2**31),
    ("1e3", 1000), ("1E3", 1000), ("1e+3", 1000), ("1e-3", Fraction(1, 1000)),
    ("1.5e3", 1500), ("1e0", 1), ("1e-9", N), ("12e-1", Fraction(6, 5)),
    # Non-zero values are rounded away from zero to a multiple of 1n.
    ("1.5e-9", 2 * N), ("1.5e-10", N), ("0.0000000001", N), ("-0.0000000001", -N),
    ("1e-999999", N), ("0." + "0" * 5000 + "1", N), ("1n1"[:2], N),
    # The cap at 2^63-1 (the apiserver's for binary suffixes; see policies/quantity.py).
    ("8Ei", CAP), ("9223372036854775807", CAP), ("9223372036854775808", CAP),
    ("1e9999999", CAP), ("1e99999999", CAP), ("1e2147483647", CAP), ("1" * 5000, CAP),
    ("-1e30", -CAP),
    # The exponent is read as int64 and truncated to int32, as the apiserver does.
    ("1e4294967296", 1), ("1e2147483648", N), ("1e4294967299", 1000),
    # No digits: zero where the apiserver's int64 fast path takes it...
    (".", 0), ("-", 0), ("+", 0), ("k", 0), ("Gi", 0), ("Ti", 0), ("e3", 0), ("E", 0),
    (".Ki", 0),
    # ...refused where its decimal path does.
    ("Pi", INVALID), ("Ei", INVALID), ("e-10", INVALID), ("-e-10", INVALID),
    # Refused by the grammar.
    ("", INVALID), (" 1", INVALID), ("1 ", INVALID), ("1 Gi", INVALID), ("1K", INVALID),
    ("1e", INVALID), ("1ee3", INVALID), ("1Ee3", INVALID), ("1e--3", INVALID),
    ("1e3.5", INVALID), ("1e3e3", INVALID), ("1.1.M", INVALID), ("1+1.0M", INVALID),
    ("0.1mi", INVALID), ("0.1am", INVALID), ("aoeu", INVALID), (".5i", INVALID),
    ("1i", INVALID), ("-3.01i", INVALID), ("-3.01e-", INVALID), ("1mi", INVALID),
    ("--1", INVALID), ("1,5", INVALID), ("0x10", INVALID), ("1_000", INVALID),
    ("²", INVALID), ("1²", INVALID), ("\u0661", INVALID), ("\uff11", INVALID), ("Infinity", INVALID),
    ("NaN", INVALID), ("inf", INVALID), ("1e9223372036854775808", INVALID),
    ("1" * 5000 + "x", INVALID), ("1e" + "9" * 5000, INVALID),
    # JSON / YAML values that are not strings.
    (1, 1), (0, 0), (-2, -2), (10**30, CAP), (-(10**30), -CAP), (0.5, Fraction(1, 2)),
    (1.0, 1), (1e300, CAP), (5e-324, N),
    (None, INVALID), (True, INVALID), (False, INVALID), (float("nan"), INVALID),
    (float("inf"), INVALID), (float("-inf"), INVALID), ([], INVALID), ([1], INVALID),
    ({}, INVALID), ({"a": 1}, INVALID),
]

# Where kubernetes.utils.parse_quantity answers otherwise, and why. The client is a plain
# Decimal() with a suffix table: it has neither the apiserver's grammar nor its limits.
CLIENT_DIFFERS = {
    " 1": "Decimal() strips whitespace", "1 ": "Decimal() strips whitespace",
    "1K": "the client takes K as k",
    "1_000": "Decimal() takes underscores", "\u0661": "Decimal() takes any Unicode digit",
    "\uff11": "Decimal() takes any Unicode digit",
    "Infinity": "Decimal() takes Infinity", "NaN": "Decimal() takes NaN",
    "inf": "Decimal() takes inf",
    ".": "no digits: the client refuses what the apiserver's fast path reads as 0",
    "-": "no digits", "+": "no digits", "k": "no digits", "Gi": "no digits", "Ti": "no digits",
    "e3": "no digits", "E": "no digits", ".Ki": "no digits",
    "1.5e-9": "the client does not round up to 1n", "1.5e-10": "no rounding to 1n",
    "0.0000000001": "no rounding to 1n", "-0.0000000001": "no rounding to 1n",
    "1e-999999": "no rounding to 1n", "0." + "0" * 5000 + "1": "no rounding to 1n",
    "8Ei": "the client has no cap", "9223372036854775808": "no cap", "1e9999999": "no cap",
    "1e99999999": "no cap", "1e2147483647": "no cap", "1" * 5000: "no cap", "-1e30": "no cap",
    "1e4294967296": "the client has no int32 wrap of the exponent",
    "1e2147483648": "no int32 wrap", "1e4294967299": "no int32 wrap",
    "1 Gi": "Decimal() strips whitespace",
}
def _ids() -> list[str]:
    return [repr(v)[:30] for v, _ in TABLE]


@pytest.mark.parametrize(("written", "expected"), TABLE, ids=_ids())
def test_quantity_table(written: Any, expected: Any) -> None:
    started = time.perf_counter()
    if expected is INVALID:
        with pytest.raises(QuantityError):
            parse_quantity(written)
    else:
        assert parse_quantity(written) == expected
        assert isinstance(parse_quantity(written), int) is (Fraction(expected).denominator == 1)
    assert time.perf_counter() - started < 0.05, "parsing must cost what the text's length does"


def _client(written: Any) -> Any:
    try:
        value = client_parse(written)
    except (ValueError, ArithmeticError, TypeError):
        return INVALID
    if not value.is_finite():
        return value
    if value and not -40 < value.adjusted() < 40:
        return value  # Fraction() of it would be the slow part; it equals no table value
    return Fraction(value)


@pytest.mark.parametrize(("written", "expected"), [r for r in TABLE if isinstance(r[0], str)],
                         ids=[repr(v)[:30] for v, _ in TABLE if isinstance(v, str)])
def test_client_agrees_except_where_listed(written: str, expected: Any) -> None:
    client = _client(written)
    if written in CLIENT_DIFFERS:
        assert client != expected, f"{written[:40]!r} now agrees: drop it from CLIENT_DIFFERS"
    else:
        assert client == expected


def test_table_size() -> None:
    assert len(TABLE) >= 120
