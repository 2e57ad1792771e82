"""User values in messages, written as the user wrote them (JSON style: null, true, "8"), and
bounded: a hostile value (a 5000-digit string, a deep list) gives a short message."""

from __future__ import annotations

import json
import math
from typing import Any

_MAX_TEXT = 60
_MAX_ITEMS = 4


def shown(value: Any) -> str:
    """`None` -> `null`, `True` -> `true`, `"8"` -> `"8"`, `8` -> `8`, long text cut short."""
    return _shown(value, 2)


def _shown(value: Any, depth: int) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return _integer(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return repr(value)
    if isinstance(value, str):
        if len(value) > _MAX_TEXT:
            return json.dumps(value[:_MAX_TEXT - 20], ensure_ascii=False)[:-1] + (
                f'…" ({len(value)} characters)')
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, list | tuple):
        if depth <= 0:
            return "[…]" if value else "[]"
        items = [_shown(v, depth - 1) for v in value[:_MAX_ITEMS]]
        more = ", …" if len(value) > _MAX_ITEMS else ""
        return "[" + ", ".join(items) + more + "]"
    if isinstance(value, dict):
        if depth <= 0:
            return "{…}" if value else "{}"
        pairs = [f"{_key(k)}: {_shown(v, depth - 1)}" for k, v in list(value.items())[:_MAX_ITEMS]]
        more = ", …" if len(value) > _MAX_ITEMS else ""
        return "{" + ", ".join(pairs) + more + "}"
    return _shown(str(value), depth)  # dates and the like a YAML loader makes


def _key(key: Any) -> str:
    return _shown(key, 0) if not isinstance(key, str) else json.dumps(key[:_MAX_TEXT])


def _integer(value: int) -> str:
    # str() of a huge int is quadratic and refused past 4300 digits: say how big it is instead.
    if value.bit_length() > 128:
        digits = int(value.bit_length() * math.log10(2)) + 1
        return f"{'-' if value < 0 else ''}(a number of about {digits} digits)"
    return str(value)


def type_name(value: Any) -> str:
    """What a JSON value is, as the apiserver's messages say it: `a string`, `an object`..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return f"a {type(value).__name__}"


def path_key(key: Any) -> str:
    """A map key as a path part: a key that is not a string (YAML `1:`, `null:`, `true:`) is
    shown as written, so paths stay printable and never look like list indexes."""
    return key if isinstance(key, str) else shown(key)
