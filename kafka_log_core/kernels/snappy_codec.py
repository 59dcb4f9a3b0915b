"""Snappy as Kafka's record areas hold it, in the compiled passes: the raw block format decoded, and
encoded as snappy's reference encoder (the one cramjam and snappy-java call) encodes it, byte for byte,
with the xerial framing snappy-java writes around it (``compression`` has the readable reader and writer).

Raw block: the uncompressed length as a varint32, then elements: a literal (tag ``len-1 << 2``, or
``60..63 << 2`` and 1-4 little-endian bytes of ``len-1``, then the bytes) or a copy of ``len`` bytes
from ``offset`` back (tag kind 1: 4-11 bytes, an 11-bit offset; kind 2 and 3: 1-64 bytes, a 16- or
32-bit little-endian offset). Xerial framing: ``82 'SNAPPY' 00``, two big-endian int32s (version 1,
compatible 1), then chunks of a big-endian int32 length and a raw block of at most 32 KiB of input.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kafka_log_core.format import compression
from kafka_log_core.kernels.fields import copy_bytes, copy_match, load_u32_le, load_u64_le, write_i32

SNAPPY_MAGIC = np.frombuffer(compression.SNAPPY_MAGIC, dtype=np.uint8)
_HEADER_BYTES = np.frombuffer(compression.SNAPPY_HEADER, dtype=np.uint8)
SNAPPY_HEADER = _HEADER_BYTES.shape[0]


@njit(cache=True)
def decode_block(src, ip, iend, dst, op, oend):
    """One raw snappy block ``src[ip:iend]`` into ``dst[op:]``: a varint32 of its length, then literals
    and copies. Returns the output end; -1: malformed, or its length passes ``oend`` (nothing is
    decoded then); -2 - length: ``dst`` is too small for the length it declares (also nothing decoded)."""
    n = np.int64(0)
    shift = 0
    while True:
        if ip >= iend or shift > 28:
            return -1
        b = np.int64(src[ip])
        ip += 1
        n |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            break
    if n > 0xFFFFFFFF or op + n > oend:
        return -1
    if op + n > dst.shape[0]:
        return -2 - n
    start = op
    end = op + n
    while ip < iend:
        tag = np.int64(src[ip])
        ip += 1
        kind = tag & 3
        if kind == 0:  # literal
            length = tag >> 2
            if length >= 60:
                extra = length - 59
                if ip + extra > iend:
                    return -1
                length = 0
                for i in range(extra):
                    length |= np.int64(src[ip + i]) << (8 * i)
                ip += extra
            length += 1
            if ip + length > iend or op + length > end:
                return -1
            copy_bytes(dst, op, src, ip, length)
            ip += length
            op += length
            continue
        if kind == 1:
            if ip >= iend:
                return -1
            length = 4 + ((tag >> 2) & 7)
            offset = ((tag >> 5) << 8) | np.int64(src[ip])
            ip += 1
        elif kind == 2:
            if ip + 2 > iend:
                return -1
            length = 1 + (tag >> 2)
            offset = np.int64(src[ip]) | (np.int64(src[ip + 1]) << 8)
            ip += 2
        else:
            if ip + 4 > iend:
                return -1
            length = 1 + (tag >> 2)
            offset = np.int64(load_u32_le(src, ip))
            ip += 4
        if offset == 0 or offset > op - start or op + length > end:
            return -1
        op = copy_match(dst, op, offset, length)
    return op if op == end else -1


SNAPPY_CHUNK = compression.SNAPPY_BLOCK  # xerial chunks: 32 KiB of input each
_SNAPPY_FRAGMENT = 1 << 16  # a raw block is compressed 64 KiB at a time
_SNAPPY_MAX_TABLE = 1 << 14
_SNAPPY_MARGIN = 15  # no match is looked for in a fragment's last 15 bytes
_SNAPPY_HASH = np.uint32(0x1E35A7BD)


@njit(cache=True, inline="always")
def _snappy_hash(x, shift):
    """Four bytes' hash: their product with a constant, wrapped to 32 bits, its top bits."""
    product = (np.uint64(x) & np.uint64(0xFFFFFFFF)) * np.uint64(_SNAPPY_HASH)
    return np.int64((product & np.uint64(0xFFFFFFFF)) >> np.uint64(shift))


@njit(cache=True, inline="always")
def _snappy_literal(src, start, end, dst, op):
    n = end - start - 1
    if n < 60:
        dst[op] = np.uint8(n << 2)
        op += 1
    elif n < 256:
        dst[op] = np.uint8(60 << 2)
        dst[op + 1] = np.uint8(n)
        op += 2
    else:
        dst[op] = np.uint8(61 << 2)
        dst[op + 1] = np.uint8(n & 0xFF)
        dst[op + 2] = np.uint8(n >> 8)
        op += 3
    copy_bytes(dst, op, src, start, end - start)
    return op + end - start


