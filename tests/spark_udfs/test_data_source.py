"""The ``kafka-log`` data source against directories written with kafka-python's record builders: the
expected rows are built from what each test wrote, never from the reader under test. (The comparison
with Spark's own Kafka source on a real broker's log dir is tests/test_spark_kafka_parity.py.)"""

from __future__ import annotations

import os
import random
import struct
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

import crc32c
import pytest
from chispa import assert_df_equality
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from pyspark.sql import functions as F

import spark_udfs
from kafka_log_core.format import checkpoints
from kafka_log_core.format.filenames import TopicPartition
from spark_udfs.schemas import BATCHES, SEGMENTS, records_schema
from tests.logbuild import TS, mark_clean_shutdown, write_segment

pytestmark = pytest.mark.spark
CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
CODECS_BY_ID = {v: k for k, v in CODECS.items()}
LEGACY_CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3}
ORDER = ["topic", "partition", "offset"]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@pytest.fixture(scope="module")
def kafka_log(spark):
    spark_udfs.register(spark)
    return spark


def _read(spark, path, **options):
    reader = spark.read.format("kafka-log")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load(path if isinstance(path, list) else str(path))


@dataclass(frozen=True)
class Rec:
    """One record as a test wrote it, with its batch's attributes and where the batch lies on disk."""

    offset: int
    timestamp: int  # ms
    timestamp_type: int  # -1 none, 0 CreateTime, 1 LogAppendTime
    key: bytes | None
    value: bytes | None
    headers: tuple = ()
    magic: int = 2
    compression: str = "none"
    transactional: bool = False
    control: bool = False
    producer_id: int = -1
    producer_epoch: int = -1
    base_sequence: int = -1
    leader_epoch: int = 0
    batch_base: int = 0
    batch_last: int = 0
    topic: str = ""
    partition: int = 0
    segment: int = 0
    position: int = 0  # of the batch in the segment (while built: in the bytes a builder returned)
    aborted: bool = False

    def row(self, headers: bool = False, extras: bool = False) -> tuple:
        out: tuple = (self.key, self.value, self.topic, self.partition, self.offset, _time(self.timestamp),
                      self.timestamp_type)  # fmt: skip
        if headers:
            out += ([tuple(h) for h in self.headers] or None,)
        if extras:
            out += (self.magic, self.compression, self.transactional, self.aborted, self.producer_id,
                    self.producer_epoch, self.base_sequence, self.leader_epoch, False, self.batch_base,
                    self.batch_last, self.segment, self.position)  # fmt: skip
        return out


def _time(ms: int) -> datetime:
    return EPOCH + timedelta(milliseconds=ms)


def _frame(spark, recs, headers=False, extras=False):
    return spark.createDataFrame([r.row(headers, extras) for r in recs], records_schema(headers, extras))


# ------------------------------------------------------------------------------------------ kafka-python batches
SAMPLE = [  # key, value, headers
    (b"k1", b"v1", [("h", b"x")]),
    (None, b"no-key", []),
    (b"k2", None, [("a", None), ("b", b"")]),
    (b"", b"", []),
    (b"k3" * 50, b"v" * 3000, [("h", b"y"), ("h", b"z")]),
]


def kp_batch(base, records, *, codec=0, ts=TS, pid=-1, epoch=-1, seq=-1, txn=False, leader_epoch=0, step=1):
    """A v2 batch from kafka-python at offsets base, base+step, ...; returns (bytes, records)."""
    builder = DefaultRecordBatchBuilder(2, codec, txn, pid, epoch, seq, 1 << 22)
    for i, (k, v, hdrs) in enumerate(records):
        builder.append(i * step, timestamp=ts + i, key=k, value=v, headers=hdrs)
    data = bytearray(builder.build())
    data[0:8] = base.to_bytes(8, "big")
    data[12:16] = leader_epoch.to_bytes(4, "big", signed=True)  # outside the CRC, set by the broker
    written = data[22] & 0x07  # kafka-python sends a batch uncompressed when compression does not pay
    last = base + (len(records) - 1) * step
    recs = [
        Rec(base + i * step, ts + i, 0, k, v, tuple(tuple(h) for h in hdrs), 2, CODECS_BY_ID[written], txn, False,
            pid, epoch, seq, leader_epoch, base, last)
        for i, (k, v, hdrs) in enumerate(records)
    ]  # fmt: skip
    return bytes(data), recs


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
        Rec(base, ts, 0, key, value, (), 2, "none", True, True, pid, epoch, -1, 0, base, base)
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
    name = CODECS_BY_ID[data[17] & 0x07]  # the attributes byte
    last = base + len(records) - 1
    # Uncompressed, each message is an entry of its own (offset int64, size int32, message).
    starts = [0]
    while not codec and len(starts) < len(records):
        starts.append(starts[-1] + 12 + int.from_bytes(data[starts[-1] + 8 : starts[-1] + 12], "big"))
    return bytes(data), [
        Rec(base + i, ts + i if magic else -1, 0 if magic else -1, k, v, (), magic, name, False, False,
            -1, -1, -1, -1, base if codec else base + i, last if codec else base + i,
            position=0 if codec else starts[i])
        for i, (k, v) in enumerate(records)
    ]  # fmt: skip


