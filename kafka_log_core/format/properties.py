"""Java ``.properties`` text, as ``java.util.Properties.load`` reads it: the broker's ``server.properties``,
the tool's ``conf/`` files and a log dir's ``meta.properties`` (ISO-8859-1 bytes, decoded by the caller).

    # or ! starts a comment line          a line ending in an odd number of backslashes continues
    key=value  key:value  key value       separators; whitespace around them is dropped
    \\t \\n \\r \\f \\uXXXX \\<char>         escapes, in keys and values alike
"""

from __future__ import annotations

import re

_SPACE = " \t\f"
_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


class MalformedEscapeError(ValueError):
    """A ``\\uXXXX`` escape without four hex digits; ``line`` is its line number, ``text`` the escape."""

    def __init__(self, line: int, text: str) -> None:
        self.line, self.text = line, text
        super().__init__(f"malformed \\uXXXX escape {text!r}")


def parse_properties(text: str) -> list[tuple[str, str, int]]:
    """(key, value, line number) of each entry, in order."""
    lines = re.split(r"\r\n|\r|\n", text)
    entries: list[tuple[str, str, int]] = []
    index = 0
    while index < len(lines):
        number, line = index + 1, lines[index].lstrip(_SPACE)
        index += 1
        if not line or line[0] in "#!":
            continue
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1:  # an odd number of trailing backslashes
            line = line[:-1]
            if index < len(lines):
                line += lines[index].lstrip(_SPACE)
                index += 1
        end = 0
        while end < len(line) and line[end] not in "=:" + _SPACE:
            end += 2 if line[end] == "\\" else 1
        rest = line[end:].lstrip(_SPACE)
        if rest[:1] in ("=", ":") and rest:
            rest = rest[1:].lstrip(_SPACE)
        entries.append((_unescape(line[:end], number), _unescape(rest, number), number))
    return entries


def parse_java_properties(text: str) -> dict[str, str]:
    """The entries as a ``Properties`` object holds them: a later key replaces an earlier one."""
    return {key: value for key, value, _ in parse_properties(text)}


def _unescape(text: str, line: int) -> str:
    out, index = [], 0
    while index < len(text):
        char = text[index]
        if char != "\\" or index + 1 == len(text):
            out.append(char)
            index += 1
            continue
        escaped = text[index + 1]
        if escaped == "u":
            digits = text[index + 2 : index + 6]
            if not re.fullmatch(r"[0-9a-fA-F]{4}", digits):
                raise MalformedEscapeError(line, text[index : index + 6])
            out.append(chr(int(digits, 16)))
            index += 6
        else:
            out.append(_ESCAPES.get(escaped, escaped))
            index += 2
    return "".join(out)
