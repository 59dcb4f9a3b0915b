"""JSON text as Jackson's ``JsonNode.toString`` writes it (what kafka-dump-log prints): no spaces,
fields in insertion order, non-ASCII kept, ``"`` ``\\`` and the short escapes (``\\b \\t \\n \\f \\r``)
escaped, other control characters as ``\\u00XX`` (upper-case hex), binary values in base64, doubles as
Java's ``Double.toString`` writes them (``1024.0``, ``1.0E7``, ``"NaN"`` quoted as Jackson quotes it)."""

from __future__ import annotations

import base64
import math
import re
from decimal import Decimal

_SHORT_ESCAPES = {'"': '\\"', "\\": "\\\\", "\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r"}
_ESCAPED = re.compile(r'["\\\x00-\x1f]')


def _escape(match: re.Match[str]) -> str:
    char = match.group()
    return _SHORT_ESCAPES.get(char) or f"\\u{ord(char):04X}"


def to_json(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict):
        return "{" + ",".join(f"{to_json(k)}:{to_json(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(to_json(v) for v in value) + "]"
    if isinstance(value, str):
        return '"' + _ESCAPED.sub(_escape, value) + '"'
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, bytes):  # a binary node
        return '"' + base64.b64encode(value).decode("ascii") + '"'
    return str(value)


def java_double(x: float) -> str:
    """``Double.toString``: plain from 10^-3 up to 10^7 (at least one digit after the point), else
    ``d.dddE±n``; the shortest digits that read back as ``x`` (Python's repr, as Java 19+ chooses)."""
    if math.isnan(x):
        return '"NaN"'
    if math.isinf(x):
        return '"Infinity"' if x > 0 else '"-Infinity"'
    sign = "-" if math.copysign(1.0, x) < 0 else ""
    if x == 0:
        return sign + "0.0"
    digits_tuple, exponent = Decimal(repr(abs(x))).normalize().as_tuple()[1:]
    digits = "".join(map(str, digits_tuple))
    point = len(digits) + int(exponent)  # value = 0.<digits> x 10^point
    if 1e-3 <= abs(x) < 1e7:
        if point <= 0:
            return f"{sign}0.{'0' * -point}{digits}"
        whole, frac = digits[:point].ljust(point, "0"), digits[point:]
        return f"{sign}{whole}.{frac or '0'}"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{point - 1}"
