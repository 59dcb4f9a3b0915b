"""Builds a segment's offset and time indexes from its batches, as the broker's recovery does.

The rule is written down in :mod:`kafka_log_core.format.offset_index`; the bulk path runs it in a compiled
kernel over a whole segment (``index_entries.index_entries``).
"""

from __future__ import annotations

import os

import numpy as np

from kafka_log_core.errors import ConfigError, CorruptIndexError, RefusedError
from kafka_log_core.format import time_index
from kafka_log_core.format.offset_index import (
    DEFAULT_INDEX_INTERVAL_BYTES,
    DEFAULT_SEGMENT_INDEX_BYTES,
    MAX_POSITION,
    MAX_RELATIVE_OFFSET,
    OffsetIndex,
    entries_array,
    max_entries,
)
from kafka_log_core.format.time_index import NO_TIMESTAMP, TimeIndex
from kafka_log_core.kernels import index_entries, statuses


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
        st = statuses.new_state(
            index_entries.INDEX_STATE, base_offset=self.base_offset, index_interval_bytes=self.index_interval_bytes,
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
        status, failed = index_entries.index_entries(
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
        if status != index_entries.INDEX_OK:  # the readable path raises the error for that batch
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
        offsets = entries_array(self._relatives, self._positions)
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
