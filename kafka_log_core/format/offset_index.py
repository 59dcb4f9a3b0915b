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
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kafka_log_core import fsutil
from kafka_log_core.constants import MAX_LONG, MIN_LONG
from kafka_log_core.errors import ConfigError, CorruptIndexError
from kafka_log_core.format.filenames import base_offset_of

ENTRY_SIZE = 8
ENTRY_DTYPE = np.dtype(
    [
        ("relative_offset", ">i4"),  # indexed offset minus the segment base offset
        ("position", ">i4"),  # byte position of a batch start in the .log
    ]
)

MAX_RELATIVE_OFFSET = 2**31 - 1
MAX_POSITION = 2**31 - 1
DEFAULT_INDEX_INTERVAL_BYTES = 4096
DEFAULT_SEGMENT_INDEX_BYTES = 10 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class OffsetPosition:
    offset: int  # absolute offset
    position: int  # byte position in the .log


def max_entries(segment_index_bytes: int) -> int:
    """Number of 8-byte slots an offset index gets from ``segment.index.bytes``."""
    if segment_index_bytes < ENTRY_SIZE:
        raise ConfigError(
            f"segment.index.bytes={segment_index_bytes} cannot hold one {ENTRY_SIZE}-byte offset index entry"
        )
    return segment_index_bytes // ENTRY_SIZE


def is_full(entry_count: int, segment_index_bytes: int) -> bool:
    return entry_count >= max_entries(segment_index_bytes)


@dataclass(frozen=True, slots=True, eq=False)
class OffsetIndex:
    """The entries of one offset index, as a read-only structured array (relative offsets as stored)."""

    base_offset: int
    entries: np.ndarray
    path: str | None = None
    file_length: int | None = None  # bytes on disk; None for an index built in memory

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[OffsetPosition]:
        base = self.base_offset
        for relative, position in self.entries.tolist():
            yield OffsetPosition(base + relative, position)

    def entry(self, n: int) -> OffsetPosition:
        relative, position = self.entries[n].item()
        return OffsetPosition(self.base_offset + relative, position)

    @property
    def offsets(self) -> np.ndarray:
        """Absolute offsets (int64)."""
        return self.entries["relative_offset"].astype(np.int64) + np.int64(self.base_offset)

    @property
    def positions(self) -> np.ndarray:
        return self.entries["position"].astype(np.int64)

    @property
    def last_entry(self) -> OffsetPosition:
        """The last entry, or ``(base_offset, 0)`` for an empty index."""
        if len(self.entries) == 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(len(self.entries) - 1)

    def lookup(self, target_offset: int) -> OffsetPosition:
        """Greatest entry with offset <= target, else ``(base_offset, 0)``; scan the .log from there."""
        target = min(max(target_offset, MIN_LONG), MAX_LONG)
        slot = int(np.searchsorted(self.offsets, np.int64(target), side="right")) - 1
        if slot < 0:
            return OffsetPosition(self.base_offset, 0)
        return self.entry(slot)

    def truncate_to(self, offset: int) -> OffsetIndex:
        """Drop every entry whose offset is >= ``offset``."""
        bound = np.int64(min(max(offset, MIN_LONG), MAX_LONG))
        keep = int(np.searchsorted(self.offsets, bound, side="left"))
        return OffsetIndex(self.base_offset, self.entries[:keep], self.path, None)

    def is_full(self, segment_index_bytes: int) -> bool:
        return is_full(len(self.entries), segment_index_bytes)

    def sanity_check(self) -> None:
        """Kafka's OffsetIndex.sanityCheck (tools only; the broker does not run it when loading)."""
        count = len(self.entries)
        if count:
            last = self.last_entry
            if last.offset < self.base_offset:
                raise CorruptIndexError(
                    f"offset index has {count} entries but its last offset {last.offset} "
                    f"is below the segment base offset {self.base_offset}",
                    self.path,
                    (count - 1) * ENTRY_SIZE,
                )
        length = count * ENTRY_SIZE if self.file_length is None else self.file_length
        if length % ENTRY_SIZE:
            raise CorruptIndexError(
                f"offset index is {length} bytes long: expected a multiple of {ENTRY_SIZE}, "
                f"found {length % ENTRY_SIZE} trailing bytes",
                self.path,
                length - length % ENTRY_SIZE,
            )

    def encode(self) -> bytes:
        """The entries exactly as stored: ``8 * len(self)`` bytes, no padding."""
        return self.entries.tobytes()


def parse_offset_index(
    data: bytes | bytearray | memoryview, base_offset: int, path: str | os.PathLike[str] | None = None
) -> OffsetIndex:
    """Interpret ``data`` as the broker does: ``floor(len / 8)`` entries, trailing bytes ignored."""
    count = len(data) // ENTRY_SIZE
    entries = np.frombuffer(data, dtype=ENTRY_DTYPE, count=count)
    entries.setflags(write=False)
    return OffsetIndex(base_offset, entries, None if path is None else os.fspath(path), len(data))


def read_offset_index(path: str | os.PathLike[str], base_offset: int | None = None) -> OffsetIndex:
    """Read a ``.index`` file; the base offset defaults to the one in its file name."""
    base = base_offset_of(path) if base_offset is None else base_offset
    return parse_offset_index(Path(path).read_bytes(), base, path)


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
    data = encode_offset_index(base_offset, entries, path)
    (fsutil.atomic_write_bytes if atomic else fsutil.write_bytes_fsync)(path, data)
    return len(data)


def entries_array(relatives: list[int], positions: list[int]) -> np.ndarray:
    array = np.empty(len(relatives), dtype=ENTRY_DTYPE)
    array["relative_offset"] = relatives
    array["position"] = positions
    return array
