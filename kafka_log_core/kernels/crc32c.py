"""CRC32C (Castagnoli), as v2 batches carry it over bytes [21, end): the CPU's crc32 instruction where it
has SSE4.2, a slicing-by-8 table walk elsewhere."""

from __future__ import annotations

import numpy as np
from llvmlite import binding as llvm_binding
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic

from kafka_log_core.kernels.fields import load_u64_le

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


@njit(cache=True)
def crc32c_sse42(b, p, n):
    """CRC32C of ``b[p:p+n]`` with the SSE4.2 crc32 instruction (only call where the CPU has it)."""
    c = np.uint64(0xFFFFFFFF)
    end = p + n
    while p + 8 <= end:
        c = _crc32_u64(c, load_u64_le(b, p))
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
