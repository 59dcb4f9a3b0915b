"""The records of ``__consumer_offsets``, ``__transaction_state`` and ``__share_group_state`` as
kafka-dump-log's ``--offsets-decoder``, ``--transaction-log-decoder`` and ``--share-group-state-decoder``
print them (Kafka 4.4's ``DumpLogSegments``).

A coordinator record's key is ``int16 type`` then the key's fields (read with the type as version); its
value is ``int16 version`` then the value's fields in that version (a null value is a tombstone, printed
``<DELETE>``).
The fields are Kafka's message schemas, written out below as :mod:`~kafka_log_core.format.message_schema`
tables and printed as::

    key    {"type":"<type>","data":{<fields>}}
    value  {"version":"<version>","data":{<fields>}}

A classic group's members (``protocolType`` ``consumer``) have their subscription and assignment bytes
shown decoded (``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment``, version first), or as
bytes when they do not decode; a transaction's ``transactionStatus`` is shown by its state's name.

Decoded: every record type of Kafka 4.4's group coordinator (0-2: offset commits and classic groups;
3-8 and 16: consumer groups, KIP-848; 10-15: share groups; 17 and 19-23: streams groups) and of its
transaction log (type 0) and of its share coordinator (0: share snapshots, 1: share updates).
"""

from __future__ import annotations

import struct

from kafka_log_core.errors import CorruptDataError
from kafka_log_core.format import message_schema
from kafka_log_core.format.kafka_message import MessageReader
from kafka_log_core.format.message_schema import Field, Schema
from kafka_log_core.tools.json_text import to_json

OFFSETS = "offsets"
TRANSACTION_LOG = "transaction-log"
SHARE_GROUP_STATE = "share-group-state"
DELETE = "<DELETE>"
CONSUMER_PROTOCOL_TYPE = "consumer"
TRANSACTION_STATES = (
    "Empty", "Ongoing", "PrepareCommit", "PrepareAbort", "CompleteCommit", "CompleteAbort", "Dead",
    "PrepareEpochFence",
)  # fmt: skip


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


# The newer group protocols' records (group-coordinator's generated CoordinatorRecordType of Kafka 4.4):
# consumer groups (KIP-848) 3-8 and 16, share groups 10-15, streams groups 17 and 19-23 (9 and 18 are not
# used). Keys are not flexible, values are flexible from version 0.
def _key(*names: str) -> Schema:
    return Schema(tuple(Field(name, "string") for name in names))


def _value(*fields: Field) -> Schema:
    return Schema(fields, flexible_from=0)


