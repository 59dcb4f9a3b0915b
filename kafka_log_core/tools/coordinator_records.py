"""The records of ``__consumer_offsets`` and ``__transaction_state`` as kafka-dump-log's
``--offsets-decoder`` and ``--transaction-log-decoder`` print them (Kafka 4.4's ``DumpLogSegments``).

A coordinator record's key is ``int16 type`` then the key's fields (version 0); its value is ``int16
version`` then the value's fields in that version (a null value is a tombstone, printed ``<DELETE>``).
The fields are Kafka's message schemas, written out below as :mod:`~kafka_log_core.tools.message_schema`
tables and printed as::

    key    {"type":"<type>","data":{<fields>}}
    value  {"version":"<version>","data":{<fields>}}

A classic group's members (``protocolType`` ``consumer``) have their subscription and assignment bytes
shown decoded (``ConsumerProtocolSubscription`` / ``ConsumerProtocolAssignment``, version first), or as
bytes when they do not decode; a transaction's ``transactionStatus`` is shown by its state's name.

Decoded: the classic consumer groups' records (types 0, 1 and 2: offset commits and group metadata)
and the transaction log (type 0). The records of the newer group protocols (types 3 and up: consumer,
share and streams groups, KIP-848 and later) are named, not decoded.
"""

from __future__ import annotations

import struct

from kafka_log_core.errors import CorruptDataError
from kafka_log_core.format.kafka_message import MessageReader
from kafka_log_core.tools import message_schema
from kafka_log_core.tools.json_text import to_json
from kafka_log_core.tools.message_schema import Field, Schema

OFFSETS = "offsets"
TRANSACTION_LOG = "transaction-log"
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


def parse(schema: Schema, data: bytes, version: int) -> dict[str, object]:
    return message_schema.parse(schema, MessageReader(data), version)


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
