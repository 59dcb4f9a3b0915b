"""Magic v2 record batches (DefaultRecordBatch / DefaultRecord), decoded and encoded.

Batch header, 61 bytes, big-endian::

    0  base_offset             int64   offset of the first record slot (kept after compaction)
    8  batch_length            int32   bytes after this field (= total - 12)
    12 partition_leader_epoch  int32   not covered by the CRC
    16 magic                   int8    2
    17 crc                     uint32  CRC32C of bytes [21, end of batch)
    21 attributes              int16   bits 0-2 codec, 3 timestamp type, 4 transactional,
                                       5 control, 6 delete horizon present
    23 last_offset_delta       int32
    27 base_timestamp          int64   first record's timestamp, or the delete horizon (bit 6)
    35 max_timestamp           int64
    43 producer_id             int64
    51 producer_epoch          int16
    53 base_sequence           int32
    57 records_count           int32
    61 records ...                     one compressed stream when the codec is not none

Record::

    length varint | attributes int8 | timestamp_delta varlong | offset_delta varint |
    key_length varint | key | value_length varint | value |
    header_count varint | (key_length varint, key utf8, value_length varint, value) * header_count
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import IntEnum

import crc32c

from kafka_log_core.constants import MAX_INT
from kafka_log_core.errors import CorruptRecordError
from kafka_log_core.format import compression
from kafka_log_core.format.varint import decode_varint, decode_varlong, encode_varint, encode_varlong

MAGIC = 2
LOG_OVERHEAD = 12  # base_offset + batch_length: the framing of every log entry, legacy or v2
OFFSET_AND_SIZE = struct.Struct(">qi")  # that framing: the (base) offset and the size that follows
MAGIC_OFFSET = 16  # after the leader epoch (v2) or the CRC (v0/v1)
HEADER_SIZE_UP_TO_MAGIC = MAGIC_OFFSET + 1  # what a reader needs to tell the format of an entry
HEADER = struct.Struct(
    ">q"  # base_offset
    "i"  # batch_length
    "i"  # partition_leader_epoch
    "b"  # magic
    "I"  # crc
    "h"  # attributes
    "i"  # last_offset_delta
    "q"  # base_timestamp
    "q"  # max_timestamp
    "q"  # producer_id
    "h"  # producer_epoch
    "i"  # base_sequence
    "i"  # records_count
)
HEADER_SIZE = HEADER.size  # 61
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # CRC covers [21, end)
PARTITION_LEADER_EPOCH_OFFSET = 12
# The smallest v2 record: a one-byte length and six one-byte fields (attributes, timestamp delta, offset
# delta, key length -1, value length -1, header count 0). A batch's record count is checked against the
# bytes that hold its records with it before anything is sized by the count.
MIN_RECORD_BYTES = 7
# The largest: a record's length is a varint of at most 5 bytes, its body a Java int.
MAX_RECORD_BYTES = 5 + MAX_INT

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40


class TimestampType(IntEnum):
    """Kafka's TimestampType: bit 3 of the attributes in v1 messages and v2 batches; v0 has none."""

    NO_TIMESTAMP_TYPE = -1
    CREATE_TIME = 0
    LOG_APPEND_TIME = 1

    @property
    def label(self) -> str:
        """Kafka's name for it (``CreateTime``...), as kafka-dump-log prints it."""
        return {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}[self.value]


class BatchRetention(IntEnum):
    """What the cleaner does with a batch before it filters the records (Kafka's
    RecordFilter.BatchRetention); the compiled pass uses the same values as plain ints."""

    DELETE = 0  # the whole batch goes, its records unread
    DELETE_EMPTY = 1  # records filtered; the batch goes if none is kept
    RETAIN_EMPTY = 2  # records filtered; an empty batch stays if none is kept (a producer's last batch...)


CREATE_TIME, LOG_APPEND_TIME = TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME
NO_TIMESTAMP = -1
NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1

# Control record types (key = version:int16 + type:int16).
CONTROL_ABORT, CONTROL_COMMIT = 0, 1
CONTROL_TYPE_NAMES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}
CONTROL_KEY = struct.Struct(">hh")  # a control record's key: version, type
_END_TXN_VALUE = struct.Struct(">hi")  # version, coordinator_epoch


