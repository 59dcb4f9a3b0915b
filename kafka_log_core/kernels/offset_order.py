"""The offsets of a segment's batches as a broker appends them: what ``log.segment.check_batch_offsets``
refuses before a cleaning round rewrites a segment.

:func:`batch_offsets` is the rule for one batch; the walks a round already makes over every header (pass 1,
``map_pass``; the CRC check, ``header_scan.verify_batches``) apply it on the way. :func:`check_offsets` is
the walk of its own, for what those walks do not cover: only the framing fields and the offsets of each
batch are read (one cache line a batch); a framing error ends it silently: the readers that come next
report it with their own detail.
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


@njit(cache=True, inline="always")
def batch_offsets(first, last, count, segment_base, previous_last, has_previous):
    """What is wrong with the offsets ``first..last`` of a batch of ``count`` records (0 for a legacy
    entry) in the segment of ``segment_base``, after a batch ending at ``previous_last`` (when
    ``has_previous``): OFFSETS_OK or the first problem (the ``other`` value of :func:`check_offsets` is
    the segment base, the delta, the count or ``previous_last``, by the finding)."""
    if last < first:
        return NEGATIVE_LAST_OFFSET_DELTA
    if count > last - first + 1:
        return MORE_RECORDS_THAN_OFFSETS
    if first < segment_base:
        return BELOW_SEGMENT_BASE
    if has_previous and first <= previous_last:
        return NOT_AFTER_PREVIOUS
    return OFFSETS_OK


@njit(cache=True, inline="always")
def finding_other(finding, first, last, count, segment_base, previous_last):
    """The ``other`` value :func:`check_offsets` reports with ``finding``."""
    if finding == BELOW_SEGMENT_BASE:
        return segment_base
    if finding == NEGATIVE_LAST_OFFSET_DELTA:
        return last - first
    if finding == MORE_RECORDS_THAN_OFFSETS:
        return count
    return previous_last


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
        count = np.int64(0)
        if magic == MAGIC:
            if total < HEADER_SIZE:
                break
            first = read_i64(buf, pos)
            last = first + np.int64(read_i32(buf, pos + LAST_OFFSET_DELTA_AT))
            count = np.int64(read_i32(buf, pos + RECORDS_COUNT_AT))
        elif magic == 0 or magic == 1:
            first = read_i64(buf, pos)  # a wrapper's own offset is its last inner one: the only one known
            last = first
        else:
            break
        finding = batch_offsets(first, last, count, segment_base, last_prev, seen)
        if finding != OFFSETS_OK:
            return (
                finding,
                pos,
                first,
                last,
                finding_other(finding, first, last, count, segment_base, last_prev),
            )
        last_prev = last
        seen = True
        pos += total
    return OFFSETS_OK, pos, np.int64(0), last_prev, np.int64(1 if seen else 0)
