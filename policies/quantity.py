"""Kubernetes resource quantities ("1", 1, "1000m", "2Gi", "1e3") as exact numbers, read the
way the apiserver reads them (apimachinery `resource.ParseQuantity` and its suffixer).

The grammar, byte for byte: an optional sign, ASCII digits with an optional `.` and fraction
(either part may be empty), then a suffix: a decimal SI one (n u m "" k M G T P E), a binary one
(Ki Mi Gi Ti Pi Ei) or an exponent `e`/`E` with an optional sign and digits. The exponent is
read as a 64-bit integer and then truncated to 32 bits, as the apiserver does. No whitespace,
no other digits (`²`, Arabic-Indic or fullwidth ones). A mantissa without digits (`.`, `-`,
`k`) is zero where the apiserver's int64 fast path takes it and refused where its decimal path
does (`Ei`, `e-10`).

Values: non-zero values are rounded away from zero to a multiple of 1n, as the apiserver does.
Magnitudes are capped at 2^63-1: the apiserver caps binary-suffixed values there and keeps larger
decimal ones exact, but no node, limit or policy goes beyond an int64, so every comparison the
engine makes comes out the same. The work is bounded by the text's length whatever the exponent
(`1e99999999` costs what `1e9` costs): digits past the ones that can matter are only looked at.
"""

from __future__ import annotations

import math
from fractions import Fraction
from functools import lru_cache
from typing import Any

from policies.display import shown

CAP = 2**63 - 1
_NANO = 10**9
_CAP_NANOS = CAP * _NANO
_DIGITS = frozenset("0123456789")
_SUFFIX_LETTERS = frozenset("eEinumkKMGTP")
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_BINARY = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_INT64 = 2**63
_CACHED_LENGTH = 40  # longer texts are rare and not worth keeping

# Whole quantities stay plain ints (most of them are): cheaper than Fraction and exact with it.
Number = Fraction | int


class QuantityError(ValueError):
    pass


def parse_quantity(value: Any) -> Number:
    """The exact value of a quantity; QuantityError for anything Kubernetes would refuse, and
    for null, booleans, lists and objects. A JSON or YAML number is read as the decimal it
    prints as (what the apiserver reads from the JSON text); NaN and infinities are refused.
    Whole numbers come back as plain ints (a Fraction in all but type, and much cheaper)."""
    if isinstance(value, bool) or value is None:
        raise QuantityError(f"{shown(value)} is not a quantity")
    if isinstance(value, int):
        return value if -CAP <= value <= CAP else (CAP if value > 0 else -CAP)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{shown(value)} is not a quantity")
        return _parse_text(repr(value))
    if isinstance(value, str):
        if len(value) <= _CACHED_LENGTH:
            return _parse_cached(value)
        return _parse_text(value)
    raise QuantityError(f"{shown(value)} is not a quantity")


@lru_cache(maxsize=1024)
def _parse_cached(text: str) -> Number:
    return _parse_text(text)


def _parse_text(text: str) -> Number:
    if text == "0":
        return 0
    if not text:
        raise QuantityError('"" is not a quantity')
    end = len(text)
    pos = 1 if text[0] in "+-" else 0
    negative = text[0] == "-"
    start = pos
    while pos < end and text[pos] == "0":
        pos += 1
    if pos == end:  # a sign and zeros, or a sign alone: zero for the apiserver too
        return 0
    zeros = pos > start
    num_start = pos
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    num = text[num_start:pos]
    frac = ""
    if pos < end and text[pos] == ".":
        pos += 1
        frac_start = pos
        while pos < end and text[pos] in _DIGITS:
            pos += 1
        frac = text[frac_start:pos]
    suffix_start = pos
    while pos < end and text[pos] in _SUFFIX_LETTERS:
        pos += 1
    if pos < end and text[pos] in "+-":
        pos += 1
    while pos < end and text[pos] in _DIGITS:
        pos += 1
    if pos < end:
        raise QuantityError(f"{shown(text)} is not a quantity: expected a number with an "
                            f"optional suffix (n, u, m, k, M, G, T, P, E, Ki…Ei or e<exponent>)")
    suffix = text[suffix_start:]
    exp10, exp2, fast = _suffix(text, suffix, num, frac)
    if not (zeros or num or frac) and not fast:
        # The apiserver's decimal path needs a digit; its int64 fast path does not.
        raise QuantityError(f"{shown(text)} is not a quantity: it has no digits")
    magnitude = _nanos((num + frac).lstrip("0"), exp10 - len(frac), exp2)
    value = Fraction(magnitude, _NANO)
    result: Number = value.numerator if value.denominator == 1 else value
    return -result if negative else result


def _suffix(text: str, suffix: str, num: str, frac: str) -> tuple[int, int, bool]:
    """(decimal exponent, binary exponent, whether the apiserver's fast path takes it)."""
    digits = len(num or "0")
    if suffix in _DECIMAL:
        exp10 = _DECIMAL[suffix]
    elif suffix in _BINARY:
        exp2 = _BINARY[suffix]
        fast = not frac and 15 - digits - exp2 * 3 // 10 - 1 >= 0
        return 0, exp2, fast
    elif len(suffix) > 1 and suffix[0] in "eE":
        exp10 = _exponent(text, suffix[1:])
    else:
        raise QuantityError(f"{shown(text)} is not a quantity: unknown suffix {shown(suffix)}")
    fast = 18 - (digits + len(frac)) >= 0 and exp10 - len(frac) >= -9
    return exp10, 0, fast


def _exponent(text: str, written: str) -> int:
    """Go's strconv.ParseInt(s, 10, 64), then int32(): the apiserver's own wrap-around."""
    body = written[1:] if written[:1] in ("+", "-") else written
    if not body or not set(body) <= _DIGITS or len(body.lstrip("0")) > 19:
        raise QuantityError(f"{shown(text)} is not a quantity: bad exponent {shown(written)}")
    parsed = int(written)
    if not -_INT64 <= parsed < _INT64:
        raise QuantityError(f"{shown(text)} is not a quantity: exponent out of range")
    return (parsed + 2**31) % 2**32 - 2**31


def _nanos(digits: str, exp10: int, exp2: int) -> int:
    """ceil(int(digits) * 10**exp10 * 2**exp2 * 1e9), capped, looking at O(len(digits)) work.

    `digits` has no leading zeros; exp2 is at most 60."""
    if not digits:
        return 0
    if len(digits) + exp10 > 19:  # at least 10**19, past the cap
        return _CAP_NANOS
    shift = -exp10 - 9  # decimal places below 1n
    if shift <= 0:  # here len(digits) <= 28
        return min((int(digits) << exp2) * int(10**-shift), _CAP_NANOS)
    # Rounding up to 1n: digits more than 61 places below 1n change nothing but whether the
    # value is exactly on a nano (10**61 is a multiple of 2**60, so their carry never reaches).
    kept = min(shift, 61)
    dropped = shift - kept
    head = digits[: len(digits) - dropped] if len(digits) > dropped else ""
    inexact = any(d != "0" for d in digits[len(head):])
    scaled = int(head or "0") << exp2
    whole, rest = divmod(scaled, int(10**kept))
    return min(whole + (1 if rest or inexact else 0), _CAP_NANOS)
