"""Records of the KRaft cluster metadata log (``__cluster_metadata-0``): framing and the types we read.

Each record of a metadata batch has a null key; its value is one framed message (Kafka's
``MetadataRecordSerde``)::

    frame_version  unsigned varint   1 (0 was KRaft's 2.8 preview, refused)
    api_key        unsigned varint   the record type (table below)
    version        unsigned varint   the record type's schema version
    message        bytes             the fields of that version, to the end of the value

Every metadata record type is a *flexible* message in all its versions: strings and arrays are
"compact" (an unsigned varint holding length + 1, 0 meaning null), a uuid is 16 raw bytes, integers
are big-endian, and the regular fields are followed by a tagged-field section::

    count          unsigned varint
    count x        tag (unsigned varint), size (unsigned varint), size bytes

Tags we do not know are skipped by their size, as Kafka does. The types read here, from Kafka's
message definitions (``metadata/src/main/resources/common/metadata/*.json``); ``tN`` is a tagged field:

    2  TopicRecord            v0    name string, topic_id uuid
    3  PartitionRecord        v0-2  partition_id int32, topic_id uuid, replicas []int32, isr []int32,
                                    removing_replicas []int32, adding_replicas []int32, leader int32,
                                    leader_epoch int32, partition_epoch int32, directories []uuid (v1+);
                                    t0 leader_recovery_state int8, t1/t2 eligible leader replicas (v2+)
    4  ConfigRecord           v0    resource_type int8, resource_name string, name string,
                                    value nullable string (null: the setting was deleted)
    5  PartitionChangeRecord  v0-2  partition_id int32, topic_id uuid; t0 isr, t1 leader int32 (-2: no
                                    change), t2 replicas, t3 removing, t4 adding ([]int32, null: no
                                    change), t5 leader_recovery_state int8, t8 directories (v1+), t6/t7 ELR
    9  RemoveTopicRecord      v0    topic_id uuid
    12 FeatureLevelRecord     v0    name string, feature_level int16
    23 BeginTransactionRecord v0    t0 name       24 EndTransactionRecord v0 (no fields)
    25 AbortTransactionRecord v0   t0 reason

Any other api key (brokers, ACLs, quotas, producer ids, no-ops, ...) is returned as an
:class:`OtherRecord` without decoding its body. A known type in a version newer than the table is an
error: its fields cannot be read safely.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kafka_log_core.errors import CorruptDataError
from kafka_log_core.format.checkpoints import encode_uuid
from kafka_log_core.format.kafka_message import INT8, INT16, INT32, MessageReader

FRAME_VERSION = 1

# ConfigResource.Type ids used by ConfigRecord.resource_type
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4


class CorruptMetadataError(CorruptDataError):
    """A record of the cluster metadata log (or a snapshot) cannot be decoded."""


@dataclass(frozen=True, slots=True)
class TopicRecord:
    name: str
    topic_id: str  # base64url, as in partition.metadata


@dataclass(frozen=True, slots=True)
class PartitionRecord:
    topic_id: str
    partition_id: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int


@dataclass(frozen=True, slots=True)
class PartitionChangeRecord:
    topic_id: str
    partition_id: int
    isr: tuple[int, ...] | None  # None: unchanged
    leader: int  # -2: unchanged, -1: no leader
    replicas: tuple[int, ...] | None


@dataclass(frozen=True, slots=True)
class RemoveTopicRecord:
    topic_id: str


@dataclass(frozen=True, slots=True)
class ConfigRecord:
    resource_type: int
    resource_name: str
    name: str
    value: str | None  # None: the setting was removed


@dataclass(frozen=True, slots=True)
class FeatureLevelRecord:
    name: str
    feature_level: int


@dataclass(frozen=True, slots=True)
class TransactionRecord:
    """BeginTransactionRecord / EndTransactionRecord / AbortTransactionRecord (KIP-868)."""

    kind: str  # "begin", "end" or "abort"


@dataclass(frozen=True, slots=True)
class OtherRecord:
    """A record type this module does not read (its body is not decoded)."""

    api_key: int
    version: int


MetadataRecord = (
    TopicRecord | PartitionRecord | PartitionChangeRecord | RemoveTopicRecord | ConfigRecord
    | FeatureLevelRecord | TransactionRecord | OtherRecord
)  # fmt: skip


# --- primitive readers: each reads one value at the cursor and moves it past ---------------------------------


def _reader(buf: bytes, pos: int = 0, end: int | None = None) -> MessageReader:
    return MessageReader(buf, pos, end, CorruptMetadataError)


def _int8(r: MessageReader, what: str) -> int:
    return r.fixed(INT8, what)


def _int16(r: MessageReader, what: str) -> int:
    return r.fixed(INT16, what)


def _int32(r: MessageReader, what: str) -> int:
    return r.fixed(INT32, what)


def _uuid(r: MessageReader, what: str) -> str:
    return encode_uuid(r.uuid(what))


def _string(r: MessageReader, what: str) -> str | None:
    length = r.uvarint(what) - 1
    if length < 0:
        return None
    start = r.pos
    try:
        return r.take(length, what).decode("utf-8")
    except UnicodeDecodeError as err:
        raise CorruptMetadataError(f"{what}: not UTF-8 ({err.reason})", None, start) from err


def _int32_array(r: MessageReader, what: str) -> tuple[int, ...] | None:
    count = r.uvarint(what) - 1
    if count < 0:
        return None
    data = r.take(4 * count, what)
    return struct.unpack(f">{count}i", data)


def _uuid_array(r: MessageReader, what: str) -> tuple[str, ...] | None:
    count = r.uvarint(what) - 1
    if count < 0:
        return None
    return tuple(_uuid(r, what) for _ in range(count))


Read = Callable[[MessageReader, str], Any]


@dataclass(frozen=True, slots=True)
class _Field:
    name: str
    read: Read
    since: int = 0  # first version that has the field
    nullable: bool = False


@dataclass(frozen=True, slots=True)
class _Schema:
    name: str
    max_version: int
    fields: tuple[_Field, ...]
    tagged: dict[int, _Field]
    build: Callable[[dict[str, Any]], MetadataRecord]


def _f(name: str, read: Read, since: int = 0, nullable: bool = False) -> _Field:
    return _Field(name, read, since, nullable)


SCHEMAS: dict[int, _Schema] = {
    2: _Schema(
        "TopicRecord", 0, (_f("name", _string), _f("topic_id", _uuid)), {},
        lambda v: TopicRecord(v["name"], v["topic_id"]),
    ),
    3: _Schema(
        "PartitionRecord", 2,
        (
            _f("partition_id", _int32), _f("topic_id", _uuid), _f("replicas", _int32_array),
            _f("isr", _int32_array), _f("removing_replicas", _int32_array),
            _f("adding_replicas", _int32_array), _f("leader", _int32), _f("leader_epoch", _int32),
            _f("partition_epoch", _int32), _f("directories", _uuid_array, since=1),
        ),
        {
            0: _f("leader_recovery_state", _int8),
            1: _f("eligible_leader_replicas", _int32_array, 2, True),
            2: _f("last_known_elr", _int32_array, 2, True),
        },
        lambda v: PartitionRecord(v["topic_id"], v["partition_id"], v["replicas"], v["isr"], v["leader"]),
    ),
    4: _Schema(
        "ConfigRecord", 0,
        (
            _f("resource_type", _int8), _f("resource_name", _string), _f("name", _string),
            _f("value", _string, nullable=True),
        ),
        {},
        lambda v: ConfigRecord(v["resource_type"], v["resource_name"], v["name"], v["value"]),
    ),
    5: _Schema(
        "PartitionChangeRecord", 2, (_f("partition_id", _int32), _f("topic_id", _uuid)),
        {
            0: _f("isr", _int32_array, nullable=True),
            1: _f("leader", _int32),
            2: _f("replicas", _int32_array, nullable=True),
            3: _f("removing_replicas", _int32_array, nullable=True),
            4: _f("adding_replicas", _int32_array, nullable=True),
            5: _f("leader_recovery_state", _int8),
            6: _f("eligible_leader_replicas", _int32_array, 2, True),
            7: _f("last_known_elr", _int32_array, 2, True),
            8: _f("directories", _uuid_array, 1, True),
        },
        lambda v: PartitionChangeRecord(
            v["topic_id"], v["partition_id"], v.get("isr"), v.get("leader", -2), v.get("replicas")
        ),
    ),
    9: _Schema("RemoveTopicRecord", 0, (_f("topic_id", _uuid),), {}, lambda v: RemoveTopicRecord(v["topic_id"])),
    12: _Schema(
        "FeatureLevelRecord", 0, (_f("name", _string), _f("feature_level", _int16)), {},
        lambda v: FeatureLevelRecord(v["name"], v["feature_level"]),
    ),
    23: _Schema(
        "BeginTransactionRecord", 0, (), {0: _f("name", _string, nullable=True)},
        lambda v: TransactionRecord("begin"),
    ),
    24: _Schema("EndTransactionRecord", 0, (), {}, lambda v: TransactionRecord("end")),
    25: _Schema(
        "AbortTransactionRecord", 0, (), {0: _f("reason", _string, nullable=True)},
        lambda v: TransactionRecord("abort"),
    ),
}  # fmt: skip


def decode_record(value: bytes) -> MetadataRecord:
    """Decode one metadata record value (positions in errors are relative to the value)."""
    r = _reader(value)
    frame = r.uvarint("frame version")
    if frame != FRAME_VERSION:
        raise CorruptMetadataError(f"frame version {frame}, expected {FRAME_VERSION}", None, 0)
    api_key = r.uvarint("record type")
    version = r.uvarint("record version")
    schema = SCHEMAS.get(api_key)
    if schema is None:
        return OtherRecord(api_key, version)
    what = f"{schema.name} v{version}"
    if version > schema.max_version:
        raise CorruptMetadataError(
            f"{what}: versions up to {schema.max_version} are known (written by a newer Kafka?)", None, 0
        )
    values: dict[str, Any] = {}
    for field in schema.fields:
        if version >= field.since:
            values[field.name] = _read_field(r, field, f"{what} field {field.name}")
    for _ in range(r.uvarint(f"{what} tagged field count")):
        tag = r.uvarint(f"{what} tag")
        size = r.uvarint(f"{what} tag {tag} size")
        body = _reader(r.buf, r.pos, r.pos + size)
        r.take(size, f"{what} tag {tag}")
        tagged = schema.tagged.get(tag)
        if tagged is None or version < tagged.since:
            continue  # a tag this version does not define: skipped, as Kafka does
        values[tagged.name] = _read_field(body, tagged, f"{what} tagged field {tagged.name}")
        if body.pos != body.end:
            raise CorruptMetadataError(
                f"{what} tagged field {tagged.name}: {body.end - body.pos} bytes left over", None, body.pos
            )
    if r.pos != r.end:
        raise CorruptMetadataError(f"{what}: {r.end - r.pos} bytes left after the last field", None, r.pos)
    return schema.build(values)


def _read_field(r: MessageReader, field: _Field, what: str) -> Any:
    value = field.read(r, what)
    if value is None and not field.nullable:
        raise CorruptMetadataError(f"{what}: null in a non-nullable field", None, r.pos)
    return value
