"""The KRaft metadata log: record framing and schemas, snapshot + log replay, corruption, stray checks.

Records are encoded by hand from Kafka's message definitions (tests/metadata_build.py); one vector is the
byte count Kafka's DumpLogSegments reports for a real record. The real-broker comparison (every record of
a broker's metadata log decoded as Kafka's own decoder reads it) is in test_broker_cluster_metadata.py.
"""

from __future__ import annotations

import pytest

from kafka_log_core.errors import CorruptDataError
from kafka_log_core.format.checkpoints import write_partition_metadata
from kafka_log_core.format.metadata_records import (
    ConfigRecord,
    CorruptMetadataError,
    FeatureLevelRecord,
    OtherRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
    TransactionRecord,
    decode_record,
)
from kafka_log_core.settings.cluster_metadata import read_cluster_metadata
from tests.metadata_build import (
    abort_txn,
    begin_txn,
    config_record,
    control_batch,
    end_txn,
    feature_level,
    frame,
    int32s,
    metadata_batch,
    no_op,
    partition_change,
    partition_record,
    remove_topic,
    string,
    tagged,
    topic_record,
    uuid,
    write_metadata_log,
    write_snapshot,
)

A = "KB9btG56TIKDzbjC1Rj0pA"  # topic ids as partition.metadata writes them
B = "6ey3bQ6uQmisysFLQnVpYA"
C = "CM6EXtYUTLuEbgLUx60m5Q"


# --------------------------------------------------------------------------------------------- records


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (topic_record("orders", A), TopicRecord("orders", A)),
        (partition_record(A, 3, [1, 2], [2], 2), PartitionRecord(A, 3, (1, 2), (2,), 2)),
        (partition_record(A, 0, [1], [1], 1, version=1), PartitionRecord(A, 0, (1,), (1,), 1)),
        (  # v2 with the leader recovery state and eligible-leader-replica tags
            partition_record(
                A, 0, [1], [], -1, version=2, tags=((0, b"\x01"), (1, int32s([1])), (2, int32s(None)))
            ),
            PartitionRecord(A, 0, (1,), (), -1),
        ),
        (partition_change(A, 1, leader=-1, isr=[]), PartitionChangeRecord(A, 1, (), -1, None)),
        (partition_change(A, 1, replicas=[4, 5]), PartitionChangeRecord(A, 1, None, -2, (4, 5))),
        (remove_topic(B), RemoveTopicRecord(B)),
        (
            config_record(2, "orders", "cleanup.policy", "compact"),
            ConfigRecord(2, "orders", "cleanup.policy", "compact"),
        ),
        (config_record(4, "", "log.retention.ms", None), ConfigRecord(4, "", "log.retention.ms", None)),
        (feature_level("metadata.version", 21), FeatureLevelRecord("metadata.version", 21)),
        (begin_txn(), TransactionRecord("begin")),
        (end_txn(), TransactionRecord("end")),
        (abort_txn(), TransactionRecord("abort")),
        (no_op(), OtherRecord(20, 0)),
        (frame(17, 3, b"\xff\xff anything"), OtherRecord(17, 3)),  # a type we do not read: not decoded
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, bytes) else "",
)
def test_records_decode_by_kafkas_schemas(value, expected):
    assert decode_record(value) == expected


def test_a_real_feature_level_record_is_23_bytes():
    """Kafka's DumpLogSegments shows valueSize 23 for {"name":"metadata.version","featureLevel":30}:
    frame 1, type 12, version 0, name (length 16 + 1), int16 30, no tags."""
    value = bytes([1, 12, 0, 17]) + b"metadata.version" + bytes([0, 30, 0])
    assert len(value) == 23
    assert decode_record(value) == FeatureLevelRecord("metadata.version", 30)


def test_unknown_tags_are_skipped_and_known_ones_read():
    body = string("t") + uuid(A) + tagged((0, b"x"), (9, b"\x01\x02\x03"))
    assert decode_record(frame(2, 0, body)) == TopicRecord("t", A)


