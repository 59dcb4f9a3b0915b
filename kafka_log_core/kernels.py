"""The hot loops, compiled once with numba: record walking (varints, key
extraction), MD5 key digests and the cleaner's offset map. Everything around them stays plain Python.

Inputs are ``numpy.uint8`` arrays over the bytes of a ``.log`` file or of a decompressed record
area. Kernels never raise: they return an error code and a byte position, and the Python callers
turn those into ``CorruptRecordError`` with the file name. ``cache=True`` keeps the compiled code on
disk so that Spark executors do not compile again.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

# Error codes returned by the kernels (0 = ok).
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


@njit(cache=True, inline="always")
def _i32(b, p):
    v = (np.int64(b[p]) << 24) | (np.int64(b[p + 1]) << 16) | (np.int64(b[p + 2]) << 8) | np.int64(b[p + 3])
    if v >= 0x80000000:
        v -= 0x100000000
    return v


@njit(cache=True, inline="always")
def _i64(b, p):
    v = np.uint64(0)
    for i in range(8):
        v = (v << np.uint64(8)) | np.uint64(b[p + i])
    return np.int64(v)


@njit(cache=True, inline="always")
def _i16(b, p):
    v = (np.int64(b[p]) << 8) | np.int64(b[p + 1])
    if v >= 0x8000:
        v -= 0x10000
    return v


@njit(cache=True, inline="always")
def _varint(b, p, end, max_bytes):
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


@njit(cache=True)
def walk_records(area, start, end, count, base_offset):
    """Walk ``count`` v2 records in ``area[start:end]`` (uncompressed). Returns (err, err_pos, table)
    with table int64 (8, count), one contiguous row per column: offset, rec_start, rec_end, body_start
    (position of the attributes byte), timestamp_delta, key_pos, key_len (-1 null), value_len (-1 null)."""
    table = np.empty((8, count), dtype=np.int64)
    p = start
    for i in range(count):
        rec_start = p
        length, p, ok = _varint(area, p, end, 5)
        if not ok:
            return ERR_VARINT, rec_start, table[:, :i]
        if length < 0 or p + length > end:
            return ERR_RECORD_LENGTH, rec_start, table[:, :i]
        body = p
        rec_end = p + length
        if p + 1 > rec_end:
            return ERR_FIELD_OVERRUN, rec_start, table[:, :i]
        p += 1  # attributes
        tsd, p, ok = _varint(area, p, rec_end, 10)
        if not ok:
            return ERR_VARINT, p, table[:, :i]
        od, p, ok = _varint(area, p, rec_end, 5)
        if not ok:
            return ERR_VARINT, p, table[:, :i]
        klen, p, ok = _varint(area, p, rec_end, 5)
        if not ok:
            return ERR_VARINT, p, table[:, :i]
        kpos = p
        if klen >= 0:
            if p + klen > rec_end:
                return ERR_FIELD_OVERRUN, p, table[:, :i]
            p += klen
        else:
            klen = -1
        vlen, p, ok = _varint(area, p, rec_end, 5)
        if not ok:
            return ERR_VARINT, p, table[:, :i]
        if vlen >= 0:
            if p + vlen > rec_end:
                return ERR_FIELD_OVERRUN, p, table[:, :i]
            p += vlen
        else:
            vlen = -1
        hc, p, ok = _varint(area, p, rec_end, 5)
        if not ok:
            return ERR_VARINT, p, table[:, :i]
        if hc < 0 or hc > rec_end - p:
            return ERR_HEADER_COUNT, p, table[:, :i]
        for _ in range(hc):
            hk, p, ok = _varint(area, p, rec_end, 5)
            if not ok:
                return ERR_VARINT, p, table[:, :i]
            if hk < 0:
                return ERR_NULL_HEADER_KEY, p, table[:, :i]
            if p + hk > rec_end:
                return ERR_FIELD_OVERRUN, p, table[:, :i]
            p += hk
            hv, p, ok = _varint(area, p, rec_end, 5)
            if not ok:
                return ERR_VARINT, p, table[:, :i]
            if hv > 0:
                if p + hv > rec_end:
                    return ERR_FIELD_OVERRUN, p, table[:, :i]
                p += hv
        if p != rec_end:
            return ERR_LEFTOVER, rec_start, table[:, :i]
        table[0, i] = base_offset + od
        table[1, i] = rec_start
        table[2, i] = rec_end
        table[3, i] = body
        table[4, i] = tsd
        table[5, i] = kpos
        table[6, i] = klen
        table[7, i] = vlen
    if p != end:
        return ERR_LEFTOVER, p, table
    return OK, p, table


# ---------------------------------------------------------------------------------------------- hashing
# Kafka's cleaner keys its offset map on the MD5 digest of the key (SkimpyOffsetMap, "MD5" in 4.x):
# two keys with the same digest are the same key. MD5 (RFC 1321) here, compiled. One MD5 block is a
# chain of 64 dependent steps, so keys that fit one block (<= 55 bytes, nearly all keys) are hashed
# sixteen at a time in lanes: independent chains the CPU overlaps (and LLVM vectorises).
_MD5_S = np.array(
    [7, 12, 17, 22] * 4 + [5, 9, 14, 20] * 4 + [4, 11, 16, 23] * 4 + [6, 10, 15, 21] * 4, dtype=np.uint32
)
_MD5_K = np.array([int(abs(math.sin(i + 1)) * 2**32) & 0xFFFFFFFF for i in range(64)], dtype=np.uint32)
_MD5_G = np.array(
    list(range(16)) + [(5 * i + 1) % 16 for i in range(16, 32)] + [(3 * i + 5) % 16 for i in range(32, 48)]
    + [(7 * i) % 16 for i in range(48, 64)],
    dtype=np.int64,
)  # fmt: skip
_MD5_INIT = np.array([0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476], dtype=np.uint32)
LANES = 16
MAX_ONE_BLOCK_KEY = 55


@njit(cache=True, inline="always")
def _md5_pad_block(src, p, n, full, dst, row, tail_len):
    """Write the last ``tail_len`` (64 or 128) padded bytes of a message into ``dst[row]``."""
    dst[row, :tail_len] = 0
    rest = n - full * 64
    for k in range(rest):
        dst[row, k] = src[p + full * 64 + k]
    dst[row, rest] = 0x80
    bits = np.uint64(n) * np.uint64(8)
    for k in range(8):
        dst[row, tail_len - 8 + k] = np.uint8((bits >> np.uint64(8 * k)) & np.uint64(0xFF))


@njit(cache=True)
def _md5_lanes(blocks, words, state):
    """Compress one 64-byte block per lane: ``blocks`` (LANES, 64) bytes, ``state`` (4, LANES) in/out."""
    for w in range(16):
        o = 4 * w
        for lane in range(LANES):
            words[w, lane] = (np.uint32(blocks[lane, o]) | (np.uint32(blocks[lane, o + 1]) << np.uint32(8))
                              | (np.uint32(blocks[lane, o + 2]) << np.uint32(16))
                              | (np.uint32(blocks[lane, o + 3]) << np.uint32(24)))  # fmt: skip
    a = state[0].copy()
    b = state[1].copy()
    c = state[2].copy()
    d = state[3].copy()
    for i in range(0, 16):
        g, k, s = _MD5_G[i], _MD5_K[i], _MD5_S[i]
        for lane in range(LANES):
            B, C, D = b[lane], c[lane], d[lane]
            x = np.uint32(((B & C) | (~B & D)) + a[lane] + k + words[g, lane])
            a[lane], d[lane], c[lane] = D, C, B
            b[lane] = np.uint32(B + ((x << s) | (x >> (np.uint32(32) - s))))
    for i in range(16, 32):
        g, k, s = _MD5_G[i], _MD5_K[i], _MD5_S[i]
        for lane in range(LANES):
            B, C, D = b[lane], c[lane], d[lane]
            x = np.uint32(((D & B) | (~D & C)) + a[lane] + k + words[g, lane])
            a[lane], d[lane], c[lane] = D, C, B
            b[lane] = np.uint32(B + ((x << s) | (x >> (np.uint32(32) - s))))
    for i in range(32, 48):
        g, k, s = _MD5_G[i], _MD5_K[i], _MD5_S[i]
        for lane in range(LANES):
            B, C, D = b[lane], c[lane], d[lane]
            x = np.uint32((B ^ C ^ D) + a[lane] + k + words[g, lane])
            a[lane], d[lane], c[lane] = D, C, B
            b[lane] = np.uint32(B + ((x << s) | (x >> (np.uint32(32) - s))))
    for i in range(48, 64):
        g, k, s = _MD5_G[i], _MD5_K[i], _MD5_S[i]
        for lane in range(LANES):
            B, C, D = b[lane], c[lane], d[lane]
            x = np.uint32((C ^ (B | ~D)) + a[lane] + k + words[g, lane])
            a[lane], d[lane], c[lane] = D, C, B
            b[lane] = np.uint32(B + ((x << s) | (x >> (np.uint32(32) - s))))
    for lane in range(LANES):
        state[0, lane] = np.uint32(state[0, lane] + a[lane])
        state[1, lane] = np.uint32(state[1, lane] + b[lane])
        state[2, lane] = np.uint32(state[2, lane] + c[lane])
        state[3, lane] = np.uint32(state[3, lane] + d[lane])


@njit(cache=True)
def _md5_one(src, p, n, blocks, words, state):
    """MD5 of one message of any length in lane 0 (the other lanes compute garbage, ignored)."""
    for j in range(4):
        state[j, :] = _MD5_INIT[j]
    full = n // 64
    for blk in range(full):
        for k in range(64):
            blocks[0, k] = src[p + blk * 64 + k]
        _md5_lanes(blocks, words, state)
    tail_len = 64 if n - full * 64 <= MAX_ONE_BLOCK_KEY else 128
    pad = np.zeros((1, 128), dtype=np.uint8)
    _md5_pad_block(src, p, n, full, pad, 0, tail_len)
    for q in range(0, tail_len, 64):
        blocks[0, :] = pad[0, q : q + 64]
        _md5_lanes(blocks, words, state)
    return np.uint64(state[0, 0]) | (np.uint64(state[1, 0]) << np.uint64(32)), np.uint64(state[2, 0]) | (
        np.uint64(state[3, 0]) << np.uint64(32)
    )


@njit(cache=True)
def md5_128(b, p, n):
    """MD5 of ``b[p:p+n]`` as two uint64 (bytes 0-7 and 8-15 of the digest, little-endian)."""
    blocks = np.zeros((LANES, 64), dtype=np.uint8)
    words = np.empty((16, LANES), dtype=np.uint32)
    state = np.empty((4, LANES), dtype=np.uint32)
    return _md5_one(b, p, n, blocks, words, state)


@njit(cache=True)
def hash_keys(area, key_pos, key_len):
    """MD5 digests of each non-null key; null keys get (0, 0) and must be masked by the caller."""
    n = key_pos.shape[0]
    hi = np.zeros(n, dtype=np.uint64)
    lo = np.zeros(n, dtype=np.uint64)
    blocks = np.zeros((LANES, 64), dtype=np.uint8)
    words = np.empty((16, LANES), dtype=np.uint32)
    state = np.empty((4, LANES), dtype=np.uint32)
    rows = np.empty(LANES, dtype=np.int64)
    filled = 0
    for i in range(n + 1):
        if i < n:
            length = key_len[i]
            if length < 0:
                continue
            if length > MAX_ONE_BLOCK_KEY:
                hi[i], lo[i] = _md5_one(area, key_pos[i], length, blocks, words, state)
                continue
            _md5_pad_block(area, key_pos[i], length, 0, blocks, filled, 64)
            rows[filled] = i
            filled += 1
        if filled == LANES or (i == n and filled > 0):
            for j in range(4):
                state[j, :] = _MD5_INIT[j]
            _md5_lanes(blocks, words, state)
            for lane in range(filled):
                r = rows[lane]
                hi[r] = np.uint64(state[0, lane]) | (np.uint64(state[1, lane]) << np.uint64(32))
                lo[r] = np.uint64(state[2, lane]) | (np.uint64(state[3, lane]) << np.uint64(32))
            filled = 0
    return hi, lo


@njit(cache=True)
def walk_and_hash(area, start, end, count, base_offset):
    """``walk_records`` then ``hash_keys`` over the keys it found, in one call."""
    err, err_pos, table = walk_records(area, start, end, count, base_offset)
    if err != OK:
        z = np.zeros(0, dtype=np.uint64)
        return err, err_pos, table, z, z
    hi, lo = hash_keys(area, table[5], table[6])
    return err, err_pos, table, hi, lo


# ---------------------------------------------------------------------------------------------- offset map
@njit(cache=True, inline="always")
def _slot(hi, lo, slots):
    return np.int64((hi ^ (lo >> np.uint64(7))) % np.uint64(slots))


@njit(cache=True)
def map_put_many(keys_hi, keys_lo, offs, hi, lo, offsets, n_used, capacity, mask):
    """Slots store ``offset + 1`` so that an all-zero (calloc'ed, untouched) table is empty. Insert ``(hash, offset)`` for each i where ``mask[i]``; an existing key is overwritten without
    growing. As Kafka's cleaner does, once the map holds ``capacity`` keys the next keyed record stops
    the pass, even one whose key is already present. Returns (consumed, n_used, last_put) where
    consumed = number of input rows processed (== len(hi) unless the map filled)."""
    slots = keys_hi.shape[0]
    last_put = np.int64(-1)
    for i in range(hi.shape[0]):
        if not mask[i]:
            continue
        if n_used >= capacity:
            return i, n_used, last_put
        s = _slot(hi[i], lo[i], slots)
        while True:
            if offs[s] == 0:
                keys_hi[s] = hi[i]
                keys_lo[s] = lo[i]
                offs[s] = offsets[i] + 1
                n_used += 1
                break
            if keys_hi[s] == hi[i] and keys_lo[s] == lo[i]:
                offs[s] = offsets[i] + 1
                break
            s += 1
            if s == slots:
                s = 0
        last_put = offsets[i]
    return hi.shape[0], n_used, last_put


@njit(cache=True, inline="always")
def _map_find(keys_hi, keys_lo, offs, digest_hi, digest_lo):
    """Latest offset stored for (digest_hi, digest_lo), or -1."""
    slots = keys_hi.shape[0]
    s = _slot(digest_hi, digest_lo, slots)
    for _ in range(slots):
        if offs[s] == 0:
            return np.int64(-1)
        if keys_hi[s] == digest_hi and keys_lo[s] == digest_lo:
            return offs[s] - 1
        s += 1
        if s == slots:
            s = 0
    return np.int64(-1)


@njit(cache=True)
def map_get_many(keys_hi, keys_lo, offs, hi, lo, mask):
    """Latest offset for each key (``-1`` when absent or masked out)."""
    out = np.full(hi.shape[0], -1, dtype=np.int64)
    for i in range(hi.shape[0]):
        if mask[i]:
            out[i] = _map_find(keys_hi, keys_lo, offs, hi[i], lo[i])
    return out


@njit(cache=True, inline="always")
def _varlong_size(v):
    u = np.uint64((v << 1) ^ (v >> 63))
    n = 1
    while u >= np.uint64(0x80):
        u >>= np.uint64(7)
        n += 1
    return n


@njit(cache=True, inline="always")
def _put_varlong(out, w, v):
    u = np.uint64((v << 1) ^ (v >> 63))
    while u >= np.uint64(0x80):
        out[w] = np.uint8((u & np.uint64(0x7F)) | np.uint64(0x80))
        u >>= np.uint64(7)
        w += 1
    out[w] = np.uint8(u)
    return w + 1


@njit(cache=True)
def rebuild_records(area, rec_end, body_start, ts_delta, new_ts_delta, keep):
    """Re-encode the kept records of a v2 record area with new timestamp deltas (the base timestamp
    changed) and attributes 0, as Kafka's builder writes them. Offset deltas, keys, values and headers
    are copied byte for byte. Returns the new record area (uint8)."""
    total = 0
    for i in range(keep.shape[0]):
        if keep[i]:
            total += rec_end[i] - body_start[i] + 20
    out = np.empty(total, dtype=np.uint8)
    w = 0
    for i in range(keep.shape[0]):
        if not keep[i]:
            continue
        old_tsd = ts_delta[i]
        new_tsd = new_ts_delta[i]
        rest = body_start[i] + 1 + _varlong_size(old_tsd)
        rest_len = rec_end[i] - rest
        length = 1 + _varlong_size(new_tsd) + rest_len
        w = _put_varlong(out, w, np.int64(length))  # zig-zag of a non-negative int32 == varint
        out[w] = 0  # record attributes: unused, the builder always writes 0
        w += 1
        w = _put_varlong(out, w, new_tsd)
        out[w : w + rest_len] = area[rest : rec_end[i]]
        w += rest_len
    return out[:w]


KEEP_BY_RULES, KEEP_ALL, KEEP_NONE = 0, 1, 2


@njit(cache=True)
def decide_keep(
    offsets, key_len, value_null, timestamps, hi, lo, keys_hi, keys_lo, offs, latest, retain_deletes, mode
):
    """The cleaner's per-record rule (spec R3) over one batch. ``mode``: KEEP_BY_RULES, KEEP_ALL (control
    batch) or KEEP_NONE (records discarded). Returns (keep, kept, tombstones, kept_tombstones,
    first_kept_timestamp, max_kept_timestamp)."""
    n = offsets.shape[0]
    keep = np.zeros(n, dtype=np.bool_)
    kept = tombs = kept_tombs = 0
    first_ts = np.int64(-1)
    max_ts = np.int64(-1)
    for i in range(n):
        tomb = value_null[i]
        if tomb:
            tombs += 1
        if mode == KEEP_NONE:
            k = False
        elif mode == KEEP_ALL or offsets[i] > latest:
            k = True
        elif key_len[i] < 0:
            k = False
        else:
            found = _map_find(keys_hi, keys_lo, offs, hi[i], lo[i])
            k = offsets[i] >= found and (not tomb or retain_deletes)
        if k:
            keep[i] = True
            if kept == 0:
                first_ts = timestamps[i]
                max_ts = timestamps[i]
            elif timestamps[i] > max_ts:
                max_ts = timestamps[i]
            kept += 1
            if tomb:
                kept_tombs += 1
    return keep, kept, tombs, kept_tombs, first_ts, max_ts
