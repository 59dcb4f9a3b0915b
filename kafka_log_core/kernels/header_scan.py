"""Batch headers of a whole segment in one compiled call: the header scan (one int64 row per batch, read
as ``HEADER_ROW`` records; what retention, recovery, producer state and the plans work from) and the
framing, CRC32C and offsets check of every batch."""

from __future__ import annotations

import numpy as np
from numba import njit

from kafka_log_core.format.log_file import HEADER_SIZE_UP_TO_MAGIC, MIN_ENTRY_SIZE
from kafka_log_core.format.record_batch import (
    ATTRIBUTES_OFFSET,
    CODEC_MASK,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
)
from kafka_log_core.kernels.batch_header import (
    BASE_OFFSET_AT,
    BASE_SEQUENCE_AT,
    BATCH_LENGTH_AT,
    LAST_OFFSET_DELTA_AT,
    LEGACY_ATTRIBUTES_AT,
    LEGACY_MIN_MESSAGE_SIZE_V0,
    LEGACY_MIN_MESSAGE_SIZE_V1,
    LEGACY_TIMESTAMP_AT,
    MAGIC_AT,
    RECORDS_COUNT_AT,
    batch_head,
    framing,
)
from kafka_log_core.kernels.crc32c import crc32c
from kafka_log_core.kernels.fields import borrowed, read_i16, read_i32, read_i64, read_u32
from kafka_log_core.kernels.offset_order import OFFSETS_OK, batch_offsets
from kafka_log_core.kernels.record_walk import OK, read_varint, walk_record
from kafka_log_core.kernels.statuses import CONTINUE, DONE, ERR_BATCH, ERR_CRC, ERR_OFFSETS, STOP_LEGACY

# ---------------------------------------------------------------------------------------------- records
# Header scan output, one row per batch, every field an int64 (the kernel fills a (rows, HEADER_FIELDS)
# array by these column numbers; Python reads it as HEADER_ROW records). Legacy entries: base_offset =
# offset for an uncompressed entry, -1 for a wrapper; records_count -1; no producer.
(H_POSITION, H_SIZE, H_MAGIC, H_ATTRIBUTES, H_BASE_OFFSET, H_LAST_OFFSET, H_MAX_TIMESTAMP, H_PRODUCER_ID,
 H_PRODUCER_EPOCH, H_BASE_SEQUENCE, H_LAST_OFFSET_DELTA, H_RECORDS_COUNT, H_CONTROL_TYPE,
 H_COORDINATOR_EPOCH) = range(14)  # fmt: skip
HEADER_ROW = np.dtype(
    [
        ("position", np.int64),
        ("size", np.int64),  # bytes of the whole batch, log overhead included
        ("magic", np.int64),
        ("attributes", np.int64),
        ("base_offset", np.int64),
        ("last_offset", np.int64),
        ("max_timestamp", np.int64),
        ("producer_id", np.int64),
        ("producer_epoch", np.int64),
        ("base_sequence", np.int64),
        ("last_offset_delta", np.int64),
        ("records_count", np.int64),
        ("control_type", np.int64),  # NOT_CONTROL, EMPTY_CONTROL, UNREADABLE_CONTROL or the marker type
        ("coordinator_epoch", np.int64),  # ABORT/COMMIT markers, else -1
    ]
)
HEADER_FIELDS = len(HEADER_ROW.names or ())
NOT_CONTROL = -1
EMPTY_CONTROL = -2  # a control batch without records (a cleaned marker)
UNREADABLE_CONTROL = -3  # compressed, or not a well-formed marker: the readable path decides


# ---------------------------------------------------------------------------------------------- scan
@njit(cache=True)
def _grow_rows(rows):
    bigger = np.empty((2 * rows.shape[0], HEADER_FIELDS), dtype=np.int64)
    bigger[: rows.shape[0]] = rows
    return bigger


@njit(cache=True, inline="always")
def _marker(buf, pos, total):
    """(control type, coordinator epoch) of a control batch with records, read from its first record."""
    count = read_i32(buf, pos + RECORDS_COUNT_AT)
    if count != 1 or buf[pos + ATTRIBUTES_OFFSET + 1] & CODEC_MASK:
        return UNREADABLE_CONTROL, -1
    end = pos + total
    err, err_pos, rec_end, body, tsd, od, kpos, klen, vlen = walk_record(buf, pos + HEADER_SIZE, end)
    if err != OK or rec_end != end or klen < 4 or read_i16(buf, kpos) < 0:
        return UNREADABLE_CONTROL, -1
    ctype = read_i16(buf, kpos + 2)
    if ctype != CONTROL_ABORT and ctype != CONTROL_COMMIT:
        return ctype, -1
    if vlen < 6:
        return UNREADABLE_CONTROL, -1
    length, vpos, ok = read_varint(buf, kpos + klen, end, 5)  # the value follows the key and its length
    return ctype, read_i32(buf, vpos + 2)  # value: version int16, coordinator_epoch int32


@njit(cache=True, inline="always")
def _legacy_ok(buf, pos, total, magic):
    """The checks ``legacy_records.decode_message(check_crc=False)`` makes on one shallow entry."""
    size = total - LOG_OVERHEAD
    if size < (LEGACY_MIN_MESSAGE_SIZE_V1 if magic == 1 else LEGACY_MIN_MESSAGE_SIZE_V0):
        return False
    end = pos + total
    p = pos + LEGACY_TIMESTAMP_AT + (8 if magic == 1 else 0)
    for _ in range(2):  # key, then value
        if p + 4 > end:
            return False
        n = read_i32(buf, p)
        p += 4
        if n >= 0:
            if p + n > end:
                return False
            p += n
    return p == end