@pytest.mark.parametrize(
    ("value", "match"),
    [
        (b"\x00\x02\x00", r"frame version 0, expected 1"),
        (frame(2, 1, b""), r"TopicRecord v1: versions up to 0 are known"),
        (
            frame(2, 0, string("orders") + uuid(A)[:10]),
            r"TopicRecord v0: topicId: 16 bytes needed, 10 left",
        ),
        (frame(2, 0, string("orders") + uuid(A) + tagged() + b"\x00"), r"1 bytes left after the last field"),
        (
            frame(2, 0, string(None) + uuid(A) + tagged()),
            r"TopicRecord v0: non-nullable field name was serialized as null",
        ),
        (
            frame(4, 0, b"\x02" + bytes([100]) + b"ab"),
            r"ConfigRecord v0: resourceName: 99 bytes needed, 2 left",
        ),
        (frame(2, 0, b"\xff\xff\xff\xff\xff\x01"), r"unsigned varint longer than 5 bytes"),
        (
            frame(5, 0, b"\x00\x00\x00\x01" + uuid(A) + tagged((1, b"\x00"))),
            r"PartitionChangeRecord v0: leader: 4 bytes needed",
        ),
    ],
)
def test_malformed_records_are_refused_with_the_position(value, match):
    with pytest.raises(CorruptMetadataError, match=match):
        decode_record(value)


# --------------------------------------------------------------------------------------------- replay


def _cluster(tmp_path):
    return tmp_path / "__cluster_metadata-0"