@dataclass(frozen=True, slots=True)
class BatchHeader:
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def size_in_bytes(self) -> int:
        return self.batch_length + LOG_OVERHEAD

    @property
    def compression(self) -> int:
        return self.attributes & CODEC_MASK

    @property
    def timestamp_type(self) -> TimestampType:
        return LOG_APPEND_TIME if self.attributes & TIMESTAMP_TYPE_MASK else CREATE_TIME

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)

    @property
    def has_delete_horizon(self) -> bool:
        return bool(self.attributes & DELETE_HORIZON_MASK)

    @property
    def delete_horizon_ms(self) -> int:
        return self.base_timestamp if self.has_delete_horizon else NO_TIMESTAMP

    @property
    def last_sequence(self) -> int:
        return increment_sequence(self.base_sequence, self.last_offset_delta)

    @property
    def has_producer_id(self) -> bool:
        return self.producer_id > NO_PRODUCER_ID


@dataclass(frozen=True, slots=True)
class Header:
    key: str
    value: bytes | None


@dataclass(frozen=True, slots=True)
class Record:
    """One record with absolute offset and timestamp; ``key``/``value`` None means null."""

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...] = ()
    attributes: int = 0
    size_in_bytes: int = 0  # encoded size incl. the length varint (0 for records built by hand)

    @property
    def is_tombstone(self) -> bool:
        return self.value is None


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """The key of a control record, and for ABORT/COMMIT the end-transaction marker value."""

    version: int
    type: int
    coordinator_epoch: int | None = None

    @property
    def type_name(self) -> str:
        return CONTROL_TYPE_NAMES.get(self.type, "UNKNOWN")


def increment_sequence(sequence: int, increment: int) -> int:
    """Kafka's sequence arithmetic: wraps from 2^31-1 to 0."""
    if sequence < 0:
        return sequence
    if sequence > (1 << 31) - 1 - increment:
        return increment - ((1 << 31) - 1 - sequence) - 1
    return sequence + increment