def _write(log_dir, topic, partition, segments, **kw) -> list[Rec]:
    """segments: base -> [(bytes, records)]; returns every record (markers included) with its place."""
    out = []
    for base, batches in segments.items():
        write_segment(log_dir / f"{topic}-{partition}", base, [b for b, _ in batches], **kw)
        position = 0
        for data, recs in batches:
            out += [
                replace(r, topic=topic, partition=partition, segment=base, position=position + r.position)
                for r in recs
            ]
            position += len(data)
    return out


def _kafka_python_dir(log_dir) -> list[Rec]:
    written = []
    v2 = {0: [kp_batch(5 * i, SAMPLE, codec=c, ts=TS + 100 * i) for i, c in enumerate(CODECS.values())]}
    v2[25] = [
        kp_batch(25, SAMPLE[:2], codec=3, pid=7, epoch=3, seq=11, leader_epoch=5),
        kp_batch(27, SAMPLE[:3], codec=4, pid=9, epoch=0, seq=0, txn=True, leader_epoch=5),
        kp_marker(30, 9, 0, commit=True),
        kp_batch(31, SAMPLE[2:4], pid=9, epoch=0, seq=3, txn=True, leader_epoch=5),
        kp_marker(33, 9, 0, commit=False),
    ]
    written += _write(log_dir, "kp", 0, v2)
    kvs = [(b"a", b"1"), (None, b"2"), (b"c", None)]
    legacy = {
        0: [kp_legacy(0, kvs, magic=0), kp_legacy(3, kvs, magic=0, codec=1), kp_legacy(6, kvs, magic=1)],
        9: [kp_legacy(9 + 3 * i, kvs, magic=1, codec=c) for i, c in enumerate((1, 2, 3))]
        + [kp_batch(18, SAMPLE[:2], codec=1)],  # the format upgraded mid-log
    }
    written += _write(log_dir, "kp", 1, legacy)
    mark_clean_shutdown(
        log_dir
    )  # read as written: no .txnindex for its ABORT marker, as a loader would rebuild
    return written


def _data(recs: list[Rec]) -> list[Rec]:
    """What a consumer gets: never a transaction marker."""
    return [r for r in recs if not r.control]


def test_records_have_sparks_kafka_schema_and_are_exactly_what_kafka_python_wrote(kafka_log, tmp_path):
    """Spark's Kafka source schema (timestamp a timestamp, timestampType an int, headers only when asked,
    null when a record has none), data records only; the opt-in batch columns describe every record."""
    written = _kafka_python_dir(tmp_path)
    df = _read(kafka_log, tmp_path)
    assert df.schema.simpleString() == (
        "struct<key:binary,value:binary,topic:string,partition:int,offset:bigint,timestamp:timestamp,"
        "timestampType:int>"
    )
    assert_df_equality(df.orderBy(ORDER), _frame(kafka_log, _data(written)).orderBy(ORDER))
    assert df.rdd.getNumPartitions() == 2  # one per partition directory: both are small
    full = _read(kafka_log, tmp_path, includeHeaders="true", includeBatchColumns="true")
    assert_df_equality(full.orderBy(ORDER), _frame(kafka_log, _data(written), True, True).orderBy(ORDER))
    codecs = {(r.magic, r.compression) for r in full.select("magic", "compression").distinct().collect()}
    assert codecs == {(2, c) for c in CODECS} | {(0, "none"), (0, "gzip")} | {(1, c) for c in LEGACY_CODECS}
    assert {r.offset for r in written if r.control} == {30, 33}  # the markers the reader left out
    later = df.where("timestamp >= '2023-11-14T22:13:20.100Z'").count()  # a timestamp compares as one
    assert later == sum(1 for r in _data(written) if r.timestamp >= TS + 100)