_GROUP, _MEMBER_KEY = _key("groupId"), _key("groupId", "memberId")
_TOPIC_ID_PARTITIONS = (Field("topicId", "uuid"), Field("partitions", "[]int32"))
_EPOCHS = Field("assignmentEpochs", "[]int32", nullable="0+", tag=0, default=[])
_TASK_IDS = (Field("subtopologyId", "string"), Field("partitions", "[]int32"))
_TASK_IDS_WITH_EPOCHS = (*_TASK_IDS, _EPOCHS)
_ASSIGNMENT_METADATA = _value(
    Field("assignmentEpoch", "int32"), Field("assignmentTimestamp", "int64", tag=0, default=0)
)
_CONFIGS = (Field("key", "string"), Field("value", "string"))
_TOPIC_INFO = (
    Field("name", "string"),
    Field("partitions", "int32"),
    Field("replicationFactor", "int16"),
    Field("topicConfigs", "[]", fields=_CONFIGS),
)
_MEMBER_IDENTITY = (
    Field("instanceId", "string", nullable="0+"),
    Field("rackId", "string", nullable="0+"),
    Field("clientId", "string"),
    Field("clientHost", "string"),
)
_STATE_TOPICS = (Field("topicId", "uuid"), Field("topicName", "string"), Field("partitions", "[]int32"))
NEWER_GROUP_KEYS = {
    **dict.fromkeys((3, 4, 6, 11, 12, 15, 17, 20, 23), _GROUP),
    **dict.fromkeys((5, 7, 8, 10, 13, 14, 19, 21, 22), _MEMBER_KEY),
    16: _key("groupId", "regularExpression"),
}
NEWER_GROUP_VALUES = {
    3: _value(Field("epoch", "int32"), Field("metadataHash", "int64", tag=0, default=0)),
    4: _value(
        Field(
            "topics",
            "[]",
            fields=(
                Field("topicId", "uuid"),
                Field("topicName", "string"),
                Field("numPartitions", "int32"),
                Field(
                    "partitionMetadata",
                    "[]",
                    fields=(Field("partition", "int32"), Field("racks", "[]string")),
                ),
            ),
        )
    ),
    5: _value(
        *_MEMBER_IDENTITY,
        Field("subscribedTopicNames", "[]string"),
        Field("subscribedTopicRegex", "string", nullable="0+"),
        Field("rebalanceTimeoutMs", "int32"),
        Field("serverAssignor", "string", nullable="0+"),
        Field(
            "classicMemberMetadata",
            "{}",
            nullable="0+",
            tag=0,
            default={"sessionTimeoutMs": 0, "supportedProtocols": []},
            fields=(
                Field("sessionTimeoutMs", "int32"),
                Field(
                    "supportedProtocols", "[]", fields=(Field("name", "string"), Field("metadata", "bytes"))
                ),
            ),
        ),
    ),
    6: _ASSIGNMENT_METADATA,
    7: _value(Field("topicPartitions", "[]", fields=_TOPIC_ID_PARTITIONS)),
    8: _value(
        Field("memberEpoch", "int32"),
        Field("previousMemberEpoch", "int32"),
        Field("state", "int8"),
        Field("assignedPartitions", "[]", fields=(*_TOPIC_ID_PARTITIONS, _EPOCHS)),
        Field("partitionsPendingRevocation", "[]", fields=(*_TOPIC_ID_PARTITIONS, _EPOCHS)),
    ),
    10: _value(
        Field("rackId", "string", nullable="0+"),
        Field("clientId", "string"),
        Field("clientHost", "string"),
        Field("subscribedTopicNames", "[]string"),
    ),
    11: _value(Field("epoch", "int32"), Field("metadataHash", "int64")),
    12: _ASSIGNMENT_METADATA,
    13: _value(Field("topicPartitions", "[]", fields=_TOPIC_ID_PARTITIONS)),
    14: _value(
        Field("memberEpoch", "int32"),
        Field("previousMemberEpoch", "int32"),
        Field("state", "int8"),
        Field("assignedPartitions", "[]", fields=_TOPIC_ID_PARTITIONS),
    ),
    15: _value(
        Field("initializingTopics", "[]", fields=_STATE_TOPICS),
        Field("initializedTopics", "[]", fields=_STATE_TOPICS),
        Field("deletingTopics", "[]", fields=_STATE_TOPICS[:2]),
    ),
    16: _value(Field("topics", "[]string"), Field("version", "int64"), Field("timestamp", "int64")),
    17: _value(
        Field("epoch", "int32"),
        Field("metadataHash", "int64"),
        Field("validatedTopologyEpoch", "int32", tag=0, default=-1),
        Field("lastAssignmentConfigs", "[]", nullable="0+", tag=1, default=[], fields=_CONFIGS),
        Field("storedDescriptionTopologyEpoch", "int32", tag=2, default=-1),
        Field("failedDescriptionTopologyEpoch", "int32", tag=3, default=-1),
    ),
    19: _value(
        *_MEMBER_IDENTITY,
        Field("rebalanceTimeoutMs", "int32"),
        Field("topologyEpoch", "int32"),
        Field("processId", "string"),
        Field("userEndpoint", "{}", nullable="0+", fields=(Field("host", "string"), Field("port", "uint16"))),
        Field("clientTags", "[]", fields=_CONFIGS),
    ),
    20: _ASSIGNMENT_METADATA,
    21: _value(
        *(Field(name, "[]", fields=_TASK_IDS) for name in ("activeTasks", "standbyTasks", "warmupTasks"))
    ),
    22: _value(
        Field("memberEpoch", "int32"),
        Field("previousMemberEpoch", "int32"),
        Field("state", "int8"),
        *(
            Field(name, "[]", fields=_TASK_IDS_WITH_EPOCHS)
            for name in (
                "activeTasks",
                "standbyTasks",
                "warmupTasks",
                "activeTasksPendingRevocation",
                "standbyTasksPendingRevocation",
                "warmupTasksPendingRevocation",
            )
        ),  # fmt: skip
    ),
    23: _value(
        Field("epoch", "int32"),
        Field(
            "subtopologies",
            "[]",
            fields=(
                Field("subtopologyId", "string"),
                Field("sourceTopics", "[]string"),
                Field("sourceTopicRegex", "[]string"),
                Field("stateChangelogTopics", "[]", fields=_TOPIC_INFO),
                Field("repartitionSinkTopics", "[]string"),
                Field("repartitionSourceTopics", "[]", fields=_TOPIC_INFO),
                Field(
                    "copartitionGroups",
                    "[]",
                    fields=(
                        Field("sourceTopics", "[]int16"),
                        Field("sourceTopicRegex", "[]int16"),
                        Field("repartitionSourceTopics", "[]int16"),
                    ),
                ),
            ),
        ),
    ),
}
OFFSETS_KEYS.update(NEWER_GROUP_KEYS)
OFFSETS_VALUES.update(NEWER_GROUP_VALUES)
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
_SHARE_KEY = Schema((Field("groupId", "string"), Field("topicId", "uuid"), Field("partition", "int32")))
_STATE_BATCH = (
    Field("firstOffset", "int64"),
    Field("lastOffset", "int64"),
    Field("deliveryState", "int8"),
    Field("deliveryCount", "int16"),
)
_DELIVERY_COMPLETE_COUNT = Field("deliveryCompleteCount", "int32", tag=0, default=-1)
# share-coordinator's CoordinatorRecordType (Kafka 4.4): 0 ShareSnapshot, 1 ShareUpdate
SHARE_GROUP_STATE_KEYS = {0: _SHARE_KEY, 1: _SHARE_KEY}
SHARE_GROUP_STATE_VALUES = {
    0: _value(
        Field("snapshotEpoch", "int32"),
        Field("stateEpoch", "int32"),
        Field("leaderEpoch", "int32"),
        Field("startOffset", "int64"),
        _DELIVERY_COMPLETE_COUNT,
        Field("createTimestamp", "int64"),
        Field("writeTimestamp", "int64"),
        Field("stateBatches", "[]", fields=_STATE_BATCH),
    ),
    1: _value(
        Field("snapshotEpoch", "int32"),
        Field("leaderEpoch", "int32"),
        Field("startOffset", "int64"),
        _DELIVERY_COMPLETE_COUNT,
        Field("stateBatches", "[]", fields=_STATE_BATCH),
    ),
}
_TABLES = {
    OFFSETS: (OFFSETS_KEYS, OFFSETS_VALUES),
    TRANSACTION_LOG: (TRANSACTION_KEYS, TRANSACTION_VALUES),
    SHARE_GROUP_STATE: (SHARE_GROUP_STATE_KEYS, SHARE_GROUP_STATE_VALUES),
}
_VALID_VALUE_VERSIONS = {
    OFFSETS: {0: (0, 4), 1: (0, 4), 2: (0, 4), **dict.fromkeys(NEWER_GROUP_VALUES, (0, 0))},
    TRANSACTION_LOG: {0: (0, 1)},
    SHARE_GROUP_STATE: {0: (0, 0), 1: (0, 0)},
}


