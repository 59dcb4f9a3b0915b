"""Zig-zag varints (32-bit, at most 5 bytes) and varlongs (64-bit, at most 10 bytes), as in Kafka's ByteUtils.

``u = (v << 1) ^ (v >> 31)`` (``>> 63`` for varlong), then unsigned LEB128, low 7-bit group first.
These plain-Python versions serve the readable record codec; the hot loops have compiled twins in
``kernels``.
"""

from __future__ import annotations

from kafka_log_core.errors import CorruptRecordError


def encode_varint(value: int) -> bytes:
    if not -(1 << 31) <= value < (1 << 31):
        raise ValueError(f"varint out of int32 range: {value}")
    return _encode_unsigned(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)


def encode_varlong(value: int) -> bytes:
    if not -(1 << 63) <= value < (1 << 63):
        raise ValueError(f"varlong out of int64 range: {value}")
    return _encode_unsigned(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _encode_unsigned(u: int) -> bytes:
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def decode_varint(buf: bytes | memoryview, pos: int, end: int | None = None) -> tuple[int, int]:
    """Return ``(value, next_pos)``; raise CorruptRecordError (position = ``pos``) on overrun or > 5 bytes."""
    return _decode(buf, pos, len(buf) if end is None else end, 5, 32)


def decode_varlong(buf: bytes | memoryview, pos: int, end: int | None = None) -> tuple[int, int]:
    return _decode(buf, pos, len(buf) if end is None else end, 10, 64)


def _decode(buf: bytes | memoryview, pos: int, end: int, max_bytes: int, bits: int) -> tuple[int, int]:
    u = 0
    shift = 0
    start = pos
    while True:
        if pos >= end:
            raise CorruptRecordError(
                f"varint runs past the end of its field (started at byte {start})", None, start
            )
        b = buf[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if pos - start >= max_bytes:
            kind = "varint" if bits == 32 else "varlong"
            raise CorruptRecordError(f"{kind} longer than {max_bytes} bytes", None, start)
    u &= (1 << bits) - 1
    return (u >> 1) ^ -(u & 1), pos
