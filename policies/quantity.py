"""Kubernetes resource quantities ("1", 1, "1000m", "2Gi", "1e3") as exact fractions."""

from __future__ import annotations

import re
from fractions import Fraction
from functools import lru_cache
from typing import Any

_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40, "Pi": 2**50, "Ei": 2**60}
_DECIMAL = {
    "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000), "": Fraction(1),
    "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9),
    "T": Fraction(10**12), "P": Fraction(10**15), "E": Fraction(10**18),
}
_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([eE][+-]?[0-9]+|[a-zA-Z]{0,2})$")


# Whole quantities stay plain ints (most of them are): cheaper than Fraction and exact with it.
Number = Fraction | int


class QuantityError(ValueError):
    pass


def parse_quantity(value: Any) -> Number:
    """The exact value of a quantity; QuantityError for anything Kubernetes would refuse.
    Whole numbers come back as plain ints (a Fraction in all but type, and much cheaper)."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return Fraction(str(value))
    if isinstance(value, str):
        return _parse_text(value.strip())
    raise QuantityError(f"{value!r} is not a quantity")


@lru_cache(maxsize=1024)
def _parse_text(text: str) -> Number:
    if text.isdigit():
        return int(text)
    match = _QUANTITY.match(text)
    if match is None:
        raise QuantityError(f"{text!r} is not a quantity")
    number, suffix = match.groups()
    base = Fraction(number)
    if suffix[:1] in ("e", "E") and len(suffix) > 1:
        return base * Fraction(10) ** int(suffix[1:])
    if suffix in _BINARY:
        return base * _BINARY[suffix]
    if suffix in _DECIMAL:
        return base * _DECIMAL[suffix]
    raise QuantityError(f"{text!r} has an unknown suffix {suffix!r}")
