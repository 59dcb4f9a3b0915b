"""The offsets of a whole segment's batches checked in one compiled walk (no row per batch kept): what
``log.segment.check_batch_offsets`` refuses before a cleaning round reads a segment.

Only the framing fields and the offsets of each batch are read (one cache line a batch); a framing error
ends the walk silently: the readers that come next report it with their own detail.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kafka_log_core.format.log_file import HEADER_SIZE_UP_TO_MAGIC, MIN_ENTRY_SIZE
from kafka_log_core.format.record_batch import HEADER_SIZE, LOG_OVERHEAD, MAGIC
from kafka_log_core.kernels.batch_header import (
    BATCH_LENGTH_AT,
    LAST_OFFSET_DELTA_AT,
    MAGIC_AT,
    RECORDS_COUNT_AT,
)
from kafka_log_core.kernels.fields import borrowed, read_i32, read_i64

# What check_offsets finds, with the batch's position and (first, last, other) offsets or counts.
OFFSETS_OK = 0
BELOW_SEGMENT_BASE = 1  # other: the segment's base offset
NEGATIVE_LAST_OFFSET_DELTA = 2  # other: the delta
MORE_RECORDS_THAN_OFFSETS = 3  # other: the records count
NOT_AFTER_PREVIOUS = 4  # other: the previous batch's last offset


@njit(cache=True)
def check_offsets(buf, segment_base, previous_last, has_previous):
    """Walk the batches of ``buf`` (a whole segment) from position 0. Returns (finding, position, first,
    last, other): OFFSETS_OK with ``last`` the last batch's last offset (``previous_last`` when there is
    none) and ``other`` 1 when there was a batch or a previous one, else the first problem."""
    buf = borrowed(buf)
    pos = 0
    end = buf.shape[0]
    last_prev = previous_last
    seen = has_previous
    while end - pos > HEADER_SIZE_UP_TO_MAGIC:
        size = read_i32(buf, pos + BATCH_LENGTH_AT)
        total = LOG_OVERHEAD + size
        if size < MIN_ENTRY_SIZE or total > end - pos:
            break
        magic = np.int64(buf[pos + MAGIC_AT])
        if magic == MAGIC:
            if total < HEADER_SIZE:
                break
            first = read_i64(buf, pos)
            delta = np.int64(read_i32(buf, pos + LAST_OFFSET_DELTA_AT))
            count = np.int64(read_i32(buf, pos + RECORDS_COUNT_AT))
            last = first + delta
            if delta < 0:
                return NEGATIVE_LAST_OFFSET_DELTA, pos, first, last, delta
            if count > delta + 1:
                return MORE_RECORDS_THAN_OFFSETS, pos, first, last, count
        elif magic == 0 or magic == 1:
            first = read_i64(buf, pos)  # a wrapper's own offset is its last inner one: the only one known
            last = first
        else:
            break
        if first < segment_base:
            return BELOW_SEGMENT_BASE, pos, first, last, segment_base
        if seen and first <= last_prev:
            return NOT_AFTER_PREVIOUS, pos, first, last, last_prev
        last_prev = last
        seen = True
        pos += total
    return OFFSETS_OK, pos, np.int64(0), last_prev, np.int64(1 if seen else 0)
