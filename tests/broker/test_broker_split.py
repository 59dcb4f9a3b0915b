"""A real broker reads a split-cleaned partition (issue 18).

The interop workload (tests/test_broker_interop.py: keyed updates, tombstones, null keys, every codec,
idempotent and transactional producers, committed and aborted transactions, headers) goes to a broker
with its cleaner off, which is stopped cleanly. Its log dir is copied twice:

* a broker with its cleaner on (a dedupe buffer holding every key) cleans one copy, then serves it to a
  ``read_committed`` consumer;
* our compact job cleans the other with ``--split-above 0`` (every partition in split tasks: pass 1
  per segment, the combine by digest, pass 2 per group), then a broker with its cleaner off serves it
  to the same consumer.

Both consumers must read the same records (partition, offset, key, value, headers, timestamp). Three
broker starts in all.
"""

from __future__ import annotations

import re
import shutil

import pytest

from tests.broker.test_broker_interop import (
    CLEANED_TOPIC_CONFIG,
    DEDUPE_BUFFER_BYTES,
    PARTITIONS,
    SEGMENT_MS,
    produce_workload,
    start_with_spark,
)
from tests.kafka_harness import KafkaBroker, consume_all, segment_files, wait_for_broker_cleaning

pytestmark = pytest.mark.broker

TOPIC = "splitread"


def _committed(broker: KafkaBroker) -> list[tuple]:
    read = consume_all(broker.bootstrap, TOPIC, isolation_level="read_committed")
    return sorted((r.partition, r.offset, r.key, r.value, tuple(r.headers), r.timestamp) for r in read)


@pytest.fixture(scope="module")
def served(kafka_jars, tmp_path_factory, request):
    import time

    from jobs import compact
    from kafka_log_core.settings.config import load_config
    from kafka_log_core.work.tasks import JobOptions

    work = tmp_path_factory.mktemp("split-broker")
    source = KafkaBroker(
        work / "source-log-dir", work / "source", {"log.cleaner.enable": "false"}, lib_dir=kafka_jars
    )
    kafka = KafkaBroker(
        work / "kafka-log-dir", work / "kafka", {"log.cleaner.backoff.ms": 100}, lib_dir=kafka_jars
    )
    ours = KafkaBroker(
        work / "ours-log-dir", work / "ours", {"log.cleaner.enable": "false"}, lib_dir=kafka_jars
    )
    try:
        spark = start_with_spark(source, request)
        produce_workload(source.bootstrap, TOPIC)
        source.stop()
        for d in (kafka.log_dir, ours.log_dir):
            shutil.copytree(source.log_dir, d)
        first_uncleanable = {
            p: int(segment_files(source.log_dir / f"{TOPIC}-{p}")[-1].name[:20]) for p in range(PARTITIONS)
        }
        kafka.start()
        for p in range(PARTITIONS):
            wait_for_broker_cleaning(kafka.log_dir, TOPIC, p, first_uncleanable[p], timeout=60)
        now = int(time.time() * 1000)
        kafka_read = _committed(kafka)
        kafka.stop()

        configs = load_config(
            None,
            (),
            [f"{TOPIC}:{k}={v}" for k, v in {**CLEANED_TOPIC_CONFIG, "segment.ms": SEGMENT_MS}.items()],
            [f"log.cleaner.dedupe.buffer.size={DEDUPE_BUFFER_BYTES}"],
        )
        rows = compact.run(
            spark, [str(ours.log_dir)], re.escape(TOPIC), configs, JobOptions(now_ms=now, split_above=0)
        )
        ours.start()
        ours_read = _committed(ours)
        ours.stop()
        yield kafka_read, ours_read, rows
    finally:
        ours.stop()
        kafka.stop()
        source.stop()


def test_every_partition_was_cleaned_in_split_tasks(served):
    _, _, rows = served
    assert len(rows) == PARTITIONS
    for row in rows:
        assert row["status"] == "cleaned" and "split cleaning" in row["reason"], row


def test_read_committed_consumer_reads_what_kafkas_cleaner_leaves(served):
    kafka_read, ours_read, _ = served
    assert kafka_read, "the workload left committed records"
    only_kafka = sorted(set(kafka_read) - set(ours_read))[:10]
    only_ours = sorted(set(ours_read) - set(kafka_read))[:10]
    assert ours_read == kafka_read, f"only after Kafka's cleaner: {only_kafka}\nonly after ours: {only_ours}"
