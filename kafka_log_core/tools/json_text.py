"""JSON text as Jackson's ``JsonNode.toString`` writes it (what kafka-dump-log prints): no spaces,
fields in insertion order, non-ASCII kept, ``"`` ``\\`` and the short escapes (``\\b \\t \\n \\f \\r``)
escaped, other control characters as ``\\u00XX`` (upper-case hex), binary values in base64."""

from __future__ import annotations

import base64
import re

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
    if isinstance(value, bytes):  # a binary node
        return '"' + base64.b64encode(value).decode("ascii") + '"'
    return str(value)
