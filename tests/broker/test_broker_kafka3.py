"""A Kafka 3.x log dir (a 3.9.1 broker from Maven Central, KRaft) with 16 KiB segments (issue 12).

1. A 3.9.1 broker, its cleaner off, with ``offsets.topic.segment.bytes=16384`` (legal before 4.x) gets a
   topic with ``segment.bytes=16384`` (also legal before 4.1): keyed updates over many segments, then a
   batch of unkeyed records (produced while the topic is still ``delete``; the policy is switched to
   ``compact`` afterwards), then one record stamped past ``segment.ms`` that rolls the segment -- so the
   unkeyed batch is the last batch of the cleaning round. A consumer group commits its offset many
   times, filling ``__consumer_offsets`` with 16 KiB segments of superseded commits.
2. The log dir is copied; a second 3.9.1 broker with its cleaner on cleans one copy; our ``compact`` job
   cleans another with only ``--config`` (that broker's server.properties): the release (3.9, from the
   metadata log's ``metadata.version``), the small segment sizes and the compacted topics come from the
   log dir itself.

Compared: segment file names and ``.log`` bytes, and cleaner checkpoints, for both partitions. 3.9.0 and
3.9.1 lack KAFKA-17076 (spec rule R2.2: keep the round's last batch, as an empty batch), which 3.9.2 and
4.0 to 4.3 have (4.4 keys it on the high watermark instead, KAFKA-20452): a 3.9.2 broker cleans a third
copy and our ``compact --kafka-version 3.9.2`` a fourth; they keep that batch empty where Kafka 3.9.1
dropped it, so the release-dependent rule is visible in the bytes of two real brokers.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from jobs import compact
from tests.broker.test_broker_interop import (
    alter_topic_config,
    report_timings,
    source_and_reference,
    start_with_spark,
)
from tests.kafka_harness import (
    KafkaBroker,
    SentRecord,
    create_topic,
    describe_topic_configs,
    log_files,
    produce,
    read_offset_checkpoint,
    run_dump_log_segments,
    segment_files,
    wait_for_broker_cleaning,
)

pytestmark = pytest.mark.broker

SEGMENT_BYTES = 16384
SEGMENT_MS = 600_000
SOURCE_PROPS = {
    "offsets.topic.segment.bytes": SEGMENT_BYTES,
    "log.cleaner.enable": "false",
    "log.retention.check.interval.ms": 3_600_000,
}
REFERENCE_PROPS = {
    "offsets.topic.segment.bytes": SEGMENT_BYTES,
    "log.cleaner.backoff.ms": 100,
    "log.retention.check.interval.ms": 500,
}
TOPIC = "small"
PARTITIONS = (f"{TOPIC}-0", "__consumer_offsets-0")


def _commit_many(bootstrap: str, commits: int) -> None:
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"committer-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
        }
    )
    try:
        for offset in range(commits):
            consumer.commit(offsets=[TopicPartition(TOPIC, 0, offset)], asynchronous=False)
    finally:
        consumer.close()


def dumped_batches(partition_dir: Path, lib_dir: Path) -> list[tuple[int, int, int]]:
    """(baseOffset, lastOffset, count) of every batch, as the DumpLogSegments of ``lib_dir``'s jars prints them."""
    dumped = run_dump_log_segments(segment_files(partition_dir), lib_dir=lib_dir)
    assert dumped.returncode == 0, dumped.stderr
    return [
        (int(m[1]), int(m[2]), int(m[3]))
        for m in re.finditer(r"baseOffset: (\d+) lastOffset: (\d+) count: (\d+)", dumped.stdout)
    ]


