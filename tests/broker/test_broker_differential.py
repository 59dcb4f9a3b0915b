"""Our compaction against Kafka's own log cleaner, on the same bytes (issue 3, item 5).

One scenario per module:

1. A broker with its cleaner off receives the interop workload (tests/test_broker_interop.py: keyed
   updates, tombstones, null keys, every codec, idempotent and transactional producers, committed and
   aborted transactions, headers; the topic ends up ``compact`` with ``min.cleanable.dirty.ratio=0.01``
   and a week of ``delete.retention.ms``; the last segment is rolled by a record stamped past
   ``segment.ms``) and is stopped cleanly.
2. Its log dir is copied twice. A second broker, cleaner on (``log.cleaner.backoff.ms=100``), starts on
   one copy and cleans each partition once, up to the active segment (``wait_for_broker_cleaning``);
   nothing is produced to it, so nothing rolls and there is no second round. It is stopped cleanly.
3. Our compact job runs on the other copy with ``--now-ms`` = the moment the broker had finished.
4. Kafka's DumpLogSegments reads both directories.

Compared: every surviving record (partition, offset, key, value; tombstones and transaction markers
included), the records' metadata, every batch header (empty batches kept for producers and at the end
of the round included), the cleaner checkpoints. Not compared: how segments are grouped. The broker
groups by ``internal.segment.bytes`` (4096 here) where our job, given its settings by flags here, uses
``segment.bytes``, so the file layout differs while the batches are the same. (Read from the log dir's
metadata log, the jobs use internal.segment.bytes too: test_broker_cluster_metadata compares files.) Not compared either: the delete-horizon values, which are each cleaner's
clock plus ``delete.retention.ms`` (their presence is compared; ours is checked exactly).
"""

from __future__ import annotations

import shutil
import time

import pytest

from tests.broker.test_broker_interop import (
    DELETE_RETENTION_MS,
    PARTITIONS,
    DumpedBatch,
    check_with_dump_log_segments,
    dump_partition,
    produce_workload,
    report_timings,
    run_our_compaction,
    start_with_spark,
)
from tests.kafka_harness import (
    KafkaBroker,
    read_offset_checkpoint,
    run_dump_log_segments,
    segment_files,
    wait_for_broker_cleaning,
)

pytestmark = pytest.mark.broker

TOPIC = "differential"
SIDES = ("kafka", "ours")
#: Batch header fields that must agree (not: position, size and crc, which follow from the layout and
#: the compressor; deleteHorizonMs, compared as present/absent).
BATCH_FIELDS = (
    "baseOffset", "lastOffset", "count", "baseSequence", "lastSequence", "producerId", "producerEpoch",
    "partitionLeaderEpoch", "isTransactional", "isControl", "magic", "compresscodec", "CreateTime",
)  # fmt: skip
RECORD_METADATA = ("CreateTime", "keySize", "valueSize", "sequence", "headerKeys", "coordinatorEpoch")


def has_horizon(batch: DumpedBatch) -> bool:
    return batch.get("deleteHorizonMs") != "OptionalLong.empty"


def horizon(batch: DumpedBatch) -> int:
    text = batch.get("deleteHorizonMs")  # OptionalLong[1234]
    return int(text[text.index("[") + 1 : -1])


def surviving_records(batches: dict[int, list[DumpedBatch]]) -> set[tuple]:
    """(partition, offset, key, value, marker) of every record on disk; None for a null key or value."""
    return {
        (
            b.partition,
            int(r["offset"]),
            r.get("key") if r["keySize"] != "-1" else None,
            r.get("payload", "") if r["valueSize"] != "-1" else None,
            r.get("endTxnMarker"),
        )
        for bs in batches.values()
        for b in bs
        for r in b.records
    }


def record_metadata(batches: dict[int, list[DumpedBatch]]) -> set[tuple]:
    return {
        (b.partition, int(r["offset"]), *(r.get(f) for f in RECORD_METADATA))
        for bs in batches.values()
        for b in bs
        for r in b.records
    }


def batch_headers(batches: dict[int, list[DumpedBatch]]) -> list[tuple]:
    return [
        (b.partition, *(b.get(f) for f in BATCH_FIELDS), has_horizon(b))
        for bs in batches.values()
        for b in bs
    ]


def difference(kafka: set | list, ours: set | list) -> str:
    only_kafka, only_ours = sorted(set(kafka) - set(ours)), sorted(set(ours) - set(kafka))
    return f"only after Kafka's cleaner: {only_kafka[:20]}\nonly after ours: {only_ours[:20]}"


class Outcome:
    def __init__(self) -> None:
        self.first_uncleanable: dict[int, int] = {}
        self.source: dict[int, list[DumpedBatch]] = {}
        self.dumps: dict[str, dict[int, list[DumpedBatch]]] = {}
        self.checkpoints: dict[str, dict[int, int]] = {}
        self.dump_problems: dict[str, list[str]] = {}
        self.kafka_cleaning_started_ms = 0
        self.kafka_cleaned_ms = 0
        self.our_now_ms = 0
        self.job_rows: list[dict] = []
        self.kafka_gap_report = ""  # DumpLogSegments' stderr on Kafka's cleaned segments
        self.timings: dict[str, float] = {}


