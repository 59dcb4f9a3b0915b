"""`kafka-log-jobs dump` against Kafka's own DumpLogSegments (tests/kafka_harness.py), run on the same files
-- built here, or written by a real broker -- and compared line by line.
"""

from __future__ import annotations

import random
import re
import struct
from pathlib import Path

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafka_log_core.format import log_file, offset_index, record_batch, time_index
from kafka_log_core.format.legacy_records import LegacyRecord, encode_message, encode_wrapper
from kafka_log_core.format.producer_snapshot import ProducerSnapshotEntry, encode_producer_snapshot
from kafka_log_core.format.record_batch import Header, Record
from kafka_log_core.log.index_builder import IndexBuilder
from tests.metadata_build import uvarint
from tests.tools.dump_harness import (
    E1,
    E5,
    E8,
    E9_ONE,
    TS,
    control_batch,
    run_dump,
    segment_name,
    write,
)


# ---------------------------------------------------------------------------------------------- real Kafka
def _kafka_dump():
    harness = pytest.importorskip("tests.kafka_harness", reason="tests/kafka_harness.py is not there")
    if not hasattr(harness, "run_dump_log_segments"):
        pytest.skip("tests/kafka_harness.py has no run_dump_log_segments")
    return harness


_LOG4J_LINE = re.compile(r"^(TRACE|DEBUG|INFO|WARN|ERROR) .*\([\w.$]+\)$")


def _compare_with_kafka(harness, files: list[Path], args: list[str]) -> None:
    """Kafka's stdout must equal ours line for line. On stderr, ignore only Kafka's log4j lines and our
    "error:" lines (Kafka has none on these inputs; we add one for a partial last batch, Kafka exits 0)."""
    kafka = harness.run_dump_log_segments(files, *args)
    assert kafka.returncode == 0, kafka.stderr[-3000:]
    ours = run_dump("--files", ",".join(map(str, files)), *args)
    assert ours.stdout.splitlines() == kafka.stdout.splitlines()
    kafka_err = [line for line in kafka.stderr.splitlines() if not _LOG4J_LINE.match(line)]
    assert [line for line in ours.stderr.splitlines() if not line.startswith("error: ")] == kafka_err