def test_snapshot_then_log_replays_topics_partitions_and_configs(tmp_path):
    d = _cluster(tmp_path)
    write_snapshot(d, 5, 1, [
        feature_level("metadata.version", 21), topic_record("orders", A), partition_record(A, 0, [1, 2], [1, 2], 1),
        config_record(2, "orders", "cleanup.policy", "compact"), config_record(2, "orders", "retention.ms", "1000"),
    ])  # fmt: skip
    write_metadata_log(d, {
        0: [[topic_record("ignored-before-the-snapshot", C)], [no_op()] * 4],  # offsets 0-4: in the snapshot
        5: [[config_record(2, "orders", "retention.ms", None), config_record(2, "orders", "min.cleanable.dirty.ratio", "0.1")],
            [partition_change(A, 0, isr=[1], leader=1), config_record(4, "", "log.retention.ms", "5000")],
            [config_record(4, "1", "log.cleaner.threads", "2"), config_record(4, "2", "log.cleaner.threads", "3")],
            [feature_level("metadata.version", 25), config_record(8, "kafka", "INFO", "x")]],
    })  # fmt: skip
    m = read_cluster_metadata(d)
    assert m.snapshot == "00000000000000000005-0000000001.checkpoint"
    assert m.end_offset == 13 and m.records_read == 8
    assert set(m.topics) == {"orders"}
    assert m.topics["orders"].topic_id == A
    assert m.topics["orders"].partitions[0].replicas == (1, 2)
    assert (m.topics["orders"].partitions[0].isr, m.topics["orders"].partitions[0].leader) == ((1,), 1)
    assert m.topic_configs == {"orders": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.1"}}
    assert m.broker_configs == {"": {"log.retention.ms": "5000"}, "1": {"log.cleaner.threads": "2"},
                                "2": {"log.cleaner.threads": "3"}}  # fmt: skip
    assert m.metadata_version == 25


def test_the_newest_snapshot_wins_and_partial_ones_are_ignored(tmp_path):
    d = _cluster(tmp_path)
    write_snapshot(d, 3, 1, [topic_record("old", A)])
    write_snapshot(d, 7, 2, [topic_record("new", B)])
    (d / "00000000000000000099-0000000002.checkpoint.part").write_bytes(b"half written")
    (d / "00000000000000000050-0000000002.checkpoint.deleted").write_bytes(b"gone")
    write_metadata_log(d, {7: [[partition_record(B, 0, [1], [1], 1)]]})
    m = read_cluster_metadata(d)
    assert set(m.topics) == {"new"} and set(m.topics["new"].partitions) == {0}


def test_removing_a_topic_removes_its_configs_and_the_name_can_return(tmp_path):
    d = _cluster(tmp_path)
    write_metadata_log(d, {0: [
        [topic_record("t", A), partition_record(A, 0, [1], [1], 1), config_record(2, "t", "cleanup.policy", "compact")],
        [remove_topic(A)],
        [topic_record("t", B), partition_record(B, 0, [1], [1], 1), config_record(2, "t", "retention.ms", "5")],
    ]})  # fmt: skip
    m = read_cluster_metadata(d)
    assert m.topics["t"].topic_id == B
    assert m.topic_configs == {"t": {"retention.ms": "5"}}
    assert m.removed_topics == (("t", A),)


def test_metadata_transactions_apply_at_their_end_and_aborted_ones_never(tmp_path):
    d = _cluster(tmp_path)
    write_metadata_log(d, {0: [
        [topic_record("kept", A), begin_txn(), config_record(2, "kept", "retention.ms", "1")],
        [config_record(2, "kept", "retention.bytes", "2"), end_txn()],
        [begin_txn(), topic_record("aborted", B), abort_txn()],
        [begin_txn(), topic_record("unfinished", C)],
    ]})  # fmt: skip
    m = read_cluster_metadata(d)
    assert set(m.topics) == {"kept"}
    assert m.topic_configs == {"kept": {"retention.ms": "1", "retention.bytes": "2"}}
    assert m.unfinished_transaction


def test_control_batches_are_skipped_and_a_partial_last_batch_ignored(tmp_path):
    d = _cluster(tmp_path)
    d.mkdir()
    data = (
        control_batch(0, 2)
        + metadata_batch(1, [topic_record("t", A)])
        + metadata_batch(2, [topic_record("u", B)])
    )
    (d / "00000000000000000000.log").write_bytes(data[:-5])  # a crash cut the last batch
    m = read_cluster_metadata(d)
    assert set(m.topics) == {"t"} and m.end_offset == 2


@pytest.mark.parametrize(
    ("build", "match"),
    [
        ("bad-crc", r"00000000000000000000\.log at position 0: CRC32C mismatch"),
        ("gap", r"00000000000000000009\.log: records 4 to 8 are in neither a snapshot nor the log"),
        (
            "orphan-partition",
            r"00000000000000000000\.log.*metadata record at offset 0: PartitionRecord 0 for topic id",
        ),
        (
            "bad-record",
            r"00000000000000000000\.log at position 0: metadata record at offset 0: frame version 0",
        ),
    ],
)
def test_a_corrupt_metadata_log_names_the_file_and_position(tmp_path, build, match):
    d = _cluster(tmp_path)
    if build == "bad-crc":
        write_metadata_log(d, {0: [[topic_record("t", A)]]})
        log = d / "00000000000000000000.log"
        data = bytearray(log.read_bytes())
        data[-3] ^= 0xFF
        log.write_bytes(bytes(data))
    elif build == "gap":
        write_snapshot(d, 4, 1, [topic_record("t", A)])
        write_metadata_log(d, {9: [[config_record(2, "t", "retention.ms", "1")]]})
    elif build == "orphan-partition":
        write_metadata_log(d, {0: [[partition_record(B, 0, [1], [1], 1)]]})
    else:
        write_metadata_log(d, {0: [[b"\x00\x02\x00"]]})
    with pytest.raises(CorruptDataError, match=match):
        read_cluster_metadata(d)


# --------------------------------------------------------------------------------------------- stray logs


def test_partition_directories_are_checked_as_the_broker_checks_for_strays(tmp_path):
    d = _cluster(tmp_path)
    write_metadata_log(d, {0: [[
        topic_record("t", A), partition_record(A, 0, [1, 2], [1], 1), partition_record(A, 1, [2, 3], [2], 2),
        topic_record("gone", C), remove_topic(C),
    ]]})  # fmt: skip
    view = read_cluster_metadata(d).view(node_id=1)
    ok, other_id, not_replica, missing = (tmp_path / n for n in ("t-0", "t-0-old", "t-1", "t-2"))
    for path, topic_id in ((ok, A), (other_id, B), (not_replica, A)):
        path.mkdir()
        write_partition_metadata(path / "partition.metadata", topic_id)
    assert view.stray_reason(ok, "t", 0) is None
    assert f"has topic id {B}, the cluster metadata's t has id {A}" in view.stray_reason(other_id, "t", 0)
    assert "broker 1 (meta.properties) is not a replica of t-1 (replicas [2, 3])" in view.stray_reason(
        not_replica, "t", 1
    )
    missing.mkdir()
    assert "partition.metadata is missing" in view.stray_reason(missing, "t", 2)
    assert f"topic gone is not in the cluster metadata (deleted: topic id {C})" in view.stray_reason(
        ok, "gone", 0
    )
    write_partition_metadata(missing / "partition.metadata", A)
    assert "t has 2 partitions in the cluster metadata, not 2" in view.stray_reason(missing, "t", 2)
