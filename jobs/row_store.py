"""The result rows as the driver keeps them: a tuple of values per partition, each string kept once.

A result row crosses from an executor as a dict of 20 to 37 columns; 50,000 of them as dicts, each with its
own copies of the same reasons and settings, held 4 KB a partition on the driver, and each copy on the way
out (trimmed to the shown columns, sorted, encoded as one JSON string) as much again. Here a row is kept as
it arrives (:meth:`RowStore.keep`): a read-only mapping over a tuple of its values in the columns' order
(the column names once per store), a string equal to one kept before being that same object. The rows are
sorted as they are and written a row at a time (:func:`write_json`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import IO, Any


class RowStore:
    """Where the rows of one table are kept: their columns, and the strings seen so far."""

    __slots__ = ("_index", "_strings")

    def __init__(self, columns: Sequence[str]) -> None:
        self._index = {name: i for i, name in enumerate(columns)}
        self._strings: dict[str, str] = {}

    def keep(self, row: Mapping[str, Any], **changes: Any) -> StoredRow:
        """``row``'s values of the columns (a missing one is None), with ``changes`` applied."""
        strings = self._strings
        values = (changes[name] if name in changes else row.get(name) for name in self._index)
        return StoredRow(
            self._index, tuple(strings.setdefault(v, v) if type(v) is str else v for v in values)
        )


class StoredRow(Mapping[str, Any]):
    """One kept row: a read-only mapping of its columns to its values (equal to the dict it was kept from)."""

    __slots__ = ("_index", "_values")

    def __init__(self, index: dict[str, int], values: tuple) -> None:
        self._index = index
        self._values = values

    def __getitem__(self, name: str) -> Any:
        return self._values[self._index[name]]

    def get(self, name: str, default: Any = None) -> Any:  # one lookup (Mapping.get raises and catches)
        i = self._index.get(name)
        return default if i is None else self._values[i]

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __repr__(self) -> str:
        return repr(dict(self))


def write_json(rows: Iterable[Mapping], out: IO[str], *, indent: int | None = None, **dumps: Any) -> None:
    """``rows`` as one JSON array and a newline, written a row at a time: the same text as
    ``json.dumps([dict(r) for r in rows], indent=indent, **dumps) + "\\n"`` without holding it whole."""
    if indent is None:
        out.write("[")
        for i, row in enumerate(rows):
            out.write((", " if i else "") + json.dumps(dict(row), **dumps))
        out.write("]\n")
        return
    pad = " " * indent
    empty = True
    for row in rows:
        text = json.dumps(dict(row), indent=indent, **dumps).replace("\n", "\n" + pad)
        out.write(("[\n" if empty else ",\n") + pad + text)
        empty = False
    out.write("[]\n" if empty else "\n]\n")
