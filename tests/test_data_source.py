"""The ``kafka-log`` data source against directories written with kafka-python's record builders and
against a real broker: the expected rows are built from what each test wrote (or what a real consumer
read), never from the reader under test."""

from __future__ import annotations

import os
import random
import re
import struct
import time

import crc32c
import pytest
from chispa import assert_df_equality
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka_harness import (
    CLEAN_EXIT_CODES,
    COMPRESSION_CODECS,
    SMALL_SEGMENT_CONFIG,
    SentRecord,
    Transaction,
    consume_all,
    create_topic,
    produce,
    produce_transactions,
)
from logbuild import TS, write_segment

import spark_udfs
from kafka_log_core import checkpoints
from kafka_log_core.filenames import TopicPartition
from spark_udfs.kafka_log_source import SCHEMAS

pytestmark = pytest.mark.spark
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
LEGACY_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}
TYPES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}
ORDER = ["topic", "partition", "offset"]


@pytest.fixture(scope="module")
def kafka_log(spark):
    spark_udfs.register(spark)
    return spark


def _read(spark, path, **options):
    reader = spark.read.format("kafka-log")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(str(path))


def _executed_plan(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


# ------------------------------------------------------------------------------------------ kafka-python batches
SAMPLE = [  # key, value, headers
    (b"k1", b"v1", [("h", b"x")]),
    (None, b"no-key", []),
    (b"k2", None, [("a", None), ("b", b"")]),
    (b"", b"", []),
    (b"k3" * 50, b"v" * 3000, [("h", b"y"), ("h", b"z")]),
]


def kp_batch(base, records, *, codec=0, ts=TS, pid=-1, epoch=-1, seq=-1, txn=False, leader_epoch=0):
    """A v2 batch from kafka-python; returns (bytes, expected rows minus topic/partition)."""
    builder = DefaultRecordBatchBuilder(2, codec, txn, pid, epoch, seq, 1 << 22)
    for i, (k, v, hdrs) in enumerate(records):
        builder.append(i, timestamp=ts + i, key=k, value=v, headers=hdrs)
    data = bytearray(builder.build())
    data[0:8] = base.to_bytes(8, "big")
    data[12:16] = leader_epoch.to_bytes(4, "big", signed=True)  # outside the CRC, set by the broker
    written = data[22] & 0x07  # kafka-python sends a batch uncompressed when compression does not pay
    attrs = (CODECS_BY_ID[written], txn, False, False, pid, epoch, seq, leader_epoch, 2)
    rows = [
        (base + i, ts + i, "CreateTime", k, v, [tuple(h) for h in hdrs], *attrs)
        for i, (k, v, hdrs) in enumerate(records)
    ]
    return bytes(data), rows


CODECS_BY_ID = {v: k for k, v in CODECS.items()}


def kp_marker(base, pid, epoch, commit, *, ts=TS, coordinator_epoch=4):
    """A transaction marker: kafka-python cannot build control batches, so set the control bit of a
    transactional batch holding the marker record (key version 0 + type, value version 0 + epoch)."""
    key, value = struct.pack(">hh", 0, 1 if commit else 0), struct.pack(">hi", 0, coordinator_epoch)
    builder = DefaultRecordBatchBuilder(2, 0, True, pid, epoch, -1, 1 << 20)
    builder.append(0, timestamp=ts, key=key, value=value, headers=[])
    data = bytearray(builder.build())
    data[0:8] = base.to_bytes(8, "big")
    data[12:16] = (0).to_bytes(4, "big")
    data[22] |= 0x20  # attributes (int16 at 21): control
    data[17:21] = crc32c.crc32c(bytes(data[21:])).to_bytes(4, "big")
    return bytes(data), [
        (base, ts, "CreateTime", key, value, [], "none", True, True, False, pid, epoch, -1, 0, 2)
    ]


def kp_legacy(base, records, *, magic, codec=0, ts=TS):
    """Legacy messages from kafka-python at absolute offsets base.. (a wrapper when compressed)."""
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (k, v) in enumerate(records):
        relative = i if (codec and magic == 1) else base + i  # v1 wrappers hold relative inner offsets
        builder.append(relative, timestamp=ts + i if magic else None, key=k, value=v)
    data = bytearray(builder.build())
    if codec:
        data[0:8] = (base + len(records) - 1).to_bytes(8, "big")  # a wrapper carries its last offset
    t = (lambda i: ts + i) if magic else (lambda i: -1)
    kind = "CreateTime" if magic else "NoTimestampType"
    attrs = (CODECS_BY_ID[data[17] & 0x07], False, False, False, -1, -1, -1, -1, magic)  # attributes byte
    return bytes(data), [(base + i, t(i), kind, k, v, [], *attrs) for i, (k, v) in enumerate(records)]


def _write(log_dir, topic, partition, segments, **kw):
    """segments: base -> [(bytes, rows)]; returns the expected rows with topic and partition."""
    expected = []
    for base, batches in segments.items():
        write_segment(log_dir / f"{topic}-{partition}", base, [b for b, _ in batches], **kw)
        expected += [(topic, partition, *row) for _, rows in batches for row in rows]
    return expected


def _kafka_python_dir(log_dir):
    expected = []
    v2 = {0: [kp_batch(5 * i, SAMPLE, codec=c, ts=TS + 100 * i) for i, c in enumerate(CODECS.values())]}
    v2[25] = [
        kp_batch(25, SAMPLE[:2], codec=3, pid=7, epoch=3, seq=11, leader_epoch=5),
        kp_batch(27, SAMPLE[:3], codec=4, pid=9, epoch=0, seq=0, txn=True, leader_epoch=5),
        kp_marker(30, 9, 0, commit=True),
        kp_batch(31, SAMPLE[2:4], pid=9, epoch=0, seq=3, txn=True, leader_epoch=5),
        kp_marker(33, 9, 0, commit=False),
    ]
    expected += _write(log_dir, "kp", 0, v2)
    kvs = [(b"a", b"1"), (None, b"2"), (b"c", None)]
    legacy = {
        0: [kp_legacy(0, kvs, magic=0), kp_legacy(3, kvs, magic=0, codec=1), kp_legacy(6, kvs, magic=1)],
        9: [kp_legacy(9 + 3 * i, kvs, magic=1, codec=c) for i, c in enumerate((1, 2, 3))]
        + [kp_batch(18, SAMPLE[:2], codec=1)],  # the format upgraded mid-log
    }
    expected += _write(log_dir, "kp", 1, legacy)
    return expected


def test_records_are_exactly_what_kafka_python_wrote(kafka_log, tmp_path):
    expected = _kafka_python_dir(tmp_path)
    df = _read(kafka_log, tmp_path)
    want = kafka_log.createDataFrame(expected, SCHEMAS["records"])
    assert_df_equality(df.orderBy(ORDER), want.orderBy(ORDER))
    assert df.rdd.getNumPartitions() == 2  # one per partition directory
    codecs = {(r.magic, r.compression) for r in df.select("magic", "compression").distinct().collect()}
    assert codecs == {(2, c) for c in CODECS} | {(0, "none"), (0, "gzip")} | {(1, c) for c in LEGACY_CODECS}


def test_a_partition_directory_alone_and_the_offsets_the_broker_would_serve(kafka_log, tmp_path):
    expected = [r for r in _kafka_python_dir(tmp_path) if r[1] == 0]
    tp = TopicPartition("kp", 0)
    checkpoints.write_offset_checkpoint(tmp_path / "log-start-offset-checkpoint", {tp: 7})
    checkpoints.write_offset_checkpoint(tmp_path / "replication-offset-checkpoint", {tp: 31})
    served = [r for r in expected if 7 <= r[2] < 31]
    got = _read(kafka_log, tmp_path / "kp-0").orderBy(ORDER)
    assert_df_equality(got, kafka_log.createDataFrame(served, SCHEMAS["records"]).orderBy(ORDER))
    everything = _read(kafka_log, tmp_path / "kp-0", end="log_end").orderBy(ORDER)
    tail = [r for r in expected if r[2] >= 7]
    assert_df_equality(everything, kafka_log.createDataFrame(tail, SCHEMAS["records"]).orderBy(ORDER))


def test_segments_level_describes_the_files(kafka_log, tmp_path):
    _kafka_python_dir(tmp_path)
    rows = []
    for partition, segments in ((0, {0: 25, 25: 34}), (1, {0: 9, 9: 20})):
        d = tmp_path / f"kp-{partition}"
        for base, next_offset in segments.items():
            stem = d / f"{base:020d}"
            largest = {(0, 0): TS + 404, (0, 25): TS + 2, (1, 0): TS + 2, (1, 9): TS + 1}[(partition, base)]
            # kafka-python stamps a v1 wrapper with timestamp 0; a v0 message has none (-1: no first timestamp)
            first = {(0, 0): TS + 4, (0, 25): TS + 1, (1, 0): None, (1, 9): 0}[(partition, base)]
            rows.append((
                "kp", partition, base, next_offset, os.path.getsize(f"{stem}.log"),
                os.stat(f"{stem}.log").st_mtime_ns // 1_000_000, largest, first,
                os.path.getsize(f"{stem}.index") // 8, os.path.getsize(f"{stem}.timeindex") // 12, 0,
                base == max(segments), f"{stem}.log",
            ))  # fmt: skip
    got = _read(kafka_log, tmp_path, level="segments")
    assert_df_equality(
        got.orderBy(ORDER[:2] + ["base_offset"]), kafka_log.createDataFrame(rows, SCHEMAS["segments"])
    )


def test_batches_level_describes_every_batch_header(kafka_log, tmp_path):
    written = {0: kp_batch(0, SAMPLE, codec=2), 5: kp_batch(5, SAMPLE[:1], pid=4, epoch=1, seq=9, txn=True)}
    written[6] = kp_marker(6, 4, 1, commit=True)
    wrapper, _ = kp_legacy(7, [(b"a", b"1"), (b"b", b"2")], magic=1, codec=1)
    write_segment(tmp_path / "b-0", 0, [data for data, _ in written.values()] + [wrapper])
    rows, position = [], 0
    for base, (data, recs) in written.items():
        (max_ts,) = struct.unpack_from(">q", data, 35)
        codec, txn, control, _, pid, epoch, seq, leader, _ = recs[0][6:]
        rows.append((
            "b", 0, 0, position, base, recs[-1][0], len(recs), len(data), 2, "CreateTime", max_ts, None, codec,
            txn, control, False, pid, epoch, seq, leader, int.from_bytes(data[17:21], "big"), True,
        ))  # fmt: skip
        position += len(data)
    (wrapper_ts,) = struct.unpack_from(">q", wrapper, 18)  # offset, size, crc, magic, attributes, timestamp
    rows.append((
        "b", 0, 0, position, 7, 8, 2, len(wrapper), 1, "CreateTime", wrapper_ts, None, "gzip", False, False, False,
        -1, -1, -1, -1, int.from_bytes(wrapper[12:16], "big"), True,
    ))  # fmt: skip
    got = _read(kafka_log, tmp_path, level="batches").orderBy("position")
    assert_df_equality(got, kafka_log.createDataFrame(rows, SCHEMAS["batches"]))


# ------------------------------------------------------------------------------------------ pushdown
def _pushdown_dir(log_dir):
    """Topics p (2 partitions) and q: 2 segments x 6 batches x 5 records, batch b of a segment stamped
    TS + 1000 * b + i; dense indexes (an entry for every batch after the first)."""
    expected = []
    for topic, partitions in (("p", 2), ("q", 1)):
        for partition in range(partitions):
            segments = {}
            for base in (0, 30):
                segments[base] = [
                    kp_batch(
                        base + 5 * b,
                        [(b"k%d" % (j % 2), b"v", []) for j in range(5)],
                        ts=TS + 1000 * b + base,
                    )
                    for b in range(6)
                ]
            expected += _write(log_dir, topic, partition, segments, interval=1)
    return expected


CASES = {  # where clause -> predicate over (topic, partition, offset, timestamp, key)
    "topic = 'p' and offset >= 12 and offset < 43": lambda t, p, o, ts, k: t == "p" and 12 <= o < 43,
    "partition = 1 and offset in (3, 17, 44)": lambda t, p, o, ts, k: p == 1 and o in (3, 17, 44),
    f"topic in ('p') and timestamp >= {TS + 4002}": lambda t, p, o, ts, k: t == "p" and ts >= TS + 4002,
    f"timestamp > {TS + 2001} and timestamp <= {TS + 4033}": lambda t, p, o, ts, k: (
        TS + 2001 < ts <= TS + 4033
    ),
    "partition > 0 and offset = 21": lambda t, p, o, ts, k: p > 0 and o == 21,
    "topic = 'q' and offset > 27 and key = X'6B31'": lambda t, p, o, ts, k: (
        t == "q" and o > 27 and k == b"k1"
    ),
}


@pytest.mark.parametrize("where", CASES, ids=range(len(CASES)))
def test_pushed_filters_return_exactly_the_filtered_rows(kafka_log, tmp_path, where):
    expected = _pushdown_dir(tmp_path)
    keep = CASES[where]
    want = [r for r in expected if keep(r[0], r[1], r[2], r[3], r[5])]
    assert want, "a case that selects nothing proves little"
    df = _read(kafka_log, tmp_path).where(where)
    assert_df_equality(df.orderBy(ORDER), kafka_log.createDataFrame(want, SCHEMAS["records"]).orderBy(ORDER))
    spark_filters = re.findall(r"\bFilter\b.*", _executed_plan(df))
    if "key" not in where:  # all taken by the reader: Spark filters nothing afterwards
        assert spark_filters == []
    else:  # the key comparison is not pushed: Spark evaluates it, and only it
        (node,) = spark_filters
        assert "key" in node and "offset" not in node and "topic" not in node


def test_reads_start_at_the_index_floor_and_prune_partitions(kafka_log, tmp_path):
    _pushdown_dir(tmp_path)
    # Spoil the first batch of p-0's first segment and the whole of q-0: only reads that skip them succeed.
    log = tmp_path / "p-0" / f"{0:020d}.log"
    data = bytearray(log.read_bytes())
    data[8:12] = (5).to_bytes(4, "big")  # batch length below any batch: iterating from position 0 fails
    log.write_bytes(bytes(data))
    (tmp_path / "q-0" / f"{0:020d}.log").write_bytes(b"\0" * 12 + b"garbage")
    with pytest.raises(Exception, match="record size 5 is smaller than the minimum"):
        _read(kafka_log, tmp_path).where("topic = 'p'").collect()
    # offset 10: the offset index's floor entry is (9, second batch); no entry at or below offset 7
    by_offset = _read(kafka_log, tmp_path).where("topic = 'p' and partition = 0 and offset >= 10")
    assert [r.offset for r in by_offset.orderBy("offset").collect()] == list(range(10, 60))
    with pytest.raises(Exception, match="record size 5"):
        _read(kafka_log, tmp_path).where("topic = 'p' and partition = 0 and offset >= 7").collect()
    # TS + 2000: the time index's floor entry is (TS + 1004, offset 9), the second batch again
    by_time = _read(kafka_log, tmp_path).where(f"topic = 'p' and partition = 0 and timestamp >= {TS + 2000}")
    assert sorted(r.offset for r in by_time.collect()) == [*range(10, 30), *range(40, 60)]
    assert _read(kafka_log, tmp_path).where("topic = 'nothing'").count() == 0


# ------------------------------------------------------------------------------------------ a real broker
def _sent(rng, tag, count, first_ts):
    out = []
    for i in range(count):
        key = None if i % 5 == 4 else f"key-{i % 7}".encode()
        value = None if i % 6 == 5 else f"{tag}:{i}:".encode() * rng.randint(4, 40)  # compressible
        headers = (("tag", tag.encode()), ("n", None)) if i % 3 == 0 else ()
        out.append(SentRecord(key, value, headers, first_ts + i, partition=i % 2))
    return out


def test_reads_what_a_consumer_read_from_a_real_broker(kafka_log, kafka_broker):
    broker = kafka_broker()
    bootstrap, topic = broker.bootstrap, "served"
    create_topic(bootstrap, topic, 2, SMALL_SEGMENT_CONFIG)
    rng = random.Random(20261122)
    ts = int(time.time() * 1000) - 600_000
    for n, codec in enumerate(COMPRESSION_CODECS):
        produce(bootstrap, topic, _sent(rng, codec, 40, ts + 1000 * n), compression=codec)
    produce(bootstrap, topic, _sent(rng, "idempotent", 40, ts + 9000), compression="lz4", idempotent=True)
    produce_transactions(
        bootstrap, topic,
        [Transaction(_sent(rng, "commit", 20, ts + 10_000)), Transaction(_sent(rng, "abort", 20, ts + 11_000), commit=False)],
        transactional_id="data-source", compression="zstd",
    )  # fmt: skip
    consumed = consume_all(bootstrap, topic)  # read_uncommitted: aborted data too, markers never
    assert broker.stop() in CLEAN_EXIT_CODES
    columns = ["topic", "partition", "offset", "key", "value", "headers", "timestamp", "timestamp_type"]
    df = _read(kafka_log, broker.log_dir).where(f"topic = '{topic}'")
    got = df.where("not is_control").select(*columns)
    want = kafka_log.createDataFrame(
        [(r.topic, r.partition, r.offset, r.key, r.value, [tuple(h) for h in r.headers], r.timestamp, r.timestamp_type)
         for r in consumed],
        got.schema,
    )  # fmt: skip
    assert_df_equality(got.orderBy(ORDER), want.orderBy(ORDER))
    markers = df.where("is_control").select("partition", "key").collect()
    kinds = sorted((m.partition, struct.unpack(">hh", m.key)[1]) for m in markers)
    assert kinds == [(0, 0), (0, 1), (1, 0), (1, 1)]  # an ABORT and a COMMIT in each partition
    codecs = {r.compression for r in df.select("compression").distinct().collect()}
    assert codecs == set(COMPRESSION_CODECS)  # every producer codec reached the log as it was sent
    segments = _read(kafka_log, broker.log_dir, level="segments").where(f"topic = '{topic}'")
    assert segments.count() > 2  # small segments: the records span several files
