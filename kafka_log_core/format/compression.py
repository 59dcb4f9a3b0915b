"""Compression codecs exactly as they appear on disk in Kafka logs.

The codec applies to the whole record area of a v2 batch, or to the value of a legacy wrapper message.

====  ======  ==================================================================================
 id   name    framing on disk
====  ======  ==================================================================================
 0    none
 1    gzip    RFC 1952 gzip member(s); zlib default level
 2    snappy  xerial snappy-java stream: 16-byte header ``82 'SNAPPY' 00 | 00000001 | 00000001``
              then chunks ``compressed_len:int32 BE`` + raw snappy block (≤ 32 KiB input each).
              A bare raw snappy block (no header) is also read, as Kafka's reader accepts it.
 3    lz4     one LZ4 *frame*: magic ``04 22 4D 18``, FLG ``0x60`` (v01, independent blocks, no
              checksums), BD ``0x40`` (64 KiB blocks), HC = second byte of xxh32(FLG, BD); blocks
              ``size:uint32 LE`` (bit 31 = stored) + data; end mark ``00000000``. Magic-0 messages
              carry Kafka's historical HC computed over magic+FLG+BD, which is not verified on read.
 4    zstd    zstd frame(s) from a streaming encoder (magic 2 only); ours as Kafka's: size unknown, one
              flush, then the end (an empty last block)
====  ======  ==================================================================================

The frame code for LZ4 and snappy is ours because the libraries' own stream formats are not the
ones Kafka writes (python-lz4 links blocks, python-snappy writes the official framing format).

Decompression is bounded: :func:`decompress` never produces more than ``limit`` bytes (the caller's
bound for one batch: ``MAX_BATCH_BYTES`` by default, see ``batch_limit``); each codec stops as soon as
it would pass it (zlib and zstd by reading at most that much, snappy by the length each block declares
before it is decoded, LZ4 block by block), so a compression bomb costs at most the limit and one block.
"""

from __future__ import annotations

import ctypes
import functools
import importlib.util
import struct
import threading
import zlib
from enum import IntEnum

import cramjam
import lz4.block
import zstandard

from kafka_log_core.errors import CompressionError


class CompressionType(IntEnum):
    """Kafka's CompressionType: the codec id in bits 0-2 of a batch's (or wrapper's) attributes."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def label(self) -> str:
        """Kafka's name for it, as ``compression.type`` and kafka-dump-log spell it."""
        return self.name.lower()


NONE, GZIP, SNAPPY, LZ4, ZSTD = CompressionType
CODEC_NAMES: dict[int, str] = {codec: codec.label for codec in CompressionType}

# Kafka's default levels (CompressionType / KIP-390).
GZIP_LEVEL = 6  # zlib's default, what Java's Deflater uses for level -1
# 9, and at that default Kafka's Lz4BlockOutputStream uses lz4's *fast* compressor (the high-compression one
# only for another level): so does ours.
LZ4_LEVEL = 9
ZSTD_LEVEL = 3

SNAPPY_MAGIC = b"\x82SNAPPY\x00"
SNAPPY_HEADER = SNAPPY_MAGIC + struct.pack(">ii", 1, 1)  # version 1, min compatible version 1
SNAPPY_BLOCK = 32 * 1024  # snappy-java's default block size
_INT32 = struct.Struct(">i")
_UINT32_LE = struct.Struct("<I")

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_FLG = 0x60  # version 01, block independence, no block checksum, no content size/checksum
_LZ4_BD = 0x40  # block maximum size code 4 = 64 KiB
LZ4_BLOCK = 64 * 1024  # the block size of our frames (Kafka's KafkaLZ4BlockOutputStream's default)
_LZ4_MAX_BLOCK = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}


# The most one batch's record area (or a legacy wrapper's value) may decompress to, unless the job says
# otherwise (``--max-decompressed-batch-bytes``; the ``kafka-log`` source's ``maxDecompressedBatchBytes``).
# Kafka itself has no such limit (its readers decode one record at a time); the cap is ours because we
# decompress whole batches. Real producers stay far below it: a producer closes a batch when its
# *compressed* size reaches batch.size (16 KiB by default, rarely above 1-2 MiB), so a batch holds
# batch.size times the compression ratio (2-10 for usual data, 50 for very repetitive data), and one
# record is bounded by the producer's max.request.size (1 MiB by default). librdkafka's consumers refuse
# more than receive.message.max.bytes (100 MB by default) decompressed.
MAX_BATCH_BYTES = 64 * 1024 * 1024
LIMIT_OPTION = "--max-decompressed-batch-bytes"  # the jobs' (jobs/options.py says which take it)
LIMIT_SOURCE_OPTION = "maxDecompressedBatchBytes"  # the kafka-log DataFrame source's (spark_udfs/options.py)
_READ_CHUNK = 1024 * 1024  # zstd output read at a time while the limit is watched