@pytest.fixture(scope="module")
def kafka3(kafka3_jars, kafka392_jars, tmp_path_factory, pytestconfig, request):
    started = time.monotonic()
    timings: dict[str, float] = {}
    work = tmp_path_factory.mktemp("kafka3")
    out: dict = {"lib": kafka3_jars}
    with source_and_reference(work, kafka3_jars, SOURCE_PROPS, REFERENCE_PROPS) as (source, reference):
        t = time.monotonic()
        spark = start_with_spark(source, request)
        timings["broker start + Spark"] = time.monotonic() - t
        t = time.monotonic()
        boot = source.bootstrap
        create_topic(boot, TOPIC, 1, {"cleanup.policy": "delete", "segment.bytes": SEGMENT_BYTES,
                                      "segment.ms": SEGMENT_MS, "min.cleanable.dirty.ratio": "0.01"})  # fmt: skip
        now = int(time.time() * 1000)
        updates = [
            SentRecord(f"key-{i % 60:02d}".encode(), f"v{i}.".encode() * 20, (), now + i, 0)
            for i in range(1500)
        ]
        produce(boot, TOPIC, updates)
        produce(
            boot,
            TOPIC,
            [SentRecord(None, f"unkeyed-{i}".encode(), (), now + 2000 + i, 0) for i in range(5)],
            linger_ms=50,
        )
        alter_topic_config(boot, TOPIC, {"cleanup.policy": "compact"})
        produce(boot, TOPIC, [SentRecord(b"roll", b"past segment.ms", (), now + 2 * SEGMENT_MS, 0)])
        _commit_many(boot, 1500)
        out["described"] = {t_: describe_topic_configs(boot, t_) for t_ in (TOPIC, "__consumer_offsets")}
        timings["produce and commit"] = time.monotonic() - t
        source.stop()

        dirs = {side: work / f"{side}-log-dir" for side in ("ours", "ours-3.9.2")}
        for d in dirs.values():
            shutil.copytree(source.log_dir, d)
        shutil.copytree(source.log_dir, reference.log_dir)
        dirs["kafka"] = reference.log_dir
        reference_392 = KafkaBroker(
            work / "kafka-3.9.2-log-dir", work / "kafka-3.9.2", REFERENCE_PROPS, lib_dir=kafka392_jars
        )
        shutil.copytree(source.log_dir, reference_392.log_dir)
        dirs["kafka-3.9.2"] = reference_392.log_dir
        out["dirs"], out["source"] = dirs, source.log_dir
        out["first_uncleanable"] = {
            name: int(segment_files(source.log_dir / name)[-1].name[:20]) for name in PARTITIONS
        }

        for broker in (reference, reference_392):
            t = time.monotonic()
            try:
                broker.start()
                for name in PARTITIONS:
                    topic, partition = name.rsplit("-", 1)
                    first_uncleanable = out["first_uncleanable"][name]
                    wait_for_broker_cleaning(broker.log_dir, topic, int(partition), first_uncleanable)
            finally:
                broker.stop()
            timings[f"reference broker {broker.release.version} cleans"] = time.monotonic() - t
        done_ms = int(time.time() * 1000)

        t = time.monotonic()
        runner = CliRunner()
        for side, extra in (("ours", []), ("ours-3.9.2", ["--kafka-version", "3.9.2"])):
            args = [
                "--log-dir",
                dirs[side],
                "--config",
                reference.properties_path,
                "--now-ms",
                done_ms,
                "--output",
                "json",
                *extra,
            ]
            result = runner.invoke(compact.command, [str(a) for a in args], catch_exceptions=False)
            out[side] = (result.exit_code, json.loads(result.stdout), result.stderr)
        timings["our compact (twice)"] = time.monotonic() - t
        del spark
        timings["total"] = time.monotonic() - started
        yield out
        report_timings(pytestconfig, "kafka 3.9.1", timings)


