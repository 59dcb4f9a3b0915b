"""Byte access for the compiled kernels: read-only ``uint8`` views over buffers, and big-endian field
reads and writes, unaligned little-endian word loads, one-call memmove and a cache prefetch, each
emitted as a few LLVM instructions (numba intrinsics, always inlined).

Inputs are ``numpy.uint8`` arrays over the bytes of a ``.log`` file or of a decompressed record area
(:func:`as_bytes` makes one, always read-only so every kernel compiles once). Kernels never raise:
they return an error code and a byte position, and the Python callers turn those into
``CorruptRecordError`` with the file name. ``cache=True`` keeps the compiled code on disk so that
Spark executors do not compile again.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.core import cgutils
from numba.extending import intrinsic


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


def _writer(width: int, big_endian: bool = True):
    @intrinsic
    def write(typingctx, arr, pos, value):
        sig = types.void(arr, types.intp, types.int64)

        def codegen(context, builder, signature, args):
            v = builder.trunc(args[2], ir.IntType(width)) if width < 64 else args[2]
            if width > 8 and big_endian:
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
write_u32_le = _writer(32, big_endian=False)  # LZ4 frames' block sizes


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


@njit(cache=True, inline="always")
def copy_match(dst, op, offset, length):
    """An LZ77 match (LZ4, snappy): ``length`` bytes from ``offset`` back in ``dst`` appended at ``op``,
    overlapping allowed (then byte by byte, which repeats the pattern). Returns the new end."""
    if offset >= length:
        copy_bytes(dst, op, dst, op - offset, length)
        return op + length
    for _ in range(length):
        dst[op] = dst[op - offset]
        op += 1
    return op


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


@intrinsic
def load_u64_le(typingctx, arr, pos):
    """Eight bytes of a uint8 array at ``pos`` as one little-endian uint64 (an unaligned load)."""
    sig = types.uint64(arr, types.intp)

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.bitcast(builder.gep(array.data, [args[1]]), ir.IntType(64).as_pointer())
        return builder.load(ptr, align=1)

    return sig, codegen


@intrinsic
def load_u32_le(typingctx, arr, pos):
    """Four bytes of a uint8 array at ``pos`` as one little-endian uint32 (an unaligned load)."""
    sig = types.uint32(arr, types.intp)

    def codegen(context, builder, signature, args):
        array = context.make_array(signature.args[0])(context, builder, args[0])
        ptr = builder.bitcast(builder.gep(array.data, [args[1]]), ir.IntType(32).as_pointer())
        return builder.load(ptr, align=1)

    return sig, codegen


@intrinsic
def borrowed(typingctx, arr):
    """``arr`` as a view without a reference count, for a kernel to pass around within one call.

    numba counts references to an array (an atomic add on its memory info) every time a variable takes
    it, which inlined helpers and per-batch choices of a source do for every batch and record: in the
    passes that was most of the time of a small batch. A view whose memory info is null makes each of
    those a null check. Only for the arguments of a kernel entry point, which its caller keeps alive for
    the call; never returned, never stored beyond the call."""
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, signature, args):
        src = context.make_array(arr)(context, builder, value=args[0])
        view = context.make_array(arr)(context, builder)
        for name in ("nitems", "itemsize", "data", "shape", "strides"):
            setattr(view, name, getattr(src, name))
        view.meminfo = cgutils.get_null_value(src.meminfo.type)
        view.parent = cgutils.get_null_value(src.parent.type)
        return view._getvalue()

    return arr(arr), codegen