def build_zoo(root: Path) -> list[Path]:
    """Segment files of every kind, including the batches and index mistakes Kafka's tool reports on."""
    rng = random.Random(4)
    v2 = root / "zoo-0"
    batches = [
        record_batch.build_batch(
            100,
            [
                Record(100, TS, b"k", b"v"),
                Record(101, TS + 5, b"b", None, (Header("h", b"x"), Header("h2", None))),
            ],
            partition_leader_epoch=3,
            producer_id=7,
            producer_epoch=1,
            base_sequence=2**31 - 2,
        ),  # fmt: skip
    ]
    for codec in (1, 2, 3, 4):
        base = 100 + 2 * codec
        payloads = [bytes(rng.randrange(256) for _ in range(12)) for _ in range(2)]  # random, rarely UTF-8
        batches.append(
            record_batch.build_batch(
                base,
                [
                    Record(base, TS, None, "héllo".encode()),
                    Record(base + 1, TS + 1, payloads[0], payloads[1]),
                ],
                codec=codec,
            )  # fmt: skip
        )
    batches += [
        record_batch.build_control_batch(
            110, 1, producer_id=7, producer_epoch=1, coordinator_epoch=5, timestamp=TS
        ),
        record_batch.build_control_batch(
            111, 0, producer_id=8, producer_epoch=0, coordinator_epoch=-1, timestamp=TS
        ),
        (112).to_bytes(8, "big") + E5[8:],  # E5 moved to offset 112 (the base offset is outside the CRC)
        record_batch.build_batch(117, [Record(117, TS, b"a", b"1")], delete_horizon_ms=TS + 100),
        record_batch.build_batch(
            118, [Record(118, TS, b"a", b"1")], timestamp_type=record_batch.LOG_APPEND_TIME
        ),
        control_batch(119, 3, b"\x00\x00" + struct.pack(">q", TS) + b"\x00"),
        control_batch(120, 9, b"zz"),
    ]
    bad_crc = bytearray(record_batch.build_batch(121, [Record(121, TS, b"k", b"value")]))
    bad_crc[-3] ^= 1
    batches.append(bytes(bad_crc))
    data = b"".join(batches)
    log = write(v2, segment_name(100, ".log"), data + data[:25])  # plus a partial batch
    builder = IndexBuilder(100, index_interval_bytes=100)
    for batch in log_file.iter_batches(data):
        builder.append(batch.position, batch.last_offset, batch.max_timestamp)
    offsets, times = builder.finish()
    offset_index.write_offset_index(log.with_suffix(".index"), 100, list(offsets))
    time_index.write_time_index(log.with_suffix(".timeindex"), 100, list(times))

    legacy = root / "legacy-0"
    entries = [encode_message(0, 0, b"k", b"v"), encode_message(1, 1, None, b"v1", TS)]
    for magic in (0, 1):
        for codec in (1, 2, 3):
            kb = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
            for i in range(3):
                kb.append(i, timestamp=TS + i if magic else None, key=b"a" if i else None, value=b"x%d" % i)
            entry = bytearray(kb.build())
            entry[0:8] = (4 if magic else 2).to_bytes(8, "big")
            entries.append(bytes(entry))
    inner = [LegacyRecord(10, 1, 0, TS, 0, b"q", b"w"), LegacyRecord(11, 1, 0, TS + 3, 0, b"q", b"w")]
    entries.append(encode_wrapper(inner, 1, 1, wrapper_timestamp=TS + 50, log_append_time=True))
    write(legacy, segment_name(0, ".log"), b"".join(entries))

    files = [log, log.with_suffix(".index"), log.with_suffix(".timeindex"), legacy / segment_name(0, ".log")]
    # Several partitions with index mistakes, so that the end-of-run reports of several files are ordered.
    for n in range(14):  # 14: the reports' tables grow past 16 buckets
        part = root / f"wrong-{n}"
        segment = [
            record_batch.build_batch(0, [Record(0, TS + 10, b"k", b"v" * 60)]),
            record_batch.build_batch(1, [Record(1, TS + 30, b"k", b"v"), Record(2, TS + 20, b"k", b"v")]),
            record_batch.build_batch(3, [], last_offset_delta=1, max_timestamp=TS + 40),
        ]
        pos = [0, len(segment[0]), len(segment[0]) + len(segment[1])]
        wrong_log = write(part, segment_name(0, ".log"), b"".join(segment))
        index = wrong_log.with_suffix(".index")
        index.write_bytes(struct.pack(">iiii", 1, pos[1], 3, pos[2]))
        times = wrong_log.with_suffix(".timeindex")
        times.write_bytes(struct.pack(">qiqiqi", TS + 20, 2, TS + 40, 4, TS + 40, 3))
        files += [wrong_log, index, times]
    snapshot_entries = [
        ProducerSnapshotEntry(5, 3, 0, 1200, 2, TS, 7, 1100),
        ProducerSnapshotEntry(6, 0, -1, -1, 0, TS + 1, -1, -1),
    ]
    files.append(write(v2, segment_name(122, ".snapshot"), encode_producer_snapshot(snapshot_entries)))
    files.append(write(v2, segment_name(205, ".snapshot"), E9_ONE))
    files.append(write(v2, segment_name(150, ".txnindex"), E8 + E8[:10]))
    kraft = [
        control_batch(0, 3, b"\x00\x00" + struct.pack(">q", TS) + b"\x00"),
        control_batch(1, 4, b"\x00\x00\x00"),
    ]
    files.append(
        write(root / "__cluster_metadata-0", "00000000000000000002-0000000001.checkpoint", b"".join(kraft))
    )
    files.append(write(v2, "leader-epoch-checkpoint", b"0\n1\n3 100\n"))
    files.append(write(v2, segment_name(0, ".log.deleted"), E1))
    return files


