"""The records of ``__consumer_offsets`` and ``__transaction_state`` as kafka-dump-log's
``--offsets-decoder`` and ``--transaction-log-decoder`` print them (Kafka 4.4's ``DumpLogSegments``).

A coordinator record's key is ``int16 type`` then the key's fields (version 0); its value is ``int16
version`` then the value's fields in that version (a null value is a tombstone, printed ``<DELETE>``).
The fields are Kafka's message schemas, written out below as tables: versions ``"0+"``, ``"1"`` or
``"3+"``; a flexible version (``FLEXIBLE_FROM``) has compact strings, bytes and arrays (unsigned varint
length + 1, 0 = null) and ends each struct with its tagged fields (unsigned varint count, then tag,
size and value each), a non-flexible one has int16 string lengths and int32 bytes and array lengths
(-1 = null)::

    key    {"type":"<type>","data":{<fields>}}
    value  {"version":"<version>","data":{<fields>}}

The JSON is Jackson's compact text: fields in schema order, a tagged field only when it is not its
default, bytes in base64, a uuid as Kafka prints it (URL-safe base64 without padding). A classic group's
members (``protocolType`` ``consumer``) have their subscription and assignment bytes shown decoded
(``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment``, version first), or as bytes when they
do not decode; a transaction's ``transactionStatus`` is shown by its state's name.

Decoded: the classic consumer groups' records (types 0, 1 and 2: offset commits and group metadata)
and the transaction log (type 0). The records of the newer group protocols (types 3 and up: consumer,
share and streams groups, KIP-848 and later) are named, not decoded.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass

from kafka_log_core.errors import CorruptDataError
from kafka_log_core.format.checkpoints import encode_uuid
from kafka_log_core.format.kafka_message import INT8, INT16, INT32, INT64, MessageReader
from kafka_log_core.tools.json_text import to_json

OFFSETS = "offsets"
TRANSACTION_LOG = "transaction-log"
DELETE = "<DELETE>"
CONSUMER_PROTOCOL_TYPE = "consumer"
TRANSACTION_STATES = (
    "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
    "PrepareEpochFence",
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Field:
    """One schema field: JSON name, type (``int8``..``int64``, ``string``, ``bytes``, ``uuid``, ``[]int32``,
    ``[]string`` or ``[]`` with ``fields``), versions, nullable versions, tag (tagged fields) and default."""

    name: str
    kind: str
    versions: str = "0+"
    nullable: str = "none"
    tag: int | None = None
    default: object = None
    fields: tuple[Field, ...] = ()


@dataclass(frozen=True, slots=True)
class Schema:
    fields: tuple[Field, ...]
    flexible_from: int | None = None  # None: no flexible version


def _in(versions: str, version: int) -> bool:
    if versions == "none":
        return False
    if versions.endswith("+"):
        return version >= int(versions[:-1])
    low, _, high = versions.partition("-")
    return int(low) <= version <= int(high or low)


_TOPIC_PARTITIONS = (Field("topic", "string"), Field("partitions", "[]int32"))
_COMMIT_KEY = Schema((Field("group", "string"), Field("topic", "string"), Field("partition", "int32")))
_MEMBER = (
    Field("memberId", "string"),
    Field("groupInstanceId", "string", "3+", nullable="3+"),
    Field("clientId", "string"),
    Field("clientHost", "string"),
    Field("rebalanceTimeout", "int32", "1+"),
    Field("sessionTimeout", "int32"),
    Field("subscription", "bytes"),
    Field("assignment", "bytes"),
)
OFFSETS_KEYS = {0: _COMMIT_KEY, 1: _COMMIT_KEY, 2: Schema((Field("group", "string"),))}
OFFSETS_VALUES = {
    0: Schema(
        (
            Field("offset", "int64"),
            Field("leaderEpoch", "int32", "3+"),
            Field("metadata", "string"),
            Field("commitTimestamp", "int64"),
            Field("expireTimestamp", "int64", "1"),
            Field("topicId", "uuid", "4+", tag=0, default=bytes(16)),
        ),
        flexible_from=4,
    ),
    2: Schema(
        (
            Field("protocolType", "string"),
            Field("generation", "int32"),
            Field("protocol", "string", nullable="0+"),
            Field("leader", "string", nullable="0+"),
            Field("currentStateTimestamp", "int64", "2+"),
            Field("members", "[]", fields=_MEMBER),
        ),
        flexible_from=4,
    ),
}
OFFSETS_VALUES[1] = OFFSETS_VALUES[0]
# The record types of the newer group protocols Kafka 4.4 decodes (3-8 consumer, 10-16 share, 17-23 streams
# groups; 9 and 18 are not used), which kafka-log-jobs names without decoding.
NEWER_GROUP_RECORD_TYPES = frozenset({*range(3, 9), *range(10, 18), *range(19, 24)})
SUBSCRIPTION = Schema(
    (
        Field("topics", "[]string"),
        Field("userData", "bytes", nullable="0+"),
        Field("ownedPartitions", "[]", "1+", fields=_TOPIC_PARTITIONS),
        Field("generationId", "int32", "2+"),
        Field("rackId", "string", "3+", nullable="3+"),
    )
)
ASSIGNMENT = Schema(
    (Field("assignedPartitions", "[]", fields=_TOPIC_PARTITIONS), Field("userData", "bytes", nullable="0+"))
)
TRANSACTION_KEYS = {0: Schema((Field("transactionalId", "string"),))}
TRANSACTION_VALUES = {
    0: Schema(
        (
            Field("producerId", "int64"),
            Field("previousProducerId", "int64", "1+", tag=0, default=-1),
            Field("nextProducerId", "int64", "1+", tag=1, default=-1),
            Field("producerEpoch", "int16"),
            Field("nextProducerEpoch", "int16", "1+", tag=3, default=-1),
            Field("transactionTimeoutMs", "int32"),
            Field("transactionStatus", "int8"),
            Field(
                "transactionPartitions",
                "[]",
                nullable="0+",
                fields=(Field("topic", "string"), Field("partitionIds", "[]int32")),
            ),  # fmt: skip
            Field("transactionLastUpdateTimestampMs", "int64"),
            Field("transactionStartTimestampMs", "int64"),
            Field("clientTransactionVersion", "int16", "1+", tag=2, default=0),
        ),
        flexible_from=1,
    )
}
_VALID_VALUE_VERSIONS = {OFFSETS: {0: (0, 4), 1: (0, 4), 2: (0, 4)}, TRANSACTION_LOG: {0: (0, 1)}}
_INTS = {"int8": INT8, "int16": INT16, "int32": INT32, "int64": INT64}


def _length(r: MessageReader, flexible: bool, wide: bool, what: str) -> int:
    """A string (int16), bytes or array (int32) length; -1 = null."""
    if flexible:
        return r.length(what)
    return r.fixed(INT32 if wide else INT16, what)


def _read_value(r: MessageReader, field: Field, version: int, flexible: bool) -> object:
    kind = field.kind
    if kind in _INTS:
        return r.fixed(_INTS[kind], field.name)
    if kind == "uuid":
        return r.uuid(field.name)
    if kind in ("string", "bytes"):
        n = _length(r, flexible, kind == "bytes", field.name)
        if n < 0:
            if not _in(field.nullable, version):
                raise ValueError(f"non-nullable field {field.name} was serialized as null")
            return None
        raw = r.take(n, field.name)
        return raw.decode("utf-8", "replace") if kind == "string" else raw
    n = _length(r, flexible, True, field.name)  # an array
    if n < 0:
        if not _in(field.nullable, version):
            raise ValueError(f"non-nullable field {field.name} was serialized as null")
        return None
    if kind == "[]":
        return [_read_struct(r, field.fields, version, flexible) for _ in range(n)]
    element = Field(field.name, kind[2:])
    return [_read_value(r, element, version, flexible) for _ in range(n)]


def _read_struct(
    r: MessageReader, fields: Sequence[Field], version: int, flexible: bool
) -> dict[str, object]:
    values: dict[str, object] = {}
    for field in fields:
        if field.tag is None and _in(field.versions, version):
            values[field.name] = _read_value(r, field, version, flexible)
    if flexible:
        tagged = {f.tag: f for f in fields if f.tag is not None and _in(f.versions, version)}
        for _ in range(r.uvarint("tagged fields")):
            tag, size = r.uvarint("tag"), r.uvarint("tagged field size")
            data = r.take(size, "tagged field")
            if tag in tagged:
                values[tagged[tag].name] = _read_value(MessageReader(data), tagged[tag], version, flexible)
    return values


def _as_json(fields: Sequence[Field], values: dict[str, object], version: int) -> dict[str, object]:
    """The JSON object Kafka's generated converter writes: schema order, tagged fields only when set."""
    out: dict[str, object] = {}
    for field in fields:
        if not _in(field.versions, version):
            continue
        if field.tag is not None:
            value = values.get(field.name, field.default)
            if value == field.default:
                continue
        else:
            value = values[field.name]
        if field.kind == "uuid" and isinstance(value, bytes):
            value = encode_uuid(value)
        elif field.kind == "[]" and isinstance(value, list):
            value = [_as_json(field.fields, item, version) for item in value]
        out[field.name] = value
    return out


