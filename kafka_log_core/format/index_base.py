"""What the offset index (``.index``) and the time index (``.timeindex``) share -- Kafka's ``AbstractIndex``.

Both are flat arrays of fixed-width big-endian entries with no header, each entry holding an offset
relative to the segment's base offset. The broker reads ``floor(length / entry size)`` entries and ignores
trailing bytes; the tools' sanity check refuses them. Lookups clamp the target to Java's long range and
binary-search the array; truncation drops every entry at or above an offset; a full index forces a roll.

The broker memory-maps an index file whole (``AbstractIndex``: ``FileChannel.map`` of its length), so it
cannot open one longer than Java's ``Integer.MAX_VALUE`` bytes; after a clean shutdown it trusts the
length it finds. An index is read here only up to those bounds: longer than Kafka can map, or (for a
segment's own index) longer than its log could need -- one entry per batch at most, a batch at least
:data:`MIN_BATCH_BYTES` -- is refused with its size, before a byte of it is read.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar, Generic, Self, TypeVar

import numpy as np

from kafka_log_core import fsutil, storage
from kafka_log_core.constants import MAX_INT, MAX_LONG, MIN_LONG
from kafka_log_core.errors import ConfigError, CorruptIndexError
from kafka_log_core.format.filenames import base_offset_of
from kafka_log_core.format.log_file import LOG_OVERHEAD, MIN_ENTRY_SIZE

MAX_RELATIVE_OFFSET = MAX_INT  # relative offsets are stored as int32
MAX_INDEX_FILE_BYTES = MAX_INT  # Java maps at most Integer.MAX_VALUE bytes: the broker cannot open more
MIN_BATCH_BYTES = LOG_OVERHEAD + MIN_ENTRY_SIZE  # the smallest batch (a magic-0 message) on disk
ITER_CHUNK = 1 << 16  # entries converted to Python at a time when iterating
E = TypeVar("E")


def read_index_file(
    path: str | os.PathLike[str], kind: str, entry_size: int, log_size: int | None = None
) -> bytes:
    """The bytes of an index file (a regular file, see :func:`storage.open_regular`), refused with its
    size when it is longer than Kafka can map, or than a log of ``log_size`` bytes could need."""
    with storage.open_regular_file(path) as f:
        size = os.fstat(f.fileno()).st_size
        if size > MAX_INDEX_FILE_BYTES:
            raise CorruptIndexError(
                f"{kind} is {size} bytes, longer than the {MAX_INDEX_FILE_BYTES} bytes a Kafka index can be "
                "(the broker cannot map it): not read",
                path,
            )
        if log_size is not None and size > (log_size // MIN_BATCH_BYTES) * entry_size:
            raise CorruptIndexError(
                f"{kind} is {size} bytes ({size // entry_size} entries) but its log of {log_size} bytes holds at "
                f"most {log_size // MIN_BATCH_BYTES} batches, one entry each: longer than its log could need "
                "(a preallocated or damaged index): not read",
                path,
            )
        return f.read()


def clamp_long(value: int) -> int:
    """``value`` within Java's long range, as a Java caller's argument would be."""
    return min(max(value, MIN_LONG), MAX_LONG)


def slots(segment_index_bytes: int, entry_size: int, kind: str) -> int:
    """Number of ``entry_size``-byte slots an index of ``kind`` gets from ``segment.index.bytes``."""
    if segment_index_bytes < entry_size:
        raise ConfigError(
            f"segment.index.bytes={segment_index_bytes} cannot hold one {entry_size}-byte {kind} entry"
        )
    return segment_index_bytes // entry_size


def write_index_bytes(path: str | os.PathLike[str], data: bytes, *, atomic: bool) -> int:
    """Write an index file's bytes and fsync them; returns the byte count. ``atomic`` goes through
    ``<path>.tmp`` + rename; pass False for ``.cleaned`` outputs whose atomicity comes from the swap
    protocol."""
    (fsutil.atomic_write_bytes if atomic else fsutil.write_bytes_fsync)(path, data)
    return len(data)


@dataclass(frozen=True, slots=True, eq=False)
class FixedWidthIndex(Generic[E]):
    """The entries of one index file, as a read-only structured array (relative offsets as stored).

    A subclass names its ``KIND``, ``ENTRY_SIZE`` and ``ENTRY_DTYPE`` (with a ``relative_offset`` field)
    and turns one stored row into its entry type (:meth:`make_entry`); :meth:`empty_entry` is what the
    broker assumes for an index with no entries."""

    KIND: ClassVar[str]
    ENTRY_SIZE: ClassVar[int]
    ENTRY_DTYPE: ClassVar[np.dtype]

    base_offset: int
    entries: np.ndarray
    path: str | None = None
    file_length: int | None = None  # bytes on disk; None for an index built in memory

    # ------------------------------------------------------------------------------ per-index parts
    def make_entry(self, row: tuple) -> E:
        raise NotImplementedError

    def empty_entry(self) -> E:
        raise NotImplementedError

    # --------------------------------------------------------------------------------- shared parts
    @classmethod
    def parse(cls, data: bytes | bytearray | memoryview, base_offset: int, path=None) -> Self:
        """Interpret ``data`` as the broker does: ``floor(len / entry size)`` entries, trailing bytes ignored."""
        entries = np.frombuffer(data, dtype=cls.ENTRY_DTYPE, count=len(data) // cls.ENTRY_SIZE)
        entries.setflags(write=False)
        return cls(base_offset, entries, None if path is None else os.fspath(path), len(data))

    @classmethod
    def read(cls, path: str | os.PathLike[str], base_offset: int | None = None) -> Self:
        """Read an index file; the base offset defaults to the one in its file name."""
        base = base_offset_of(path) if base_offset is None else base_offset
        return cls.parse(read_index_file(path, cls.KIND, cls.ENTRY_SIZE), base, path)

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[E]:
        for start in range(0, len(self.entries), ITER_CHUNK):  # never the whole index as Python objects
            for row in self.entries[start : start + ITER_CHUNK].tolist():
                yield self.make_entry(row)

    def entry(self, n: int) -> E:
        return self.make_entry(self.entries[n].item())

    @property
    def offsets(self) -> np.ndarray:
        """Absolute offsets (int64)."""
        return self.entries["relative_offset"].astype(np.int64) + np.int64(self.base_offset)

    @property
    def last_entry(self) -> E:
        """The last entry, or :meth:`empty_entry` for an empty index."""
        if len(self.entries) == 0:
            return self.empty_entry()
        return self.entry(len(self.entries) - 1)

    def floor_entry(self, keys: np.ndarray, target: int) -> E:
        """The greatest entry whose key (sorted ``keys``, one per entry) is <= target, else
        :meth:`empty_entry`; the target is clamped to Java's long range first."""
        slot = int(np.searchsorted(keys, np.int64(clamp_long(target)), side="right")) - 1
        return self.empty_entry() if slot < 0 else self.entry(slot)

    def truncate_to(self, offset: int) -> Self:
        """Drop every entry whose offset is >= ``offset``."""
        keep = int(np.searchsorted(self.offsets, np.int64(clamp_long(offset)), side="left"))
        return dataclasses.replace(self, entries=self.entries[:keep], file_length=None)

    def check_length(self) -> None:
        """The sanity check's last part: a file length that is a whole number of entries."""
        size = self.ENTRY_SIZE
        length = len(self.entries) * size if self.file_length is None else self.file_length
        if length % size:
            raise CorruptIndexError(
                f"{self.KIND} is {length} bytes long: expected a multiple of {size}, "
                f"found {length % size} trailing bytes",
                self.path,
                length - length % size,
            )

    def check_last_offset(self, offset_field_position: int) -> None:
        """The sanity check's part on offsets: the last entry's offset is not below the base offset."""
        count = len(self.entries)
        if count:
            last = int(self.entries["relative_offset"][-1]) + self.base_offset
            if last < self.base_offset:
                raise CorruptIndexError(
                    f"{self.KIND} has {count} entries but its last offset {last} "
                    f"is below the segment base offset {self.base_offset}",
                    self.path,
                    (count - 1) * self.ENTRY_SIZE + offset_field_position,
                )

    def encode(self) -> bytes:
        """The entries exactly as stored: ``entry size * len(self)`` bytes, no padding."""
        return self.entries.tobytes()
