"""The hot loops' building blocks, compiled once with numba: big-endian field reads, CRC32C, the record
walk (varints, key extraction), MD5 key digests and the cleaner's offset map. The passes that run
them over whole segments live in :mod:`kafka_log_core.kernels.segment_kernels`; everything around them stays
plain Python.

Inputs are ``numpy.uint8`` arrays over the bytes of a ``.log`` file or of a decompressed record area
(:func:`as_bytes` makes one, always read-only so every kernel compiles once). Kernels never raise:
they return an error code and a byte position, and the Python callers turn those into
``CorruptRecordError`` with the file name. ``cache=True`` keeps the compiled code on disk so that
Spark executors do not compile again.

Record (inside a v2 batch; ``record_batch`` has the readable decoder)::

    length varint | attributes int8 | timestamp_delta varlong | offset_delta varint |
    key_length varint | key | value_length varint | value |
    header_count varint | (key_length varint, key, value_length varint, value) * header_count

Offset map slot (24 bytes, as the broker's SkimpyOffsetMap: 16-byte MD5 digest + 8-byte offset), one
row of a ``(slots, 3)`` uint64 array so that a probe touches one place in memory::

    SLOT_HI  digest bytes 0-7 (little-endian)
    SLOT_LO  digest bytes 8-15
    SLOT_OFFSET  offset + 1 (0 = empty slot: a freshly calloc'ed map is all empty)
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import binding as llvm_binding
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from kafka_log_core.constants import OFFSET_MAP_ENTRY_BYTES

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


def as_bytes(buf) -> np.ndarray:
    """A read-only uint8 view of ``buf`` (bytes, memoryview, mmap or array), without copying."""
    if isinstance(buf, np.ndarray) and buf.dtype == np.uint8 and not buf.flags.writeable:
        return buf
    arr = np.frombuffer(buf, dtype=np.uint8) if not isinstance(buf, np.ndarray) else buf.view(np.uint8)
    if arr.flags.writeable:
        arr = arr.view()
        arr.flags.writeable = False
    return arr


EMPTY_BYTES = as_bytes(b"")


# ---------------------------------------------------------------------------------------------- fields
# Big-endian reads and writes at a byte position of a uint8 array, emitted as single (unaligned) loads
# and stores with a byte swap. Intrinsics are always inlined: a helper called per field must not cost
# a function call (numba would also count references to the array on every call).
def _array_pointer(context, builder, array_type, array, pos, width):
    data = context.make_array(array_type)(context, builder, array).data
    return builder.bitcast(builder.gep(data, [pos]), ir.IntType(width).as_pointer())


def _bswap(builder, value):
    fn = cgutils.get_or_insert_function(
        builder.module, ir.FunctionType(value.type, [value.type]), f"llvm.bswap.i{value.type.width}"
    )
    return builder.call(fn, [value])


def _reader(width: int, signed: bool):
    @intrinsic
    def read(typingctx, arr, pos):
        sig = types.int64(arr, types.intp)

        def codegen(context, builder, signature, args):
            value = builder.load(
                _array_pointer(context, builder, signature.args[0], args[0], args[1], width), align=1
            )
            if width > 8:
                value = _bswap(builder, value)
            if width == 64:
                return value
            return builder.sext(value, ir.IntType(64)) if signed else builder.zext(value, ir.IntType(64))

        return sig, codegen

    return read


def _writer(width: int):
    @intrinsic
    def write(typingctx, arr, pos, value):
        sig = types.void(arr, types.intp, types.int64)

        def codegen(context, builder, signature, args):
            v = builder.trunc(args[2], ir.IntType(width)) if width < 64 else args[2]
            if width > 8:
                v = _bswap(builder, v)
            builder.store(
                v, _array_pointer(context, builder, signature.args[0], args[0], args[1], width), align=1
            )
            return context.get_dummy_value()

        return sig, codegen

    return write


read_i16 = _reader(16, signed=True)
read_i32 = _reader(32, signed=True)
read_u32 = _reader(32, signed=False)
read_i64 = _reader(64, signed=True)
write_i16 = _writer(16)
write_i32 = _writer(32)
write_i64 = _writer(64)


@intrinsic
def copy_bytes(typingctx, dst, dst_pos, src, src_pos, n):
    """``dst[dst_pos:dst_pos+n] = src[src_pos:src_pos+n]`` as one memmove (no array views made)."""
    sig = types.void(dst, types.intp, src, types.intp, types.intp)

    def codegen(context, builder, signature, args):
        d = _array_pointer(context, builder, signature.args[0], args[0], args[1], 8)
        s = _array_pointer(context, builder, signature.args[2], args[2], args[3], 8)
        cgutils.raw_memmove(builder, d, s, args[4], 1)
        return context.get_dummy_value()

    return sig, codegen


@intrinsic
def prefetch_row(typingctx, table, row):
    """Ask the CPU to fetch row ``row`` of a 2D table into the caches (no fault, no wait)."""
    sig = types.void(table, types.intp)

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        stride = cgutils.unpack_tuple(builder, array.strides, 2)[0]
        i8p = ir.IntType(8).as_pointer()
        ptr = builder.gep(builder.bitcast(array.data, i8p), [builder.mul(args[1], stride)])
        i32 = ir.IntType(32)
        fn = cgutils.get_or_insert_function(
            builder.module, ir.FunctionType(ir.VoidType(), [i8p, i32, i32, i32]), "llvm.prefetch.p0i8"
        )
        builder.call(fn, [ptr, ir.Constant(i32, 0), ir.Constant(i32, 3), ir.Constant(i32, 1)])
        return context.get_dummy_value()

    return sig, codegen


# ---------------------------------------------------------------------------------------------- CRC32C
# CRC32C (Castagnoli, reflected polynomial 0x82F63B78, init and final xor 0xFFFFFFFF), as v2 batches
# carry it over bytes [21, end). With SSE4.2 the CPU's crc32 instruction does 8 bytes at a time (the
# LLVM intrinsic is emitted directly); without it, a slicing-by-8 table walk. The choice is made once
# at import: numba's on-disk cache is keyed by the CPU's features, so each machine compiles its own.
_CRC_POLY = 0x82F63B78


def _crc_tables() -> np.ndarray:
    table = np.zeros((8, 256), dtype=np.uint32)
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ _CRC_POLY if c & 1 else c >> 1
        table[0, n] = c
    for n in range(256):
        c = int(table[0, n])
        for k in range(1, 8):
            c = int(table[0, c & 0xFF]) ^ (c >> 8)
            table[k, n] = c
    return table


_CRC_TABLE = _crc_tables()


def cpu_has_sse42() -> bool:
    return "+sse4.2" in llvm_binding.get_host_cpu_features().flatten().split(",")


@intrinsic
def _crc32_u64(typingctx, crc, data):
    sig = types.uint64(types.uint64, types.uint64)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(64), [ir.IntType(64), ir.IntType(64)])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.x86.sse42.crc32.64.64")
        return builder.call(fn, args)

    return sig, codegen


@intrinsic
def _crc32_u8(typingctx, crc, data):
    sig = types.uint32(types.uint32, types.uint8)

    def codegen(context, builder, signature, args):
        fnty = ir.FunctionType(ir.IntType(32), [ir.IntType(32), ir.IntType(8)])
        fn = cgutils.get_or_insert_function(builder.module, fnty, "llvm.x86.sse42.crc32.32.8")
        return builder.call(fn, args)

    return sig, codegen


@intrinsic
def _load_u64_le(typingctx, arr, pos):
    """Eight bytes of a uint8 array at ``pos`` as one little-endian uint64 (an unaligned load)."""
    sig = types.uint64(arr, types.intp)

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.bitcast(builder.gep(array.data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(ptr, align=1)

    return sig, codegen


@intrinsic
def _load_u32_le(typingctx, arr, pos):
    """Four bytes of a uint8 array at ``pos`` as one little-endian uint32 (an unaligned load)."""
    sig = types.uint32(arr, types.intp)

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.bitcast(builder.gep(array.data, [args[1]]), ir.IntType(32).as_pointer())
        return builder.load(ptr, align=1)

    return sig, codegen


@njit(cache=True)
def crc32c_sse42(b, p, n):
    """CRC32C of ``b[p:p+n]`` with the SSE4.2 crc32 instruction (only call where the CPU has it)."""
    c = np.uint64(0xFFFFFFFF)
    end = p + n
    while p + 8 <= end:
        c = _crc32_u64(c, _load_u64_le(b, p))
        p += 8
    c32 = np.uint32(c)
    while p < end:
        c32 = _crc32_u8(c32, b[p])
        p += 1
    return np.int64(c32 ^ np.uint32(0xFFFFFFFF))


@njit(cache=True)
def crc32c_table(b, p, n):
    """CRC32C of ``b[p:p+n]`` by slicing-by-8 tables (any CPU)."""
    t = _CRC_TABLE
    c = np.uint32(0xFFFFFFFF)
    end = p + n
    while p + 8 <= end:
        lo = c ^ (np.uint32(b[p]) | (np.uint32(b[p + 1]) << np.uint32(8)) | (np.uint32(b[p + 2]) << np.uint32(16))
                  | (np.uint32(b[p + 3]) << np.uint32(24)))  # fmt: skip
        c = (t[7, lo & np.uint32(0xFF)] ^ t[6, (lo >> np.uint32(8)) & np.uint32(0xFF)]
             ^ t[5, (lo >> np.uint32(16)) & np.uint32(0xFF)] ^ t[4, lo >> np.uint32(24)]
             ^ t[3, b[p + 4]] ^ t[2, b[p + 5]] ^ t[1, b[p + 6]] ^ t[0, b[p + 7]])  # fmt: skip
        p += 8
    while p < end:
        c = t[0, (c ^ np.uint32(b[p])) & np.uint32(0xFF)] ^ (c >> np.uint32(8))
        p += 1
    return np.int64(c ^ np.uint32(0xFFFFFFFF))


HARDWARE_CRC32C = cpu_has_sse42()
crc32c = crc32c_sse42 if HARDWARE_CRC32C else crc32c_table


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
def _md5_fill_lane(src, p, n, words, lane):
    """The one padded block of a message of ``n`` <= 55 bytes, as message words of ``lane``."""
    full = n // 4
    for w in range(full):
        words[w, lane] = _load_u32_le(src, p + 4 * w)
    tail = np.uint32(0x80) << np.uint32(8 * (n - 4 * full))  # the 0x80 pad byte after the message
    for k in range(n - 4 * full):
        tail |= np.uint32(src[p + 4 * full + k]) << np.uint32(8 * k)
    words[full, lane] = tail
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


# Record table columns shared with the segment passes: one int64 row per record, so that a kernel
# passes one array around, not one per column.
(R_OFFSET, R_REC_END, R_BODY, R_TS_DELTA, R_KEY_POS, R_KEY_LEN, R_VALUE_LEN, R_WANT, R_KEEP,
 R_NEW_TS_DELTA, R_SOURCE) = range(11)  # fmt: skip
RECORD_COLUMNS = 11
# R_SOURCE: which buffer holds the record (positions are in it): the segment's bytes, records Python
# decompressed, records the kernel decompressed.
SOURCE_BUF, SOURCE_AREAS, SOURCE_KAREA = 0, 1, 2
DIGEST_HI, DIGEST_LO = 0, 1
WANT_NONE, WANT_HASH, WANT_STORED = 0, 1, 2  # R_WANT: no digest needed, to hash, digest already there


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
    filled = 0
    for i in range(start, stop + 1):
        if i < stop:
            length = rec[i, R_KEY_LEN]
            if length < 0 or rec[i, R_WANT] != WANT_HASH:
                continue
            source = rec[i, R_SOURCE]
            area = buf if source == SOURCE_BUF else (areas if source == SOURCE_AREAS else karea)
            if length > MAX_ONE_BLOCK_KEY:
                hi, lo = _md5_one(area, rec[i, R_KEY_POS], length, long_blocks, long_words, long_state)
                digests[i, DIGEST_HI] = hi
                digests[i, DIGEST_LO] = lo
                continue
            _md5_fill_lane(area, rec[i, R_KEY_POS], length, words, filled)
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
    """``walk_records`` then ``hash_keys`` over the keys it found, in one call."""
    err, err_pos, table = walk_records(area, start, end, count, base_offset)
    if err != OK:
        z = np.zeros(0, dtype=np.uint64)
        return err, err_pos, table, z, z
    hi, lo = hash_keys(area, table[W_KEY_POS], table[W_KEY_LEN])
    return err, err_pos, table, hi, lo


# ---------------------------------------------------------------------------------------------- fast hash
# MurmurHash3 x64 128 (Austin Appleby, public domain): a fast non-cryptographic 128-bit digest, compiled
# here only so the benchmark can set its cost against MD5's on the same keys. The map keys on MD5: two
# keys with the same MD5 digest are one key to the broker, and to us (see README, "key digest").
_M3_C1 = np.uint64(0x87C37B91114253D5)
_M3_C2 = np.uint64(0x4CF5AD432745937F)


@njit(cache=True, inline="always")
def _rotl64(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(cache=True, inline="always")
def _fmix64(k):
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xFF51AFD7ED558CCD)
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xC4CEB9FE1A85EC53)
    k ^= k >> np.uint64(33)
    return k


@njit(cache=True)
def murmur3_128(b, p, n):
    """MurmurHash3_x64_128 of ``b[p:p+n]`` with seed 0, as two uint64 (h1, h2)."""
    h1 = np.uint64(0)
    h2 = np.uint64(0)
    nblocks = n // 16
    for i in range(nblocks):
        k1 = _load_u64_le(b, p + 16 * i)
        k2 = _load_u64_le(b, p + 16 * i + 8)
        k1 *= _M3_C1
        k1 = _rotl64(k1, 31)
        k1 *= _M3_C2
        h1 ^= k1
        h1 = _rotl64(h1, 27)
        h1 += h2
        h1 = h1 * np.uint64(5) + np.uint64(0x52DCE729)
        k2 *= _M3_C2
        k2 = _rotl64(k2, 33)
        k2 *= _M3_C1
        h2 ^= k2
        h2 = _rotl64(h2, 31)
        h2 += h1
        h2 = h2 * np.uint64(5) + np.uint64(0x38495AB5)
    tail = p + nblocks * 16
    rest = n & 15
    k1 = np.uint64(0)
    k2 = np.uint64(0)
    for i in range(rest - 1, 7, -1):
        k2 ^= np.uint64(b[tail + i]) << np.uint64(8 * (i - 8))
    if rest > 8:
        k2 *= _M3_C2
        k2 = _rotl64(k2, 33)
        k2 *= _M3_C1
        h2 ^= k2
    for i in range(min(rest, 8) - 1, -1, -1):
        k1 ^= np.uint64(b[tail + i]) << np.uint64(8 * i)
    if rest > 0:
        k1 *= _M3_C1
        k1 = _rotl64(k1, 31)
        k1 *= _M3_C2
        h1 ^= k1
    h1 ^= np.uint64(n)
    h2 ^= np.uint64(n)
    h1 += h2
    h2 += h1
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 += h2
    h2 += h1
    return h1, h2


@njit(cache=True)
def murmur3_keys(area, key_pos, key_len):
    """``hash_keys`` with MurmurHash3 x64 128 instead of MD5 (the benchmark's comparison)."""
    n = key_pos.shape[0]
    hi = np.zeros(n, dtype=np.uint64)
    lo = np.zeros(n, dtype=np.uint64)
    for i in range(n):
        if key_len[i] >= 0:
            hi[i], lo[i] = murmur3_128(area, key_pos[i], key_len[i])
    return hi, lo


# ---------------------------------------------------------------------------------------------- offset map
SLOT_HI, SLOT_LO, SLOT_OFFSET = 0, 1, 2
SLOT_WORDS = OFFSET_MAP_ENTRY_BYTES // 8  # 3 uint64 words: digest hi, digest lo, offset


@njit(cache=True, inline="always")
def map_slot(hi, slots):
    """Home slot of a digest: the top 32 bits of its first word scaled to [0, slots) (multiply-shift:
    no division; MD5 words are uniform, and ``slots`` < 2^32)."""
    return np.int64(((hi >> np.uint64(32)) * np.uint64(slots)) >> np.uint64(32))


@njit(cache=True, inline="always")
def map_find(table, hi, lo):
    """Latest offset stored for the digest (hi, lo), or -1."""
    slots = table.shape[0]
    s = map_slot(hi, slots)
    for _ in range(slots):
        stored = table[s, SLOT_OFFSET]
        if stored == 0:
            return np.int64(-1)
        if table[s, SLOT_HI] == hi and table[s, SLOT_LO] == lo:
            return np.int64(stored) - 1
        s += 1
        if s == slots:
            s = 0
    return np.int64(-1)


@njit(cache=True, inline="always")
def map_put(table, hi, lo, offset):
    """Store ``offset`` for the digest; returns 1 when the key is new, 0 when it overwrote. The caller
    keeps the map below its capacity, so an empty slot always exists."""
    slots = table.shape[0]
    s = map_slot(hi, slots)
    while True:
        stored = table[s, SLOT_OFFSET]
        if stored == 0:
            table[s, SLOT_HI] = hi
            table[s, SLOT_LO] = lo
            table[s, SLOT_OFFSET] = np.uint64(offset + 1)
            return 1
        if table[s, SLOT_HI] == hi and table[s, SLOT_LO] == lo:
            table[s, SLOT_OFFSET] = np.uint64(offset + 1)
            return 0
        s += 1
        if s == slots:
            s = 0


@njit(cache=True)
def map_put_many(table, hi, lo, offsets, n_used, capacity, mask):
    """Insert ``(digest, offset)`` for each i where ``mask[i]``; an existing key is overwritten without
    growing. As Kafka's cleaner does, once the map holds ``capacity`` keys the next keyed record stops
    the pass, even one whose key is already present. Returns (consumed, n_used, last_put) where
    consumed = number of input rows processed (== len(hi) unless the map filled)."""
    last_put = np.int64(-1)
    for i in range(hi.shape[0]):
        if not mask[i]:
            continue
        if n_used >= capacity:
            return i, n_used, last_put
        n_used += map_put(table, hi[i], lo[i], offsets[i])
        last_put = offsets[i]
    return hi.shape[0], n_used, last_put


@njit(cache=True)
def map_get_many(table, hi, lo, mask):
    """Latest offset for each key (``-1`` when absent or masked out)."""
    out = np.full(hi.shape[0], -1, dtype=np.int64)
    for i in range(hi.shape[0]):
        if mask[i]:
            out[i] = map_find(table, hi[i], lo[i])
    return out


KEEP_BY_RULES, KEEP_ALL, KEEP_NONE = 0, 1, 2


@njit(cache=True)
def decide_keep(offsets, key_len, value_null, hi, lo, table, latest, retain_deletes, mode):
    """The cleaner's per-record rule (spec R3) over one legacy batch (v2 batches are decided inside the
    segment passes). ``mode``: KEEP_BY_RULES, KEEP_ALL or KEEP_NONE. Returns (keep, kept, tombstones,
    kept_tombstones)."""
    n = offsets.shape[0]
    keep = np.zeros(n, dtype=np.bool_)
    kept = tombs = kept_tombs = 0
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
            k = offsets[i] >= map_find(table, hi[i], lo[i]) and (not tomb or retain_deletes)
        if k:
            keep[i] = True
            kept += 1
            if tomb:
                kept_tombs += 1
    return keep, kept, tombs, kept_tombs