def parse(schema: Schema, data: bytes, version: int) -> dict[str, object]:
    flexible = schema.flexible_from is not None and version >= schema.flexible_from
    r = MessageReader(data)
    return _as_json(schema.fields, _read_struct(r, schema.fields, version, flexible), version)


def _decoded_member_bytes(member: dict[str, object]) -> None:
    for name, schema in (("subscription", SUBSCRIPTION), ("assignment", ASSIGNMENT)):
        raw = member.get(name)
        if not isinstance(raw, bytes) or len(raw) < 2:
            continue
        version = struct.unpack_from(">h", raw)[0]
        if not 0 <= version <= 3:  # ConsumerProtocol*: validVersions 0-3
            continue
        try:
            member[name] = parse(schema, raw[2:], version)
        except (ValueError, CorruptDataError):
            pass  # kept as bytes, as Kafka keeps them


def decode(
    decoder: str, offset: int, key: bytes | None, value: bytes | None
) -> tuple[str | None, str | None]:
    """(key text, payload text) of one record for ``decoder`` (``OFFSETS`` or ``TRANSACTION_LOG``); a
    text is None where Kafka prints no ``key:`` / ``payload:``."""
    if key is None:
        raise CorruptDataError(
            f"Failed to decode message at offset {offset} using the specified decoder (message had a missing key)"
        )
    keys, values = (
        (OFFSETS_KEYS, OFFSETS_VALUES) if decoder == OFFSETS else (TRANSACTION_KEYS, TRANSACTION_VALUES)
    )
    try:
        if len(key) < 2:
            raise ValueError("the key holds no record type")
        record_type = struct.unpack_from(">h", key)[0]
        if record_type not in keys:
            if decoder == OFFSETS and record_type in NEWER_GROUP_RECORD_TYPES:
                return (
                    f"Record type {record_type} at offset {offset} is not decoded by kafka-log-jobs, skipping.",
                    None,
                )
            return f"Unknown record type {record_type} at offset {offset}, skipping.", None
        key_text = to_json({"type": str(record_type), "data": parse(keys[record_type], key[2:], 0)})
        if value is None:
            return key_text, DELETE
        if len(value) < 2:
            raise ValueError("the value holds no version")
        version = struct.unpack_from(">h", value)[0]
        low, high = _VALID_VALUE_VERSIONS[decoder][record_type]
        if not low <= version <= high:
            raise ValueError(f"unknown version {version} of the value of record type {record_type}")
        data = parse(values[record_type], value[2:], version)
        if decoder == TRANSACTION_LOG:
            status = data["transactionStatus"]
            if not isinstance(status, int) or not 0 <= status < len(TRANSACTION_STATES):
                raise ValueError(f"Unknown transaction state id {status}")
            data["transactionStatus"] = TRANSACTION_STATES[status]
        elif record_type == 2 and data.get("protocolType") == CONSUMER_PROTOCOL_TYPE:
            members = data["members"]
            for member in members if isinstance(members, list) else ():
                _decoded_member_bytes(member)
        return key_text, to_json({"version": str(version), "data": data})
    except (ValueError, CorruptDataError) as err:
        return f"Error at offset {offset}, skipping. {err}", None