def test_a_partition_directory_alone_and_the_offsets_the_broker_would_serve(kafka_log, tmp_path):
    written = _data([r for r in _kafka_python_dir(tmp_path) if r.partition == 0])
    tp = TopicPartition("kp", 0)
    checkpoints.write_offset_checkpoint(tmp_path / "log-start-offset-checkpoint", {tp: 7})
    checkpoints.write_offset_checkpoint(tmp_path / "replication-offset-checkpoint", {tp: 31})
    served = [r for r in written if 7 <= r.offset < 31]
    got = _read(kafka_log, tmp_path / "kp-0").orderBy(ORDER)
    assert_df_equality(got, _frame(kafka_log, served).orderBy(ORDER))
    everything = _read(kafka_log, tmp_path / "kp-0", end="log_end").orderBy(ORDER)
    assert_df_equality(everything, _frame(kafka_log, [r for r in written if r.offset >= 7]).orderBy(ORDER))


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
    assert_df_equality(got.orderBy(ORDER[:2] + ["base_offset"]), kafka_log.createDataFrame(rows, SEGMENTS))


def test_batches_level_describes_every_batch_header(kafka_log, tmp_path):
    """Transaction markers, which the records level never returns, are batches here."""
    written = {0: kp_batch(0, SAMPLE, codec=2), 5: kp_batch(5, SAMPLE[:1], pid=4, epoch=1, seq=9, txn=True)}
    written[6] = kp_marker(6, 4, 1, commit=True)
    wrapper, _ = kp_legacy(7, [(b"a", b"1"), (b"b", b"2")], magic=1, codec=1)
    write_segment(tmp_path / "b-0", 0, [data for data, _ in written.values()] + [wrapper])
    rows, position = [], 0
    for base, (data, recs) in written.items():
        (max_ts,) = struct.unpack_from(">q", data, 35)
        r = recs[0]
        rows.append((
            "b", 0, 0, position, base, recs[-1].offset, len(recs), len(data), 2, "CreateTime", max_ts, None,
            r.compression, r.transactional, r.control, False, r.producer_id, r.producer_epoch, r.base_sequence,
            r.leader_epoch, int.from_bytes(data[17:21], "big"), True,
        ))  # fmt: skip
        position += len(data)
    (wrapper_ts,) = struct.unpack_from(">q", wrapper, 18)  # offset, size, crc, magic, attributes, timestamp
    rows.append((
        "b", 0, 0, position, 7, 8, 2, len(wrapper), 1, "CreateTime", wrapper_ts, None, "gzip", False, False, False,
        -1, -1, -1, -1, int.from_bytes(wrapper[12:16], "big"), True,
    ))  # fmt: skip
    got = _read(kafka_log, tmp_path, level="batches").orderBy("position")
    assert_df_equality(got, kafka_log.createDataFrame(rows, BATCHES))


# ------------------------------------------------------------------------------------------ filters and reuse
def _payments_dir(log_dir) -> list[Rec]:
    """Topics payments (2 partitions) and refunds: 2 segments x 6 batches x 5 records, batch b of a
    segment stamped TS + 1000 * b + i; dense indexes (an entry for every batch after the first)."""
    written = []
    for topic, partitions in (("payments", 2), ("refunds", 1)):
        for partition in range(partitions):
            segments = {
                base: [
                    kp_batch(base + 5 * b, [(b"k%d" % (j % 2), b"v", []) for j in range(5)], ts=TS + 1000 * b + base)
                    for b in range(6)
                ]
                for base in (0, 30)
            }  # fmt: skip
            written += _write(log_dir, topic, partition, segments, interval=1)
    mark_clean_shutdown(log_dir)  # read as written, its dense indexes included (no loader's rebuild)
    return written


WHERE = {  # where clause -> predicate over a written record
    "topic='payments' AND partition=0 AND offset>=10 AND offset<20": lambda r: (
        r.topic == "payments" and r.partition == 0 and 10 <= r.offset < 20
    ),
    "topic = 'payments' and offset >= 12 and offset < 43": lambda r: (
        r.topic == "payments" and 12 <= r.offset < 43
    ),
    "partition = 1 and offset in (3, 17, 44)": lambda r: r.partition == 1 and r.offset in (3, 17, 44),
    "topic in ('payments') and timestamp >= '2023-11-14 22:13:24.002'": lambda r: (
        r.topic == "payments" and r.timestamp >= TS + 4002
    ),
    "partition > 0 and offset = 21": lambda r: r.partition > 0 and r.offset == 21,
    "topic = 'refunds' and offset > 27 and key = X'6B31'": lambda r: (
        r.topic == "refunds" and r.offset > 27 and r.key == b"k1"
    ),
}


