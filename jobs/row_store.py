"""The result rows as the driver keeps them: a tuple per partition, each string kept once.

A result row crosses from an executor as a dict of 20 to 37 columns; 50,000 of them as dicts, each with its
own copies of the same reasons and settings, held 4 KB a partition on the driver (and each copy of the table
on the way out -- sorted, trimmed to the shown columns, encoded as one JSON string -- as much again). Here a
row is a tuple of its values in the columns' order (no keys), a string equal to one seen before is that
same object, and the rows are written out one at a time (:func:`write_json`), as dicts made on the fly.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import IO, Any


class RowStore:
    """Rows of the columns ``columns``, in the order added (or sorted by :meth:`sort`); iterating gives
    each as a fresh dict."""

    __slots__ = ("columns", "_rows", "_strings")

    def __init__(self, columns: Sequence[str], rows: Iterable[dict] = ()) -> None:
        self.columns = tuple(columns)
        self._rows: list[tuple] = []
        self._strings: dict[str, str] = {}
        for row in rows:
            self.add(row)

    def add(self, row: dict) -> None:
        """Keep ``row``'s values of the columns (a missing one is None)."""
        strings = self._strings
        self._rows.append(
            tuple(strings.setdefault(v, v) if type(v) is str else v for v in map(row.get, self.columns))
        )

    def __len__(self) -> int:
        return len(self._rows)

    def __iter__(self) -> Iterator[dict]:
        columns = self.columns
        for values in self._rows:
            yield dict(zip(columns, values, strict=True))

    def __getitem__(self, i: int) -> dict:
        return dict(zip(self.columns, self._rows[i], strict=True))

    def sort(self, key: Callable[[dict], Any]) -> None:
        """Sort the rows by ``key`` of each row as a dict."""
        columns = self.columns
        self._rows.sort(key=lambda values: key(dict(zip(columns, values, strict=True))))


def write_json(rows: Iterable[dict], out: IO[str], *, indent: int | None = None, **dumps: Any) -> None:
    """``rows`` as one JSON array and a newline, written a row at a time: the same text as
    ``json.dumps(list(rows), indent=indent, **dumps) + "\n"`` without holding it whole."""
    if indent is None:
        out.write("[")
        for i, row in enumerate(rows):
            out.write((", " if i else "") + json.dumps(row, **dumps))
        out.write("]\n")
        return
    pad = " " * indent
    empty = True
    for row in rows:
        text = json.dumps(row, indent=indent, **dumps).replace("\n", "\n" + pad)
        out.write(("[\n" if empty else ",\n") + pad + text)
        empty = False
    out.write("[]\n" if empty else "\n]\n")
