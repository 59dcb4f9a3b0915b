"""Codec C entry points called from the compiled passes, so that no compressed batch costs a Python call.

The libraries are the ones the codec packages we depend on ship in their wheels (never the OS's):
libzstd inside ``zstandard``'s cffi module (``ZSTD_decompressDCtx``; ``ZSTD_compressStream2`` with the size
unknown, flushed then ended, as Kafka's ``ZstdOutputStream`` under its ``BufferedOutputStream``), lz4 inside
``lz4.block``'s extension (``LZ4_compress_fast_extState``: what ``LZ4_compress_default`` runs, and what
Kafka's lz4-java fast compressor writes; the same bytes as our Python writer; ``LZ4_decompress_safe`` for the
blocks of a frame, what ``lz4.block.decompress`` calls), libdeflate inside ``deflate``'s
(gzip members, one-shot: faster than zlib on batch-sized data, and bounded by the room it is given; its
level-6 output is other bytes than zlib's for the same records). Their addresses, and one zstd context of each kind
per thread, travel into the kernels as the ``CODECS`` int64 array (``C_*`` slots; 0: not available,
the kernels then hand the batch back to Python as before). Addresses are arguments, not constants
compiled in, so numba's on-disk cache stays valid from one process to the next.

The calls (:func:`call_sized`, :func:`call_lz4`) are numba intrinsics: an indirect call through the
address with the C signature, nothing else.
"""

from __future__ import annotations

import ctypes
import threading

import numpy as np
from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.extending import intrinsic

from kafka_log_core.format import compression
from kafka_log_core.format.compression import module_library

C_ZSTD_DECOMPRESS, C_ZSTD_DCTX, C_ZSTD_COMPRESS, C_ZSTD_CCTX, C_LZ4_COMPRESS, C_ZSTD_RESET, C_LZ4_STATE = (
    range(7)
)
C_GZIP_DECOMPRESS, C_GZIP_DSTATE, C_GZIP_COMPRESS, C_GZIP_CSTATE, C_GZIP_BOUND = range(7, 12)
C_LZ4_DECOMPRESS = 12
CODEC_SLOTS = 13
GZIP_OK, GZIP_NO_ROOM = 0, 3  # libdeflate_result: LIBDEFLATE_SUCCESS, LIBDEFLATE_INSUFFICIENT_SPACE
ZSTD_DST_TOO_SMALL = 70  # ZSTD_error_dstSize_tooSmall: ``-(result)`` of a call whose output did not fit
ZSTD_MAX_ERROR = 120  # results above ``2**64 - ZSTD_MAX_ERROR`` are error codes (ZSTD_isError)
_ZSTD_C_LEVEL = 100  # ZSTD_c_compressionLevel
_ZSTD_C_CONTENT_SIZE = 200  # ZSTD_c_contentSizeFlag (Kafka's streams write no content size)
_ZSTD_C_CHECKSUM = 201  # ZSTD_c_checksumFlag
ZSTD_RESET_SESSION = 1  # ZSTD_reset_session_only: a new frame, its size unknown, the parameters kept
ZSTD_E_FLUSH, ZSTD_E_END = 1, 2  # ZSTD_EndDirective


def _caller(result_bits: int, arg_bits: tuple[int, ...]):
    """An intrinsic ``call(fn, *args)`` calling the C function at address ``fn`` whose arguments are
    integers (or pointers) of ``arg_bits`` bits and whose result has ``result_bits`` (0: void); every
    value is passed and returned as an int64."""

    @intrinsic
    def call(typingctx, fn, args):
        if not isinstance(args, types.UniTuple) or args.count != len(arg_bits):
            return None
        sig = types.int64(types.int64, args)

        def codegen(context, builder, signature, values):
            i64 = ir.IntType(64)
            result_type = ir.IntType(result_bits) if result_bits else ir.VoidType()
            fnty = ir.FunctionType(result_type, [ir.IntType(bits) for bits in arg_bits])
            given = cgutils.unpack_tuple(builder, values[1], len(arg_bits))
            actual = [
                builder.trunc(v, ir.IntType(bits)) if bits < 64 else v
                for v, bits in zip(given, arg_bits, strict=True)
            ]
            result = builder.call(builder.inttoptr(values[0], fnty.as_pointer()), actual)
            if not result_bits:
                return ir.Constant(i64, 0)
            return builder.sext(result, i64) if result_bits < 64 else result

        return sig, codegen

    return call


# size_t f(ctx*, void *dst, size_t capacity, const void *src, size_t size): the zstd one-shot calls
call_sized = _caller(64, (64, 64, 64, 64, 64))
# size_t ZSTD_compressStream2(ZSTD_CCtx*, ZSTD_outBuffer*, ZSTD_inBuffer*, ZSTD_EndDirective)
call_zstd_stream = _caller(64, (64, 64, 64, 32))
# size_t ZSTD_CCtx_reset(ZSTD_CCtx*, ZSTD_ResetDirective)
call_zstd_reset = _caller(64, (64, 32))
# int LZ4_compress_fast_extState(void *state, const char *src, char *dst, int size, int capacity, int acceleration)
call_lz4 = _caller(32, (64, 64, 64, 32, 32, 32))
# int LZ4_decompress_safe(const char *src, char *dst, int size, int capacity)
call_lz4_block = _caller(32, (64, 64, 32, 32))
# enum libdeflate_result libdeflate_gzip_decompress_ex(d*, const void *in, size_t in_size, void *out,
#     size_t out_room, size_t *in_used, size_t *out_used)
call_inflate = _caller(32, (64, 64, 64, 64, 64, 64, 64))
# size_t libdeflate_gzip_compress_bound(c*, size_t size)
call_bound = _caller(64, (64, 64))