@pytest.mark.parametrize("pushdown", ["false", "true"])
def test_the_filter_leak_from_the_issue_stays_fixed(kafka_log, tmp_path, pushdown):
    """A filter on a derived DataFrame used to leak back into its base DataFrame; with Python filter
    pushdown switched on for the session too (the source takes no filters, Spark keeps them all)."""
    written = _payments_dir(tmp_path)
    conf = "spark.sql.python.filterPushdown.enabled"
    before = kafka_log.conf.get(conf)
    kafka_log.conf.set(conf, pushdown)
    try:
        records = _read(kafka_log, tmp_path)
        assert records.count() == len(written)
        assert records.where("topic='payments' AND partition=0 AND offset>=10 AND offset<20").count() == 10
        assert records.count() == len(written)
        assert records.where("topic = 'refunds'").count() == 60
        assert records.count() == len(written)
    finally:
        kafka_log.conf.set(conf, before)


def test_dataframes_reused_across_filtered_queries_in_any_order(kafka_log, tmp_path):
    """One base DataFrame and DataFrames derived from it (and from those), each queried twice, in a
    shuffled order: every answer is exactly the records its filters select, whatever ran before it."""
    written = _payments_dir(tmp_path)
    records = _read(kafka_log, tmp_path)
    frames = {"": (records, written)}
    for where, keep in WHERE.items():
        selected = [r for r in written if keep(r)]
        assert selected  # a filter that selects nothing proves little
        frames[where] = (records.where(where), selected)
    first = frames[next(iter(WHERE))][0]  # a filter on a filtered DataFrame
    frames["nested"] = (
        first.where("offset % 2 = 0"),
        [r for r in frames[next(iter(WHERE))][1] if r.offset % 2 == 0],
    )
    order = list(frames) * 2
    random.Random(20261123).shuffle(order)
    for name in order:
        df, expected = frames[name]
        got = sorted((r.topic, r.partition, r.offset) for r in df.select(*ORDER).collect())
        assert got == sorted((r.topic, r.partition, r.offset) for r in expected), name


def test_options_choose_partitions_and_start_at_the_index_floor(kafka_log, tmp_path):
    """assign/subscribe/subscribePattern prune partition directories; startingOffsets start each read at
    its offset-index floor: reads that skip spoiled bytes succeed, reads that do not, fail."""
    _payments_dir(tmp_path)
    # Spoil the first batch of payments-0's first segment and the whole of refunds-0.
    log = tmp_path / "payments-0" / f"{0:020d}.log"
    data = bytearray(log.read_bytes())
    data[8:12] = (5).to_bytes(4, "big")  # batch length below any batch: iterating from position 0 fails
    log.write_bytes(bytes(data))
    (tmp_path / "refunds-0" / f"{0:020d}.log").write_bytes(b"\0" * 12 + b"garbage")
    with pytest.raises(Exception, match=r"\[payments-0 in .*record size 5 is smaller than the minimum"):
        _read(kafka_log, tmp_path, subscribe="payments").collect()
    # offset 10: the offset index's floor entry is (9, second batch); no entry at or below offset 7
    start_10 = _read(kafka_log, tmp_path, assign='{"payments":[0]}', startingOffsets='{"payments":{"0":10}}')
    assert [r.offset for r in start_10.orderBy("offset").collect()] == list(range(10, 60))
    start_7 = _read(kafka_log, tmp_path, assign='{"payments":[0]}', startingOffsets='{"payments":{"0":7}}')
    with pytest.raises(Exception, match="record size 5"):
        start_7.collect()
    # TS + 2000: the time index's floor entry is (TS + 1004, offset 9), the second batch again
    by_time = _read(kafka_log, tmp_path, subscribePattern="pay.*", startingTimestamp=str(TS + 2000))
    firsts = by_time.groupBy("partition").agg(F.min("offset").alias("first")).collect()
    assert {(r.partition, r.first) for r in firsts} == {(0, 10), (1, 10)}
    assert _read(kafka_log, tmp_path, subscribe="nothing").count() == 0