@pytest.mark.broker
@pytest.mark.parametrize(
    "args",
    [
        [],
        ["--deep-iteration"],
        ["--print-data-log"],
        ["--print-data-log", "--skip-record-metadata"],
        ["--verify-index-only"],
        ["--index-sanity-check"],
        ["--max-bytes", "700"],
    ],
    ids=lambda args: " ".join(args) or "shallow",
)
def test_matches_kafkas_dump_log_segments_on_built_files(kafka_jars, tmp_path, args):
    harness = _kafka_dump()
    _compare_with_kafka(harness, build_zoo(tmp_path), args)


@pytest.mark.broker
def test_matches_kafkas_dump_log_segments_on_a_partition_written_by_a_broker(kafka_broker):
    harness = _kafka_dump()
    broker = kafka_broker()
    topic = "dump"
    harness.create_topic(broker.bootstrap, topic, 1, harness.SMALL_SEGMENT_CONFIG)
    rng = random.Random(11)

    def records(tag: str, n: int) -> list:
        return [
            harness.SentRecord(
                None if i % 5 == 4 else f"{tag}-{i % 7}".encode(),
                None if i % 6 == 5 else rng.randbytes(rng.randint(5, 60)),
                (("h", b"1"), ("n", None)) if i % 3 == 0 else (),
                TS + i,
                partition=0,
            )
            for i in range(n)
        ]

    for codec in harness.COMPRESSION_CODECS:
        harness.produce(broker.bootstrap, topic, records(codec, 40), compression=codec)
    harness.produce(broker.bootstrap, topic, records("idem", 30), compression="lz4", idempotent=True)
    harness.produce_transactions(
        broker.bootstrap,
        topic,
        [
            harness.Transaction(records("c", 20), commit=True),
            harness.Transaction(records("a", 20), commit=False),
        ],
        transactional_id="dump-txn",
        compression="zstd",
    )
    assert broker.stop() in harness.CLEAN_EXIT_CODES
    partition = broker.log_dir / f"{topic}-0"
    suffixes = (".log", ".index", ".timeindex", ".snapshot", ".txnindex")
    files = sorted(p for p in partition.iterdir() if p.suffix in suffixes)
    assert {p.suffix for p in files} >= {".log", ".index", ".timeindex", ".snapshot", ".txnindex"}, files
    for args in (["--print-data-log"], ["--verify-index-only"], ["--index-sanity-check"]):
        _compare_with_kafka(harness, files, args)


