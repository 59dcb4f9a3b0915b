"""The offset index (``<base>.index``) and the rule that builds it together with the time index.

A flat array of 8-byte big-endian entries, no header::

    0  relative_offset  int32   last offset of the indexed batch minus the segment base offset
    4  position         int32   byte position of that batch's start in the segment's .log

Offsets strictly increase. The broker preallocates the file while the segment is active and trims it to
``8 * entries`` on roll; when it opens an existing file it takes ``floor(length / 8)`` entries without
looking at them, so a writer must never leave padding behind. ``segment.index.bytes`` gives
``floor(bytes / 8)`` slots; a full index forces a roll.

Build rule (LogSegment.recover; :class:`IndexBuilder`): walk the batches in file order with
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

from . import fsutil, time_index
from . import segment_kernels as sk
from .errors import ConfigError, CorruptIndexError, RefusedError
from .filenames import base_offset_of
from .time_index import NO_TIMESTAMP, TimeIndex

ENTRY_SIZE = 8
ENTRY_DTYPE = np.dtype(
    [
        ("relative_offset", ">i4"),  # indexed offset minus the segment base offset
        ("position", ">i4"),  # byte position of a batch start in the .log
    ]
)
MAX_RELATIVE_OFFSET = 2**31 - 1
MAX_POSITION = 2**31 - 1
MAX_LONG = 2**63 - 1
MIN_LONG = -(2**63)
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
    return _array(relatives, positions).tobytes()


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


def _array(relatives: list[int], positions: list[int]) -> np.ndarray:
    array = np.empty(len(relatives), dtype=ENTRY_DTYPE)
    array["relative_offset"] = relatives
    array["position"] = positions
    return array


class IndexBuilder:
    """Builds a segment's offset and time indexes batch by batch, as the broker's recovery does.

    Feed every batch of the segment in file order with :meth:`append`; :meth:`finish` returns both
    indexes including the final time-index entry (it does not change the builder). Before appending a
    batch to a segment being written, check :attr:`is_full`: the broker rolls a new segment then.
    """

    def __init__(
        self,
        base_offset: int,
        *,
        index_interval_bytes: int = DEFAULT_INDEX_INTERVAL_BYTES,
        segment_index_bytes: int = DEFAULT_SEGMENT_INDEX_BYTES,
        path: str | os.PathLike[str] | None = None,
    ) -> None:
        if index_interval_bytes < 0:
            raise ConfigError(f"index.interval.bytes={index_interval_bytes}: expected a value >= 0")
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.segment_index_bytes = segment_index_bytes
        self.path = None if path is None else os.fspath(path)
        self._max_offset_entries = max_entries(segment_index_bytes)
        self._max_time_entries = time_index.max_entries(segment_index_bytes)
        self._relatives: list[int] = []
        self._positions: list[int] = []
        self._timestamps: list[int] = []
        self._time_relatives: list[int] = []
        self._last_indexed_position = 0
        self._last_position = -1
        self.max_timestamp = NO_TIMESTAMP  # largest batch max-timestamp fed so far
        self.offset_of_max_timestamp = -1  # last offset of the batch that carried it

    @property
    def offset_index_full(self) -> bool:
        return len(self._relatives) >= self._max_offset_entries

    @property
    def time_index_full(self) -> bool:
        return len(self._timestamps) >= self._max_time_entries - 1

    @property
    def is_full(self) -> bool:
        """Either index is full: a writer must roll before the next batch."""
        return self.offset_index_full or self.time_index_full

    def append(self, position: int, last_offset: int, max_timestamp: int) -> None:
        """One batch: its byte position in the .log, its last offset and its max timestamp."""
        relative = last_offset - self.base_offset
        if not 0 <= relative <= MAX_RELATIVE_OFFSET:
            raise CorruptIndexError(
                f"batch at position {position}: last offset {last_offset} is outside the segment's range "
                f"{self.base_offset}..{self.base_offset + MAX_RELATIVE_OFFSET}",
                self.path,
            )
        if not self._last_position < position <= MAX_POSITION:
            raise CorruptIndexError(
                f"batch positions must increase within 0..{MAX_POSITION}: found {position} "
                f"after {self._last_position}",
                self.path,
            )
        new_max = max_timestamp > self.max_timestamp
        if position - self._last_indexed_position > self.index_interval_bytes:
            self._refuse_if_full(position)
            if self._relatives and relative <= self._relatives[-1]:
                raise CorruptIndexError(
                    f"batch at position {position}: last offset {last_offset} is not above the last indexed "
                    f"offset {self.base_offset + self._relatives[-1]}",
                    self.path,
                )
            self._relatives.append(relative)
            self._positions.append(position)
            self._last_indexed_position = position
            if new_max:
                self._time_entry(max_timestamp, last_offset)
            else:
                self._time_entry(self.max_timestamp, self.offset_of_max_timestamp)
        if new_max:
            self.max_timestamp, self.offset_of_max_timestamp = max_timestamp, last_offset
        self._last_position = position

    def append_many(
        self, positions: np.ndarray, last_offsets: np.ndarray, max_timestamps: np.ndarray
    ) -> None:
        """:meth:`append` for many batches at once (int64 arrays), in one compiled loop."""
        n = positions.shape[0]
        if n == 0:
            return
        st = sk.new_state(
            sk.INDEX_STATE, base_offset=self.base_offset, index_interval_bytes=self.index_interval_bytes,
            max_offset_entries=self._max_offset_entries, max_time_entries=self._max_time_entries,
            last_indexed_position=self._last_indexed_position, last_position=self._last_position,
            max_timestamp=self.max_timestamp, offset_of_max_timestamp=self.offset_of_max_timestamp,
            offset_entries=len(self._relatives), last_indexed_relative=self._relatives[-1] if self._relatives else -1,
            time_entries=len(self._timestamps), last_time_timestamp=self._timestamps[-1] if self._timestamps else -1,
        )  # fmt: skip
        rel = np.empty(n, dtype=np.int64)
        pos = np.empty(n, dtype=np.int64)
        time_ts = np.empty(n, dtype=np.int64)
        time_rel = np.empty(n, dtype=np.int64)
        first_offset, first_time = len(self._relatives), len(self._timestamps)
        status, failed = sk.index_entries(
            positions, last_offsets, max_timestamps, st, rel, pos, time_ts, time_rel
        )
        row = st[0]
        self._relatives += rel[: int(row["offset_entries"]) - first_offset].tolist()
        self._positions += pos[: int(row["offset_entries"]) - first_offset].tolist()
        self._timestamps += time_ts[: int(row["time_entries"]) - first_time].tolist()
        self._time_relatives += time_rel[: int(row["time_entries"]) - first_time].tolist()
        self._last_indexed_position = int(row["last_indexed_position"])
        self._last_position = int(row["last_position"])
        self.max_timestamp = int(row["max_timestamp"])
        self.offset_of_max_timestamp = int(row["offset_of_max_timestamp"])
        if status != sk.INDEX_OK:  # the readable path raises the error for that batch
            self.append(int(positions[failed]), int(last_offsets[failed]), int(max_timestamps[failed]))
            raise CorruptIndexError(
                f"batch at position {int(positions[failed])} cannot be indexed", self.path
            )

    def finish(self) -> tuple[OffsetIndex, TimeIndex]:
        """Both indexes as the broker leaves them on roll/close: the time index gets its final entry."""
        timestamps, relatives = list(self._timestamps), list(self._time_relatives)
        last_timestamp = timestamps[-1] if timestamps else NO_TIMESTAMP
        if self.max_timestamp > last_timestamp:
            timestamps.append(self.max_timestamp)
            relatives.append(self.offset_of_max_timestamp - self.base_offset)
        offsets = _array(self._relatives, self._positions)
        times = np.empty(len(timestamps), dtype=time_index.ENTRY_DTYPE)
        times["timestamp"] = timestamps
        times["relative_offset"] = relatives
        offsets.setflags(write=False)
        times.setflags(write=False)
        return OffsetIndex(self.base_offset, offsets), TimeIndex(self.base_offset, times)

    def _time_entry(self, timestamp: int, offset: int) -> None:
        if timestamp > (self._timestamps[-1] if self._timestamps else NO_TIMESTAMP):
            self._timestamps.append(timestamp)
            self._time_relatives.append(offset - self.base_offset)

    def _refuse_if_full(self, position: int) -> None:
        for name, full, count in (
            ("offset", self.offset_index_full, len(self._relatives)),
            ("time", self.time_index_full, len(self._timestamps)),
        ):
            if full:
                raise RefusedError(
                    f"batch at position {position} needs an index entry but the {name} index of segment "
                    f"{self.base_offset} is full ({count} entries with segment.index.bytes="
                    f"{self.segment_index_bytes}); roll a new segment first"
                )
