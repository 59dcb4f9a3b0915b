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

from kafka_log_core.constants import MAX_LONG, MIN_LONG
from kafka_log_core.format.record_batch import MIN_RECORD_BYTES

# Error codes returned by the record walk (0 = ok).
OK = 0
ERR_VARINT = 1
ERR_RECORD_LENGTH = 2
ERR_FIELD_OVERRUN = 3
ERR_HEADER_COUNT = 4
ERR_LEFTOVER = 5
ERR_RECORD_COUNT = 6
ERR_NULL_HEADER_KEY = 8

ERROR_TEXT = {
    ERR_VARINT: "malformed varint (overlong or past the end of its field)",
    ERR_RECORD_LENGTH: "record length overruns the record area",
    ERR_FIELD_OVERRUN: "record field overruns its record",
    ERR_HEADER_COUNT: "invalid header count",
    ERR_LEFTOVER: "record length does not match its fields, or bytes are left over after the last record",
    ERR_NULL_HEADER_KEY: "null header key",
    ERR_RECORD_COUNT: f"more records claimed than the record area can hold ({MIN_RECORD_BYTES} bytes each at least)",
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


# The record table: one int64 row per record, so that a kernel passes one array around, not one per
# column. Read it by these names.
(R_OFFSET, R_REC_END, R_BODY, R_TS_DELTA, R_KEY_POS, R_KEY_LEN, R_VALUE_LEN, R_WANT, R_KEEP,
 R_NEW_TS_DELTA, R_SOURCE) = range(11)  # fmt: skip
RECORD_COLUMNS = 11
# R_BODY: the position of the record's attributes byte (after its length); lengths are -1 for null.
# R_KEEP, R_NEW_TS_DELTA: pass 2's decision and the timestamp delta a rebuilt record gets.
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
        return ERR_LEFTOVER, p
    return OK, np.int64(0)


@njit(cache=True)
def walk_records(area, start, end, count, base_offset):
    """Walk ``count`` v2 records in ``area[start:end]`` (uncompressed) into a record table of their own,
    every keyed record marked WANT_HASH. Returns (err, err_pos, table). A count the area cannot hold is
    ERR_RECORD_COUNT, before a row is allocated."""
    if count * MIN_RECORD_BYTES > end - start:
        return ERR_RECORD_COUNT, start, np.zeros((0, RECORD_COLUMNS), dtype=np.int64)
    table = np.zeros((count, RECORD_COLUMNS), dtype=np.int64)
    err, err_pos = walk_into(
        area, start, end, count, base_offset, table, 0, False, MIN_LONG, MAX_LONG, SOURCE_BUF
    )
    return err, err_pos, table
