"""The key digest of the cleaner's offset map: MD5 of the key (Kafka's SkimpyOffsetMap hashes keys with
MD5; two keys with the same digest are one key to the broker, and to us), compiled, sixteen keys at a
time in SIMD lanes."""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from kafka_log_core.kernels.fields import load_u32_le
from kafka_log_core.kernels.record_walk import (
    OK,
    R_KEY_LEN,
    R_KEY_POS,
    R_SOURCE,
    R_WANT,
    RECORD_COLUMNS,
    SOURCE_AREAS,
    SOURCE_BUF,
    WANT_HASH,
    walk_records,
)

# ---------------------------------------------------------------------------------------------- hashing
# Kafka's cleaner keys its offset map on the MD5 digest of the key (SkimpyOffsetMap, "MD5" in 4.x):
# two keys with the same digest are the same key. MD5 (RFC 1321) here, compiled. One MD5 block is a
# chain of 64 dependent steps, so keys that fit one block (<= 55 bytes, nearly all keys) are hashed
# sixteen at a time in lanes: the 64 steps are emitted directly as LLVM vector instructions over
# sixteen 32-bit lanes (AVX2 where the CPU has it), so the lanes run side by side.
_MD5_S = [7, 12, 17, 22] * 4 + [5, 9, 14, 20] * 4 + [4, 11, 16, 23] * 4 + [6, 10, 15, 21] * 4
_MD5_K = [int(abs(math.sin(i + 1)) * 2**32) & 0xFFFFFFFF for i in range(64)]
_MD5_G = (
    list(range(16)) + [(5 * i + 1) % 16 for i in range(16, 32)] + [(3 * i + 5) % 16 for i in range(32, 48)]
    + [(7 * i) % 16 for i in range(48, 64)]
)  # fmt: skip
_MD5_INIT = np.array([0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476], dtype=np.uint32)
LANES = 16
MAX_ONE_BLOCK_KEY = 55


@intrinsic
def _md5_compress(typingctx, words, state):
    """One MD5 compression per lane: ``words`` (16, LANES) uint32 message words, ``state`` (4, LANES)
    uint32 chaining values, updated in place. Both C-contiguous."""
    sig = types.void(words, state)

    def codegen(context, builder, signature, args):
        i32, i64 = ir.IntType(32), ir.IntType(64)
        vec = ir.VectorType(i32, LANES)

        def splat(v: int) -> ir.Constant:
            return ir.Constant(vec, [ir.Constant(i32, v & 0xFFFFFFFF)] * LANES)

        def rows(array_type, value, n):
            array = context.make_array(array_type)(context, builder, value)
            ptr = builder.bitcast(array.data, vec.as_pointer())
            return [builder.gep(ptr, [ir.Constant(i64, j)]) for j in range(n)]

        x = [builder.load(p, align=4) for p in rows(signature.args[0], args[0], 16)]
        state_rows = rows(signature.args[1], args[1], 4)
        start = [builder.load(p, align=4) for p in state_rows]
        a, b, c, d = start
        ones = splat(0xFFFFFFFF)
        for i in range(64):
            if i < 16:
                f = builder.or_(builder.and_(b, c), builder.and_(builder.xor(b, ones), d))
            elif i < 32:
                f = builder.or_(builder.and_(d, b), builder.and_(builder.xor(d, ones), c))
            elif i < 48:
                f = builder.xor(builder.xor(b, c), d)
            else:
                f = builder.xor(c, builder.or_(b, builder.xor(d, ones)))
            t = builder.add(builder.add(a, f), builder.add(splat(_MD5_K[i]), x[_MD5_G[i]]))
            rotated = builder.or_(builder.shl(t, splat(_MD5_S[i])), builder.lshr(t, splat(32 - _MD5_S[i])))
            a, d, c, b = d, c, b, builder.add(b, rotated)
        for p, first, last in zip(state_rows, start, (a, b, c, d), strict=True):
            builder.store(builder.add(first, last), p, align=4)
        return context.get_dummy_value()

    return sig, codegen


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


@njit(cache=True, inline="always")
def _md5_fill_lane(src, p, n, words, lane, same_length):
    """The one padded block of a message of ``n`` <= 55 bytes, as message words of ``lane``. With
    ``same_length`` (the lane's last message had ``n`` bytes too) the words after the message's last one
    are already what they must be (zeros, the length) and are left as they are."""
    full = n // 4
    for w in range(full):
        words[w, lane] = load_u32_le(src, p + 4 * w)
    tail = np.uint32(0x80) << np.uint32(8 * (n - 4 * full))  # the 0x80 pad byte after the message
    for k in range(n - 4 * full):
        tail |= np.uint32(src[p + 4 * full + k]) << np.uint32(8 * k)
    words[full, lane] = tail
    if same_length:
        return
    for w in range(full + 1, 14):
        words[w, lane] = 0
    words[14, lane] = np.uint32(n * 8)  # length in bits, little-endian, low word (the high one is 0)
    words[15, lane] = 0


