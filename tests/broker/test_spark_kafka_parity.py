"""The ``kafka-log`` data source side by side with Spark's own Kafka source (issue 15).

One real broker for the module (tests/kafka_harness.py), its cleaner off so that nothing changes the log
while it runs:

1. The interop workload (tests/test_broker_interop.py: every codec, keyed updates, tombstones, null keys,
   headers with null values and repeated names, an idempotent producer, committed and aborted
   transactions, a rolled tail and an active segment) on a 3-partition compacted topic; a LogAppendTime
   topic; last, a transaction left open, so the last stable offset stays below the high watermark.
2. While the broker runs, Spark's Kafka source (spark-sql-kafka-0-10, from Maven Central, in the shared
   session) reads each case below; the DataFrames are saved as Parquet. A real consumer reads the
   compacted topic with read_committed.
3. The broker is stopped cleanly. ``kafka-log`` reads its log dir with the same options: the DataFrames
   must be equal (chispa), schema included. The ``latest`` view must equal the state the consumer
   rebuilt, before and after our compaction of a copy (which leaves an uncleaned tail), and the exported
   tables must read back through Spark SQL with the same rows.
"""

from __future__ import annotations

import json
import shutil
import statistics
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from chispa import assert_df_equality

import spark_udfs
from jobs import export
from tests.broker.test_broker_interop import (
    PARTITIONS,
    Workload,
    produce_workload,
    report_timings,
    run_our_compaction,
    start_with_spark,
)
from tests.kafka_harness import (
    COMPRESSION_CODECS,
    SMALL_BATCH_BYTES,
    SMALL_SEGMENT_CONFIG,
    ConsumedRecord,
    KafkaBroker,
    SentRecord,
    consume_all,
    create_topic,
    latest_offsets,
    produce,
)

pytestmark = pytest.mark.broker

TOPIC = "parity"
STAMPED = "stamped"  # message.timestamp.type=LogAppendTime
ORDER = ["topic", "partition", "offset"]


@dataclass
class Parity:
    log_dir: Path
    compacted: Path  # a copy of log_dir, compacted by our job
    cases: dict[str, dict[str, str]]  # options shared by both sources
    spark_kafka: dict[str, Path]  # Spark's Kafka source results, as Parquet
    consumed: list[ConsumedRecord]  # a read_committed consumer's full read of TOPIC
    workload: Workload
    high_watermarks: dict[int, int]
    last_stable: dict[int, int]
    work: Path
    timings: dict[str, float] = field(default_factory=dict)


def _open_transaction(bootstrap: str, records: list[SentRecord]):
    """A transaction begun and flushed, never committed: the producer is returned, still open."""
    from confluent_kafka import Producer

    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "parity-open",
            # open until the broker stops, however long Spark takes (the coordinator aborts a transaction
            # older than this: librdkafka's 60 s default was passed on a loaded machine)
            "transaction.timeout.ms": 900_000,  # the broker's transaction.max.timeout.ms
            "enable.idempotence": True,
            "batch.size": SMALL_BATCH_BYTES,
            "linger.ms": 5,
            "log_level": 0,
        }
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for rec in records:
        producer.produce(
            TOPIC, key=rec.key, value=rec.value, headers=list(rec.headers), partition=rec.partition
        )
    if producer.flush(30):
        raise AssertionError("the open transaction's records were not delivered")
    return producer


