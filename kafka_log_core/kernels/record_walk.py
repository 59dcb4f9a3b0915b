"""The walk over the records of a v2 batch (uncompressed or decompressed): varints, field bounds, key
and value positions, one record at a time, into a record table of one int64 row per record.

Record (inside a v2 batch; ``record_batch`` has the readable decoder)::

    length varint | attributes int8 | timestamp_delta varlong | offset_delta varint |
    key_length varint | key | value_length varint | value |
    header_count varint | (key_length varint, key, value_length varint, value) * header_count

Errors come back as an ``ERR_*`` code and a byte position (``ERROR_TEXT`` says what each means).
"""

from __future__ import annotations

import numpy as np
from numba import njit

# Error codes returned by the record walk (0 = ok).
OK = 0
ERR_VARINT = 1
ERR_RECORD_LENGTH = 2
ERR_FIELD_OVERRUN = 3
ERR_HEADER_COUNT = 4
ERR_LEFTOVER = 5
ERR_NULL_HEADER_KEY = 8

ERROR_TEXT = {
    ERR_VARINT: "malformed varint (overlong or past the end of its field)",
    ERR_RECORD_LENGTH: "record length overruns the record area",
    ERR_FIELD_OVERRUN: "record field overruns its record",
    ERR_HEADER_COUNT: "invalid header count",
    ERR_LEFTOVER: "record length does not match its fields, or bytes are left over after the last record",
    ERR_NULL_HEADER_KEY: "null header key",
}


# ---------------------------------------------------------------------------------------------- records
@njit(cache=True, inline="always")
def read_varint(b, p, end, max_bytes):
    """Returns (value, next_pos, ok)."""
    u = np.uint64(0)
    shift = np.uint64(0)
    i = 0
    while True:
        if p >= end or i >= max_bytes:
            return np.int64(0), p, False
        c = np.uint64(b[p])
        p += 1
        i += 1
        u |= (c & np.uint64(0x7F)) << shift
        if c < np.uint64(0x80):
            break
        shift += np.uint64(7)
    if max_bytes == 5:
        u &= np.uint64(0xFFFFFFFF)
    v = np.int64(u >> np.uint64(1)) ^ -np.int64(u & np.uint64(1))
    return v, p, True


@njit(cache=True, inline="always")
def walk_record(area, p, end):
    """One v2 record at ``area[p:]`` (within ``end``). Returns (err, err_pos, rec_end, body_start,
    timestamp_delta, offset_delta, key_pos, key_len, value_len): ``body_start`` is the position of the
    attributes byte, lengths are -1 for null."""
    rec_start = p
    z = np.int64(0)
    length, p, ok = read_varint(area, p, end, 5)
    if not ok:
        return ERR_VARINT, rec_start, z, z, z, z, z, z, z
    if length < 0 or p + length > end:
        return ERR_RECORD_LENGTH, rec_start, z, z, z, z, z, z, z
    body = p
    rec_end = p + length
    if p + 1 > rec_end:
        return ERR_FIELD_OVERRUN, rec_start, z, z, z, z, z, z, z
    p += 1  # attributes
    tsd, p, ok = read_varint(area, p, rec_end, 10)
    if not ok:
        return ERR_VARINT, p, z, z, z, z, z, z, z
    od, p, ok = read_varint(area, p, rec_end, 5)
    if not ok:
        return ERR_VARINT, p, z, z, z, z, z, z, z
    klen, p, ok = read_varint(area, p, rec_end, 5)
    if not ok:
        return ERR_VARINT, p, z, z, z, z, z, z, z
    kpos = p
    if klen >= 0:
        if p + klen > rec_end:
            return ERR_FIELD_OVERRUN, p, z, z, z, z, z, z, z
        p += klen
    else:
        klen = -1
    vlen, p, ok = read_varint(area, p, rec_end, 5)
    if not ok:
        return ERR_VARINT, p, z, z, z, z, z, z, z
    if vlen >= 0:
        if p + vlen > rec_end:
            return ERR_FIELD_OVERRUN, p, z, z, z, z, z, z, z
        p += vlen
    else:
        vlen = -1
    hc, p, ok = read_varint(area, p, rec_end, 5)
    if not ok:
        return ERR_VARINT, p, z, z, z, z, z, z, z
    if hc < 0 or hc > rec_end - p:
        return ERR_HEADER_COUNT, p, z, z, z, z, z, z, z
    for _ in range(hc):
        hk, p, ok = read_varint(area, p, rec_end, 5)
        if not ok:
            return ERR_VARINT, p, z, z, z, z, z, z, z
        if hk < 0:
            return ERR_NULL_HEADER_KEY, p, z, z, z, z, z, z, z
        if p + hk > rec_end:
            return ERR_FIELD_OVERRUN, p, z, z, z, z, z, z, z
        p += hk
        hv, p, ok = read_varint(area, p, rec_end, 5)
        if not ok:
            return ERR_VARINT, p, z, z, z, z, z, z, z
        if hv > 0:
            if p + hv > rec_end:
                return ERR_FIELD_OVERRUN, p, z, z, z, z, z, z, z
            p += hv
    if p != rec_end:
        return ERR_LEFTOVER, rec_start, z, z, z, z, z, z, z
    return OK, z, rec_end, body, tsd, od, kpos, klen, vlen


