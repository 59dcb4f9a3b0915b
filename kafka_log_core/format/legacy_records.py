"""Legacy message sets, magic v0 and v1 (LegacyRecord / AbstractLegacyRecordBatch).

Each shallow entry is ``offset:int64 | message_size:int32 | message``; the message::

    0  crc         uint32  CRC32 (IEEE) of bytes from magic to the end of the message
    4  magic       int8    0 or 1
    5  attributes  int8    bits 0-2 codec (0-3), bit 3 timestamp type (v1 only)
    6  timestamp   int64   v1 only; -1 = none
    .  key_length  int32   -1 = null, then key bytes
    .  value_length int32  -1 = null, then value bytes

A compressed entry ("wrapper") has a null key and a value holding the compressed concatenation of the
inner shallow entries (uncompressed, same magic). The wrapper's offset is the offset of the last inner
message. v0 inner offsets are absolute; v1 inner offsets are relative, absolute =
``wrapper_offset - last_inner_relative + inner`` (a wrapper offset of 0 keeps them as they are).
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence
from dataclasses import dataclass

from kafka_log_core.errors import CorruptRecordError
from kafka_log_core.format import compression
from kafka_log_core.format.record_batch import (
    CODEC_MASK,
    LOG_OVERHEAD,
    OFFSET_AND_SIZE,
    TIMESTAMP_TYPE_MASK,
    TimestampType,
)

_V0 = struct.Struct(
    ">I"  # crc
    "b"  # magic
    "b"  # attributes
)
_V1_TS = struct.Struct(">q")  # timestamp (v1 only)
_INT32 = struct.Struct(">i")
MIN_MESSAGE_SIZE = {0: 14, 1: 22}  # LegacyRecord.RECORD_OVERHEAD_V0, _V1
MIN_ENTRY_SIZE = MIN_MESSAGE_SIZE[0]  # the smallest size field of any log entry
NO_TIMESTAMP = -1


@dataclass(frozen=True, slots=True)
class LegacyRecord:
    """One legacy message (a shallow entry, or an inner message of a wrapper with absolute offset)."""

    offset: int
    magic: int
    attributes: int
    timestamp: int
    crc: int
    key: bytes | None
    value: bytes | None
    size_in_bytes: int = 0  # message size incl. its 12-byte log overhead
    headers: tuple = ()

    @property
    def compression(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        if self.magic == 0:
            return TimestampType.NO_TIMESTAMP_TYPE
        return (
            TimestampType.LOG_APPEND_TIME
            if self.attributes & TIMESTAMP_TYPE_MASK
            else TimestampType.CREATE_TIME
        )

    @property
    def is_tombstone(self) -> bool:
        return self.value is None

    @property
    def is_valid(self) -> bool:
        return True


def decode_message(
    buf: bytes | memoryview, pos: int, end: int | None = None, check_crc: bool = True
) -> tuple[LegacyRecord, int]:
    """Decode the shallow entry at ``pos``; returns it and the position after it."""
    end = len(buf) if end is None else end
    if pos + LOG_OVERHEAD + _V0.size > end:
        raise CorruptRecordError("legacy entry header truncated", None, pos)
    offset, size = OFFSET_AND_SIZE.unpack_from(buf, pos)
    msg = pos + LOG_OVERHEAD
    if size < MIN_MESSAGE_SIZE[0] or msg + size > end:
        raise CorruptRecordError(f"legacy message size {size} is invalid or overruns the data", None, pos)
    crc, magic, attributes = _V0.unpack_from(buf, msg)
    if magic not in (0, 1):
        raise CorruptRecordError(f"legacy message magic {magic}, expected 0 or 1", None, pos)
    if size < MIN_MESSAGE_SIZE[magic]:
        raise CorruptRecordError(
            f"v{magic} message size {size} is below {MIN_MESSAGE_SIZE[magic]}", None, pos
        )
    msg_end = msg + size
    if check_crc:
        computed = zlib.crc32(memoryview(buf)[msg + 4 : msg_end])
        if computed != crc:
            raise CorruptRecordError(
                f"CRC32 mismatch in v{magic} message at offset {offset}: stored {crc}, computed {computed}",
                None,
                pos,
            )
    p = msg + _V0.size
    timestamp = NO_TIMESTAMP
    if magic == 1:
        (timestamp,) = _V1_TS.unpack_from(buf, p)
        p += 8
    key, p = _read_sized(buf, p, msg_end, "key", pos)
    value, p = _read_sized(buf, p, msg_end, "value", pos)
    if p != msg_end:
        raise CorruptRecordError(
            f"{msg_end - p} bytes left over in legacy message at offset {offset}", None, pos
        )
    record = LegacyRecord(offset, magic, attributes, timestamp, crc, key, value, size + LOG_OVERHEAD)
    return record, msg_end


def _read_sized(
    buf: bytes | memoryview, p: int, end: int, what: str, entry_pos: int
) -> tuple[bytes | None, int]:
    if p + 4 > end:
        raise CorruptRecordError(f"legacy message {what} length truncated", None, entry_pos)
    (n,) = _INT32.unpack_from(buf, p)
    p += 4
    if n < 0:
        return None, p
    if p + n > end:
        raise CorruptRecordError(f"legacy message {what} of {n} bytes overruns the message", None, entry_pos)
    return bytes(buf[p : p + n]), p + n


def inner_records(
    wrapper: LegacyRecord, max_batch_bytes: int = compression.MAX_BATCH_BYTES
) -> list[LegacyRecord]:
    """The records a shallow entry stands for: itself, or the inner messages of a compressed wrapper (its
    value decompressed to at most ``max_batch_bytes``)."""
    if wrapper.compression == compression.NONE:
        return [wrapper]
    if wrapper.value is None:
        raise CorruptRecordError(f"compressed legacy wrapper at offset {wrapper.offset} has a null value")
    try:
        data = compression.decompress(wrapper.compression, wrapper.value, wrapper.magic, max_batch_bytes)
    except CorruptRecordError as err:  # at the wrapper entry's position
        raise CorruptRecordError(f"legacy wrapper at offset {wrapper.offset}: {err.detail}", None, 0) from err
    inner: list[LegacyRecord] = []
    pos = 0
    while pos < len(data):
        record, pos = decode_message(data, pos)
        if record.compression != compression.NONE:
            raise CorruptRecordError(f"nested compression inside the wrapper at offset {wrapper.offset}")
        inner.append(record)
    if not inner:
        return inner
    log_append = wrapper.magic == 1 and wrapper.timestamp_type == TimestampType.LOG_APPEND_TIME
    base = 0
    if wrapper.magic == 1 and wrapper.offset != 0:
        base = wrapper.offset - inner[-1].offset
    out = []
    for r in inner:
        offset = base + r.offset if wrapper.magic == 1 else r.offset
        timestamp = wrapper.timestamp if log_append else r.timestamp
        attributes = (r.attributes | TIMESTAMP_TYPE_MASK) if log_append else r.attributes
        out.append(
            LegacyRecord(offset, r.magic, attributes, timestamp, r.crc, r.key, r.value, r.size_in_bytes)
        )
    return out


# ---------------------------------------------------------------------------------------------- encode
def encode_message(
    offset: int,
    magic: int,
    key: bytes | None,
    value: bytes | None,
    timestamp: int = NO_TIMESTAMP,
    attributes: int = 0,
) -> bytes:
    body = bytearray()
    body += struct.pack(">bb", magic, attributes)
    if magic == 1:
        body += _V1_TS.pack(timestamp)
    for field in (key, value):
        if field is None:
            body += _INT32.pack(-1)
        else:
            body += _INT32.pack(len(field)) + field
    crc = zlib.crc32(body)
    message = struct.pack(">I", crc) + bytes(body)
    return OFFSET_AND_SIZE.pack(offset, len(message)) + message


def encode_wrapper(
    records: Sequence[LegacyRecord],
    magic: int,
    codec: int,
    *,
    wrapper_timestamp: int | None = None,
    log_append_time: bool = False,
) -> bytes:
    """A compressed wrapper around ``records`` (absolute offsets); v1 inner offsets become relative."""
    if not records:
        raise ValueError("a legacy wrapper needs at least one record")
    first = records[0].offset
    inner = b"".join(
        encode_message(
            r.offset - first if magic == 1 else r.offset,
            magic,
            r.key,
            r.value,
            r.timestamp,
            r.attributes & TIMESTAMP_TYPE_MASK if magic == 1 else 0,
        )  # fmt: skip
        for r in records
    )
    if wrapper_timestamp is None:
        wrapper_timestamp = max(r.timestamp for r in records) if magic == 1 else NO_TIMESTAMP
    attributes = codec | (TIMESTAMP_TYPE_MASK if log_append_time and magic == 1 else 0)
    value = compression.compress(codec, inner, magic)
    return encode_message(records[-1].offset, magic, None, value, wrapper_timestamp, attributes)
