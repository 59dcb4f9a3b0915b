"""The offset and time index entries of a run of batches, by the broker's rule (format spec §9-§10), in
one compiled call (``log.index_builder`` keeps the state between calls)."""

from __future__ import annotations

import numpy as np
from numba import njit

from kafka_log_core.format.index_base import MAX_RELATIVE_OFFSET
from kafka_log_core.format.offset_index import MAX_POSITION
from kafka_log_core.format.record_batch import NO_TIMESTAMP

# ---------------------------------------------------------------------------------------------- indexes
INDEX_STATE = np.dtype(
    [
        ("base_offset", np.int64),
        ("index_interval_bytes", np.int64),
        ("max_offset_entries", np.int64),
        ("max_time_entries", np.int64),
        ("last_indexed_position", np.int64),
        ("last_position", np.int64),
        ("max_timestamp", np.int64),  # largest batch max timestamp so far
        ("offset_of_max_timestamp", np.int64),
        ("offset_entries", np.int64),
        ("last_indexed_relative", np.int64),
        ("time_entries", np.int64),
        ("last_time_timestamp", np.int64),
    ]
)
INDEX_OK, INDEX_OFFSET_RANGE, INDEX_POSITION_ORDER, INDEX_OFFSET_FULL, INDEX_TIME_FULL, INDEX_NOT_ABOVE = (
    range(6)
)


@njit(cache=True)
def index_entries(positions, last_offsets, max_timestamps, st, rel, pos, time_ts, time_rel):
    """``index_builder.IndexBuilder.append`` over many batches: the broker's recovery rule (format spec
    §9-§10). New entries go to ``rel``/``pos`` and ``time_ts``/``time_rel`` from index 0; ``st`` counts
    every entry so far. Returns (INDEX_*, index of the batch that failed)."""
    s = st[0]
    new_offsets = 0
    new_times = 0
    for i in range(positions.shape[0]):
        position = positions[i]
        relative = last_offsets[i] - s.base_offset
        if relative < 0 or relative > MAX_RELATIVE_OFFSET:
            return INDEX_OFFSET_RANGE, i
        if not (s.last_position < position <= MAX_POSITION):
            return INDEX_POSITION_ORDER, i
        ts = max_timestamps[i]
        new_max = ts > s.max_timestamp
        if position - s.last_indexed_position > s.index_interval_bytes:
            if s.offset_entries >= s.max_offset_entries:
                return INDEX_OFFSET_FULL, i
            if s.time_entries >= s.max_time_entries - 1:
                return INDEX_TIME_FULL, i
            if s.offset_entries > 0 and relative <= s.last_indexed_relative:
                return INDEX_NOT_ABOVE, i
            rel[new_offsets] = relative
            pos[new_offsets] = position
            new_offsets += 1
            s.offset_entries += 1
            s.last_indexed_relative = relative
            s.last_indexed_position = position
            entry_ts = ts if new_max else s.max_timestamp
            entry_offset = last_offsets[i] if new_max else s.offset_of_max_timestamp
            if entry_ts > (s.last_time_timestamp if s.time_entries > 0 else NO_TIMESTAMP):
                time_ts[new_times] = entry_ts
                time_rel[new_times] = entry_offset - s.base_offset
                new_times += 1
                s.time_entries += 1
                s.last_time_timestamp = entry_ts
        if new_max:
            s.max_timestamp = ts
            s.offset_of_max_timestamp = last_offsets[i]
        s.last_position = position
    return INDEX_OK, -1
