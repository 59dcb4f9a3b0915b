"""The records of ``__remote_log_metadata`` (tiered storage's TopicBasedRemoteLogMetadataManager) as
kafka-dump-log's ``--remote-log-metadata-decoder`` prints them (Kafka 4.4's ``DumpLogSegments``).

A value is framed as a metadata record (:func:`~kafka_log_core.format.metadata_records.read_message`
reads it, with the four record types below, all at version 0) and printed, without a key, as the
``toString`` of the Java object Kafka makes of it::

    RemoteLogSegmentMetadata{remoteLogSegmentId=RemoteLogSegmentId{topicIdPartition=<topic id>:<topic>-<partition>,
      id=<segment id>}, startOffset=.., endOffset=.., brokerId=.., maxTimestampMs=.., eventTimestampMs=..,
      segmentLeaderEpochs={<epoch>=<offset>, ...}, segmentSizeInBytes=.., customMetadata=Optional[CustomMetadata{N
      bytes}]|Optional.empty, state=<RemoteLogSegmentState>, txnIdxEmpty=<bool>}
    RemoteLogSegmentMetadataUpdate{remoteLogSegmentId=.., customMetadata=.., state=.., eventTimestampMs=.., brokerId=..}
    RemotePartitionDeleteMetadata{topicPartition=<topic id>:<topic>-<partition>, state=.., eventTimestampMs=..,
      brokerId=..}
    RemoteLogSegmentMetadataSnapshot{segmentId=.., startOffset=.., endOffset=.., maxTimestampMs=..,
      segmentLeaderEpochs=.., segmentSizeInBytes=.., customMetadata=.., state=.., txnIdxEmpty=..}

(each one line). What Kafka refuses -- a malformed value, or one its objects' constructors reject (a
negative start offset, an end before the start, no leader epochs, an unknown state) -- is printed
``Error at offset <offset>, skipping. <the exception's message>``.
"""

from __future__ import annotations

from typing import Any

from kafka_log_core.format.checkpoints import encode_uuid
from kafka_log_core.format.message_schema import Field, Schema
from kafka_log_core.format.metadata_records import MetadataParseError, MetadataType, read_message

REMOTE_LOG_METADATA = "remote-log-metadata"
#: Java's message for ``record.value().remaining()`` on a null value (helpful NullPointerException text).
NULL_VALUE_TEXT = (
    'Cannot invoke "java.nio.ByteBuffer.remaining()" because the return value of '
    '"org.apache.kafka.common.record.internal.Record.value()" is null'
)
SEGMENT_STATES = (
    "COPY_SEGMENT_STARTED",
    "COPY_SEGMENT_FINISHED",
    "DELETE_SEGMENT_STARTED",
    "DELETE_SEGMENT_FINISHED",
)
PARTITION_DELETE_STATES = ("DELETE_PARTITION_MARKED", "DELETE_PARTITION_STARTED", "DELETE_PARTITION_FINISHED")

_TOPIC_ID_PARTITION = Field(
    "topicIdPartition",
    "{}",
    fields=(Field("name", "string"), Field("id", "uuid"), Field("partition", "int32")),
)
_SEGMENT_ID = Field("remoteLogSegmentId", "{}", fields=(_TOPIC_ID_PARTITION, Field("id", "uuid")))
_EPOCHS = Field("segmentLeaderEpochs", "[]", fields=(Field("leaderEpoch", "int32"), Field("offset", "int64")))
_CUSTOM = Field("customMetadata", "bytes", nullable="0+")
_STATE = Field("remoteLogSegmentState", "int8")
_TXN_INDEX_EMPTY = Field("txnIndexEmpty", "bool", tag=0, default=False)
_SEGMENT = (
    Field("startOffset", "int64"),
    Field("endOffset", "int64"),
    Field("brokerId", "int32"),
    Field("maxTimestampMs", "int64"),
    Field("eventTimestampMs", "int64"),
    _EPOCHS,
    Field("segmentSizeInBytes", "int32"),
    _CUSTOM,
    _STATE,
    _TXN_INDEX_EMPTY,
)


def _type(name: str, *fields: Field) -> MetadataType:
    return MetadataType(name, 0, Schema(fields, flexible_from=0))


#: The storage module's MetadataRecordType of Kafka 4.4 (schemas from its kafka-storage jar).
REMOTE_LOG_METADATA_TYPES = {
    0: _type("REMOTE_LOG_SEGMENT_METADATA_RECORD", _SEGMENT_ID, *_SEGMENT),
    1: _type(
        "REMOTE_LOG_SEGMENT_METADATA_UPDATE_RECORD",
        _SEGMENT_ID,
        Field("brokerId", "int32"),
        Field("eventTimestampMs", "int64"),
        _CUSTOM,
        _STATE,
    ),
    2: _type(
        "REMOTE_PARTITION_DELETE_METADATA_RECORD",
        _TOPIC_ID_PARTITION,
        Field("brokerId", "int32"),
        Field("eventTimestampMs", "int64"),
        Field("remotePartitionDeleteState", "int8"),
    ),
    3: _type("REMOTE_LOG_SEGMENT_METADATA_SNAPSHOT_RECORD", Field("segmentId", "uuid"), *_SEGMENT),
}