@pytest.mark.broker
def test_decoders_match_kafkas_on_the_coordinators_topics_of_a_broker(kafka_broker):
    """--offsets-decoder on __consumer_offsets and --transaction-log-decoder on __transaction_state, as
    a real broker wrote them: classic groups (a consumer's subscription and assignment decoded, commit
    metadata with non-ASCII and control characters, a static member, an admin commit with no group
    member, a deleted group's tombstones) and committed and aborted transactions."""
    from confluent_kafka import Consumer, ConsumerGroupTopicPartitions, TopicPartition
    from confluent_kafka.admin import AdminClient

    harness = _kafka_dump()
    broker = kafka_broker(**{"offsets.topic.num.partitions": 1, "transaction.state.log.num.partitions": 1})
    harness.create_topic(broker.bootstrap, "orders", 2, {})
    harness.produce(broker.bootstrap, "orders", [(f"k{i}".encode(), b"v") for i in range(20)])
    harness.produce_transactions(
        broker.bootstrap,
        "orders",
        [harness.Transaction([(b"t", b"1")]), harness.Transaction([(b"t", b"2")], commit=False)],
        transactional_id="decoded-txn",
    )
    for group, extra in (("plain", {}), ("static", {"group.instance.id": "static-1"})):
        consumer = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": group, "auto.offset.reset": "earliest",
             "enable.auto.commit": False, **extra}
        )  # fmt: skip
        consumer.subscribe(["orders"])
        for _ in range(30):
            if consumer.poll(1.0) is not None and consumer.assignment():
                break
        consumer.commit(
            offsets=[TopicPartition("orders", 0, 3, metadata='ü\n"é\x01'), TopicPartition("orders", 1, 4)],
            asynchronous=False,
        )
        consumer.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.alter_consumer_group_offsets(
        [ConsumerGroupTopicPartitions("admin", [TopicPartition("orders", 0, 7)])]
    )["admin"].result(30)
    admin.delete_consumer_groups(["plain"])["plain"].result(30)
    assert broker.stop() in harness.CLEAN_EXIT_CODES
    for topic, flag in (
        ("__consumer_offsets", "--offsets-decoder"),
        ("__transaction_state", "--transaction-log-decoder"),
    ):
        files = sorted((broker.log_dir / f"{topic}-0").glob("*.log"))
        assert files and sum(p.stat().st_size for p in files) > 0, topic
        _compare_with_kafka(harness, files, [flag])
    offsets_files = sorted((broker.log_dir / "__consumer_offsets-0").glob("*.log"))
    _compare_with_kafka(harness, offsets_files, ["--offsets-decoder", "--skip-record-metadata"])
    dumped = run_dump("--files", ",".join(map(str, offsets_files)), "--offsets-decoder").stdout
    assert "<DELETE>" in dumped and '"groupInstanceId":"static-1"' in dumped and '"subscription":{' in dumped


@pytest.mark.broker
def test_offsets_decoder_matches_kafkas_on_a_consumer_groups_records(kafka_broker):
    """--offsets-decoder on the records of the consumer group protocol (KIP-848, group.protocol=consumer),
    as a 4.4 broker wrote them: group metadata, member metadata, target assignment and current assignment
    (with topic ids), a regex subscription, commits, and a group deleted after its members left."""
    from confluent_kafka import Consumer, TopicPartition
    from confluent_kafka.admin import AdminClient

    harness = _kafka_dump()
    broker = kafka_broker(**{"offsets.topic.num.partitions": 1})
    for topic in ("orders", "ordinals"):
        harness.create_topic(broker.bootstrap, topic, 3, {})
        harness.produce(broker.bootstrap, topic, [(f"k{i}".encode(), b"v") for i in range(12)])
    groups = (
        ("kip848", "orders", "orders"),
        ("regex", "^ord.*", "ordinals"),
        ("gone", "ordinals", "ordinals"),
    )
    for group, subscription, committed in groups:
        consumer = Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": group, "group.protocol": "consumer",
             "auto.offset.reset": "earliest", "enable.auto.commit": False, "client.rack": "rack-ü"}
        )  # fmt: skip
        consumer.subscribe([subscription])
        for _ in range(60):
            if consumer.poll(1.0) is not None and len(consumer.assignment()) >= 3:
                break
        consumer.commit(offsets=[TopicPartition(committed, 1, 5)], asynchronous=False)
        consumer.close()
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    admin.delete_consumer_groups(["gone"])["gone"].result(30)
    assert broker.stop() in harness.CLEAN_EXIT_CODES
    files = sorted((broker.log_dir / "__consumer_offsets-0").glob("*.log"))
    _compare_with_kafka(harness, files, ["--offsets-decoder"])
    dumped = run_dump("--files", ",".join(map(str, files)), "--offsets-decoder").stdout
    types = set(re.findall(r'key: \{"type":"(\d+)"', dumped))
    assert {"3", "5", "6", "7", "8", "16"} <= types, types
    assert "<DELETE>" in dumped and '"rackId":"rack-ü"' in dumped