# The rows of walk_records' table (one contiguous row per column; read them by these names).
(W_OFFSET, W_REC_START, W_REC_END, W_BODY_START, W_TS_DELTA, W_KEY_POS, W_KEY_LEN, W_VALUE_LEN) = range(8)
WALK_ROWS = 8


@njit(cache=True)
def walk_records(area, start, end, count, base_offset):
    """Walk ``count`` v2 records in ``area[start:end]`` (uncompressed). Returns (err, err_pos, table)
    with table int64 (WALK_ROWS, count), one contiguous row per column: W_OFFSET, W_REC_START, W_REC_END,
    W_BODY_START (position of the attributes byte), W_TS_DELTA, W_KEY_POS, W_KEY_LEN (-1 null),
    W_VALUE_LEN (-1 null)."""
    table = np.empty((WALK_ROWS, count), dtype=np.int64)
    p = start
    for i in range(count):
        err, err_pos, rec_end, body, tsd, od, kpos, klen, vlen = walk_record(area, p, end)
        if err != OK:
            return err, err_pos, table[:, :i]
        table[W_OFFSET, i] = base_offset + od
        table[W_REC_START, i] = p
        table[W_REC_END, i] = rec_end
        table[W_BODY_START, i] = body
        table[W_TS_DELTA, i] = tsd
        table[W_KEY_POS, i] = kpos
        table[W_KEY_LEN, i] = klen
        table[W_VALUE_LEN, i] = vlen
        p = rec_end
    if p != end:
        return ERR_LEFTOVER, p, table
    return OK, p, table


# passes one array around, not one per column.
(R_OFFSET, R_REC_END, R_BODY, R_TS_DELTA, R_KEY_POS, R_KEY_LEN, R_VALUE_LEN, R_WANT, R_KEEP,
 R_NEW_TS_DELTA, R_SOURCE) = range(11)  # fmt: skip
RECORD_COLUMNS = 11
# R_SOURCE: which buffer holds the record (positions are in it): the segment's bytes, records Python
# decompressed, records the kernel decompressed.
SOURCE_BUF, SOURCE_AREAS, SOURCE_KAREA = 0, 1, 2
WANT_NONE, WANT_HASH, WANT_STORED = 0, 1, 2  # R_WANT: no digest needed, to hash, digest already there


@njit(cache=True, inline="always")
def walk_into(area, start, end, count, base_offset, rec, r0, control, hash_from, hash_upto, source):
    """Walk ``count`` records of one batch into rows ``r0..`` of the chunk; mark the keys to hash.
    Returns (err, err_pos)."""
    p = start
    for i in range(count):
        err, err_pos, rec_end, body, tsd, od, kpos, klen, vlen = walk_record(area, p, end)
        if err != OK:
            return err, err_pos
        r = r0 + i
        offset = base_offset + od
        rec[r, R_OFFSET] = offset
        rec[r, R_REC_END] = rec_end
        rec[r, R_BODY] = body
        rec[r, R_TS_DELTA] = tsd
        rec[r, R_KEY_POS] = kpos
        rec[r, R_KEY_LEN] = klen
        rec[r, R_VALUE_LEN] = vlen
        rec[r, R_WANT] = (
            WANT_HASH if (not control) and klen >= 0 and hash_from <= offset <= hash_upto else WANT_NONE
        )
        rec[r, R_SOURCE] = source
        p = rec_end
    if p != end:
        return 5, p  # kernels.ERR_LEFTOVER
    return OK, np.int64(0)
