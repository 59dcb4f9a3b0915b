"""Records of the KRaft cluster metadata log (``__cluster_metadata-0``): framing, the schemas of every
record type of Kafka 4.4, and the types the config replay uses.

Each record of a metadata batch has a null key; its value is one framed message (Kafka's
``MetadataRecordSerde``)::

    frame_version  unsigned varint   1 (0 was KRaft's 2.8 preview, refused)
    api_key        unsigned varint   the record type (:data:`METADATA_TYPES`)
    version        unsigned varint   the record type's schema version
    message        bytes             the fields of that version, to the end of the value

Every metadata record type is a *flexible* message in all its versions: strings, bytes and arrays are
"compact" (an unsigned varint holding length + 1, 0 meaning null), a uuid is 16 raw bytes, integers
and doubles are big-endian, and each struct ends with its tagged fields (unsigned varint count, then tag,
size and value each; a tag the version does not define is skipped by its size, as Kafka does). The
fields are read by :mod:`~kafka_log_core.format.message_schema`.

:data:`METADATA_TYPES` holds, for each api key, the name Kafka's ``MetadataRecordType`` gives it, its
highest version and its fields in the order Kafka's JSON converters write them (with the versions that
have each field, the nullable ones, and a tagged field's tag and default), as Kafka 4.4's
``kafka-metadata`` jar has them (its generated classes' schemas; a 3.9 log holds the same types in
versions up to these). :func:`read_message` reads one value into a :class:`MetadataMessage` and refuses a
malformed one with a :class:`MetadataParseError` that also carries the line Kafka's serde says for it;
:func:`decode_record` turns the types the config replay needs into dataclasses and leaves the others
as :class:`OtherRecord`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kafka_log_core.errors import CorruptDataError
from kafka_log_core.format.checkpoints import encode_uuid
from kafka_log_core.format.kafka_message import MessageReader
from kafka_log_core.format.message_schema import Field, Schema, read_struct

FRAME_VERSION = 1
_SHORT_MAX = 0x7FFF

# ConfigResource.Type ids used by ConfigRecord.resource_type
RESOURCE_TOPIC = 2
RESOURCE_BROKER = 4


class CorruptMetadataError(CorruptDataError):
    """A record of the cluster metadata log (or a snapshot) cannot be decoded."""


class MetadataParseError(CorruptMetadataError):
    """A metadata record value :func:`read_message` refuses. ``kafka_text`` is what Kafka's serde says
    about it (the text kafka-dump-log prints); the message says what was wrong and where."""

    kafka_text = ""


def _refused(kafka_text: str, detail: str, position: int | None = None) -> MetadataParseError:
    err = MetadataParseError(detail, None, position)
    err.kafka_text = kafka_text
    return err


@dataclass(frozen=True, slots=True)
class MetadataType:
    """One metadata record type: Kafka's enum name, its highest version and its schema."""

    name: str  # MetadataRecordType's name, e.g. TOPIC_RECORD
    max_version: int
    schema: Schema

    @property
    def message_name(self) -> str:
        """The generated message's name, e.g. TopicRecord."""
        return "".join(part.capitalize() for part in self.name.split("_"))


def _type(name: str, max_version: int, *fields: Field) -> MetadataType:
    return MetadataType(name, max_version, Schema(fields, flexible_from=0))