# ------------------------------------------------------------------------------------------ offsets and isolation
def _txn_index(path, entries):
    """A .txnindex, written field by field from the spec (version, producer id, first, last, LSO)."""
    path.write_bytes(b"".join(struct.pack(">hqqqq", 0, *entry) for entry in entries))


def _transactions_dir(log_dir) -> list[Rec]:
    """One partition: plain records, a committed transaction (pid 9), an aborted one (pid 8) interleaved
    with plain records, and last a transaction left open (pid 7)."""
    batches = [
        kp_batch(0, [(b"a", b"1", []), (b"b", b"1", [])]),
        kp_batch(2, [(b"a", b"2", [("t", b"c")])], pid=9, epoch=0, seq=0, txn=True),
        kp_batch(3, [(b"c", b"1", [])], pid=8, epoch=0, seq=0, txn=True),
        kp_batch(4, [(b"b", None, [])]),  # a tombstone, outside any transaction
        kp_marker(5, 9, 0, commit=True),
        kp_batch(6, [(b"a", b"aborted", []), (b"d", b"aborted", [])], pid=8, epoch=0, seq=1, txn=True),
        kp_marker(8, 8, 0, commit=False),
        kp_batch(9, [(b"e", b"1", []), (None, b"unkeyed", [])]),
        kp_batch(11, [(b"a", b"open", [])], pid=7, epoch=0, seq=0, txn=True),
        kp_batch(12, [(b"f", b"after the open one", [])]),
    ]
    written = _write(log_dir, "t", 0, {0: batches})
    _txn_index(log_dir / "t-0" / f"{0:020d}.txnindex", [(8, 3, 8, 3)])
    return [replace(r, aborted=r.producer_id == 8 and not r.control) for r in written]


def test_read_committed_hides_aborted_records_and_stops_at_the_last_stable_offset(kafka_log, tmp_path):
    written = _data(_transactions_dir(tmp_path))
    uncommitted = _read(kafka_log, tmp_path, includeBatchColumns="true")
    assert_df_equality(uncommitted.orderBy(ORDER), _frame(kafka_log, written, extras=True).orderBy(ORDER))
    committed = _read(kafka_log, tmp_path, **{"kafka.isolation.level": "read_committed"})
    visible = [r for r in written if not r.aborted and r.offset < 11]  # 11: the open transaction
    assert_df_equality(committed.orderBy(ORDER), _frame(kafka_log, visible).orderBy(ORDER))


OFFSET_CASES = {  # options -> offsets of "t-0" read (markers at 5 and 8 are never rows)
    "earliest to latest": ({}, [0, 1, 2, 3, 4, 6, 7, 9, 10, 11, 12]),
    "JSON offsets": ({"startingOffsets": '{"t":{"0":3}}', "endingOffsets": '{"t":{"0":10}}'}, [3, 4, 6, 7, 9]),
    "-2 and -1": ({"startingOffsets": '{"t":{"0":-2}}', "endingOffsets": '{"t":{"0":-1}}'}, None),
    "committed, ending past the last stable offset": (
        {"kafka.isolation.level": "read_committed", "endingOffsets": '{"t":{"0":13}}'}, [0, 1, 2, 4, 9, 10],
    ),
    "startingTimestamp": ({"startingTimestamp": str(TS)}, None),
    "failOnDataLoss=false": ({"startingOffsets": '{"t":{"0":0}}', "failOnDataLoss": "false"}, None),
}  # fmt: skip


@pytest.mark.parametrize("case", OFFSET_CASES)
def test_starting_and_ending_offsets_as_sparks_kafka_source_reads_them(kafka_log, tmp_path, case):
    _transactions_dir(tmp_path)
    options, offsets = OFFSET_CASES[case]
    if offsets is None:
        offsets = OFFSET_CASES["earliest to latest"][1]
    got = [r.offset for r in _read(kafka_log, tmp_path, **options).orderBy("offset").collect()]
    assert got == offsets


