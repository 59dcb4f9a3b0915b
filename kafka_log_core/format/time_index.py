"""The time index (``<base>.timeindex``): which offset to start from to find a timestamp.

A flat array of 12-byte big-endian entries, no header::

    0  timestamp        int64   largest batch max-timestamp seen up to and including ...
    8  relative_offset  int32   ... the batch whose last offset is base_offset + relative_offset

Timestamps strictly increase from entry to entry and offsets never decrease. The broker preallocates
the file while the segment is active and trims it to ``12 * entries`` on roll; when it opens an existing
file it takes ``floor(length / 12)`` entries without looking at them, so a writer must never leave
padding behind. The last entry carries the segment's largest timestamp (time retention,
``min.compaction.lag.ms``); an empty index means "no timestamp" and the broker falls back to the
``.log`` mtime.

``segment.index.bytes`` bounds the file: ``floor(bytes / 12)`` slots, and the index counts as full one
entry early (``entries >= slots - 1``) so that the final entry written on roll always fits.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from kafka_log_core.constants import MAX_LONG
from kafka_log_core.errors import CorruptIndexError
from kafka_log_core.format.index_base import MAX_RELATIVE_OFFSET, FixedWidthIndex, slots, write_index_bytes

ENTRY_SIZE = 12
ENTRY_DTYPE = np.dtype(
    [
        ("timestamp", ">i8"),  # max timestamp so far, milliseconds
        ("relative_offset", ">i4"),  # shallow offset of that timestamp minus the segment base offset
    ]
)

NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class TimestampOffset:
    timestamp: int
    offset: int  # absolute offset


def max_entries(segment_index_bytes: int) -> int:
    """Number of 12-byte slots a time index gets from ``segment.index.bytes``."""
    return slots(segment_index_bytes, ENTRY_SIZE, "time index")


def is_full(entry_count: int, segment_index_bytes: int) -> bool:
    """Kafka's TimeIndex.isFull: the last slot stays reserved for the entry written on roll."""
    return entry_count >= max_entries(segment_index_bytes) - 1


@dataclass(frozen=True, slots=True, eq=False)
class TimeIndex(FixedWidthIndex[TimestampOffset]):
    """The entries of one time index, as a read-only structured array (relative offsets as stored)."""

    KIND: ClassVar[str] = "time index"
    ENTRY_SIZE: ClassVar[int] = ENTRY_SIZE
    ENTRY_DTYPE: ClassVar[np.dtype] = ENTRY_DTYPE

    def make_entry(self, row: tuple) -> TimestampOffset:
        timestamp, relative = row
        return TimestampOffset(timestamp, self.base_offset + relative)

    def empty_entry(self) -> TimestampOffset:
        """``(-1, base_offset)``: what the broker assumes for an empty time index."""
        return TimestampOffset(NO_TIMESTAMP, self.base_offset)

    @property
    def timestamps(self) -> np.ndarray:
        return self.entries["timestamp"].astype(np.int64)

    @property
    def max_timestamp(self) -> int:
        """The segment's largest timestamp according to the index, ``-1`` when it has none."""
        return self.last_entry.timestamp

    def lookup(self, target_timestamp: int) -> TimestampOffset:
        """Greatest entry with timestamp <= target, else ``(-1, base_offset)``."""
        return self.floor_entry(self.timestamps, target_timestamp)

    def is_full(self, segment_index_bytes: int) -> bool:
        return is_full(len(self.entries), segment_index_bytes)

    def sanity_check(self) -> None:
        """Kafka's TimeIndex.sanityCheck (tools only; the broker does not run it when loading)."""
        count = len(self.entries)
        if count:
            first = int(self.entries["timestamp"][0])
            last = self.last_entry
            if last.timestamp < first:
                raise CorruptIndexError(
                    f"time index has {count} entries but its last timestamp {last.timestamp} "
                    f"is below its first timestamp {first}",
                    self.path,
                    (count - 1) * ENTRY_SIZE,
                )
        self.check_last_offset(8)
        self.check_length()


def parse_time_index(
    data: bytes | bytearray | memoryview, base_offset: int, path: str | os.PathLike[str] | None = None
) -> TimeIndex:
    """Interpret ``data`` as the broker does: ``floor(len / 12)`` entries, trailing bytes ignored."""
    return TimeIndex.parse(data, base_offset, path)


def read_time_index(path: str | os.PathLike[str], base_offset: int | None = None) -> TimeIndex:
    """Read a ``.timeindex`` file; the base offset defaults to the one in its file name."""
    return TimeIndex.read(path, base_offset)


def encode_time_index(
    base_offset: int, entries: Iterable[TimestampOffset], path: str | os.PathLike[str] | None = None
) -> bytes:
    """``12 * n`` bytes for entries the broker would have written; refuses anything it would not."""
    timestamps: list[int] = []
    relatives: list[int] = []
    last_timestamp, last_offset = NO_TIMESTAMP, base_offset
    for n, entry in enumerate(entries):
        where = n * ENTRY_SIZE
        relative = entry.offset - base_offset
        if not 0 <= relative <= MAX_RELATIVE_OFFSET:
            raise CorruptIndexError(
                f"entry {n}: offset {entry.offset} is outside the segment's range "
                f"{base_offset}..{base_offset + MAX_RELATIVE_OFFSET}",
                path,
                where + 8,
            )
        if not last_timestamp < entry.timestamp <= MAX_LONG:
            raise CorruptIndexError(
                f"entry {n}: timestamp {entry.timestamp} must be above the previous timestamp "
                f"{last_timestamp} (time index timestamps strictly increase from -1)",
                path,
                where,
            )
        if entry.offset < last_offset:
            raise CorruptIndexError(
                f"entry {n}: offset {entry.offset} is below the previous entry's offset {last_offset}",
                path,
                where + 8,
            )
        timestamps.append(entry.timestamp)
        relatives.append(relative)
        last_timestamp, last_offset = entry.timestamp, entry.offset
    return _array(timestamps, relatives).tobytes()


def time_index_from_entries(base_offset: int, entries: Iterable[TimestampOffset]) -> TimeIndex:
    """A validated in-memory index (see :func:`encode_time_index` for the rules)."""
    data = encode_time_index(base_offset, entries)
    return TimeIndex(base_offset, np.frombuffer(data, dtype=ENTRY_DTYPE), None, None)


def write_time_index(
    path: str | os.PathLike[str],
    base_offset: int,
    entries: Iterable[TimestampOffset],
    *,
    atomic: bool = True,
) -> int:
    """Write a trimmed time index (``12 * n`` bytes) and fsync it; returns the byte count.

    ``atomic`` goes through ``<path>.tmp`` + rename; pass False for ``.cleaned`` outputs whose
    atomicity comes from the swap protocol.
    """
    return write_index_bytes(path, encode_time_index(base_offset, entries, path), atomic=atomic)


def _array(timestamps: list[int], relatives: list[int]) -> np.ndarray:
    array = np.empty(len(timestamps), dtype=ENTRY_DTYPE)
    array["timestamp"] = timestamps
    array["relative_offset"] = relatives
    return array