class _Refused(Exception):
    """What a Kafka constructor throws; the text is the exception's message."""


def _java_bool(value: object) -> str:
    return "true" if value else "false"


def _topic_id_partition(v: dict[str, Any]) -> str:
    return f"{encode_uuid(v['id'])}:{v['name']}-{v['partition']}"


def _segment_id(v: dict[str, Any]) -> str:
    return f"RemoteLogSegmentId{{topicIdPartition={_topic_id_partition(v['topicIdPartition'])}, id={encode_uuid(v['id'])}}}"


def _custom(raw: bytes | None) -> str:
    return "Optional.empty" if raw is None else f"Optional[CustomMetadata{{{len(raw)} bytes}}]"


def _epochs(v: dict[str, Any]) -> str:
    """A HashMap filled in order (a later entry for an epoch wins) printed as a TreeMap."""
    by_epoch = {e["leaderEpoch"]: e["offset"] for e in v["segmentLeaderEpochs"]}
    if not by_epoch:
        raise _Refused("segmentLeaderEpochs can not be null or empty")
    return "{" + ", ".join(f"{k}={by_epoch[k]}" for k in sorted(by_epoch)) + "}"


def _state(
    v: dict[str, Any], field: str = "remoteLogSegmentState", names: tuple[str, ...] = SEGMENT_STATES
) -> str:
    """A state enum's name by its id; an unknown id is Kafka's ``forId`` null, which the constructors refuse
    (``Objects.requireNonNull``: with a message for segment states, without one for partition deletes)."""
    state_id = v[field]
    if not 0 <= state_id < len(names):
        raise _Refused("state can not be null" if names is SEGMENT_STATES else "null")
    return names[state_id]


def _segment(v: dict[str, Any]) -> str:
    start, end = v["startOffset"], v["endOffset"]
    if start < 0:
        raise _Refused(
            f"Unexpected start offset = {start}. StartOffset for a remote segment cannot be negative"
        )
    if end < start:
        raise _Refused(
            f"Unexpected end offset = {end}. EndOffset for a remote segment cannot be less than startOffset = {start}"
        )
    epochs = _epochs(v)
    state = _state(v)
    return (
        f"RemoteLogSegmentMetadata{{remoteLogSegmentId={_segment_id(v['remoteLogSegmentId'])}, "
        f"startOffset={start}, endOffset={end}, brokerId={v['brokerId']}, maxTimestampMs={v['maxTimestampMs']}, "
        f"eventTimestampMs={v['eventTimestampMs']}, segmentLeaderEpochs={epochs}, "
        f"segmentSizeInBytes={v['segmentSizeInBytes']}, customMetadata={_custom(v['customMetadata'])}, "
        f"state={state}, txnIdxEmpty={_java_bool(v.get('txnIndexEmpty', False))}}}"
    )


def _update(v: dict[str, Any]) -> str:
    state = _state(v)
    return (
        f"RemoteLogSegmentMetadataUpdate{{remoteLogSegmentId={_segment_id(v['remoteLogSegmentId'])}, "
        f"customMetadata={_custom(v['customMetadata'])}, state={state}, "
        f"eventTimestampMs={v['eventTimestampMs']}, brokerId={v['brokerId']}}}"
    )


def _partition_delete(v: dict[str, Any]) -> str:
    state = _state(v, "remotePartitionDeleteState", PARTITION_DELETE_STATES)
    return (
        f"RemotePartitionDeleteMetadata{{topicPartition={_topic_id_partition(v['topicIdPartition'])}, "
        f"state={state}, eventTimestampMs={v['eventTimestampMs']}, brokerId={v['brokerId']}}}"
    )


def _snapshot(v: dict[str, Any]) -> str:
    state = _state(v)
    epochs = _epochs(v)
    return (
        f"RemoteLogSegmentMetadataSnapshot{{segmentId={encode_uuid(v['segmentId'])}, "
        f"startOffset={v['startOffset']}, endOffset={v['endOffset']}, maxTimestampMs={v['maxTimestampMs']}, "
        f"segmentLeaderEpochs={epochs}, segmentSizeInBytes={v['segmentSizeInBytes']}, "
        f"customMetadata={_custom(v['customMetadata'])}, state={state}, "
        f"txnIdxEmpty={_java_bool(v.get('txnIndexEmpty', False))}}}"
    )


_TEXTS = {0: _segment, 1: _update, 2: _partition_delete, 3: _snapshot}


def payload(offset: int, value: bytes | None) -> str:
    """The ``payload:`` text of the ``__remote_log_metadata`` record at ``offset``."""
    try:
        if value is None:
            raise _Refused(NULL_VALUE_TEXT)
        try:
            message = read_message(value, REMOTE_LOG_METADATA_TYPES)
        except MetadataParseError as err:
            raise _Refused(err.kafka_text) from err
        return _TEXTS[message.api_key](message.values)
    except _Refused as refused:
        return f"Error at offset {offset}, skipping. {refused}"
