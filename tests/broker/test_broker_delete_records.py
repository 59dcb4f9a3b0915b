"""``retain --log-start-offset`` (offline DeleteRecords) against a real 4.4 broker's DeleteRecords: the
offset -1 means the high watermark, and a topic whose ``cleanup.policy`` lacks ``delete`` is refused
(``Partition.deleteRecordsOnLeader``). Kafka's answers come from the running broker; our planner reads
the stopped broker's partition directories."""

from __future__ import annotations

import pytest

from kafka_log_core.errors import UsageError
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.log.partition_log import LogDirState, PartitionLog
from kafka_log_core.rules.retention import plan_retention
from kafka_log_core.settings.config import LogConfig
from tests.kafka_harness import CLEAN_EXIT_CODES, create_topic, earliest_offsets, produce

pytestmark = pytest.mark.broker


def _open(log_dir, topic: str, partition: int) -> PartitionLog:
    tp = TopicPartition(topic, partition)
    return PartitionLog.open(log_dir, tp, LogDirState.read(log_dir).for_partition(tp))


def test_delete_records_to_the_high_watermark_and_refused_without_delete_in_the_policy(kafka_broker):
    from confluent_kafka import KafkaException
    from confluent_kafka import TopicPartition as CTP
    from confluent_kafka.admin import AdminClient

    broker = kafka_broker()
    create_topic(broker.bootstrap, "trimmed", 2, {})
    create_topic(broker.bootstrap, "kept", 1, {"cleanup.policy": "compact"})
    for topic, partitions in (("trimmed", 2), ("kept", 1)):
        produce(
            broker.bootstrap, topic, [(f"k{i}".encode(), b"v", (), None, i % partitions) for i in range(40)]
        )
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    trimmed = admin.delete_records([CTP("trimmed", 0, -1)], request_timeout=30)
    (low,) = [f.result(30).low_watermark for f in trimmed.values()]
    kept = admin.delete_records([CTP("kept", 0, 5)], request_timeout=30)
    with pytest.raises(KafkaException, match="POLICY_VIOLATION|policy"):
        next(iter(kept.values())).result(30)
    assert earliest_offsets(broker.bootstrap, "kept") == {0: 0}
    assert broker.stop() in CLEAN_EXIT_CODES
    assert low == 20  # Kafka: -1 is the high watermark, here the partition's 20 records

    ours = plan_retention(
        _open(broker.log_dir, "trimmed", 1), LogConfig(retention_ms=-1), 0, log_start_offset_override=-1
    )
    assert ours.new_log_start_offset == low  # partition 1 holds the same 20 records
    with pytest.raises(UsageError, match="cleanup.policy=compact does not include delete"):
        plan_retention(
            _open(broker.log_dir, "kept", 0),
            LogConfig(cleanup_policy=frozenset({"compact"})),
            0,
            log_start_offset_override=5,
        )