@njit(cache=True)
def scan_headers(buf, pos, end):
    """Every batch header from ``pos``, as ``log_file.iter_batches`` (not strict: a partial batch at the
    end stops the scan silently). Returns (status, position, rows) with rows (n, HEADER_FIELDS) int64:
    DONE, or ERR_BATCH at the position of a malformed entry (rows hold the batches before it)."""
    rows = np.empty((1024, HEADER_FIELDS), dtype=np.int64)
    n = 0
    status = DONE
    while end - pos > HEADER_SIZE_UP_TO_MAGIC:
        size = read_i32(buf, pos + BATCH_LENGTH_AT)
        if size < MIN_ENTRY_SIZE:
            status = ERR_BATCH
            break
        if pos + LOG_OVERHEAD + size > end:
            break  # a partial trailing batch is invisible to readers
        total = LOG_OVERHEAD + size
        magic = np.int64(buf[pos + MAGIC_AT])
        if n == rows.shape[0]:
            rows = _grow_rows(rows)
        rows[n, H_POSITION] = pos
        rows[n, H_SIZE] = total
        rows[n, H_MAGIC] = magic
        rows[n, H_COORDINATOR_EPOCH] = -1
        if magic == 2:
            count = read_i32(buf, pos + RECORDS_COUNT_AT)
            if total < HEADER_SIZE or count < 0:
                status = ERR_BATCH
                break
            h = batch_head(buf, pos)
            rows[n, H_ATTRIBUTES] = h.attributes
            rows[n, H_BASE_OFFSET] = h.base_offset
            rows[n, H_LAST_OFFSET] = h.last_offset
            rows[n, H_MAX_TIMESTAMP] = h.max_timestamp
            rows[n, H_PRODUCER_ID] = h.producer_id
            rows[n, H_PRODUCER_EPOCH] = h.producer_epoch
            rows[n, H_BASE_SEQUENCE] = read_i32(buf, pos + BASE_SEQUENCE_AT)
            rows[n, H_LAST_OFFSET_DELTA] = read_i32(buf, pos + LAST_OFFSET_DELTA_AT)
            rows[n, H_RECORDS_COUNT] = count
            rows[n, H_CONTROL_TYPE] = NOT_CONTROL
            if h.attributes & CONTROL_MASK:
                if count == 0:
                    rows[n, H_CONTROL_TYPE] = EMPTY_CONTROL
                else:
                    ctype, coordinator_epoch = _marker(buf, pos, total)
                    rows[n, H_CONTROL_TYPE] = ctype
                    rows[n, H_COORDINATOR_EPOCH] = coordinator_epoch
        elif magic == 0 or magic == 1:
            if not _legacy_ok(buf, pos, total, magic):
                status = ERR_BATCH
                break
            offset = read_i64(buf, pos)
            attributes = np.int64(buf[pos + LEGACY_ATTRIBUTES_AT])
            rows[n, H_ATTRIBUTES] = attributes
            rows[n, H_BASE_OFFSET] = -1 if attributes & CODEC_MASK else offset
            rows[n, H_LAST_OFFSET] = offset
            rows[n, H_MAX_TIMESTAMP] = (
                read_i64(buf, pos + LEGACY_TIMESTAMP_AT) if magic == 1 else NO_TIMESTAMP
            )
            rows[n, H_PRODUCER_ID] = -1
            rows[n, H_PRODUCER_EPOCH] = -1
            rows[n, H_BASE_SEQUENCE] = -1
            rows[n, H_LAST_OFFSET_DELTA] = 0
            rows[n, H_RECORDS_COUNT] = -1
            rows[n, H_CONTROL_TYPE] = NOT_CONTROL
        else:
            status = ERR_BATCH
            break
        n += 1
        pos += total
    return status, pos, rows[:n].copy()


def header_rows(rows: np.ndarray) -> np.ndarray:
    """The (n, HEADER_FIELDS) int64 array of :func:`scan_headers` as HEADER_ROW records (no copy)."""
    return rows.view(HEADER_ROW)[:, 0] if rows.shape[0] else np.zeros(0, dtype=HEADER_ROW)


@njit(cache=True)
def verify_batches(buf, pos, end, segment_base):
    """Framing, CRC32C and offsets (``offset_order.batch_offsets``, within the segment of
    ``segment_base``) of every v2 batch from ``pos`` (strict: a partial batch at the end is an error).
    Returns (status, position, batches, first, last): DONE, STOP_LEGACY (Python checks that entry's
    CRC32) or ERR_*, with the batches checked before ``position``, the first offset of the first and the
    last offset of the last."""
    buf = borrowed(buf)
    batches = np.int64(0)
    first = np.int64(0)
    last = np.int64(0)
    while True:
        status, total, magic = framing(buf, pos, end)
        if status != CONTINUE:
            return status, pos, batches, first, last
        if magic != 2:
            return STOP_LEGACY, pos, batches, first, last
        base = read_i64(buf, pos + BASE_OFFSET_AT)
        batch_last = base + read_i32(buf, pos + LAST_OFFSET_DELTA_AT)
        count = read_i32(buf, pos + RECORDS_COUNT_AT)
        if batch_offsets(base, batch_last, count, segment_base, last, batches > 0) != OFFSETS_OK:
            return ERR_OFFSETS, pos, batches, first, last
        if crc32c(buf, pos + ATTRIBUTES_OFFSET, total - ATTRIBUTES_OFFSET) != read_u32(buf, pos + CRC_OFFSET):
            return ERR_CRC, pos, batches, first, last
        if batches == 0:
            first = base
        last = batch_last
        batches += 1
        pos += total