@njit(cache=True, inline="always")
def _snappy_copy2(dst, op, offset, length):
    dst[op] = np.uint8(((length - 1) << 2) | 2)
    dst[op + 1] = np.uint8(offset & 0xFF)
    dst[op + 2] = np.uint8(offset >> 8)
    return op + 3


@njit(cache=True, inline="always")
def _snappy_copy(dst, op, offset, length):
    while length >= 68:
        op = _snappy_copy2(dst, op, offset, 64)
        length -= 64
    if length > 64:
        op = _snappy_copy2(dst, op, offset, 60)
        length -= 60
    if length <= 11 and offset <= 2047:
        dst[op] = np.uint8(((offset >> 8) << 5) | ((length - 4) << 2) | 1)
        dst[op + 1] = np.uint8(offset & 0xFF)
        return op + 2
    return _snappy_copy2(dst, op, offset, length)


@njit(cache=True)
def _snappy_fragment(src, base, n, dst, op, table):
    """At most 64 KiB ``src[base:base+n]`` as snappy elements: greedy matches found through a hash of
    four bytes, the lookups spread out as no match turns up (snappy's reference encoder)."""
    if n < _SNAPPY_MARGIN + 2:
        return _snappy_literal(src, base, base + n, dst, op)
    size = 256
    shift = 24
    while size < _SNAPPY_MAX_TABLE and size < n:
        size *= 2
        shift -= 1
    table[:size] = 0
    limit = n - _SNAPPY_MARGIN
    emitted = 0
    s = 1
    next_hash = _snappy_hash(load_u32_le(src, base + s), shift)
    while True:
        skip = 32
        next_s = s
        candidate = 0
        while True:
            s = next_s
            step = skip >> 5
            next_s = s + step
            skip += step
            if next_s > limit:
                return _snappy_literal(src, base + emitted, base + n, dst, op)
            candidate = np.int64(table[next_hash])
            table[next_hash] = s
            next_hash = _snappy_hash(load_u32_le(src, base + next_s), shift)
            if load_u32_le(src, base + s) == load_u32_le(src, base + candidate):
                break
        op = _snappy_literal(src, base + emitted, base + s, dst, op)
        while True:
            start = s
            i = s + 4
            j = candidate + 4
            while i < n and src[base + i] == src[base + j]:
                i += 1
                j += 1
            s = i
            op = _snappy_copy(dst, op, start - candidate, s - start)
            emitted = s
            if s >= limit:
                if emitted < n:
                    op = _snappy_literal(src, base + emitted, base + n, dst, op)
                return op
            x = load_u64_le(src, base + s - 1)
            table[_snappy_hash(x, shift)] = s - 1
            h = _snappy_hash(x >> np.uint64(8), shift)
            candidate = np.int64(table[h])
            table[h] = s
            if np.uint32((x >> np.uint64(8)) & np.uint64(0xFFFFFFFF)) != load_u32_le(src, base + candidate):
                next_hash = _snappy_hash(x >> np.uint64(16), shift)
                s += 1
                break


@njit(cache=True)
def snappy_raw(src, start, n, dst, op, table):
    """``src[start:start+n]`` as one raw snappy block (its length as a varint32, then 64 KiB fragments)."""
    v = n
    while v >= 0x80:
        dst[op] = np.uint8((v & 0x7F) | 0x80)
        v >>= 7
        op += 1
    dst[op] = np.uint8(v)
    op += 1
    for fragment in range(start, start + n, _SNAPPY_FRAGMENT):
        op = _snappy_fragment(src, fragment, min(_SNAPPY_FRAGMENT, start + n - fragment), dst, op, table)
    return op


@njit(cache=True)
def xerial_snappy(src, start, n, dst, op):
    """The xerial framing snappy-java writes: its header, then per 32 KiB of input a big-endian int32
    length and a raw block."""
    copy_bytes(dst, op, _HEADER_BYTES, 0, SNAPPY_HEADER)
    op += SNAPPY_HEADER
    table = np.empty(_SNAPPY_MAX_TABLE, dtype=np.uint16)
    for chunk in range(start, start + n, SNAPPY_CHUNK):
        end = snappy_raw(src, chunk, min(SNAPPY_CHUNK, start + n - chunk), dst, op + 4, table)
        write_i32(dst, op, end - op - 4)
        op = end
    return op