_ENDPOINT = (
    Field("name", "string"),
    Field("host", "string"),
    Field("port", "uint16"),
    Field("securityProtocol", "int16"),
)
_FEATURE = (
    Field("name", "string"),
    Field("minSupportedVersion", "int16"),
    Field("maxSupportedVersion", "int16"),
)
METADATA_TYPES: dict[int, MetadataType] = {
    0: _type(
        "REGISTER_BROKER_RECORD",
        4,
        Field("brokerId", "int32"),
        Field("isMigratingZkBroker", "bool", "2+"),
        Field("incarnationId", "uuid"),
        Field("brokerEpoch", "int64"),
        Field("endPoints", "[]", fields=_ENDPOINT),
        Field("features", "[]", fields=_FEATURE),
        Field("rack", "string", "0+", nullable="0+"),
        Field("fenced", "bool"),
        Field("inControlledShutdown", "bool", "1+"),
        Field("logDirs", "[]uuid", "3+", tag=0, default=[]),
        Field("cordonedLogDirs", "[]uuid", "4+", nullable="4+", tag=1, default=None),
    ),
    1: _type(
        "UNREGISTER_BROKER_RECORD",
        0,
        Field("brokerId", "int32"),
        Field("brokerEpoch", "int64"),
    ),
    2: _type(
        "TOPIC_RECORD",
        0,
        Field("name", "string"),
        Field("topicId", "uuid"),
    ),
    3: _type(
        "PARTITION_RECORD",
        2,
        Field("partitionId", "int32"),
        Field("topicId", "uuid"),
        Field("replicas", "[]int32"),
        Field("isr", "[]int32"),
        Field("removingReplicas", "[]int32"),
        Field("addingReplicas", "[]int32"),
        Field("leader", "int32"),
        Field("leaderRecoveryState", "int8", "0+", tag=0, default=0),
        Field("leaderEpoch", "int32"),
        Field("partitionEpoch", "int32"),
        Field("directories", "[]uuid", "1+"),
        Field("eligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tag=1, default=None),
        Field("lastKnownElr", "[]int32", "2+", nullable="2+", tag=2, default=None),
    ),
    4: _type(
        "CONFIG_RECORD",
        0,
        Field("resourceType", "int8"),
        Field("resourceName", "string"),
        Field("name", "string"),
        Field("value", "string", "0+", nullable="0+"),
    ),
    5: _type(
        "PARTITION_CHANGE_RECORD",
        2,
        Field("partitionId", "int32"),
        Field("topicId", "uuid"),
        Field("isr", "[]int32", "0+", nullable="0+", tag=0, default=None),
        Field("leader", "int32", "0+", tag=1, default=-2),
        Field("replicas", "[]int32", "0+", nullable="0+", tag=2, default=None),
        Field("removingReplicas", "[]int32", "0+", nullable="0+", tag=3, default=None),
        Field("addingReplicas", "[]int32", "0+", nullable="0+", tag=4, default=None),
        Field("leaderRecoveryState", "int8", "0+", tag=5, default=-1),
        Field("directories", "[]uuid", "1+", nullable="1+", tag=8, default=None),
        Field("eligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tag=6, default=None),
        Field("lastKnownElr", "[]int32", "2+", nullable="2+", tag=7, default=None),
    ),
    7: _type(
        "FENCE_BROKER_RECORD",
        0,
        Field("id", "int32"),
        Field("epoch", "int64"),
    ),
    8: _type(
        "UNFENCE_BROKER_RECORD",
        0,
        Field("id", "int32"),
        Field("epoch", "int64"),
    ),
    9: _type(
        "REMOVE_TOPIC_RECORD",
        0,
        Field("topicId", "uuid"),
    ),
    10: _type(
        "DELEGATION_TOKEN_RECORD",
        0,
        Field("owner", "string"),
        Field("requester", "string"),
        Field("renewers", "[]string"),
        Field("issueTimestamp", "int64"),
        Field("maxTimestamp", "int64"),
        Field("expirationTimestamp", "int64"),
        Field("tokenId", "string"),
    ),
    11: _type(
        "USER_SCRAM_CREDENTIAL_RECORD",
        0,
        Field("name", "string"),
        Field("mechanism", "int8"),
        Field("salt", "bytes"),
        Field("storedKey", "bytes"),
        Field("serverKey", "bytes"),
        Field("iterations", "int32"),
    ),
    12: _type(
        "FEATURE_LEVEL_RECORD",
        0,
        Field("name", "string"),
        Field("featureLevel", "int16"),
    ),
    14: _type(
        "CLIENT_QUOTA_RECORD",
        0,
        Field(
            "entity",
            "[]",
            fields=(Field("entityType", "string"), Field("entityName", "string", nullable="0+")),
        ),
        Field("key", "string"),
        Field("value", "float64"),
        Field("remove", "bool"),
    ),
    15: _type(
        "PRODUCER_IDS_RECORD",
        0,
        Field("brokerId", "int32"),
        Field("brokerEpoch", "int64"),
        Field("nextProducerId", "int64"),
    ),
    17: _type(
        "BROKER_REGISTRATION_CHANGE_RECORD",
        3,
        Field("brokerId", "int32"),
        Field("brokerEpoch", "int64"),
        Field("fenced", "int8", "0+", tag=0, default=0),
        Field("inControlledShutdown", "int8", "1+", tag=1, default=0),
        Field("logDirs", "[]uuid", "2+", tag=2, default=[]),
        Field("cordonedLogDirs", "[]uuid", "3+", nullable="3+", tag=3, default=None),
    ),
    18: _type(
        "ACCESS_CONTROL_ENTRY_RECORD",
        0,
        Field("id", "uuid"),
        Field("resourceType", "int8"),
        Field("resourceName", "string"),
        Field("patternType", "int8"),
        Field("principal", "string"),
        Field("host", "string"),
        Field("operation", "int8"),
        Field("permissionType", "int8"),
    ),
    19: _type(
        "REMOVE_ACCESS_CONTROL_ENTRY_RECORD",
        0,
        Field("id", "uuid"),
    ),
    20: _type("NO_OP_RECORD", 0),
    21: _type(
        "ZK_MIGRATION_STATE_RECORD",
        0,
        Field("zkMigrationState", "int8"),
    ),
    22: _type(
        "REMOVE_USER_SCRAM_CREDENTIAL_RECORD",
        0,
        Field("name", "string"),
        Field("mechanism", "int8"),
    ),
    23: _type(
        "BEGIN_TRANSACTION_RECORD",
        0,
        Field("name", "string", "0+", nullable="0+", tag=0, default=None),
    ),
    24: _type("END_TRANSACTION_RECORD", 0),
    25: _type(
        "ABORT_TRANSACTION_RECORD",
        0,
        Field("reason", "string", "0+", nullable="0+", tag=0, default=None),
    ),
    26: _type(
        "REMOVE_DELEGATION_TOKEN_RECORD",
        0,
        Field("tokenId", "string"),
    ),
    27: _type(
        "REGISTER_CONTROLLER_RECORD",
        0,
        Field("controllerId", "int32"),
        Field("incarnationId", "uuid"),
        Field("zkMigrationReady", "bool"),
        Field("endPoints", "[]", fields=_ENDPOINT),
        Field("features", "[]", fields=_FEATURE),
    ),
    28: _type(
        "CLEAR_ELR_RECORD",
        0,
        Field("topicName", "string"),
    ),
    29: _type(
        "UNREGISTER_CONTROLLER_RECORD",
        0,
        Field("controllerId", "int32"),
    ),
}


@dataclass(frozen=True, slots=True)
class MetadataMessage:
    """One record value: its api key, type, version and fields (JSON names; uuids as 16 bytes)."""

    api_key: int
    type: MetadataType
    version: int
    values: dict[str, Any]


def _short(r: MessageReader, entity: str) -> int:
    """An unsigned varint taken as a Java short, as the serde reads the frame's three numbers."""
    start = r.pos
    try:
        value = r.uvarint(entity)
    except CorruptDataError as err:
        raise _refused(f"Error while reading {entity}", err.detail, start) from err
    value = (value + 2**31) % 2**32 - 2**31  # a Java int
    if value > _SHORT_MAX:
        raise _refused(f"Value for {entity} was too large.", f"{entity} {value} is over {_SHORT_MAX}", start)
    return (value + 2**15) % 2**16 - 2**15


def read_message(value: bytes, types: Mapping[int, MetadataType] = METADATA_TYPES) -> MetadataMessage:
    """One metadata record value read as Kafka's ``MetadataRecordSerde`` reads it; a
    :class:`MetadataParseError` (positions relative to the value) when it refuses it. ``types``: the record
    types of another log framed the same way (``__remote_log_metadata``'s)."""
    r = MessageReader(value, error=CorruptMetadataError)
    frame = _short(r, "frame version")
    if frame == 0:
        raise _refused(
            "Could not deserialize metadata record with frame version 0. Note that upgrades from the preview "
            "release of KRaft in 2.8 to newer versions are not supported.",
            f"frame version 0, expected {FRAME_VERSION}",
            0,
        )
    if frame != FRAME_VERSION:
        raise _refused(
            f"Could not deserialize metadata record due to unknown frame version {frame}(only frame version "
            f"{FRAME_VERSION} is supported)",
            f"frame version {frame}, expected {FRAME_VERSION}",
            0,
        )
    api_key = _short(r, "type")
    version = _short(r, "version")
    kind = types.get(api_key)
    if kind is None:
        raise _refused(
            f"org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id {api_key}",
            f"record type {api_key} is not one Kafka 4.4 knows here",
            0,
        )
    what = f"{kind.message_name} v{version}"
    failed = f"Failed to deserialize record with type {api_key}"
    if not 0 <= version <= kind.max_version:
        raise _refused(
            failed, f"{what}: versions up to {kind.max_version} are known (written by a newer Kafka?)", 0
        )
    try:
        values = read_struct(r, kind.schema.fields, version, True)
    except CorruptDataError as err:
        raise _refused(failed, f"{what}: {err.detail}", err.position) from err
    if r.pos != r.end:
        raise _refused(
            f"Found {r.end - r.pos} byte(s) of garbage after {api_key}",
            f"{what}: {r.end - r.pos} bytes left after the last field",
            r.pos,
        )
    return MetadataMessage(api_key, kind, version, values)


# --------------------------------------------------------------------------------------------- replay types
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
    """A record type the replay does not use (its body is not read)."""

    api_key: int
    version: int


MetadataRecord = (
    TopicRecord | PartitionRecord | PartitionChangeRecord | RemoveTopicRecord | ConfigRecord
    | FeatureLevelRecord | TransactionRecord | OtherRecord
)  # fmt: skip


def _ints(values: Any) -> tuple[int, ...] | None:
    return None if values is None else tuple(values)


_BUILDERS: dict[int, Callable[[dict[str, Any]], MetadataRecord]] = {
    2: lambda v: TopicRecord(v["name"], encode_uuid(v["topicId"])),
    3: lambda v: PartitionRecord(
        encode_uuid(v["topicId"]), v["partitionId"], tuple(v["replicas"]), tuple(v["isr"]), v["leader"]
    ),
    4: lambda v: ConfigRecord(v["resourceType"], v["resourceName"], v["name"], v["value"]),
    5: lambda v: PartitionChangeRecord(
        encode_uuid(v["topicId"]), v["partitionId"], _ints(v.get("isr")), v.get("leader", -2),
        _ints(v.get("replicas")),
    ),
    9: lambda v: RemoveTopicRecord(encode_uuid(v["topicId"])),
    12: lambda v: FeatureLevelRecord(v["name"], v["featureLevel"]),
    23: lambda v: TransactionRecord("begin"),
    24: lambda v: TransactionRecord("end"),
    25: lambda v: TransactionRecord("abort"),
}  # fmt: skip


def decode_record(value: bytes) -> MetadataRecord:
    """The replay's view of one metadata record value (positions in errors are relative to the value);
    the types it does not use are not read beyond their frame."""
    r = MessageReader(value, error=CorruptMetadataError)
    frame = _short(r, "frame version")
    if frame != FRAME_VERSION:
        raise CorruptMetadataError(f"frame version {frame}, expected {FRAME_VERSION}", None, 0)
    api_key, version = _short(r, "type"), _short(r, "version")
    build = _BUILDERS.get(api_key)
    if build is None:
        return OtherRecord(api_key, version)
    return build(read_message(value).values)