def _cases(workload: Workload, stamped: list, ends: dict[int, int], stable: dict[int, int]) -> dict:
    """Each case's options, in Spark's formats; offsets and timestamps picked from what was produced."""
    ts = statistics.median(
        r.timestamp for r in workload.records if r.offset < workload.tail_offsets[r.partition]
    )
    stamped_ts = sorted(d.timestamp for d in stamped)
    return {
        "read_uncommitted, headers": {"subscribe": TOPIC, "includeHeaders": "true"},
        "read_committed, headers": {
            "subscribe": TOPIC, "includeHeaders": "true", "kafka.isolation.level": "read_committed",
        },
        "read_committed, starting and ending offsets": {
            "subscribe": TOPIC, "kafka.isolation.level": "read_committed",
            "startingOffsets": json.dumps({TOPIC: {"0": 7, "1": -2, "2": ends[2] // 2}}),
            "endingOffsets": json.dumps({TOPIC: {"0": -1, "1": stable[1] - 3, "2": stable[2] - 1}}),
        },
        "read_uncommitted, startingTimestamp, assign": {
            "assign": json.dumps({TOPIC: [0, 2]}), "includeHeaders": "true", "startingTimestamp": str(int(ts)),
            "endingOffsets": json.dumps({TOPIC: {"0": ends[0] - 5, "2": -1}}),
        },
        "LogAppendTime, subscribePattern, timestamps": {
            "subscribePattern": f"{STAMPED}|nothing.*",
            "startingOffsetsByTimestamp": json.dumps({STAMPED: {"0": stamped_ts[3], "1": stamped_ts[3]}}),
            "endingTimestamp": str(stamped_ts[-4]),
        },
    }  # fmt: skip


@pytest.fixture(scope="module")
def parity(kafka_jars, tmp_path_factory, pytestconfig, request):
    started = time.monotonic()
    work = tmp_path_factory.mktemp("parity")
    broker = KafkaBroker(
        work / "log-dir", work / "broker", {"log.cleaner.enable": "false"}, lib_dir=kafka_jars
    )
    open_producer = None
    try:
        t = time.monotonic()
        spark = start_with_spark(broker, request)
        timings = {"broker start + Spark session": time.monotonic() - t}
        workload = produce_workload(broker.bootstrap, TOPIC)
        timings.update(workload.timings)
        t = time.monotonic()
        create_topic(
            broker.bootstrap, STAMPED, 2, {"message.timestamp.type": "LogAppendTime", **SMALL_SEGMENT_CONFIG}
        )
        sent = [
            SentRecord(f"s{i % 5}".encode(), f"stamped {i}".encode() * 9, (("n", str(i).encode()),) if i % 2 else (),
                       None, i % 2)
            for i in range(40)
        ]  # fmt: skip
        stamped = []
        for n, codec in enumerate(COMPRESSION_CODECS[:2]):
            stamped += produce(broker.bootstrap, STAMPED, sent[20 * n : 20 * n + 20], compression=codec)
        opened = [
            SentRecord(b"key-00", f"open {p}".encode(), (), None, p)
            for p in range(PARTITIONS)
            for _ in range(3)
        ]
        open_producer = _open_transaction(broker.bootstrap, opened)
        high_watermarks = latest_offsets(broker.bootstrap, TOPIC)
        last_stable = latest_offsets(broker.bootstrap, TOPIC, isolation_level="read_committed")
        assert all(last_stable[p] < high_watermarks[p] for p in range(PARTITIONS)), (
            last_stable,
            high_watermarks,
        )
        timings["more topics, open transaction"] = time.monotonic() - t

        t = time.monotonic()
        consumed = consume_all(broker.bootstrap, TOPIC, isolation_level="read_committed")
        cases = _cases(workload, stamped, high_watermarks, last_stable)
        spark_kafka = {}
        for n, (name, options) in enumerate(cases.items()):
            reader = spark.read.format("kafka").option("kafka.bootstrap.servers", broker.bootstrap)
            for key, value in options.items():
                reader = reader.option(key, value)
            spark_kafka[name] = work / f"spark-kafka-{n}"
            reader.load().write.parquet(str(spark_kafka[name]))
        timings["Spark's Kafka source"] = time.monotonic() - t
        t = time.monotonic()
        broker.stop()
        timings["stop"] = time.monotonic() - t

        t = time.monotonic()
        compacted = work / "compacted"
        shutil.copytree(broker.log_dir, compacted)
        rows = run_our_compaction(spark, compacted, TOPIC, int(time.time() * 1000))
        assert {r["status"] for r in rows if r["topic"] == TOPIC} == {"cleaned"}, rows
        timings["our compaction of a copy"] = time.monotonic() - t
        spark_udfs.register(spark)
        timings["set-up total"] = time.monotonic() - started
        yield Parity(broker.log_dir, compacted, cases, spark_kafka, consumed, workload, high_watermarks,
                     last_stable, work, timings)  # fmt: skip
        timings["module total (set-up and tests)"] = time.monotonic() - started
        report_timings(pytestconfig, "Spark Kafka parity", timings)
    finally:
        broker.stop()
        del open_producer


def kafka_log(spark, path, **options):
    reader = spark.read.format("kafka-log")
    for key, value in options.items():
        reader = reader.option(key, value)
    return reader.load(path if isinstance(path, list) else str(path))


def read_once_sorted(df):
    """``df`` sorted by ORDER, its source read once: a sort reads its input twice (first the range
    partitioner's sample), and every read runs each of the many small splits again."""
    return df.localCheckpoint().orderBy(ORDER)


# ------------------------------------------------------------------------------------------ records
CASES = [
    "read_uncommitted, headers",
    "read_committed, headers",
    "read_committed, starting and ending offsets",
    "read_uncommitted, startingTimestamp, assign",
    "LogAppendTime, subscribePattern, timestamps",
]


@pytest.mark.parametrize("case", CASES)
def test_kafka_log_equals_sparks_kafka_source(spark, parity, case):
    theirs = spark.read.parquet(str(parity.spark_kafka[case]))
    # Small splits: several Spark partitions per Kafka partition, and the same rows.
    ours = kafka_log(spark, parity.log_dir, maxBytesPerSplit="2048", **parity.cases[case])
    if case != CASES[-1]:
        assert ours.rdd.getNumPartitions() > 2 * PARTITIONS
    assert theirs.count() > 10
    assert_df_equality(read_once_sorted(ours), theirs.orderBy(ORDER))


def test_the_cases_tell_the_isolation_levels_and_timestamp_types_apart(spark, parity):
    """What the comparisons above cover: aborted and open-transaction records in read_uncommitted only,
    headers with null values, every timestamp type the topics hold."""
    read = {case: spark.read.parquet(str(parity.spark_kafka[case])) for case in CASES[:2]}
    uncommitted = {(r.partition, r.offset) for r in read[CASES[0]].select("partition", "offset").collect()}
    committed = {(r.partition, r.offset) for r in read[CASES[1]].select("partition", "offset").collect()}
    aborted = {(r.partition, r.offset) for r in parity.workload.records if r.aborted}
    assert committed < uncommitted and aborted <= uncommitted - committed
    assert max(o for p, o in uncommitted if p == 0) >= parity.last_stable[0]  # the open transaction
    assert max(o for p, o in committed if p == 0) < parity.last_stable[0]
    assert read[CASES[0]].where("exists(headers, h -> h.value is null)").count() > 0
    stamped = spark.read.parquet(str(parity.spark_kafka[CASES[-1]]))
    assert {r.timestampType for r in stamped.select("timestampType").distinct().collect()} == {1}
    assert {r.timestampType for r in read[CASES[0]].select("timestampType").distinct().collect()} == {0}


def test_several_log_dirs_in_one_load(spark, parity, tmp_path):
    """A JBOD broker: the partitions spread over two log dirs read as one, by list or by commas."""
    dirs = [tmp_path / "d1", tmp_path / "d2"]
    for d in dirs:
        d.mkdir()
    for name in (
        "replication-offset-checkpoint",
        "log-start-offset-checkpoint",
        "recovery-point-offset-checkpoint",
    ):
        for d in dirs:
            shutil.copy(parity.log_dir / name, d / name)
    for n, partition_dir in enumerate(sorted(parity.log_dir.glob(f"{TOPIC}-*"))):
        shutil.copytree(partition_dir, dirs[n % 2] / partition_dir.name)
    theirs = spark.read.parquet(str(parity.spark_kafka[CASES[1]]))
    options = parity.cases[CASES[1]]
    for path in ([str(d) for d in dirs], ",".join(str(d) for d in dirs)):
        assert_df_equality(read_once_sorted(kafka_log(spark, path, **options)), theirs.orderBy(ORDER))


def test_batch_columns_show_what_only_the_log_knows(spark, parity):
    """Opt-in columns: every producer codec reached the log as sent; aborted records are flagged."""
    df = kafka_log(spark, parity.log_dir, subscribe=TOPIC, includeBatchColumns="true")
    codecs = {r.compression for r in df.select("compression").distinct().collect()}
    assert codecs == set(COMPRESSION_CODECS)
    flagged = {
        (r.partition, r.offset) for r in df.where("is_aborted").select("partition", "offset").collect()
    }
    assert flagged == {(r.partition, r.offset) for r in parity.workload.records if r.aborted}
    segments = kafka_log(spark, parity.log_dir, subscribe=TOPIC, level="segments")
    assert segments.count() > 2 * PARTITIONS  # small segments: the records span several files


def test_transaction_markers_are_batches_not_records(spark, parity):
    """Every offset below the high watermark of a never-compacted log is a record Spark's Kafka source
    returned or a transaction marker; the markers are exactly the control batches of the batches level."""
    delivered = spark.read.parquet(str(parity.spark_kafka[CASES[0]])).select("partition", "offset").collect()
    by_partition: dict[int, set[int]] = {p: set() for p in range(PARTITIONS)}
    for r in delivered:
        by_partition[r.partition].add(r.offset)
    batches = kafka_log(spark, parity.log_dir, subscribe=TOPIC, level="batches").where("is_control")
    markers = {(r.partition, r.base_offset) for r in batches.select("partition", "base_offset").collect()}
    expected = {
        (p, o)
        for p in range(PARTITIONS)
        for o in range(parity.high_watermarks[p])
        if o not in by_partition[p]
    }
    assert markers == expected and len(markers) >= 2 * PARTITIONS  # a COMMIT and an ABORT at least


# ------------------------------------------------------------------------------------------ latest, export
def consumer_state(consumed: list[ConsumedRecord]) -> dict[tuple[int, bytes], tuple]:
    """The table a consumer builds from the topic: the last value of each key, deleted by a tombstone."""
    state: dict[tuple[int, bytes], tuple] = {}
    for r in consumed:
        if r.key is None:
            continue
        if r.value is None:
            state.pop((r.partition, r.key), None)
        else:
            state[(r.partition, r.key)] = (r.offset, r.value)
    return state


def _state_of(df) -> dict[tuple[int, bytes], tuple]:
    rows = df.select("partition", "key", "offset", "value").collect()
    state = {(r.partition, bytes(r.key)): (r.offset, bytes(r.value)) for r in rows}
    assert len(state) == len(rows), "one row per key"
    return state


def test_latest_view_is_the_state_a_consumer_rebuilds(spark, parity):
    expected = consumer_state(parity.consumed)
    assert len(expected) > 20
    assert any(r.value is None for r in parity.consumed if r.key is not None)  # tombstones were read
    for log_dir in (parity.log_dir, parity.compacted):  # as the broker wrote it; compacted, uncleaned tail
        latest = kafka_log(spark, log_dir, level="latest", subscribe=TOPIC)
        assert _state_of(latest) == expected


@pytest.mark.parametrize("fmt", ["parquet", "delta"])
def test_exported_tables_read_back_through_spark_sql(spark, parity, fmt):
    out = parity.work / f"export-{fmt}-{uuid.uuid4().hex}"
    latest = export.ExportSettings(str(out / "latest"), "latest", fmt)
    rows = export.run(spark, [str(parity.log_dir)], TOPIC, latest)
    expected = consumer_state(parity.consumed)
    assert [(r["partition"], r["status"]) for r in rows] == [(p, "exported") for p in range(PARTITIONS)]
    assert sum(r["rows"] for r in rows) == len(expected)
    table = spark.sql(f"SELECT * FROM {fmt}.`{out / 'latest'}`")
    assert _state_of(table) == expected

    records = export.ExportSettings(str(out / "records"), "records", fmt, include_headers=True)
    export.run(spark, [str(parity.log_dir)], f"{TOPIC}|{STAMPED}", records)
    theirs = spark.read.parquet(str(parity.spark_kafka[CASES[1]]))
    got = spark.sql(
        f"SELECT {', '.join(theirs.columns)} FROM {fmt}.`{out / 'records'}` WHERE topic = '{TOPIC}'"
    )
    assert_df_equality(got.orderBy(ORDER), theirs.orderBy(ORDER))
    partitions = {
        r.topic for r in spark.sql(f"SELECT DISTINCT topic FROM {fmt}.`{out / 'records'}`").collect()
    }
    assert partitions == {TOPIC, STAMPED}