# ---------------------------------------------------------------------------------------------- decode
def decode_header(buf: bytes | memoryview, pos: int = 0) -> BatchHeader:
    """Unpack the 61-byte header at ``pos``; positions in errors are relative to ``buf``."""
    if pos + HEADER_SIZE > len(buf):
        raise CorruptRecordError(
            f"v2 batch header needs {HEADER_SIZE} bytes, only {len(buf) - pos} present", None, pos
        )
    header = BatchHeader(*HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC:
        raise CorruptRecordError(f"magic {header.magic}, expected 2", None, pos)
    if header.batch_length + LOG_OVERHEAD < HEADER_SIZE:
        raise CorruptRecordError(
            f"batch length {header.batch_length} is below the v2 minimum of {HEADER_SIZE - LOG_OVERHEAD}",
            None,
            pos,
        )
    if header.records_count < 0:
        raise CorruptRecordError(f"negative record count {header.records_count}", None, pos)
    return header


def compute_crc(batch: bytes | memoryview) -> int:
    """CRC32C of a whole batch's bytes from the attributes field to the end."""
    return crc32c.crc32c(batch[ATTRIBUTES_OFFSET:])


def verify_crc(header: BatchHeader, batch: bytes | memoryview, pos: int = 0) -> None:
    computed = compute_crc(batch)
    if computed != header.crc:
        raise CorruptRecordError(
            f"CRC32C mismatch in batch at offset {header.base_offset}: stored {header.crc}, computed {computed}",
            None,
            pos,
        )


def area_limit(records_count: int, max_batch_bytes: int) -> int:
    """The most the record area of a batch of ``records_count`` records may decompress to: what that
    many records can hold at most (``MAX_RECORD_BYTES`` each), and never more than ``max_batch_bytes``."""
    return min(max_batch_bytes, max(records_count, 0) * MAX_RECORD_BYTES)


def check_records_count(header: BatchHeader, area_bytes: int, compressed: bool) -> None:
    """A record count the bytes holding the records cannot hold (``MIN_RECORD_BYTES`` each) is refused
    before anything is sized by it. ``area_bytes``: the record area's size, or for a compressed batch
    not yet decompressed the most it may decompress to. The error is at the batch's position (0)."""
    if header.records_count * MIN_RECORD_BYTES > area_bytes:
        holds = f"may decompress to at most {area_bytes} bytes" if compressed else f"holds {area_bytes} bytes"
        raise CorruptRecordError(
            f"batch at offset {header.base_offset} claims {header.records_count} records, which take at least "
            f"{MIN_RECORD_BYTES} bytes each; its record area {holds}",
            None,
            0,
        )


def check_no_records(header: BatchHeader, body: bytes | memoryview) -> None:
    """A batch that declares 0 records holds none: its record area is empty, or (compressed) a stream
    that decompresses to nothing. Kafka's readers never look at the area of such a batch (and its
    cleaner drops it); offline those bytes may be the only copy of something, so they are refused, as
    any bytes left over after a batch's records are. The error is at the batch's position (0)."""
    if not len(body):
        return
    codec = header.compression
    if codec != compression.NONE:
        try:
            if not compression.decompress(codec, body, MAGIC, limit=0):
                return
        except CorruptRecordError:
            pass  # not an empty stream: bytes all the same
    kind = "" if codec == compression.NONE else f" of {compression.codec_name(codec)} data"
    raise CorruptRecordError(
        f"batch at offset {header.base_offset} declares 0 records but holds {len(body)} bytes{kind}", None, 0
    )


def records_area(
    header: BatchHeader, batch: bytes | memoryview, max_batch_bytes: int = compression.MAX_BATCH_BYTES
) -> bytes | memoryview:
    """The uncompressed record area of one batch (``batch`` = the batch's bytes, starting at base_offset),
    its record count checked against it; a compressed area decompresses to at most
    ``area_limit(records_count, max_batch_bytes)`` bytes. Errors are at the batch's position (0)."""
    body = memoryview(batch)[HEADER_SIZE : header.size_in_bytes]
    if header.records_count == 0:
        check_no_records(header, body)
        return body[:0]
    if header.compression == compression.NONE:
        check_records_count(header, len(body), compressed=False)
        return body
    limit = area_limit(header.records_count, max_batch_bytes)
    check_records_count(header, limit, compressed=True)
    try:
        area = compression.decompress(header.compression, body, MAGIC, limit)
    except CorruptRecordError as err:
        raise CorruptRecordError(f"batch at offset {header.base_offset}: {err.detail}", None, 0) from err
    check_records_count(header, len(area), compressed=False)
    return area


def decode_records(
    header: BatchHeader, batch: bytes | memoryview, max_batch_bytes: int = compression.MAX_BATCH_BYTES
) -> list[Record]:
    """Decode every record of one v2 batch; errors are positioned relative to the batch start."""
    area = records_area(header, batch, max_batch_bytes)
    compressed = header.compression != compression.NONE
    return list(_iter_records(header, area, HEADER_SIZE if not compressed else None))


def _iter_records(header: BatchHeader, area: bytes | memoryview, area_pos: int | None) -> Iterable[Record]:
    pos = 0
    end = len(area)
    log_append = header.timestamp_type == LOG_APPEND_TIME
    for index in range(header.records_count):
        try:
            record, pos = _decode_record(area, pos, end, header, log_append)
        except CorruptRecordError as err:
            where = f"record {index} of batch at offset {header.base_offset}"
            if area_pos is None:
                raise CorruptRecordError(
                    f"{where} (compressed area byte {err.position}): {err.detail}"
                ) from err
            raise CorruptRecordError(f"{where}: {err.detail}", None, area_pos + (err.position or 0)) from err
        yield record
    if pos != end:
        raise CorruptRecordError(
            f"{end - pos} bytes left over after {header.records_count} records in batch at offset "
            f"{header.base_offset}",
            None,
            None if area_pos is None else area_pos + pos,
        )


def _decode_record(
    buf: bytes | memoryview, pos: int, end: int, header: BatchHeader, log_append: bool
) -> tuple[Record, int]:
    start = pos
    length, pos = decode_varint(buf, pos, end)
    body_start = pos
    if length < 0 or pos + length > end:
        raise CorruptRecordError(f"record length {length} overruns the record area", None, start)
    rec_end = pos + length
    if pos + 1 > rec_end:
        raise CorruptRecordError("record too short for its attributes", None, pos)
    attributes = buf[pos]
    pos += 1
    ts_delta, pos = decode_varlong(buf, pos, rec_end)
    offset_delta, pos = decode_varint(buf, pos, rec_end)
    key, pos = _read_bytes(buf, pos, rec_end, "key")
    value, pos = _read_bytes(buf, pos, rec_end, "value")
    count, pos = decode_varint(buf, pos, rec_end)
    if count < 0 or count > rec_end - pos:
        raise CorruptRecordError(f"invalid header count {count}", None, pos)
    headers = []
    for _ in range(count):
        hk_len, pos = decode_varint(buf, pos, rec_end)
        if hk_len < 0:
            raise CorruptRecordError("null header key", None, pos)
        if pos + hk_len > rec_end:
            raise CorruptRecordError(f"header key of {hk_len} bytes overruns the record", None, pos)
        try:
            hkey = bytes(buf[pos : pos + hk_len]).decode("utf-8")
        except UnicodeDecodeError as err:
            raise CorruptRecordError("header key is not UTF-8", None, pos) from err
        pos += hk_len
        hval, pos = _read_bytes(buf, pos, rec_end, "header value")
        headers.append(Header(hkey, hval))
    if pos != rec_end:
        raise CorruptRecordError(
            f"record declares {length} bytes but its fields use {pos - body_start}", None, start
        )
    timestamp = header.max_timestamp if log_append else header.base_timestamp + ts_delta
    record = Record(
        offset=header.base_offset + offset_delta,
        timestamp=timestamp,
        key=key,
        value=value,
        headers=tuple(headers),
        attributes=attributes,
        size_in_bytes=rec_end - start,
    )
    return record, rec_end


def _read_bytes(buf: bytes | memoryview, pos: int, end: int, what: str) -> tuple[bytes | None, int]:
    n, pos = decode_varint(buf, pos, end)
    if n < 0:
        return None, pos
    if pos + n > end:
        raise CorruptRecordError(f"{what} of {n} bytes overruns the record", None, pos)
    return bytes(buf[pos : pos + n]), pos + n


def decode_control_record(record: Record) -> ControlRecord:
    """Parse a control record's key (and an ABORT/COMMIT marker's value)."""
    key = record.key
    if key is None or len(key) < CONTROL_KEY.size:
        raise CorruptRecordError(f"control record at offset {record.offset} has a key shorter than 4 bytes")
    version, ctype = CONTROL_KEY.unpack_from(key)
    if version < 0:
        raise CorruptRecordError(
            f"control record at offset {record.offset} has negative key version {version}"
        )
    coordinator_epoch = None
    if ctype in (CONTROL_ABORT, CONTROL_COMMIT):
        value = record.value
        if value is None or len(value) < _END_TXN_VALUE.size:
            raise CorruptRecordError(f"transaction marker at offset {record.offset} has a short value")
        _, coordinator_epoch = _END_TXN_VALUE.unpack_from(value)
    return ControlRecord(version, ctype, coordinator_epoch)


# ---------------------------------------------------------------------------------------------- encode
def encode_record(
    offset_delta: int,
    timestamp_delta: int,
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Header] = (),
    attributes: int = 0,
) -> bytes:
    body = bytearray()
    body.append(attributes & 0xFF)
    body += encode_varlong(timestamp_delta)
    body += encode_varint(offset_delta)
    _write_bytes(body, key)
    _write_bytes(body, value)
    body += encode_varint(len(headers))
    for h in headers:
        hk = h.key.encode("utf-8")
        body += encode_varint(len(hk))
        body += hk
        _write_bytes(body, h.value)
    return encode_varint(len(body)) + bytes(body)


