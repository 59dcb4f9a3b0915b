"""The offset index (``<base>.index``).

A flat array of 8-byte big-endian entries, no header::

    0  relative_offset  int32   last offset of the indexed batch minus the segment base offset
    4  position         int32   byte position of that batch's start in the segment's .log

Offsets strictly increase. The broker preallocates the file while the segment is active and trims it to
``8 * entries`` on roll; when it opens an existing file it takes ``floor(length / 8)`` entries without
looking at them, so a writer must never leave padding behind. ``segment.index.bytes`` gives
``floor(bytes / 8)`` slots; a full index forces a roll.

Build rule (LogSegment.recover; :class:`kafka_log_core.log.index_builder.IndexBuilder`): walk the batches in file order with
``last_indexed_position = 0``; a batch at ``position`` gets an entry ``(last_offset, position)`` when
``position - last_indexed_position > index.interval.bytes`` (so the batch at 0 never does). The time index
tracks the largest batch max-timestamp so far with the last offset of the batch holding it, and
*maybe-appends* that pair whenever an offset entry is added and once more when the segment is finished;
maybe-append writes only a timestamp above the last one written (an empty time index counts as -1).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from kafka_log_core.constants import MAX_INT
from kafka_log_core.errors import CorruptIndexError
from kafka_log_core.format.index_base import MAX_RELATIVE_OFFSET, FixedWidthIndex, slots, write_index_bytes

ENTRY_SIZE = 8
ENTRY_DTYPE = np.dtype(
    [
        ("relative_offset", ">i4"),  # indexed offset minus the segment base offset
        ("position", ">i4"),  # byte position of a batch start in the .log
    ]
)

MAX_POSITION = MAX_INT
DEFAULT_INDEX_INTERVAL_BYTES = 4096
DEFAULT_SEGMENT_INDEX_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class OffsetPosition:
    offset: int  # absolute offset
    position: int  # byte position in the .log


def max_entries(segment_index_bytes: int) -> int:
    """Number of 8-byte slots an offset index gets from ``segment.index.bytes``."""
    return slots(segment_index_bytes, ENTRY_SIZE, "offset index")


def is_full(entry_count: int, segment_index_bytes: int) -> bool:
    return entry_count >= max_entries(segment_index_bytes)


@dataclass(frozen=True, slots=True, eq=False)
class OffsetIndex(FixedWidthIndex[OffsetPosition]):
    """The entries of one offset index, as a read-only structured array (relative offsets as stored)."""

    KIND: ClassVar[str] = "offset index"
    ENTRY_SIZE: ClassVar[int] = ENTRY_SIZE
    ENTRY_DTYPE: ClassVar[np.dtype] = ENTRY_DTYPE

    def make_entry(self, row: tuple) -> OffsetPosition:
        relative, position = row
        return OffsetPosition(self.base_offset + relative, position)

    def empty_entry(self) -> OffsetPosition:
        """``(base_offset, 0)``: scan the .log from its start."""
        return OffsetPosition(self.base_offset, 0)

    @property
    def positions(self) -> np.ndarray:
        return self.entries["position"].astype(np.int64)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Greatest entry with offset <= target, else ``(base_offset, 0)``; scan the .log from there."""
        return self.floor_entry(self.offsets, target_offset)

    def is_full(self, segment_index_bytes: int) -> bool:
        return is_full(len(self.entries), segment_index_bytes)

    def sanity_check(self) -> None:
        """Kafka's OffsetIndex.sanityCheck (tools only; the broker does not run it when loading)."""
        self.check_last_offset(0)
        self.check_length()


def parse_offset_index(
    data: bytes | bytearray | memoryview, base_offset: int, path: str | os.PathLike[str] | None = None
) -> OffsetIndex:
    """Interpret ``data`` as the broker does: ``floor(len / 8)`` entries, trailing bytes ignored."""
    return OffsetIndex.parse(data, base_offset, path)


def read_offset_index(path: str | os.PathLike[str], base_offset: int | None = None) -> OffsetIndex:
    """Read a ``.index`` file; the base offset defaults to the one in its file name."""
    return OffsetIndex.read(path, base_offset)


def encode_offset_index(
    base_offset: int, entries: Iterable[OffsetPosition], path: str | os.PathLike[str] | None = None
) -> bytes:
    """``8 * n`` bytes for entries the broker would have written; refuses anything it would not."""
    relatives: list[int] = []
    positions: list[int] = []
    last_offset: int | None = None
    for n, entry in enumerate(entries):
        where = n * ENTRY_SIZE
        relative = entry.offset - base_offset
        if not 0 <= relative <= MAX_RELATIVE_OFFSET:
            raise CorruptIndexError(
                f"entry {n}: offset {entry.offset} is outside the segment's range "
                f"{base_offset}..{base_offset + MAX_RELATIVE_OFFSET}",
                path,
                where,
            )
        if last_offset is not None and entry.offset <= last_offset:
            raise CorruptIndexError(
                f"entry {n}: offset {entry.offset} is not above the previous entry's offset {last_offset}",
                path,
                where,
            )
        if not 0 <= entry.position <= MAX_POSITION:
            raise CorruptIndexError(
                f"entry {n}: position {entry.position} is outside 0..{MAX_POSITION}", path, where + 4
            )
        relatives.append(relative)
        positions.append(entry.position)
        last_offset = entry.offset
    return entries_array(relatives, positions).tobytes()


def offset_index_from_entries(base_offset: int, entries: Iterable[OffsetPosition]) -> OffsetIndex:
    """A validated in-memory index (see :func:`encode_offset_index` for the rules)."""
    data = encode_offset_index(base_offset, entries)
    return OffsetIndex(base_offset, np.frombuffer(data, dtype=ENTRY_DTYPE), None, None)


def write_offset_index(
    path: str | os.PathLike[str],
    base_offset: int,
    entries: Iterable[OffsetPosition],
    *,
    atomic: bool = True,
) -> int:
    """Write a trimmed offset index (``8 * n`` bytes) and fsync it; returns the byte count.

    ``atomic`` goes through ``<path>.tmp`` + rename; pass False for ``.cleaned`` outputs whose
    atomicity comes from the swap protocol.
    """
    return write_index_bytes(path, encode_offset_index(base_offset, entries, path), atomic=atomic)


def entries_array(relatives: list[int], positions: list[int]) -> np.ndarray:
    array = np.empty(len(relatives), dtype=ENTRY_DTYPE)
    array["relative_offset"] = relatives
    array["position"] = positions
    return array