def test_offsets_by_timestamp_and_the_log_start_offset(kafka_log, tmp_path):
    """Timestamps resolve as ListOffsets does (first record at or after, below the latest offset); a
    starting offset below the log start offset is data loss, as Spark reports it."""
    _payments_dir(tmp_path)
    checkpoints.write_offset_checkpoint(
        tmp_path / "log-start-offset-checkpoint", {TopicPartition("payments", 0): 12}
    )
    options = {"assign": '{"payments":[0]}'}
    # batch 1 of segment 30 holds offsets 35..39, stamped TS + 1030 + i
    # TS + 1032: a record of segment 0's third batch (offsets 10..14, TS + 2000..) at or after the log
    # start; TS + 3031: segment 0's fifth batch (offsets 20..24, TS + 4000..) ends the read.
    ts = _read(
        kafka_log, tmp_path, startingTimestamp=str(TS + 1032), endingTimestamp=str(TS + 3031), **options
    )
    assert [r.offset for r in ts.orderBy("offset").collect()] == list(range(12, 20))
    lost = _read(kafka_log, tmp_path, startingOffsets='{"payments":{"0":3}}', **options)
    with pytest.raises(Exception, match="below its log start offset 12"):
        lost.collect()
    kept = _read(
        kafka_log, tmp_path, startingOffsets='{"payments":{"0":3}}', failOnDataLoss="false", **options
    )
    assert min(r.offset for r in kept.collect()) == 12
    future = _read(kafka_log, tmp_path, startingTimestamp=str(TS + 10**9), **options)
    with pytest.raises(Exception, match="no offset of payments-0 matches the timestamp"):
        future.collect()
    latest = _read(kafka_log, tmp_path, startingTimestamp=str(TS + 10**9),
                   startingOffsetsByTimestampStrategy="latest", **options)  # fmt: skip
    assert latest.count() == 0


# ------------------------------------------------------------------------------------------ the latest view
def _rebuilt_state(recs: list[Rec], *, committed: bool, ends: dict[str, int]) -> dict[tuple, Rec]:
    """What a consumer holds after reading each topic from its start to ``ends[topic]`` (or its end)
    and folding it into a table."""
    state: dict[tuple, Rec] = {}
    for r in sorted(recs, key=lambda r: (r.topic, r.partition, r.offset)):
        if r.control or r.key is None or (committed and r.aborted) or r.offset >= ends.get(r.topic, 1 << 62):
            continue
        if r.value is None:
            state.pop((r.topic, r.partition, r.key), None)
        else:
            state[(r.topic, r.partition, r.key)] = r
    return state


def test_latest_view_is_the_last_record_of_each_key(kafka_log, tmp_path):
    """Tombstoned keys absent, aborted transactions ignored (read_committed unless told otherwise), the
    open transaction past the last stable offset not yet visible; legacy and compressed batches alike."""
    written = _transactions_dir(tmp_path / "t") + _kafka_python_dir(tmp_path / "kp")
    for isolation, end in (("read_committed", 11), ("read_uncommitted", 13)):
        options = {"level": "latest", "includeHeaders": "true", "kafka.isolation.level": isolation}
        latest = _read(kafka_log, [str(tmp_path / "t"), str(tmp_path / "kp")], **options)
        state = _rebuilt_state(written, committed=isolation == "read_committed", ends={"t": end})
        expected = _frame(kafka_log, list(state.values()), headers=True)
        assert_df_equality(latest.orderBy(ORDER), expected.orderBy(ORDER))
        assert latest.rdd.getNumPartitions() == 3  # one split per partition: it sees every key
    committed = _read(kafka_log, tmp_path / "t", level="latest")
    assert sorted((r.key, r.offset) for r in committed.collect()) == [(b"a", 2), (b"e", 9)]


# ------------------------------------------------------------------------------------------ refusals
def test_a_dataframe_whose_files_were_replaced_since_it_was_planned_is_refused(kafka_log, tmp_path):
    written = _payments_dir(tmp_path)
    records = _read(kafka_log, tmp_path)
    assert records.count() == len(written)
    segment = tmp_path / "payments-0" / f"{0:020d}.log"
    data = segment.read_bytes()
    segment.unlink()  # what a compaction's swap does: another file under the same name
    segment.write_bytes(data[: len(data) // 2])
    with pytest.raises(Exception, match="changed since this DataFrame was planned .*: load it again"):
        records.count()


def test_the_schema_is_fixed_and_bad_options_fail_at_load(kafka_log, tmp_path):
    _payments_dir(tmp_path)
    with pytest.raises(Exception, match="kafka-log has a fixed schema"):
        kafka_log.read.format("kafka-log").schema("key binary").load(str(tmp_path)).collect()
    with pytest.raises(Exception, match="kafka-log: option level='rows'"):
        _read(kafka_log, tmp_path, level="rows")