def _write_bytes(out: bytearray, data: bytes | None) -> None:
    if data is None:
        out += b"\x01"  # varint -1
    else:
        out += encode_varint(len(data))
        out += data


def control_record_key(ctype: int, version: int = 0) -> bytes:
    return CONTROL_KEY.pack(version, ctype)


def end_txn_marker_value(coordinator_epoch: int, version: int = 0) -> bytes:
    return _END_TXN_VALUE.pack(version, coordinator_epoch)


def build_batch(
    base_offset: int,
    records: Sequence[Record],
    *,
    codec: int = compression.NONE,
    timestamp_type: int = CREATE_TIME,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    is_transactional: bool = False,
    is_control: bool = False,
    delete_horizon_ms: int | None = None,
    last_offset_delta: int | None = None,
    max_timestamp: int | None = None,
) -> bytes:
    """Encode one v2 batch holding ``records`` (absolute offsets, in increasing order).

    ``last_offset_delta`` defaults to the last record's delta (the cleaner passes the original one to keep
    the batch's offset range); ``max_timestamp`` defaults to the max record timestamp (CreateTime).
    An empty ``records`` gives a header-only batch (base_timestamp -1, codec none), as the cleaner writes.
    """
    if not records:
        if last_offset_delta is None or max_timestamp is None:
            raise ValueError("an empty batch needs last_offset_delta and max_timestamp")
        attributes = _attributes(compression.NONE, timestamp_type, is_transactional, is_control, False)
        return assemble_batch(
            base_offset, partition_leader_epoch, attributes, last_offset_delta, NO_TIMESTAMP,
            max_timestamp, producer_id, producer_epoch, base_sequence, 0, b"",
        )  # fmt: skip
    has_horizon = False
    base_timestamp = records[0].timestamp
    if delete_horizon_ms is not None and delete_horizon_ms >= 0:
        has_horizon, base_timestamp = True, delete_horizon_ms
    if max_timestamp is None:
        max_timestamp = max(r.timestamp for r in records)
    if last_offset_delta is None:
        last_offset_delta = records[-1].offset - base_offset
    body = b"".join(
        encode_record(
            r.offset - base_offset, r.timestamp - base_timestamp, r.key, r.value, r.headers, r.attributes
        )
        for r in records
    )
    attributes = _attributes(codec, timestamp_type, is_transactional, is_control, has_horizon)
    if codec != compression.NONE:
        body = compression.compress(codec, body, MAGIC)
    return assemble_batch(
        base_offset, partition_leader_epoch, attributes, last_offset_delta, base_timestamp,
        max_timestamp, producer_id, producer_epoch, base_sequence, len(records), body,
    )  # fmt: skip


