"""The result rows as the driver keeps them: columns, not a row object per partition.

A result row crosses from an executor as a dict of 15 to 36 columns. A broker's 50,000 rows kept as
they came held about 4 KB a partition on the driver; a tuple of each row's values with each string kept
once still held 580 B. Here each column keeps its values in the most compact of three forms, chosen as
the values arrive (:class:`Column`):

* a **dictionary**: each distinct value once, and a code per row (one byte while a column has at most 256
  distinct values: the statuses, settings, reasons and most numbers of idle partitions, which are mostly
  equal; two or four bytes beyond);
* **numbers**: a column of many distinct ints (offsets, sizes) or floats as an array of int64 or double
  and a byte per row marking None;
* **objects**: a list, for what fits neither (an int beyond int64, a value that is not hashable).

A value comes back as it was kept: the same type (``1``, ``1.0`` and ``True`` are distinct values, as are
``0.0`` and ``-0.0``), the same object where it was kept once (a string, a :class:`Status`). A row is read
through a :class:`StoredRow`, a read-only mapping made when it is read, equal to the dict it was kept
from; :meth:`RowStore.ordered` sorts row numbers by columns, one stable pass a column, without a key
tuple per row. JSON is written a row at a time (:func:`write_json`).
"""

from __future__ import annotations

import itertools
import json
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import IO, Any

import numpy as np

DICTIONARY_LIMIT = 256  # distinct values a dictionary column takes before numbers may suit it better
NUMBERS_SHARE = 8  # ... when it has at least one distinct value per this many rows
_INT64 = (-(2**63), 2**63 - 1)
_CODES = ("B", "H", "I", "Q")  # the code width of a dictionary column, as it grows


def _key(value: Any) -> Any:
    """What makes two values the same in a dictionary column: equal, of the same type, and for floats
    the same bits (``0.0`` and ``-0.0`` differ; every NaN is one value)."""
    if type(value) is str:
        return value
    if type(value) is float:
        return (float, value.hex())
    return (type(value), value)


class Column:
    """One column's values, in the order the rows were kept."""

    __slots__ = ("_values", "_where", "_codes", "_numbers", "_nulls", "_objects", "_count", "_not_numbers")

    def __init__(self) -> None:
        self._values: list | None = []  # the dictionary form: each distinct value once
        self._where: dict[Any, int] = {}
        self._codes = array("B")
        self._numbers: array | None = None  # the numbers form: int64 or double ...
        self._nulls = bytearray()  # ... and 1 where the value is None
        self._objects: list | None = None  # the objects form
        self._count = 0
        # the dictionary holds a value the numbers form cannot: it is never asked again
        self._not_numbers = False

    def __len__(self) -> int:
        return self._count

    def append(self, value: Any) -> None:
        self._count += 1
        if self._values is not None and self._append_coded(self._values, value):
            return
        if self._numbers is not None and self._append_number(self._numbers, value):
            return
        if self._objects is None:
            self._objects = self._all_but_last()
        self._objects.append(value)

    def __getitem__(self, row: int) -> Any:
        if self._values is not None:
            return self._values[self._codes[row]] if len(self._values) > 1 else self._values[0]
        if self._numbers is not None:
            return None if self._nulls[row] else self._numbers[row]
        return self._objects[row]  # type: ignore[index]

    # ------------------------------------------------------------------ the three forms
    def _append_coded(self, values: list, value: Any) -> bool:
        try:
            key = _key(value)
            code = self._where.get(key)
        except TypeError:  # not hashable
            self._leave_dictionary(values, None)
            return False
        if code is None:
            if (
                not self._not_numbers
                and len(values) >= DICTIONARY_LIMIT
                and len(values) * NUMBERS_SHARE >= self._count
            ):
                typecode = _numbers_type(values)
                if typecode is not None:
                    self._leave_dictionary(values, typecode)
                    return False
                # Asked once: a dictionary of strings (a reason naming each partition's offsets) would
                # otherwise be walked whole at every new value, quadratic in its distinct values.
                self._not_numbers = True
            code = self._where[key] = len(values)
            values.append(value)
            if (
                code == 1
            ):  # a second value: the rows so far all hold the first (a column of one value has no codes)
                self._codes = array("B", bytes(self._count - 1))
            elif code >= 1 << (8 * self._codes.itemsize):
                self._codes = array(_CODES[_CODES.index(self._codes.typecode) + 1], self._codes)
        if len(values) > 1:
            self._codes.append(code)
        return True

    def _each_code(self) -> Iterable[int]:
        """The code of every row kept so far but the one being appended."""
        values = self._values or ()
        return self._codes if len(values) > 1 else itertools.repeat(0, self._count - 1)

    def _leave_dictionary(self, values: list, typecode: str | None) -> None:
        """Into the numbers form (``typecode``) or, when None, the objects form, with the rows so far."""
        codes = self._each_code()
        if typecode is not None:
            self._numbers = array(typecode, (0 if values[c] is None else values[c] for c in codes))
            self._nulls = bytearray(values[c] is None for c in self._each_code())
        else:
            self._objects = [values[c] for c in codes]
        self._values, self._where, self._codes = None, {}, array("B")

    def _append_number(self, numbers: array, value: Any) -> bool:
        if value is None:
            numbers.append(0)
        elif type(value) is not (int if numbers.typecode == "q" else float) or (
            numbers.typecode == "q" and not _INT64[0] <= value <= _INT64[1]
        ):
            self._objects = self._all_but_last()
            self._numbers, self._nulls = None, bytearray()
            return False
        else:
            numbers.append(value)
        self._nulls.append(value is None)
        return True

    # ------------------------------------------------------------------ sorting
    def ranks(self, missing: Any = None) -> np.ndarray | None:
        """Each row's rank: rows compare as their values do (None as ``missing``, when given), equal values
        the same rank. None where numpy cannot rank them (values of the objects form, None without a
        ``missing``): the caller then sorts the values as Python does."""
        if self._values is not None:
            values = [missing if v is None and missing is not None else v for v in self._values]
            try:
                by_value = sorted(range(len(values)), key=values.__getitem__)
            except TypeError:
                return None
            ranks = np.zeros(len(values), np.int64)
            for k in range(1, len(by_value)):
                ranks[by_value[k]] = ranks[by_value[k - 1]] + (values[by_value[k]] != values[by_value[k - 1]])
            if len(values) <= 1:
                return np.zeros(self._count, np.int64)
            return ranks[np.frombuffer(self._codes, np.dtype(self._codes.typecode))]
        if self._numbers is None:
            return None
        numbers = np.frombuffer(self._numbers, np.dtype(self._numbers.typecode))
        nulls = np.frombuffer(self._nulls, np.uint8).astype(bool)
        if nulls.any():
            if missing is None or type(missing) is not (int if self._numbers.typecode == "q" else float):
                return None
            numbers = np.where(nulls, missing, numbers)
        return np.unique(numbers, return_inverse=True)[1].astype(np.int64)

    def _all_but_last(self) -> list:
        """The values of every row but the one being appended, as a list (into the objects form)."""
        if self._numbers is not None:
            return [None if null else n for n, null in zip(self._numbers, self._nulls, strict=True)]
        return []