def parse(schema: Schema, data: bytes, version: int) -> dict[str, object]:
    return message_schema.parse(schema, MessageReader(data), version)


def _version(buffer: bytes, name: str) -> int:
    """The int16 a key (its record type) or value (its version) starts with (CoordinatorRecordSerde)."""
    if len(buffer) < 2:
        raise ValueError(f"Could not read version from {name}'s buffer.")
    return int(struct.unpack_from(">h", buffer)[0])


def _read(schema: Schema, buffer: bytes, version: int, name: str) -> dict[str, object]:
    """The fields after the version, read at ``version`` (a key's is its record type); an error is said as
    Kafka's CoordinatorRecordSerde says it, with our reader's detail."""
    try:
        return parse(schema, buffer[2:], version)
    except CorruptDataError as err:
        raise ValueError(
            f"Could not read record with version {version} from {name}'s buffer due to: {err}."
        ) from err


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
    """(key text, payload text) of one record for ``decoder`` (``OFFSETS``, ``TRANSACTION_LOG`` or
    ``SHARE_GROUP_STATE``); a
    text is None where Kafka prints no ``key:`` / ``payload:``."""
    if key is None:
        raise CorruptDataError(
            f"Failed to decode message at offset {offset} using the specified decoder (message had a missing key)"
        )
    keys, values = _TABLES[decoder]
    try:
        record_type = _version(key, "key")
        if record_type not in keys:
            return f"Unknown record type {record_type} at offset {offset}, skipping.", None
        key_data = _read(keys[record_type], key, record_type, "key")
        key_text = to_json({"type": str(record_type), "data": key_data})
        if value is None:
            return key_text, DELETE
        version = _version(value, "value")
        low, high = _VALID_VALUE_VERSIONS[decoder][record_type]
        if not low <= version <= high:
            raise ValueError(f"Found an unknown record version {version} for {record_type} type")
        data = _read(values[record_type], value, version, "value")
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
