"""Decompression the compiled passes do themselves: LZ4 frames as Kafka writes them (the codec whose
batches are smallest and most numerous), so a run of lz4 batches never goes back to Python.

Frame (``compression`` has the readable reader and the writer; the format spec §7 the rules)::

    04 22 4D 18 magic | FLG | BD | [content size, 8 bytes, if FLG bit 3] | HC |
    blocks: size uint32 LE (bit 31: stored uncompressed), data, [checksum if FLG bit 4] | 00 00 00 00 |
    [content checksum if FLG bit 2]

Block (LZ4 block format): sequences of ``token | literal length extension | literals | offset uint16
LE | match length extension``, the last one literals only; a match copies from ``offset`` bytes back,
overlapping allowed, at least 4 bytes.

The kernel takes the frames the broker's writer and every Kafka client write: version 01, independent
blocks, no block checksums, no content size, a valid header checksum. Anything else -- and anything
malformed -- is left to the readable reader (``compression.decompress``), which accepts or refuses it
with the library and its message: the kernel answers only "decoded" or "not mine".
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kafka_log_core.format import compression
from kafka_log_core.kernels.fields import copy_bytes

LZ4_OK = 0
LZ4_NOT_MINE = 1  # unusual or malformed: the readable reader decides
LZ4_NEEDS_ROOM = 2  # the output buffer is too small (the caller grows it by ``LZ4_MAX_BLOCK`` and retries)

_MAGIC = (0x04, 0x22, 0x4D, 0x18)
_FLG_VERSION_MASK, _FLG_VERSION_01 = 0xC0, 0x40
_FLG_INDEPENDENT = 0x20
_FLG_BLOCK_CHECKSUM = 0x10
_FLG_CONTENT_SIZE = 0x08
_FLG_CONTENT_CHECKSUM = 0x04
_FLG_RESERVED = 0x03
_BLOCK_STORED = 0x80000000
LZ4_MAX_BLOCK = 4 * 1024 * 1024  # the largest block size a BD byte may name
_MAX_BLOCK = np.array([0, 0, 0, 0, 64 * 1024, 256 * 1024, 1024 * 1024, 4 * 1024 * 1024], dtype=np.int64)


def _header_checksums() -> np.ndarray:
    """HC byte for each (FLG, BD >> 4) the kernel takes: the second byte of xxh32 of FLG and BD."""
    table = np.full((256, 8), -1, dtype=np.int64)
    for flg in range(256):
        if flg & _FLG_VERSION_MASK != _FLG_VERSION_01 or flg & (_FLG_RESERVED | _FLG_CONTENT_SIZE):
            continue
        for code in range(4, 8):
            table[flg, code] = compression.lz4_header_checksum(bytes([flg, code << 4]))
    return table


_HC = _header_checksums()


@njit(cache=True, inline="always")
def _u32_le(b, p):
    return (
        np.int64(b[p]) | (np.int64(b[p + 1]) << 8) | (np.int64(b[p + 2]) << 16) | (np.int64(b[p + 3]) << 24)
    )


@njit(cache=True)
def _lz4_block(src, ip, iend, dst, op, oend):
    """One LZ4 block ``src[ip:iend]`` into ``dst[op:oend]``. Returns the output end, or -1 (malformed,
    or more output than ``oend`` allows)."""
    start = op
    while ip < iend:
        token = np.int64(src[ip])
        ip += 1
        literals = token >> 4
        if literals == 15:
            while True:
                if ip >= iend:
                    return -1
                extra = np.int64(src[ip])
                ip += 1
                literals += extra
                if extra != 255:
                    break
        if ip + literals > iend or op + literals > oend:
            return -1
        copy_bytes(dst, op, src, ip, literals)
        ip += literals
        op += literals
        if ip == iend:
            return op  # the last sequence: literals only
        if ip + 2 > iend:
            return -1
        offset = np.int64(src[ip]) | (np.int64(src[ip + 1]) << 8)
        ip += 2
        if offset == 0 or offset > op - start:
            return -1
        match = token & 15
        if match == 15:
            while True:
                if ip >= iend:
                    return -1
                extra = np.int64(src[ip])
                ip += 1
                match += extra
                if extra != 255:
                    break
        match += 4
        if op + match > oend:
            return -1
        if offset >= match:
            copy_bytes(dst, op, dst, op - offset, match)
            op += match
        else:  # overlapping: byte by byte repeats the pattern
            for _ in range(match):
                dst[op] = dst[op - offset]
                op += 1
    return -1  # an empty block, or one that ends on a match


@njit(cache=True)
def lz4_frame(src, pos, end, dst, op, limit):
    """Decode the LZ4 frame ``src[pos:end]`` into ``dst`` from ``op``, at most ``limit`` bytes (more:
    LZ4_NOT_MINE, and the readable reader refuses it). Returns (LZ4_*, output end)."""
    if end - pos < 7:
        return LZ4_NOT_MINE, op
    for i in range(4):
        if src[pos + i] != _MAGIC[i]:
            return LZ4_NOT_MINE, op
    flg = np.int64(src[pos + 4])
    bd = np.int64(src[pos + 5])
    if flg & (_FLG_BLOCK_CHECKSUM | _FLG_CONTENT_SIZE) or not flg & _FLG_INDEPENDENT or bd & 0x8F:
        return LZ4_NOT_MINE, op
    code = bd >> 4
    if _HC[flg, code] < 0 or np.int64(src[pos + 6]) != _HC[flg, code]:
        return LZ4_NOT_MINE, op
    max_block = _MAX_BLOCK[code]
    ip = pos + 7
    oend = dst.shape[0]
    limit_end = op + limit
    while True:
        if ip + 4 > end:
            return LZ4_NOT_MINE, op
        size = _u32_le(src, ip)
        ip += 4
        if size == 0:
            break
        stored = size & _BLOCK_STORED
        size &= 0x7FFFFFFF
        if size > max_block or ip + size > end:
            return LZ4_NOT_MINE, op
        if (
            op + max_block > oend and oend < limit_end
        ):  # room for the largest block, unless the limit is nearer
            return LZ4_NEEDS_ROOM, op
        block_end = min(op + max_block, limit_end, oend)
        if stored:
            if op + size > block_end:
                return LZ4_NOT_MINE, op
            copy_bytes(dst, op, src, ip, size)
            op += size
        else:
            op = _lz4_block(src, ip, ip + size, dst, op, block_end)
            if op < 0:
                return LZ4_NOT_MINE, op
        ip += size
    if flg & _FLG_CONTENT_CHECKSUM and ip + 4 > end:
        return LZ4_NOT_MINE, op
    return LZ4_OK, op