def codec_name(codec: int) -> str:
    return CODEC_NAMES.get(codec, f"unknown({codec})")


# ---------------------------------------------------------------------------------------------- xxh32
_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


@functools.lru_cache(maxsize=64)
def xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32; only ever called on a few header bytes (LZ4 frame descriptors), so plain Python."""
    n = len(data)
    i = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while i + 16 <= n:
            for lane in range(4):
                (w,) = _UINT32_LE.unpack_from(data, i + 4 * lane)
                v[lane] = (_rotl((v[lane] + w * _P2) & _M32, 13) * _P1) & _M32
            i += 16
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while i + 4 <= n:
        (w,) = _UINT32_LE.unpack_from(data, i)
        h = (_rotl((h + w * _P3) & _M32, 17) * _P4) & _M32
        i += 4
    while i < n:
        h = (_rotl((h + data[i] * _P5) & _M32, 11) * _P1) & _M32
        i += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


# ---------------------------------------------------------------------------------------------- public
def compress(codec: int, data: bytes | memoryview, magic: int = 2) -> bytes:
    """Compress a record area (v2) or a wrapper value (v0/v1) the way a Kafka producer frames it."""
    if codec == NONE:
        return bytes(data)
    if codec == GZIP:
        c = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, 31)
        return c.compress(data) + c.flush()
    if codec == SNAPPY:
        return _snappy_compress(bytes(data))
    if codec == LZ4:
        return _lz4_compress(bytes(data), magic)
    if codec == ZSTD:
        if magic < 2:
            raise CompressionError("zstd is not allowed with message format v0/v1")
        stream = _zstd_compressor().compressobj()
        return stream.compress(data) + stream.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK) + stream.flush()
    raise CompressionError(f"unknown compression codec id {codec} (expected 0-4)")


def decompress(codec: int, data: bytes | memoryview, magic: int = 2, limit: int = MAX_BATCH_BYTES) -> bytes:
    """Decompress to the end of the stream, at most ``limit`` bytes (more raises ``CompressionError``).
    Errors carry no file; callers re-anchor them with ``.at``."""
    try:
        if codec == NONE:
            return bytes(data)
        if codec == GZIP:
            return _gzip_decompress(bytes(data), limit)
        if codec == SNAPPY:
            return _snappy_decompress(bytes(data), limit)
        if codec == LZ4:
            return _lz4_decompress(bytes(data), magic, limit)
        if codec == ZSTD:
            if magic < 2:
                raise CompressionError("zstd compression found in a v0/v1 message (forbidden)")
            return _zstd_decompress(data, limit)
    except CompressionError:
        raise
    except (zlib.error, zstandard.ZstdError, cramjam.DecompressionError, lz4.block.LZ4BlockError) as err:
        raise CompressionError(f"cannot decompress {codec_name(codec)} data: {err}") from err
    except (ValueError, struct.error, IndexError) as err:
        raise CompressionError(f"cannot decompress {codec_name(codec)} data: {err}") from err
    raise CompressionError(f"unknown compression codec id {codec} (expected 0-4)")


def over_limit(codec: int, limit: int) -> CompressionError:
    """The error of a record area that decompresses to more than ``limit`` bytes."""
    return CompressionError(
        f"{codec_name(codec)} data decompresses to more than {limit} bytes, the most one batch may hold "
        f"({LIMIT_OPTION}, or the kafka-log source's option {LIMIT_SOURCE_OPTION}, raises it)"
    )


_LOCAL = threading.local()


def _zstd_decompressor() -> zstandard.ZstdDecompressor:
    """One decompressor per thread: making one costs more than decompressing a small batch."""
    dctx = getattr(_LOCAL, "zstd", None)
    if dctx is None:
        dctx = _LOCAL.zstd = zstandard.ZstdDecompressor()
    return dctx


def _zstd_compressor() -> zstandard.ZstdCompressor:
    """One compressor per thread (level 3, Kafka's default; no content size). A frame is Kafka's
    ``ZstdOutputStream``'s: the data streamed with its size unknown (level 3's parameters for an unknown
    size, not the smaller ones a one-shot call picks for the size it knows), flushed, then ended."""
    cctx = getattr(_LOCAL, "zstd_out", None)
    if cctx is None:
        cctx = _LOCAL.zstd_out = zstandard.ZstdCompressor(level=ZSTD_LEVEL, write_content_size=False)
    return cctx


def _zstd_decompress(data: bytes | memoryview, limit: int) -> bytes:
    reader = _zstd_decompressor().stream_reader(data, read_across_frames=True)
    out, total = [], 0
    while chunk := reader.read(min(_READ_CHUNK, limit - total + 1)):
        total += len(chunk)
        if total > limit:
            raise over_limit(ZSTD, limit)
        out.append(chunk)
    return b"".join(out)


def _gzip_decompress(data: bytes, limit: int) -> bytes:
    out, total = [], 0
    while data:
        d = zlib.decompressobj(31)
        chunk = d.decompress(data, limit - total + 1)  # never 0 (which would mean no limit)
        total += len(chunk)
        if total > limit:
            raise over_limit(GZIP, limit)
        out.append(chunk)
        if not d.eof:
            raise CompressionError("truncated gzip stream")
        data = d.unused_data
    return b"".join(out)


def _snappy_compress(data: bytes) -> bytes:
    parts = [SNAPPY_HEADER]
    for i in range(0, len(data), SNAPPY_BLOCK):
        block = bytes(cramjam.snappy.compress_raw(data[i : i + SNAPPY_BLOCK]))
        parts.append(_INT32.pack(len(block)))
        parts.append(block)
    return b"".join(parts)


def _snappy_block(block: bytes, total: int, limit: int) -> bytes:
    """One raw snappy block, refused before it is decoded when the length it declares passes the limit."""
    declared, shift = 0, 0
    for i, byte in enumerate(block[:5]):
        declared |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            break
        if i == 4:
            raise CompressionError("snappy block length is not a varint32")
    if total + declared > limit:
        raise over_limit(SNAPPY, limit)
    return bytes(cramjam.snappy.decompress_raw(block))


def _snappy_decompress(data: bytes, limit: int) -> bytes:
    if not data.startswith(SNAPPY_MAGIC):
        return _snappy_block(data, 0, limit)
    pos, out, total = len(SNAPPY_HEADER), [], 0
    if len(data) < pos:
        raise CompressionError("truncated xerial snappy header")
    while pos < len(data):
        if pos + 4 > len(data):
            raise CompressionError(f"truncated xerial snappy chunk length at byte {pos}")
        (n,) = _INT32.unpack_from(data, pos)
        pos += 4
        if n < 0 or pos + n > len(data):
            raise CompressionError(f"xerial snappy chunk of {n} bytes at byte {pos - 4} overruns the stream")
        out.append(_snappy_block(data[pos : pos + n], total, limit))
        total += len(out[-1])
        pos += n
    return b"".join(out)


def lz4_header_checksum(descriptor: bytes) -> int:
    return (xxh32(descriptor) >> 8) & 0xFF


def module_library(module: str, names: tuple[str, ...]) -> ctypes.CDLL | None:
    """The shared library that a wheel's extension ``module`` is, found without importing the module, if its
    package is installed and the library exports ``names``; None otherwise (the codec's Python path)."""
    try:
        spec = importlib.util.find_spec(module)
    except ModuleNotFoundError:  # the package itself is missing (e.g. an executors' archive built before it)
        return None
    if spec is None or not spec.origin:
        return None
    try:
        lib = ctypes.CDLL(spec.origin)
    except OSError:
        return None
    return lib if all(hasattr(lib, name) for name in names) else None


# Kafka's Lz4BlockOutputStream compresses each block with lz4-java's fast compressor: LZ4_compress_default,
# i.e. LZ4_compress_fast_extState at acceleration 1 (a fresh state, its table sized for the block).
# ``lz4.block.compress`` writes other bytes (a streaming state), so the lz4 wheel's library is called.
LZ4_MODULE, LZ4_COMPRESS = "lz4.block._block", "LZ4_compress_fast_extState"


@functools.cache
def _lz4_library() -> ctypes.CDLL | None:
    lib = module_library(LZ4_MODULE, (LZ4_COMPRESS, "LZ4_sizeofState", "LZ4_compressBound"))
    if lib is not None:
        lib.LZ4_compress_fast_extState.argtypes = [
            ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int, ctypes.c_int
        ]  # fmt: skip
    return lib


def _lz4_block(raw: bytes) -> bytes:
    """One block as Kafka compresses it (``lz4.block.compress`` where the wheel's library is not found)."""
    lib = _lz4_library()
    if lib is None:
        return lz4.block.compress(raw, mode="default", store_size=False)
    state = getattr(_LOCAL, "lz4_state", None)
    if state is None:
        state = _LOCAL.lz4_state = ctypes.create_string_buffer(lib.LZ4_sizeofState() + 8)
    aligned = ctypes.addressof(state) + (-ctypes.addressof(state) % 8)
    out = ctypes.create_string_buffer(lib.LZ4_compressBound(len(raw)))
    written = lib.LZ4_compress_fast_extState(aligned, raw, out, len(raw), len(out), 1)
    if written <= 0:
        raise CompressionError(f"lz4 could not compress a block of {len(raw)} bytes")
    return out.raw[:written]


def _lz4_compress(data: bytes, magic: int) -> bytes:
    parts = [lz4_frame_header(magic)]
    for i in range(0, len(data), LZ4_BLOCK):
        raw = data[i : i + LZ4_BLOCK]
        block = _lz4_block(raw)
        if len(block) >= len(raw):
            parts.append(_UINT32_LE.pack(len(raw) | 0x80000000))
            parts.append(raw)
        else:
            parts.append(_UINT32_LE.pack(len(block)))
            parts.append(block)
    parts.append(b"\x00\x00\x00\x00")
    return b"".join(parts)


@functools.lru_cache(maxsize=2)
def lz4_frame_header(magic: int) -> bytes:
    descriptor = bytes([_LZ4_FLG, _LZ4_BD])
    # Kafka's magic-0 quirk: the header checksum was computed over the magic number as well.
    hc = lz4_header_checksum(_LZ4_MAGIC + descriptor if magic == 0 else descriptor)
    return _LZ4_MAGIC + descriptor + bytes([hc])


def _lz4_decompress(data: bytes, magic: int, limit: int) -> bytes:
    if len(data) < 7 or data[:4] != _LZ4_MAGIC:
        raise CompressionError("LZ4 frame does not start with magic 04 22 4D 18")
    flg, bd = data[4], data[5]
    if (flg >> 6) != 1:
        raise CompressionError(f"LZ4 frame version {(flg >> 6)} is not supported (expected 1)")
    if flg & 0x03:
        raise CompressionError(f"LZ4 frame FLG 0x{flg:02x} has reserved bits set")
    if not flg & 0x20:
        raise CompressionError("LZ4 frame uses dependent (linked) blocks, which Kafka does not support")
    if bd & 0x8F or ((bd >> 4) & 0x07) not in _LZ4_MAX_BLOCK:
        raise CompressionError(f"LZ4 frame BD 0x{bd:02x} is invalid")
    block_checksum, content_size, content_checksum = flg & 0x10, flg & 0x08, flg & 0x04
    max_block = _LZ4_MAX_BLOCK[(bd >> 4) & 0x07]
    pos = 6 + (8 if content_size else 0)
    if len(data) < pos + 1:
        raise CompressionError("truncated LZ4 frame header")
    if magic != 0:
        hc = lz4_header_checksum(data[4:pos])
        if data[pos] != hc:
            raise CompressionError(f"LZ4 frame header checksum 0x{data[pos]:02x}, expected 0x{hc:02x}")
    pos += 1
    out, total = [], 0
    while True:
        if pos + 4 > len(data):
            raise CompressionError(f"LZ4 frame truncated before the end mark (byte {pos})")
        (size,) = _UINT32_LE.unpack_from(data, pos)
        pos += 4
        if size == 0:
            break
        stored, size = size & 0x80000000, size & 0x7FFFFFFF
        if size > max_block or pos + size > len(data):
            raise CompressionError(
                f"LZ4 block of {size} bytes at byte {pos - 4} exceeds {max_block} or the frame"
            )
        block = data[pos : pos + size]
        pos += size
        if block_checksum:
            if pos + 4 > len(data):
                raise CompressionError("LZ4 block checksum truncated")
            (expected,) = _UINT32_LE.unpack_from(data, pos)
            if xxh32.__wrapped__(block) != expected:
                raise CompressionError(f"LZ4 block checksum mismatch at byte {pos}")
            pos += 4
        out.append(block if stored else lz4.block.decompress(block, uncompressed_size=max_block))
        total += len(out[-1])
        if total > limit:
            raise over_limit(LZ4, limit)
    if content_checksum and pos + 4 > len(data):
        raise CompressionError("LZ4 content checksum truncated")
    return b"".join(out)