def _address(lib: ctypes.CDLL, name: str) -> int:
    return int(ctypes.cast(getattr(lib, name), ctypes.c_void_p).value or 0)


def _zstd_library() -> ctypes.CDLL | None:
    lib = module_library(
        "zstandard._cffi", ("ZSTD_decompressDCtx", "ZSTD_compressStream2", "ZSTD_CCtx_reset")
    )
    if lib is None:
        return None
    lib.ZSTD_createDCtx.restype = lib.ZSTD_createCCtx.restype = ctypes.c_void_p
    lib.ZSTD_CCtx_setParameter.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    lib.ZSTD_CCtx_setParameter.restype = ctypes.c_size_t
    return lib


def _gzip_library() -> ctypes.CDLL | None:
    names = ("libdeflate_gzip_decompress_ex", "libdeflate_gzip_compress", "libdeflate_gzip_compress_bound")
    lib = module_library("deflate._deflate", names)
    if lib is None:
        return None
    lib.libdeflate_alloc_compressor.restype = lib.libdeflate_alloc_decompressor.restype = ctypes.c_void_p
    lib.libdeflate_alloc_compressor.argtypes = [ctypes.c_int]
    return lib


def _lz4_library() -> ctypes.CDLL | None:
    return module_library(
        compression.LZ4_MODULE, (compression.LZ4_COMPRESS, "LZ4_sizeofState", "LZ4_decompress_safe")
    )


_LIBS: dict[str, ctypes.CDLL | None] = {}
_LOCAL = threading.local()


def codecs() -> np.ndarray:
    """This thread's ``CODECS`` array (its own zstd contexts: a context is used by one thread at a time)."""
    table = getattr(_LOCAL, "codecs", None)
    if table is None:
        table, _LOCAL.lz4_state = _new_table()
        _LOCAL.codecs = table
    return table


def _new_table() -> tuple[np.ndarray, np.ndarray]:
    """A table and the lz4 stream state it points at (kept alive beside it)."""
    if not _LIBS:
        _LIBS["zstd"], _LIBS["lz4"], _LIBS["gzip"] = _zstd_library(), _lz4_library(), _gzip_library()
    table = np.zeros(CODEC_SLOTS, dtype=np.int64)
    zstd, lz4 = _LIBS["zstd"], _LIBS["lz4"]
    if zstd is not None:
        dctx, cctx = zstd.ZSTD_createDCtx(), zstd.ZSTD_createCCtx()
        settings = ((_ZSTD_C_LEVEL, compression.ZSTD_LEVEL), (_ZSTD_C_CONTENT_SIZE, 0), (_ZSTD_C_CHECKSUM, 0))
        if (
            dctx
            and cctx
            and all(zstd.ZSTD_CCtx_setParameter(cctx, k, v) < 2**64 - ZSTD_MAX_ERROR for k, v in settings)
        ):
            table[C_ZSTD_DECOMPRESS] = _address(zstd, "ZSTD_decompressDCtx")
            table[C_ZSTD_DCTX] = dctx
            table[C_ZSTD_COMPRESS] = _address(zstd, "ZSTD_compressStream2")
            table[C_ZSTD_CCTX] = cctx
            table[C_ZSTD_RESET] = _address(zstd, "ZSTD_CCtx_reset")
    state = np.zeros(0, dtype=np.uint64)
    if lz4 is not None:
        state = np.zeros((lz4.LZ4_sizeofState() + 7) // 8, dtype=np.uint64)  # LZ4_stream_t, 8-byte aligned
        table[C_LZ4_COMPRESS] = _address(lz4, compression.LZ4_COMPRESS)
        table[C_LZ4_STATE] = state.ctypes.data
        table[C_LZ4_DECOMPRESS] = _address(lz4, "LZ4_decompress_safe")
    gzip = _LIBS["gzip"]
    if gzip is not None:
        inflater = gzip.libdeflate_alloc_decompressor()
        deflater = gzip.libdeflate_alloc_compressor(compression.GZIP_LEVEL)
        if inflater and deflater:
            table[C_GZIP_DECOMPRESS] = _address(gzip, "libdeflate_gzip_decompress_ex")
            table[C_GZIP_DSTATE] = inflater
            table[C_GZIP_COMPRESS] = _address(gzip, "libdeflate_gzip_compress")
            table[C_GZIP_CSTATE] = deflater
            table[C_GZIP_BOUND] = _address(gzip, "libdeflate_gzip_compress_bound")
    table.flags.writeable = False
    return table, state


NO_CODECS = np.zeros(CODEC_SLOTS, dtype=np.int64)  # every batch handed back to Python
NO_CODECS.flags.writeable = False
