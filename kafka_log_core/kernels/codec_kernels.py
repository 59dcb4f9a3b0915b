"""The codecs the compiled passes run themselves, so a run of compressed batches never goes back to
Python: LZ4 frames decoded here (their blocks by the lz4 wheel's decoder when it is there); zstd frames
and gzip members decoded, and rebuilt lz4, zstd and gzip record areas compressed, by the libraries' C
entry points (:mod:`native_codecs`); snappy decoded and encoded by :mod:`snappy_codec`, in its xerial
framing here. Every decoder stops at the batch's limit.

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
from kafka_log_core.format.record_batch import MAX_RECORD_BYTES
from kafka_log_core.kernels.fields import copy_bytes, copy_match, read_i32, write_u32_le
from kafka_log_core.kernels.native_codecs import (
    C_GZIP_BOUND,
    C_GZIP_COMPRESS,
    C_GZIP_CSTATE,
    C_GZIP_DECOMPRESS,
    C_GZIP_DSTATE,
    C_LZ4_COMPRESS,
    C_LZ4_DECOMPRESS,
    C_LZ4_STATE,
    C_ZSTD_CCTX,
    C_ZSTD_COMPRESS,
    C_ZSTD_DCTX,
    C_ZSTD_DECOMPRESS,
    C_ZSTD_RESET,
    GZIP_NO_ROOM,
    GZIP_OK,
    ZSTD_DST_TOO_SMALL,
    ZSTD_E_END,
    ZSTD_E_FLUSH,
    ZSTD_MAX_ERROR,
    ZSTD_RESET_SESSION,
    call_bound,
    call_inflate,
    call_lz4,
    call_lz4_block,
    call_sized,
    call_zstd_reset,
    call_zstd_stream,
)
from kafka_log_core.kernels.snappy_codec import (
    SNAPPY_CHUNK,
    SNAPPY_HEADER,
    SNAPPY_MAGIC,
    decode_block,
    xerial_snappy,
)

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
_FRAME_HEADER = np.frombuffer(compression.lz4_frame_header(2), dtype=np.uint8)
_LZ4_BLOCK = compression.LZ4_BLOCK  # the block size our frames (and Kafka's) use
_GZIP_CODEC = int(compression.GZIP)
_SNAPPY_CODEC, _LZ4_CODEC, _ZSTD_CODEC = int(compression.SNAPPY), int(compression.LZ4), int(compression.ZSTD)
_ZSTD_SMALL = 128 * 1024  # ZSTD_COMPRESSBOUND's margin for inputs below it


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
        op = copy_match(dst, op, offset, match)
    return -1  # an empty block, or one that ends on a match


@njit(cache=True, inline="always")
def _lz4_block_fast(codecs, src, ip, size, dst, op, oend):
    """:func:`_lz4_block` for ``src[ip:ip+size]``, by the lz4 wheel's ``LZ4_decompress_safe`` when it is
    there (a quarter less CPU on the sweep's blocks). What it refuses, our decoder decides, so the blocks
    taken are the ones taken before: the C decoder refuses everything ours refuses but a match at offset
    0, which the readable reader (``lz4.block.decompress``: the same C decoder) takes alike; for the
    blocks both take the output is the same."""
    fn = codecs[C_LZ4_DECOMPRESS]
    if fn != 0:
        written = call_lz4_block(fn, (src.ctypes.data + ip, dst.ctypes.data + op, np.int64(size), oend - op))
        if written >= 0:
            return op + written
    return _lz4_block(src, ip, ip + size, dst, op, oend)


@njit(cache=True)
def lz4_frame(codecs, src, pos, end, dst, op, limit):
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
            op = _lz4_block_fast(codecs, src, ip, size, dst, op, block_end)
            if op < 0:
                return LZ4_NOT_MINE, op
        ip += size
    if flg & _FLG_CONTENT_CHECKSUM and ip + 4 > end:
        return LZ4_NOT_MINE, op
    return LZ4_OK, op


# ---------------------------------------------------------------------------------------------- zstd
@njit(cache=True)
def zstd_frames(codecs, src, pos, end, dst, op, limit):
    """Decode the zstd frames ``src[pos:end]`` into ``dst`` from ``op``, at most ``limit`` bytes, with
    libzstd (``ZSTD_decompressDCtx``: every frame, skippable ones skipped). Returns (LZ4_* status, output
    end): LZ4_NEEDS_ROOM when ``dst`` ends before the limit and the frames did not fit, LZ4_NOT_MINE for
    anything else libzstd refuses (the readable reader then refuses it with its message) or when the
    library is not there."""
    fn = codecs[C_ZSTD_DECOMPRESS]
    if fn == 0:
        return LZ4_NOT_MINE, op
    if end == pos:
        return LZ4_OK, op
    room = dst.shape[0] - op
    capacity = min(room, limit)
    result = call_sized(
        fn, (codecs[C_ZSTD_DCTX], dst.ctypes.data + op, capacity, src.ctypes.data + pos, end - pos)
    )
    if result < 0 and result >= -ZSTD_MAX_ERROR:
        if -result == ZSTD_DST_TOO_SMALL and room < limit:
            return LZ4_NEEDS_ROOM, op
        return LZ4_NOT_MINE, op
    return LZ4_OK, op + result


# ---------------------------------------------------------------------------------------------- compress
@njit(cache=True, inline="always")
def _lz4_block_bound(n):
    return n + n // 255 + 16  # LZ4_COMPRESSBOUND


@njit(cache=True)
def compress_bound(codecs, codec, n):
    """The most :func:`compress_area` may write for ``n`` bytes of records; -1: not compiled for this
    codec (Python compresses it)."""
    if codec == _LZ4_CODEC and codecs[C_LZ4_COMPRESS] != 0:
        blocks = max((n + _LZ4_BLOCK - 1) // _LZ4_BLOCK, 1)
        return _FRAME_HEADER.shape[0] + 4 + blocks * 4 + _lz4_block_bound(n) + 16 * blocks
    if codec == _ZSTD_CODEC and codecs[C_ZSTD_COMPRESS] != 0:
        return n + (n >> 8) + ((_ZSTD_SMALL - n) >> 11 if n < _ZSTD_SMALL else 0)  # ZSTD_COMPRESSBOUND
    if codec == _GZIP_CODEC and codecs[C_GZIP_COMPRESS] != 0:
        return call_bound(codecs[C_GZIP_BOUND], (codecs[C_GZIP_CSTATE], np.int64(n)))
    if codec == _SNAPPY_CODEC:  # the header, then per chunk its length and at most 32 + n + n / 6 bytes
        chunks = (n + SNAPPY_CHUNK - 1) // SNAPPY_CHUNK
        return SNAPPY_HEADER + chunks * (4 + 32 + 1) + n + n // 6
    return -1


@njit(cache=True)
def compress_area(codecs, codec, src, start, n, dst, op):
    """``src[start:start+n]`` compressed with ``codec`` as our writer frames it (``compression.compress``:
    an LZ4 frame of 64 KiB blocks, a block stored when compressing does not make it smaller; a zstd
    frame as Kafka's stream writes it (:func:`_zstd_frame`); xerial snappy chunks of 32 KiB: the same bytes) or, for gzip,
    as libdeflate writes one member at level 6 (other bytes than zlib's), into ``dst`` from ``op``, which
    has room for :func:`compress_bound`. Returns the end, or -1 (the library refused: Python compresses
    it)."""
    if codec == _SNAPPY_CODEC:
        return xerial_snappy(src, start, n, dst, op)
    if codec == _GZIP_CODEC:
        written = call_sized(codecs[C_GZIP_COMPRESS], (codecs[C_GZIP_CSTATE], src.ctypes.data + start, np.int64(n),
                             dst.ctypes.data + op, compress_bound(codecs, codec, n)))  # fmt: skip
        return op + written if written > 0 else -1
    if codec == _ZSTD_CODEC:
        return _zstd_frame(codecs, src, start, n, dst, op, compress_bound(codecs, codec, n))
    fn, stream = codecs[C_LZ4_COMPRESS], codecs[C_LZ4_STATE]
    copy_bytes(dst, op, _FRAME_HEADER, 0, _FRAME_HEADER.shape[0])
    op += _FRAME_HEADER.shape[0]
    for block in range(start, start + n, _LZ4_BLOCK):
        size = min(_LZ4_BLOCK, start + n - block)
        written = call_lz4(fn, (stream, src.ctypes.data + block, dst.ctypes.data + op + 4, size,
                                _lz4_block_bound(size), np.int64(1)))  # fmt: skip
        if written <= 0:
            return -1
        if written >= size:
            write_u32_le(dst, op, size | _BLOCK_STORED)
            copy_bytes(dst, op + 4, src, block, size)
            op += 4 + size
        else:
            write_u32_le(dst, op, written)
            op += 4 + written
    write_u32_le(dst, op, 0)
    return op + 4


@njit(cache=True)
def _zstd_frame(codecs, src, start, n, dst, op, capacity):
    """One zstd frame as Kafka's ``ZstdOutputStream`` writes it (level 3, no content size): the records
    streamed with their size unknown (so level 3's parameters for an unknown size: a 2 MiB window), then
    flushed (``close`` flushes the ``BufferedOutputStream`` above it first), then the frame ended (an empty
    last block). Returns the end, or -1 (libzstd refused: Python compresses it)."""
    cctx = codecs[C_ZSTD_CCTX]
    if call_zstd_reset(codecs[C_ZSTD_RESET], (cctx, np.int64(ZSTD_RESET_SESSION))) != 0:
        return -1
    io = np.empty(6, dtype=np.int64)  # ZSTD_outBuffer then ZSTD_inBuffer: pointer, size, position
    io[0], io[1], io[2] = dst.ctypes.data + op, capacity, 0
    io[3], io[4], io[5] = src.ctypes.data + start, n, 0
    buffers = np.int64(io.ctypes.data)
    for directive in (ZSTD_E_FLUSH, ZSTD_E_END):
        left = call_zstd_stream(codecs[C_ZSTD_COMPRESS], (cctx, buffers, buffers + 24, np.int64(directive)))
        if left != 0:  # an error code, or output left to flush: no room (the bound leaves plenty)
            return -1
    return op + io[2]


# ---------------------------------------------------------------------------------------------- snappy
@njit(cache=True)
def snappy_stream(src, pos, end, dst, op, limit):
    """Decode a snappy record area ``src[pos:end]`` (xerial framing: header, then chunks of a big-endian
    int32 length and a raw block; or one bare raw block, as the readable reader also takes) into ``dst``
    from ``op``, at most ``limit`` bytes. Returns (LZ4_* status, output end): LZ4_NEEDS_ROOM when a
    block fits the limit but not ``dst``; LZ4_NOT_MINE for anything malformed or past the limit (the
    readable reader refuses it with its message)."""
    limit_end = op + limit
    framed = end - pos >= SNAPPY_MAGIC.shape[0]
    if framed:
        for i in range(SNAPPY_MAGIC.shape[0]):
            if src[pos + i] != SNAPPY_MAGIC[i]:
                framed = False
                break
    if not framed:
        return _snappy_status(decode_block(src, pos, end, dst, op, limit_end), op)
    if end - pos < SNAPPY_HEADER:
        return LZ4_NOT_MINE, op
    ip = pos + SNAPPY_HEADER
    while ip < end:
        if ip + 4 > end:
            return LZ4_NOT_MINE, op
        size = read_i32(src, ip)
        ip += 4
        if size < 0 or ip + size > end:
            return LZ4_NOT_MINE, op
        status, op = _snappy_status(decode_block(src, ip, ip + size, dst, op, limit_end), op)
        if status != LZ4_OK:
            return status, op
        ip += size
    return LZ4_OK, op


@njit(cache=True, inline="always")
def _snappy_status(out, op):
    if out == -1:
        return LZ4_NOT_MINE, op
    if out < -1:
        return LZ4_NEEDS_ROOM, op
    return LZ4_OK, out


# ---------------------------------------------------------------------------------------------- gzip
@njit(cache=True)
def gzip_members(codecs, src, pos, end, dst, op, limit):
    """Decode the gzip members ``src[pos:end]`` into ``dst`` from ``op``, at most ``limit`` bytes, with
    libdeflate (one member at a time, each given the room left). Returns (LZ4_* status, output end), as
    :func:`zstd_frames`."""
    fn = codecs[C_GZIP_DECOMPRESS]
    if fn == 0:
        return LZ4_NOT_MINE, op
    used = np.zeros(2, dtype=np.int64)  # bytes read, bytes written by the last call
    room = dst.shape[0] - op
    capacity = min(room, limit)
    out = op
    while pos < end:
        result = call_inflate(fn, (codecs[C_GZIP_DSTATE], src.ctypes.data + pos, end - pos, dst.ctypes.data + out,
                                   capacity - (out - op), np.int64(used.ctypes.data), used.ctypes.data + 8))  # fmt: skip
        if result == GZIP_NO_ROOM:
            return (LZ4_NEEDS_ROOM if room < limit else LZ4_NOT_MINE), op
        if result != GZIP_OK or used[0] <= 0:
            return LZ4_NOT_MINE, op
        pos += used[0]
        out += used[1]
    return LZ4_OK, out


# ---------------------------------------------------------------------------------------------- any codec
@njit(cache=True, inline="always")
def decode_limit(count, max_batch_bytes):
    """The most a batch of ``count`` records may decode to (``record_batch.area_limit``)."""
    return min(max_batch_bytes, max(count, 0) * MAX_RECORD_BYTES)


@njit(cache=True, inline="always")
def decode_area(codecs, codec, src, pos, end, dst, op, limit):
    """The record area ``src[pos:end]`` of a batch compressed with ``codec`` (lz4, snappy, gzip or zstd)
    decoded into ``dst`` from ``op``, at most ``limit`` bytes, by the decoder of that codec above.
    Returns (LZ4_* status, output end)."""
    if codec == _LZ4_CODEC:
        return lz4_frame(codecs, src, pos, end, dst, op, limit)
    if codec == _SNAPPY_CODEC:
        return snappy_stream(src, pos, end, dst, op, limit)
    if codec == _GZIP_CODEC:
        return gzip_members(codecs, src, pos, end, dst, op, limit)
    return zstd_frames(codecs, src, pos, end, dst, op, limit)