def test_the_3x_log_dir_is_accepted_with_its_own_settings(kafka3):
    code, rows, stderr = kafka3["ours"]
    assert code == 0, rows
    by_name = {f"{r['topic']}-{r['partition']}": r for r in rows}
    assert {by_name[name]["status"] for name in PARTITIONS} == {"cleaned"}
    assert "Kafka 3.9 rules (the cluster metadata says metadata.version 3.9-IV0" in stderr
    # small segments were legal in 3.9: the broker described them, and they shaped its segments
    assert kafka3["described"][TOPIC]["segment.bytes"] == (str(SEGMENT_BYTES), "DYNAMIC_TOPIC_CONFIG")
    assert kafka3["described"]["__consumer_offsets"]["segment.bytes"] == (
        str(SEGMENT_BYTES),
        "DYNAMIC_TOPIC_CONFIG",
    )
    for name in PARTITIONS:
        assert len(segment_files(kafka3["source"] / name)) >= 8, name


def test_segment_files_after_our_compaction_are_the_ones_kafkas_cleaner_leaves(kafka3):
    for name in PARTITIONS:
        theirs, ours = log_files(kafka3["dirs"]["kafka"] / name), log_files(kafka3["dirs"]["ours"] / name)
        assert sorted(ours) == sorted(theirs), name
        # 16 KiB groups: Kafka cleans each segment alone and keeps the emptied ones as 0-byte segments
        assert any(data == b"" for data in theirs.values()), name
        for file_name, data in theirs.items():
            assert ours[file_name] == data, f"{name}/{file_name} differs from Kafka 3.9.1's"
    kafka = read_offset_checkpoint(kafka3["dirs"]["kafka"] / "cleaner-offset-checkpoint")
    ours = read_offset_checkpoint(kafka3["dirs"]["ours"] / "cleaner-offset-checkpoint")
    assert ours == kafka


def test_the_round_end_rule_follows_the_release(kafka3):
    """Kafka 3.9.1 drops the round's last batch when nothing in it survives; 3.9.2 (as 4.0 to 4.3) keeps it
    empty. Our compaction under --kafka-version 3.9.2 leaves the files a real 3.9.2 broker's cleaner leaves."""
    code, rows, _ = kafka3["ours-3.9.2"]
    assert code == 0, rows
    dirs, bound = kafka3["dirs"], kafka3["first_uncleanable"][f"{TOPIC}-0"]
    kafka = dumped_batches(dirs["kafka"] / f"{TOPIC}-0", kafka3["lib"])
    kafka_392 = dumped_batches(dirs["kafka-3.9.2"] / f"{TOPIC}-0", kafka3["lib"])
    before = [b for b in kafka if b[1] < bound]
    assert before[-1][1] + 1 < bound  # Kafka 3.9.1: the unkeyed batch at the end of the round is gone
    (kept,) = [b for b in kafka_392 if b not in kafka]
    assert kept[1] + 1 == bound and kept[2] == 0  # Kafka 3.9.2: kept, empty, ending at the round's bound
    assert [b for b in kafka_392 if b != kept] == kafka
    for name in PARTITIONS:
        assert log_files(dirs["ours-3.9.2"] / name) == log_files(dirs["kafka-3.9.2"] / name), name


def test_the_3x_metadata_log_dumps_as_kafka_44s_cluster_metadata_decoder_prints_it(kafka3, kafka_jars):
    """What a 3.9 broker's metadata log holds (its registration, feature levels, topics, configs) is read
    and printed by our --cluster-metadata-decoder as by Kafka 4.4's own tool."""
    from tests.broker.test_broker_dump import _compare_with_kafka, _kafka_dump

    metadata = kafka3["source"] / "__cluster_metadata-0"
    files = sorted(metadata.glob("*.checkpoint")) + sorted(metadata.glob("*.log"))
    _compare_with_kafka(_kafka_dump(), files, ["--cluster-metadata-decoder"])
    printed = run_dump_log_segments(files, "--cluster-metadata-decoder", lib_dir=kafka_jars).stdout
    assert '"type":"REGISTER_BROKER_RECORD"' in printed and "Error at" not in printed