@njit(cache=True)
def _md5_lanes(blocks, words, state):
    """Compress one 64-byte block per lane: ``blocks`` (LANES, 64) bytes, ``state`` (4, LANES) in/out."""
    for lane in range(LANES):
        for w in range(16):
            o = 4 * w
            words[w, lane] = (np.uint32(blocks[lane, o]) | (np.uint32(blocks[lane, o + 1]) << np.uint32(8))
                              | (np.uint32(blocks[lane, o + 2]) << np.uint32(16))
                              | (np.uint32(blocks[lane, o + 3]) << np.uint32(24)))  # fmt: skip
    _md5_compress(words, state)


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


DIGEST_HI, DIGEST_LO = 0, 1


@njit(cache=True)
def hash_rows(buf, areas, karea, rec, digests, start, stop):
    """MD5 digests of the keys of rows ``start <= r < stop`` of a record table whose R_WANT is WANT_HASH,
    into ``digests[r]``; keys of one block go sixteen at a time through the lanes."""
    words = np.empty((16, LANES), dtype=np.uint32)
    state = np.empty((4, LANES), dtype=np.uint32)
    rows = np.empty(LANES, dtype=np.int64)
    # Longer keys go one at a time through buffers of their own: the lanes being filled stay intact.
    long_blocks = np.zeros((LANES, 64), dtype=np.uint8)
    long_words = np.empty((16, LANES), dtype=np.uint32)
    long_state = np.empty((4, LANES), dtype=np.uint32)
    lane_length = np.full(LANES, -1, dtype=np.int64)  # the length of each lane's last key
    filled = 0
    for i in range(start, stop + 1):
        if i < stop:
            length = rec[i, R_KEY_LEN]
            if length < 0 or rec[i, R_WANT] != WANT_HASH:
                continue
            source = rec[i, R_SOURCE]
            p = rec[i, R_KEY_POS]
            if length > MAX_ONE_BLOCK_KEY:
                area = buf if source == SOURCE_BUF else (areas if source == SOURCE_AREAS else karea)
                hi, lo = _md5_one(area, p, length, long_blocks, long_words, long_state)
                digests[i, DIGEST_HI] = hi
                digests[i, DIGEST_LO] = lo
                continue
            # Each source its own call: an array variable chosen per key costs numba a reference count
            # call per key (even on a borrowed view), about as much as the rest of the filling.
            same = lane_length[filled] == length
            if source == SOURCE_BUF:
                _md5_fill_lane(buf, p, length, words, filled, same)
            elif source == SOURCE_AREAS:
                _md5_fill_lane(areas, p, length, words, filled, same)
            else:
                _md5_fill_lane(karea, p, length, words, filled, same)
            lane_length[filled] = length
            rows[filled] = i
            filled += 1
        if filled == LANES or (i == stop and filled > 0):
            for j in range(4):
                state[j, :] = _MD5_INIT[j]
            _md5_compress(words, state)
            for lane in range(filled):
                r = rows[lane]
                digests[r, DIGEST_HI] = np.uint64(state[0, lane]) | (
                    np.uint64(state[1, lane]) << np.uint64(32)
                )
                digests[r, DIGEST_LO] = np.uint64(state[2, lane]) | (
                    np.uint64(state[3, lane]) << np.uint64(32)
                )
            filled = 0


@njit(cache=True)
def hash_keys(area, key_pos, key_len):
    """MD5 digests of each non-null key; null keys get (0, 0) and must be masked by the caller."""
    n = key_pos.shape[0]
    rec = np.zeros((n, RECORD_COLUMNS), dtype=np.int64)
    for i in range(n):
        rec[i, R_KEY_POS] = key_pos[i]
        rec[i, R_KEY_LEN] = key_len[i]
        rec[i, R_WANT] = 1
    digests = np.zeros((n, 2), dtype=np.uint64)
    hash_rows(area, area, area, rec, digests, 0, n)
    return digests[:, DIGEST_HI].copy(), digests[:, DIGEST_LO].copy()


@njit(cache=True)
def walk_and_hash(area, start, end, count, base_offset):
    """``walk_records``, then the digests of the keys it found (rows of ``(count, 2)`` uint64: DIGEST_HI,
    DIGEST_LO; zero for null keys), in one call. Returns (err, err_pos, table, digests)."""
    err, err_pos, table = walk_records(area, start, end, count, base_offset)
    digests = np.zeros((table.shape[0], 2), dtype=np.uint64)
    if err == OK:
        hash_rows(area, area, area, table, digests, 0, table.shape[0])
    return err, err_pos, table, digests
