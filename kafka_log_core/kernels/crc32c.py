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


# The crc32 instruction takes three cycles and the CPU can start one every cycle: three registers over
# three adjacent blocks of ``L`` bytes run at up to three times the rate of one. The three are then
# joined as one register over the three blocks: a register carried past ``L`` more bytes is the register
# times x^(8L) mod P, linear in its bits, so four table lookups (``_CRC_SHIFT``). Blocks of each length
# of ``CRC_BLOCKS`` in turn while three fit, then one register over the rest.
CRC_BLOCKS = (2048, 256, 32)


def _gf2_apply(matrix: list[int], vector: int) -> int:
    out = 0
    for row in matrix:
        if vector & 1:
            out ^= row
        vector >>= 1
    return out


def _register_shifts(sizes: tuple[int, ...]) -> np.ndarray:
    """For each size (a power of two) the register carried past that many zero bytes, by its four
    bytes: ``t[i, k, v]`` for the register ``v << 8k``."""
    op = [_CRC_POLY] + [1 << (i - 1) for i in range(1, 32)]  # one zero bit, column by column
    ops = {}
    for n_bits in range(3 + max(sizes).bit_length()):  # 1, 2, 4, ... zero bits, by squaring
        if n_bits >= 3:
            ops[1 << (n_bits - 3)] = op
        op = [_gf2_apply(op, col) for col in op]
    v = np.arange(256)
    tables = np.zeros((len(sizes), 4, 256), dtype=np.uint64)
    for i, size in enumerate(sizes):
        columns = np.array(ops[size], dtype=np.uint64).reshape(4, 8)
        for bit in range(8):  # each byte value: the columns of its set bits
            tables[i] ^= np.where((v >> bit) & 1, columns[:, bit : bit + 1], np.uint64(0))
    return tables


_CRC_SHIFT = _register_shifts(CRC_BLOCKS)


@njit(cache=True, inline="always")
def _shifted(t, c):
    return (t[0, c & np.uint64(0xFF)] ^ t[1, (c >> np.uint64(8)) & np.uint64(0xFF)]
            ^ t[2, (c >> np.uint64(16)) & np.uint64(0xFF)] ^ t[3, c >> np.uint64(24)])  # fmt: skip


@njit(cache=True)
def crc32c_sse42(b, p, n):
    """CRC32C of ``b[p:p+n]`` with the SSE4.2 crc32 instruction (only call where the CPU has it)."""
    c = np.uint64(0xFFFFFFFF)
    end = p + n
    for k in range(len(CRC_BLOCKS)):
        size = CRC_BLOCKS[k]
        while end - p >= 3 * size:
            c1 = np.uint64(0)
            c2 = np.uint64(0)
            for i in range(p, p + size, 8):
                c = _crc32_u64(c, load_u64_le(b, i))
                c1 = _crc32_u64(c1, load_u64_le(b, i + size))
                c2 = _crc32_u64(c2, load_u64_le(b, i + 2 * size))
            c = _shifted(_CRC_SHIFT[k], _shifted(_CRC_SHIFT[k], c) ^ c1) ^ c2
            p += 3 * size
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