# ------------------------------------------------------------------------- coordinator records built here
def _i(fmt: str, *values: int) -> bytes:
    return struct.pack(">" + fmt, *values)


def _cs(text: str | None) -> bytes:  # a compact string (bytes when given bytes); None is null
    if text is None:
        return b"\x00"
    data = text.encode() if isinstance(text, str) else text
    return uvarint(len(data) + 1) + data


def _carr(*items: bytes) -> bytes:
    return uvarint(len(items) + 1) + b"".join(items)


def _tags(**by_tag: bytes) -> bytes:
    fields = sorted((int(tag[1:]), data) for tag, data in by_tag.items())
    return uvarint(len(fields)) + b"".join(uvarint(t) + uvarint(len(d)) + d for t, d in fields)


def _key(record_type: int, *names: str) -> bytes:
    return _i("h", record_type) + b"".join(_i("h", len(n.encode())) + n.encode() for n in names)


TOPIC_ID = bytes(range(1, 17))


def newer_group_records() -> list[tuple[bytes, bytes | None]]:
    """One or two values of each newer group record type, tagged fields set and unset, nulls where allowed."""
    tp = TOPIC_ID + _carr(_i("i", 0), _i("i", 2)) + _tags()
    task = _cs("0_1") + _carr(_i("i", 1)) + _tags()
    configs = _carr(_cs("cleanup.policy") + _cs("compact") + _tags())
    topic_info = _cs("app-store-changelog") + _i("ih", 3, 1) + configs + _tags()
    classic = _i("i", 45000) + _carr(_cs("range") + _cs(b"\x00\x01\xff") + _tags()) + _tags()
    values = {
        4: _carr(TOPIC_ID + _cs("t") + _i("i", 2) + _carr(_i("i", 0) + _carr(_cs("r1"), _cs("r2")) + _tags()) + _tags())
        + _tags(),
        5: _cs("static-1") + _cs(None) + _cs("cid") + _cs("/10.0.0.1") + _carr() + _cs("^t.*") + _i("i", 5000)
        + _cs(None) + _tags(t0=uvarint(1) + classic),
        8: _i("iib", 7, 6, 2) + _carr(TOPIC_ID + _carr(_i("i", 3)) + _tags(t0=_carr(_i("i", 7)))) + _carr(tp)
        + _tags(),
        10: _cs("r1") + _cs("share-client") + _cs("/1.2.3.4") + _carr(_cs("a"), _cs("b")) + _tags(),
        11: _i("iq", 5, -7) + _tags(),
        12: _i("i", 3) + _tags(t0=_i("q", TS)),
        13: _carr(tp) + _tags(),
        14: _i("iib", 4, 3, 1) + _carr(tp) + _tags(),
        15: _carr(TOPIC_ID + _cs("a") + _carr(_i("i", 0)) + _tags()) + _carr()
        + _carr(TOPIC_ID + _cs("b") + _tags()) + _tags(),
        17: _i("iq", 9, 123) + _tags(t0=_i("i", 2), t1=_carr(_cs("k") + _cs("v") + _tags()), t3=_i("i", -1)),
        19: _cs(None) + _cs("rack") + _cs("streams-client") + _cs("/h") + _i("ii", 1000, 2) + _cs("proc")
        + _i("b", 1) + _cs("host") + _i("H", 8080) + _tags() + _carr(_cs("k") + _cs("v") + _tags()) + _tags(),
        20: _i("i", 1) + _tags(),
        21: _carr(task) + _carr() + _carr(task, task) + _tags(),
        22: _i("iib", 2, 1, 0) + _carr(_cs("0_0") + _carr(_i("i", 0)) + _tags(t0=_carr(_i("i", 5))))
        + _carr(_cs("0_1") + _carr() + _tags(t0=b"\x00")) + _carr() * 4 + _tags(),
        23: _i("i", 1) + _carr(
            _cs("0") + _carr(_cs("src")) + _carr() + _carr(topic_info) + _carr(_cs("sink")) + _carr(topic_info)
            + _carr(_carr(_i("h", 0)) + _carr() + _carr(_i("h", 0), _i("h", 1)) + _tags()) + _tags()
        ) + _tags(),
    }  # fmt: skip
    members = {5, 7, 8, 10, 13, 14, 19, 21, 22}
    records = [
        (_key(t, "grp", "m-1") if t in members else _key(t, "grp"), _i("h", 0) + v) for t, v in values.items()
    ]
    records += [
        (_key(17, "grp"), _i("h", 0) + _i("iq", 1, 0) + _tags(t1=b"\x00")),  # null lastAssignmentConfigs
        (_key(19, "grp", "m-2"), _i("h", 0) + _cs("i") + _cs(None) + _cs("c") + _cs("/h") + _i("ii", 1, 1)
         + _cs("p") + _i("b", -1) + _carr() + _tags()),  # a null userEndpoint
        (_key(11, "grp"), None),  # a tombstone
        (_key(9, "grp"), _i("h", 0)),  # a type no record has
        (_key(3, "grp"), _i("h", 1) + _i("i", 1) + _tags()),  # a value version Kafka 4.4 does not know
        (b"\x00", None),  # no room for the record type
        (_key(11, "grp"), b"\x00"),  # nor for the value's version
        (_i("hh", 3, -1), None),  # a null group id
        (_key(10, "grp", "m"), _i("h", 0) + _cs("r") + _cs(None)),  # a null client id
        (_key(10, "grp", "m"), _i("h", 0) + _cs("r") + uvarint(40_001)),  # a string longer than 32767
    ]  # fmt: skip
    return records