@pytest.fixture(scope="module")
def outcome(kafka_jars, tmp_path_factory, pytestconfig, request):
    started = time.monotonic()
    work = tmp_path_factory.mktemp("differential")
    result = Outcome()
    timings = result.timings
    source = KafkaBroker(
        work / "source-log-dir", work / "source", {"log.cleaner.enable": "false"}, lib_dir=kafka_jars
    )
    kafka = KafkaBroker(
        work / "kafka-log-dir", work / "kafka", {"log.cleaner.backoff.ms": 100}, lib_dir=kafka_jars
    )
    try:
        t = time.monotonic()
        spark = start_with_spark(source, request)
        timings["broker start + Spark session"] = time.monotonic() - t
        workload = produce_workload(source.bootstrap, TOPIC)
        timings.update(workload.timings)
        source.stop()
        dirs = {side: work / f"{side}-log-dir" for side in SIDES}
        for d in dirs.values():
            shutil.copytree(source.log_dir, d)
        for p in range(PARTITIONS):
            partition_dir = source.log_dir / f"{TOPIC}-{p}"
            result.first_uncleanable[p] = int(segment_files(partition_dir)[-1].name[:20])
            result.source[p] = dump_partition(partition_dir, p)

        t = time.monotonic()
        result.kafka_cleaning_started_ms = int(time.time() * 1000)
        kafka.start()
        result.checkpoints["kafka"] = {
            p: wait_for_broker_cleaning(kafka.log_dir, TOPIC, p, result.first_uncleanable[p], timeout=60)
            for p in range(PARTITIONS)
        }
        result.kafka_cleaned_ms = int(time.time() * 1000)
        kafka.stop()
        timings["Kafka's cleaner (start, clean, stop)"] = time.monotonic() - t

        t = time.monotonic()
        result.our_now_ms = result.kafka_cleaned_ms
        result.job_rows = run_our_compaction(spark, dirs["ours"], TOPIC, result.our_now_ms)
        timings["our compact job"] = time.monotonic() - t
        result.checkpoints["ours"] = {
            tp[1]: offset
            for tp, offset in read_offset_checkpoint(dirs["ours"] / "cleaner-offset-checkpoint").items()
            if tp[0] == TOPIC
        }

        t = time.monotonic()
        for side, d in dirs.items():
            partition_dirs = [d / f"{TOPIC}-{p}" for p in range(PARTITIONS)]
            result.dumps[side] = {p: dump_partition(pd, p) for p, pd in enumerate(partition_dirs)}
            files = [
                f
                for pd in partition_dirs
                for f in sorted(pd.iterdir())
                if f.suffix in (".log", ".index", ".timeindex", ".txnindex")
            ]
            result.dump_problems[side] = check_with_dump_log_segments(files)
        kafka_logs = segment_files(dirs["kafka"] / f"{TOPIC}-0")
        result.kafka_gap_report = run_dump_log_segments(kafka_logs, "--deep-iteration").stderr
        timings["DumpLogSegments"] = time.monotonic() - t
        timings["set-up total"] = time.monotonic() - started
        yield result
        report_timings(pytestconfig, "broker differential", timings)
    finally:
        kafka.stop()
        source.stop()


def test_kafka_cleaned_once_up_to_the_active_segment(outcome):
    """The reference did what the comparison assumes: one round per partition, ending at the active
    segment, with something removed."""
    assert outcome.checkpoints["kafka"] == outcome.first_uncleanable
    source, kafka = surviving_records(outcome.source), surviving_records(outcome.dumps["kafka"])
    assert kafka < source
    assert any(value is None for *_, value, marker in kafka if marker is None)  # a tombstone survived
    assert any(key is None for _, _, key, _, _ in source)
    assert not any(key is None for _, _, key, _, marker in kafka if marker is None)
    assert {marker for *_, marker in kafka} == {None, "COMMIT", "ABORT"}


def test_surviving_records_match_kafkas_cleaner(outcome):
    kafka, ours = surviving_records(outcome.dumps["kafka"]), surviving_records(outcome.dumps["ours"])
    assert ours == kafka, difference(kafka, ours)


def test_record_metadata_matches_kafkas_cleaner(outcome):
    """Timestamps, sequence numbers, header names, null-ness and marker epochs of every survivor."""
    kafka, ours = record_metadata(outcome.dumps["kafka"]), record_metadata(outcome.dumps["ours"])
    assert ours == kafka, difference(kafka, ours)


def test_batch_headers_match_kafkas_cleaner(outcome):
    """Same batches, in the same order, with the same headers: the empty batches kept for active
    producers (rule R2.1) and at the end of the round (R2.2), the batches dropped whole, the codecs of
    rewritten batches, whether a delete horizon was set."""
    kafka, ours = batch_headers(outcome.dumps["kafka"]), batch_headers(outcome.dumps["ours"])
    assert any(b[BATCH_FIELDS.index("count") + 1] == "0" for b in kafka)  # empty batches are part of it
    assert ours == kafka, difference(kafka, ours)


def test_checkpoints_and_horizons(outcome):
    assert outcome.checkpoints["ours"] == outcome.checkpoints["kafka"]
    rows = [r for r in outcome.job_rows if r["topic"] == TOPIC]
    assert {r["status"] for r in rows} == {"cleaned"} and len(rows) == PARTITIONS, rows
    ours = [horizon(b) for bs in outcome.dumps["ours"].values() for b in bs if has_horizon(b)]
    kafka = [horizon(b) for bs in outcome.dumps["kafka"].values() for b in bs if has_horizon(b)]
    assert ours and set(ours) == {outcome.our_now_ms + DELETE_RETENTION_MS}
    assert kafka and all(
        outcome.kafka_cleaning_started_ms + DELETE_RETENTION_MS
        <= h
        <= outcome.kafka_cleaned_ms + DELETE_RETENTION_MS
        for h in kafka
    )


def test_dump_log_segments_judges_both_alike(outcome):
    """Kafka's checker finds nothing wrong with either directory (its offset-gap report, which it prints
    for any compacted segment, is not a problem: Kafka's own output has it too)."""
    assert outcome.dump_problems == {"kafka": [], "ours": []}
    assert "Non-consecutive offsets in" in outcome.kafka_gap_report
