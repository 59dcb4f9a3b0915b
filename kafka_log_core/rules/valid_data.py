"""Valid batches after the point where the loader's recovery stops: what the broker's rule would delete.

Kafka's loader truncates a segment at its first invalid batch and, after an unclean shutdown, deletes
every later segment. In a cluster that is safe: the follower fetches the rest again from the leader.
Offline nothing fetches it again, so before that rule is applied we look for valid data past the cut:

* in the rest of the segment, **resynchronising** past the invalid batch: its length field may lie, so
  the search goes on byte by byte for the next position where a batch with a matching CRC begins, then
  walks batch by batch again;
* in every later segment the rule deletes (batch by batch, resynchronising the same way).

A position is a candidate when its 17 framing bytes are plausible (magic 0, 1 or 2; a size that fits
the file and holds the header; an offset inside the segment's range); a candidate is a valid batch when
its checksum matches (v2: CRC32C from the attributes to the end; v0/v1: CRC32 from the magic byte). The
framing test runs over a window of positions at once (numpy) and skips zero runs, so a zero-filled tail
of a preallocated segment costs a pass over its bytes, not a Python step per byte. A crash leaves a torn
or zero-filled tail, after which nothing valid follows; bit rot or a damaged copy leaves valid batches
after the bad one, which this finds.

The checksums tried are bounded (:data:`CHECK_BUDGET_FACTOR`): a hostile file made of overlapping
plausible headers ends the search as *undetermined*, which the caller treats as "valid data may follow"
(refusing is the safe side).
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

import crc32c
import numpy as np

from kafka_log_core.format.index_base import MAX_RELATIVE_OFFSET
from kafka_log_core.format.legacy_records import MIN_ENTRY_SIZE as MIN_LEGACY_SIZE
from kafka_log_core.format.record_batch import (
    ATTRIBUTES_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
)
from kafka_log_core.format.record_batch import (
    HEADER_SIZE_UP_TO_MAGIC as FRAMING,
)
from kafka_log_core.format.record_batch import (
    MAGIC_OFFSET as MAGIC_AT,
)
from kafka_log_core.format.record_batch import (
    OFFSET_AND_SIZE as _FRAME,
)

_SIZE = struct.Struct(">i")
_V2_TAIL = struct.Struct(">Ihi")  # crc (17), attributes (21), last offset delta (23)
_RECORDS = struct.Struct(">i")  # records count, at 57
_LEGACY_CRC = struct.Struct(">I")  # at 12, the message's first field
MIN_V2_SIZE = HEADER_SIZE - LOG_OVERHEAD
WINDOW = 1 << 20  # positions tested at once
#: Checksummed bytes allowed per byte searched (plus a fixed allowance), before the search gives up.
CHECK_BUDGET_FACTOR = 4
CHECK_BUDGET_FLOOR = 64 << 20


@dataclass(frozen=True, slots=True)
class ValidData:
    """Valid batches found: how many, their records (a v2 batch's count, a legacy entry as one) and bytes."""

    batches: int = 0
    records: int = 0
    bytes: int = 0
    undetermined: bool = False  # the search gave up (its checksum budget): valid data may be there

    def __add__(self, other: ValidData) -> ValidData:
        return ValidData(
            self.batches + other.batches,
            self.records + other.records,
            self.bytes + other.bytes,
            self.undetermined or other.undetermined,
        )

    @property
    def any(self) -> bool:
        """Whether the broker's rule would delete valid data here (or might: undetermined)."""
        return self.batches > 0 or self.undetermined

    def describe(self) -> str:
        if self.undetermined and not self.batches:
            return "possibly valid batches (the search gave up on overlapping plausible headers)"
        found = (
            f"{self.records} valid record{'' if self.records == 1 else 's'} in {self.batches} "
            f"batch{'' if self.batches == 1 else 'es'} ({self.bytes} bytes)"
        )
        return found + (" and possibly more (the search gave up)" if self.undetermined else "")


NOTHING = ValidData()


def find_valid_data(data: bytes | memoryview, start: int, base_offset: int) -> ValidData:
    """The valid batches of a segment's bytes ``data`` from ``start`` on (the segment's base offset
    ``base_offset`` bounds the offsets a batch of it may have)."""
    view = memoryview(data)
    end = len(view)
    budget = CHECK_BUDGET_FLOOR + CHECK_BUDGET_FACTOR * max(end - start, 0)
    batches = records = size = 0
    pos = start
    while pos + FRAMING <= end:
        found = _valid_batch(view, pos, end, base_offset)
        if found is not None:
            batch_size, count = found
            batches, records, size = batches + 1, records + count, size + batch_size
            pos += batch_size
            continue
        pos, budget = _resynchronise(view, pos + 1, end, base_offset, budget)
        if pos < 0:
            return ValidData(batches, records, size, undetermined=pos == _GAVE_UP)
    return ValidData(batches, records, size)


def next_valid_batch(
    data: bytes | memoryview, start: int, base_offset: int, end: int | None = None
) -> int | None:
    """Where the first valid batch at or after ``start`` (and ending by ``end``) begins; None when there is
    none, or when the search gave up (its checksum budget)."""
    view = memoryview(data)
    end = len(view) if end is None else end
    budget = CHECK_BUDGET_FLOOR + CHECK_BUDGET_FACTOR * max(end - start, 0)
    pos, _ = _resynchronise(view[:end], start, end, base_offset, budget)
    return pos if pos >= 0 else None


_NONE_LEFT, _GAVE_UP = -1, -2


def _resynchronise(view: memoryview, pos: int, end: int, base_offset: int, budget: int) -> tuple[int, int]:
    """The first position at or after ``pos`` where a valid batch begins, and the budget left; a negative
    position when there is none (-1) or the budget ran out (-2)."""
    last = end - FRAMING  # the last position a batch's framing fits at
    while pos <= last:
        hi = min(pos + WINDOW, last + 1)
        for candidate in _candidates(view, pos, hi, end, base_offset):
            checked = _checked_bytes(view, int(candidate))
            if checked > budget:
                return _GAVE_UP, 0
            budget -= checked
            if _valid_batch(view, int(candidate), end, base_offset) is not None:
                return int(candidate), budget
        pos = hi
    return _NONE_LEFT, budget


def _candidates(view: memoryview, lo: int, hi: int, end: int, base_offset: int) -> np.ndarray:
    """Positions in ``[lo, hi)`` whose framing is plausible, in order (numpy over the window; the
    int32 fields at every position are read through overlapping one-byte-stride views, no copies)."""
    window = view[lo : min(end, hi + FRAMING - 1)]
    raw = np.frombuffer(window, dtype=np.uint8)
    if not raw.any():
        return np.empty(0, dtype=np.int64)
    n = hi - lo
    at = np.flatnonzero(raw[MAGIC_AT : MAGIC_AT + n] <= 2)
    magic = raw[at + MAGIC_AT]
    size = _int32_at_every_position(window, 8, n)[at].astype(np.int64)
    high = _int32_at_every_position(window, 0, n)[at]  # the offset's high word
    plausible = (size >= MIN_LEGACY_SIZE) & (size <= end - lo - LOG_OVERHEAD - at)
    plausible &= (magic != 2) | (size >= MIN_V2_SIZE)
    plausible &= (high >= base_offset >> 32) & (high <= (base_offset + MAX_RELATIVE_OFFSET) >> 32)
    return lo + at[plausible]


def _int32_at_every_position(buffer: memoryview, at: int, n: int) -> np.ndarray:
    """The big-endian int32 starting at ``at + i`` for each i < n (a read-only strided view)."""
    return np.ndarray(shape=(n,), dtype=">i4", buffer=buffer, offset=at, strides=(1,))


def _checked_bytes(view: memoryview, pos: int) -> int:
    return LOG_OVERHEAD + _SIZE.unpack_from(view, pos + 8)[0]


def _valid_batch(view: memoryview, pos: int, end: int, base_offset: int) -> tuple[int, int] | None:
    """(bytes, records) of the batch at ``pos`` when it is whole, in the segment's offset range and its
    checksum matches; None otherwise."""
    if pos + FRAMING > end:
        return None
    offset, size = _FRAME.unpack_from(view, pos)
    magic = view[pos + MAGIC_AT]
    batch_end = pos + LOG_OVERHEAD + size
    if magic > 2 or size < MIN_LEGACY_SIZE or batch_end > end:
        return None
    if magic == 2:
        if size < MIN_V2_SIZE:
            return None
        crc, _, last_delta = _V2_TAIL.unpack_from(view, pos + FRAMING)
        if offset < base_offset or last_delta < 0 or offset + last_delta - base_offset > MAX_RELATIVE_OFFSET:
            return None
        if crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : batch_end]) != crc:
            return None
        return LOG_OVERHEAD + size, max(_RECORDS.unpack_from(view, pos + 57)[0], 0)
    if not 0 <= offset - base_offset <= MAX_RELATIVE_OFFSET:
        return None
    if zlib.crc32(view[pos + MAGIC_AT : batch_end]) != _LEGACY_CRC.unpack_from(view, pos + LOG_OVERHEAD)[0]:
        return None
    return LOG_OVERHEAD + size, 1