@pytest.mark.broker
def test_offsets_decoder_matches_kafkas_on_share_and_streams_group_records(kafka_jars, tmp_path):
    """--offsets-decoder on records of every share and streams group type (and the consumer group types a
    broker rarely writes) built here: Kafka's DumpLogSegments decides what they print."""
    harness = _kafka_dump()
    records = [Record(i, TS + i, k, v) for i, (k, v) in enumerate(newer_group_records())]
    path = write(tmp_path, segment_name(0, ".log"), record_batch.build_batch(0, records))
    _compare_with_kafka(harness, [path], ["--offsets-decoder"])


def share_group_state_records() -> list[tuple[bytes, bytes | None]]:
    """Share snapshots and updates (the delivery complete count set and left at its default), a tombstone,
    a type and a value version Kafka 4.4 does not know."""

    def key(record_type: int) -> bytes:
        return _key(record_type, "share-grp") + TOPIC_ID + _i("i", 4)

    batch = _i("qqbh", 100, 109, 2, 1) + _tags()
    return [
        (key(0), _i("h", 0) + _i("iiiqqq", 1, 2, 3, 100, TS, TS + 1) + _carr(batch, batch) + _tags(t0=_i("i", 7))),
        (key(0), _i("h", 0) + _i("iiiqqq", 1, 2, 3, 100, TS, TS + 1) + _carr() + _tags()),
        (key(1), _i("h", 0) + _i("iiq", 1, 3, 105) + _carr(batch) + _tags(t0=_i("i", -1))),
        (key(1), None),
        (key(2), _i("h", 0)),
        (key(1), _i("h", 1)),
    ]  # fmt: skip


@pytest.mark.broker
def test_share_group_state_decoder_matches_kafkas(kafka_jars, tmp_path):
    harness = _kafka_dump()
    records = [Record(i, TS + i, k, v) for i, (k, v) in enumerate(share_group_state_records())]
    path = write(tmp_path, segment_name(0, ".log"), record_batch.build_batch(0, records))
    _compare_with_kafka(harness, [path], ["--share-group-state-decoder"])
    _compare_with_kafka(harness, [path], ["--share-group-state-decoder", "--transaction-log-decoder"])
