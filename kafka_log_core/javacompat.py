"""Java behaviour that Kafka's output depends on, emulated once for the whole core.

Kafka writes some lists in the iteration order of a ``java.util.HashMap``: producer snapshots (a
``HashMap<Long, ...>`` over producer ids) and ``kafka-dump-log``'s end-of-run findings (maps keyed by
absolute path). That order is the table's: bucket ``spread(hashCode) & (capacity - 1)``, where
``spread(h) = h ^ (h >>> 16)``; the table starts at 16 buckets and doubles once it holds more than 3/4 of
its capacity (doubling keeps each bucket's order). Tree bins (8+ keys colliding in one bucket of a table
of 64+) are not modelled. Importable by every module of the core (layer 0).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Generic, TypeVar

from kafka_log_core.constants import MAX_LONG, MIN_LONG

V = TypeVar("V")

DEFAULT_CAPACITY = 16
TREEIFY_THRESHOLD = 8  # a bucket reaching this many keys in a table under 64 buckets doubles the table
MIN_TREEIFY_CAPACITY = 64


_JAVA_INTEGER = re.compile(r"[+-]?\d+")  # \d: Unicode decimal digits, like Character.digit(c, 10)
_LONG_DIGITS = len(str(MAX_LONG))  # 19: more significant digits cannot be a long


def parse_java_integer(text: str, low: int = MIN_LONG, high: int = MAX_LONG) -> int | None:
    """``text`` as ``Long.parseLong`` / ``Integer.parseInt`` read it (an optional sign, decimal digits,
    leading zeros allowed) when it lies in ``low..high``; else None. The digits are counted before they
    are converted: a value of thousands of digits is simply out of range (Python refuses to convert more
    than 4,300 digits, and no more than 19 can be a long)."""
    if not _JAVA_INTEGER.fullmatch(text):
        return None
    if len(text.lstrip("+-").lstrip("0")) > _LONG_DIGITS:
        return None
    value = int(text)
    return value if low <= value <= high else None


def java_split(text: str, separator: str) -> list[str]:
    """``String.split`` on a one-character separator: the parts, trailing empty ones dropped (``"1,"`` is
    ``["1"]``, ``","`` is ``[]``), the text itself when the separator is not in it (``""`` is ``[""]``)."""
    parts = text.split(separator)
    if len(parts) == 1:
        return parts
    while parts and not parts[-1]:
        parts.pop()
    return parts


def java_string_hash(text: str) -> int:
    """``String.hashCode`` as an unsigned 32-bit value (over UTF-16 code units)."""
    units = text.encode("utf-16-be", "surrogatepass")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + (units[i] << 8 | units[i + 1])) & 0xFFFFFFFF
    return h


def java_long_hash(value: int) -> int:
    """``Long.hashCode`` as an unsigned 32-bit value: the two halves of the 64-bit value xor-ed."""
    unsigned = value & 0xFFFFFFFFFFFFFFFF
    return (unsigned ^ (unsigned >> 32)) & 0xFFFFFFFF


def spread(h: int) -> int:
    """``HashMap.hash``: the high half of the hash folded into the low half."""
    return h ^ (h >> 16)


def hashmap_capacity(size: int, capacity: int = DEFAULT_CAPACITY) -> int:
    """Table size of a HashMap of ``capacity`` buckets after it has held ``size`` entries (doubled past 3/4)."""
    while size > capacity * 3 // 4:
        capacity *= 2
    return capacity


def long_hashmap_order(keys: Iterable[int], capacity: int) -> list[int]:
    """Iteration order of a ``HashMap<Long, _>`` of ``capacity`` buckets holding ``keys`` (given in
    insertion order): by bucket, and within a bucket in insertion order (``put`` appends to the bucket)."""
    mask = capacity - 1
    return sorted(keys, key=lambda key: spread(java_long_hash(key)) & mask)  # stable


class JavaHashMap(Generic[V]):
    """Values by string key, iterated like a ``java.util.HashMap<String, _>`` filled through
    ``computeIfAbsent``, which puts a new key at the head of its bucket (so the newest key of a bucket comes
    first). The table also doubles when a bucket that already held 7 keys of a table under 64 buckets gets
    another."""

    def __init__(self) -> None:
        self._values: dict[str, V] = {}
        self._buckets: list[list[str]] = []
        self._threshold = 0

    def compute_if_absent(self, key: str, make: Callable[[], V]) -> V:
        if len(self._values) > self._threshold or not self._buckets:
            self._resize()
        if key in self._values:
            return self._values[key]
        bucket = self._buckets[spread(java_string_hash(key)) & (len(self._buckets) - 1)]
        bucket.insert(0, key)
        self._values[key] = value = make()
        if len(bucket) >= TREEIFY_THRESHOLD and len(self._buckets) < MIN_TREEIFY_CAPACITY:
            self._resize()
        return value

    def _resize(self) -> None:
        capacity = 2 * len(self._buckets) if self._buckets else DEFAULT_CAPACITY
        self._threshold = 2 * self._threshold if self._buckets else DEFAULT_CAPACITY * 3 // 4
        buckets: list[list[str]] = [[] for _ in range(capacity)]
        for key in self.keys():
            buckets[spread(java_string_hash(key)) & (capacity - 1)].append(key)
        self._buckets = buckets

    def keys(self) -> Iterator[str]:
        for bucket in self._buckets:
            yield from bucket

    def items(self) -> Iterator[tuple[str, V]]:
        for key in self.keys():
            yield key, self._values[key]

    def __len__(self) -> int:
        return len(self._values)