def _attributes(codec: int, ts_type: int, transactional: bool, control: bool, horizon: bool) -> int:
    return (
        (codec & CODEC_MASK)
        | (TIMESTAMP_TYPE_MASK if ts_type == LOG_APPEND_TIME else 0)
        | (TRANSACTIONAL_MASK if transactional else 0)
        | (CONTROL_MASK if control else 0)
        | (DELETE_HORIZON_MASK if horizon else 0)
    )


def assemble_batch(
    base_offset: int,
    leader_epoch: int,
    attributes: int,
    last_offset_delta: int,
    base_timestamp: int,
    max_timestamp: int,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    count: int,
    body: bytes,
) -> bytes:
    out = bytearray(HEADER_SIZE + len(body))
    HEADER.pack_into(
        out, 0, base_offset, HEADER_SIZE - LOG_OVERHEAD + len(body), leader_epoch, MAGIC, 0, attributes,
        last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, count,
    )  # fmt: skip
    out[HEADER_SIZE:] = body
    struct.pack_into(">I", out, CRC_OFFSET, crc32c.crc32c(memoryview(out)[ATTRIBUTES_OFFSET:]))
    return bytes(out)


def build_control_batch(
    base_offset: int,
    ctype: int,
    *,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int = 0,
    timestamp: int,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
) -> bytes:
    """A transaction marker batch (attributes transactional+control, codec none, base_sequence -1)."""
    record = Record(
        offset=base_offset,
        timestamp=timestamp,
        key=control_record_key(ctype),
        value=end_txn_marker_value(coordinator_epoch),
    )
    return build_batch(
        base_offset,
        [record],
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        partition_leader_epoch=partition_leader_epoch,
        is_transactional=True,
        is_control=True,
    )