def _numbers_type(values: Sequence[Any]) -> str | None:
    """``q`` when every value is an int in int64 or None, ``d`` when every value is a float or None."""
    kinds = {type(v) for v in values if v is not None}
    if kinds == {int} and all(_INT64[0] <= v <= _INT64[1] for v in values if v is not None):
        return "q"
    if kinds == {float}:
        return "d"
    return None


@dataclass(frozen=True)
class SortKey:
    """One column of a sort: ascending or descending, None sorting as ``missing`` (when given)."""

    column: str
    descending: bool = False
    missing: Any = None


class RowStore:
    """The rows of one table: their columns, and the rows kept so far (numbered from 0)."""

    __slots__ = ("columns", "_index", "_columns")

    def __init__(self, columns: Sequence[str]) -> None:
        self.columns = tuple(columns)
        self._index = {name: i for i, name in enumerate(self.columns)}
        self._columns = [Column() for _ in self.columns]

    def __len__(self) -> int:
        return len(self._columns[0]) if self._columns else 0

    def keep(self, row: Mapping[str, Any], **changes: Any) -> int:
        """``row``'s values of the columns (a missing one is None), with ``changes`` applied: its number."""
        for name, column in zip(self.columns, self._columns, strict=True):
            column.append(changes[name] if name in changes else row.get(name))
        return len(self) - 1

    def value(self, row: int, name: str) -> Any:
        return self._columns[self._index[name]][row]

    def row(self, row: int) -> StoredRow:
        if not 0 <= row < len(self):
            raise IndexError(f"row {row} of {len(self)}")
        return StoredRow(self, row)

    def ordered(self, rows: Iterable[int], keys: Sequence[SortKey]) -> array:
        """``rows`` sorted by ``keys`` (the first the most significant; equal rows stay in their order), as
        Python sorts the rows' values: by ranks (an int64 a row a key, not a key tuple a row), or, where
        numpy cannot rank a column, by Python's sort."""
        numbers = np.fromiter(rows, np.int64)
        ranked = []
        for key in keys:
            ranks = self._columns[self._index[key.column]].ranks(key.missing)
            if ranks is None:
                return self._sorted(numbers.tolist(), keys)
            ranked.append(-ranks[numbers] if key.descending else ranks[numbers])
        out = array("q")
        out.frombytes(numbers[np.lexsort(ranked[::-1])].tobytes() if ranked else numbers.tobytes())
        return out

    def _sorted(self, order: list[int], keys: Sequence[SortKey]) -> array:
        """:meth:`ordered` by Python's sort: one stable pass a key."""
        for key in reversed(keys):  # stable passes, the least significant key first
            column = self._columns[self._index[key.column]]
            if key.missing is None:
                order.sort(key=column.__getitem__, reverse=key.descending)
            else:
                order.sort(key=lambda r, c=column, m=key.missing: m if c[r] is None else c[r],
                           reverse=key.descending)  # fmt: skip
        return array("q", order)


class StoredRow(Mapping[str, Any]):
    """One kept row: a read-only mapping of its columns to its values (equal to the dict it was kept from),
    each value read from its column when asked for."""

    __slots__ = ("_store", "_row")

    def __init__(self, store: RowStore, row: int) -> None:
        self._store = store
        self._row = row

    def __getitem__(self, name: str) -> Any:
        return self._store._columns[self._store._index[name]][self._row]

    def get(self, name: str, default: Any = None) -> Any:  # one lookup (Mapping.get raises and catches)
        i = self._store._index.get(name)
        return default if i is None else self._store._columns[i][self._row]

    def __iter__(self) -> Iterator[str]:
        return iter(self._store.columns)

    def __len__(self) -> int:
        return len(self._store.columns)

    def __repr__(self) -> str:
        return repr(dict(self))


class StoredRows(Sequence[StoredRow]):
    """The result table: rows of a store in a given order, each read when asked for."""

    def __init__(self, store: RowStore, order: Sequence[int]) -> None:
        self.store, self.order = store, order

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        return StoredRow(self.store, self.order[i])


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
