"""`dump --cluster-metadata-decoder`, `--remote-log-metadata-decoder` and the decoder classes against Kafka
4.4's own DumpLogSegments on the same files: a real broker's metadata log and snapshot, records of every
metadata and remote-log-metadata type and version built here with random field values, malformed records, and
segments that are not metadata at all.
"""

from __future__ import annotations

import random
import struct
import time
from pathlib import Path

import pytest

from kafka_log_core.format.message_schema import Field, in_versions
from kafka_log_core.format.metadata_records import METADATA_TYPES
from kafka_log_core.settings.cluster_metadata import METADATA_LOG_DIR
from kafka_log_core.tools.remote_log_metadata_text import REMOTE_LOG_METADATA_TYPES
from tests.broker.test_broker_dump import _compare_with_kafka, _kafka_dump, build_zoo
from tests.metadata_build import frame, metadata_batch, string, tagged, uvarint
from tests.tools.dump_harness import TS, control_batch, run_dump, segment_name, write

pytestmark = pytest.mark.broker

DECODER = "--cluster-metadata-decoder"


# ------------------------------------------------------------------------------- records built from the schemas
def _random_value(rng: random.Random, field: Field, version: int):
    nullable = in_versions(field.nullable, version)
    if nullable and rng.random() < 0.3:
        return None
    kind = field.kind
    if kind == "{}":  # (no metadata type has a nullable struct)
        return _random_struct(rng, field.fields, version)
    if kind == "[]":
        return [_random_struct(rng, field.fields, version) for _ in range(rng.randint(0, 2))]
    if kind.startswith("[]"):
        element = Field(field.name, kind[2:])
        return [_random_value(rng, element, version) for _ in range(rng.randint(0, 3))]
    return {
        "int8": lambda: rng.randint(-128, 127),
        "int16": lambda: rng.randint(-(2**15), 2**15 - 1),
        "int32": lambda: rng.choice([0, -1, rng.randint(-(2**31), 2**31 - 1)]),
        "int64": lambda: rng.choice([0, -1, rng.randint(-(2**63), 2**63 - 1)]),
        "uint16": lambda: rng.randint(0, 65535),
        "float64": lambda: rng.choice([0.0, 1024.0, 2.5e7, 1e-5, 0.125, rng.uniform(-1e9, 1e9)]),
        "bool": lambda: rng.random() < 0.5,
        "uuid": lambda: rng.randbytes(16),
        "string": lambda: rng.choice(["", "a", 'héllo "q" \\ \n', "x" * rng.randint(1, 40)]),
        "bytes": lambda: rng.randbytes(rng.randint(0, 12)),
    }[kind]()


def _random_struct(rng: random.Random, fields: tuple[Field, ...], version: int) -> dict:
    values = {}
    for field in fields:
        if not in_versions(field.versions, version):
            continue
        if field.tag is not None and rng.random() < 0.4:
            continue  # a tagged field left out: its default
        values[field.name] = _random_value(rng, field, version)
    return values


def _encode_value(field: Field, value) -> bytes:
    """A field in a flexible version, written from the message definition's rules (compact lengths)."""
    kind = field.kind
    if value is None:
        return b"\x00" if kind in ("string", "bytes") or kind.startswith("[]") else b""
    if kind == "{}":
        return _encode_struct(field.fields, value)
    if kind == "[]":
        return uvarint(len(value) + 1) + b"".join(_encode_struct(field.fields, v) for v in value)
    if kind.startswith("[]"):
        element = Field(field.name, kind[2:])
        return uvarint(len(value) + 1) + b"".join(_encode_value(element, v) for v in value)
    if kind == "string":
        return string(value)
    if kind == "bytes":
        return uvarint(len(value) + 1) + value
    if kind == "uuid":
        return value
    if kind == "bool":
        return b"\x01" if value else b"\x00"
    fmt = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "uint16": ">H", "float64": ">d"}[kind]
    return struct.pack(fmt, value)


def _encode_struct(fields: tuple[Field, ...], values: dict) -> bytes:
    body = b"".join(_encode_value(f, values[f.name]) for f in fields if f.tag is None and f.name in values)
    tags = sorted(
        (f.tag, _encode_value(f, values[f.name])) for f in fields if f.tag is not None and f.name in values
    )
    return body + tagged(*tags)


def every_type_and_version(rng: random.Random, types=METADATA_TYPES) -> list[bytes]:
    values = []
    for api_key, kind in types.items():
        for version in range(kind.max_version + 1):
            for _ in range(3):
                body = _encode_struct(kind.schema.fields, _random_struct(rng, kind.schema.fields, version))
                values.append(frame(api_key, version, body))
    return values


MALFORMED = [
    b"",  # no frame version
    b"\x00\x02\x00",  # KRaft 2.8's frame version
    b"\x05",  # an unknown frame version
    frame(13, 0, tagged()),  # an api key no record type has
    frame(2, 1, tagged()),  # TopicRecord has version 0 only
    frame(2, 0, string("t") + bytes(10)),  # a uuid cut short
    frame(2, 0, string("t") + bytes(16) + tagged() + b"\x07\x07"),  # bytes after the last field
    frame(2, 0, b"\x00" + bytes(16) + tagged()),  # a null name
    b"\x01\x80\x80\x02\x00",  # a record type over 32767
    b"\x01\xff\xff\xff\xff\x0f\x00",  # a record type that is a negative Java int
    b"\x01\x02\xff\xff\xff\xff\xff\x01",  # a version varint longer than 5 bytes
    frame(4, 0, b"\x02" + bytes([100]) + b"ab"),  # a string longer than the value
    frame(3, 0, struct.pack(">i", 0) + bytes(16) + uvarint(0xFFFFFF)),  # a huge array count
]


def test_every_metadata_record_type_and_version_prints_as_kafkas_decoder_prints_it(kafka_jars, tmp_path):
    harness = _kafka_dump()
    rng = random.Random(26)
    values = every_type_and_version(rng)
    batches, offset = [], 0
    for start in range(0, len(values), 20):
        chunk = values[start : start + 20]
        batches.append(metadata_batch(offset, chunk))
        offset += len(chunk)
    batches.append(metadata_batch(offset, MALFORMED))
    offset += len(MALFORMED)
    batches.append(control_batch(offset, 2, b"\x00\x00" + struct.pack(">i", 1) + b"\x01\x01\x00"))
    metadata = tmp_path / METADATA_LOG_DIR
    log = write(metadata, segment_name(0, ".log"), b"".join(batches))
    header = control_batch(0, 3, b"\x00\x00" + struct.pack(">q", TS) + b"\x00")
    snapshot_values = values[:40]
    footer = control_batch(1 + len(snapshot_values), 4, b"\x00\x00\x00")
    snapshot = write(
        metadata,
        "00000000000000000041-0000000003.checkpoint",
        header + metadata_batch(1, snapshot_values) + footer,
    )
    for args in ([DECODER], [DECODER, "--skip-record-metadata"]):
        _compare_with_kafka(harness, [log, snapshot], args)
    printed = run_dump("--files", f"{log},{snapshot}", DECODER).stdout
    assert printed.count("payload: Error at") == len(MALFORMED)  # the built records all read
    assert printed.count('"type":"') == len(values) + len(snapshot_values)


def test_segments_that_are_not_metadata_print_as_kafkas_decoder_prints_them(kafka_jars, tmp_path):
    """Keys, control batches, legacy entries, a null value: every record a failed parse, as Kafka says it."""
    harness = _kafka_dump()
    files = [f for f in build_zoo(tmp_path) if f.suffix == ".log" and "wrong" not in f.parent.name]
    _compare_with_kafka(harness, files, [DECODER])


# ------------------------------------------------------------------------------------- a broker's metadata log
def _admin(bootstrap: str):
    from confluent_kafka.admin import AdminClient

    return AdminClient({"bootstrap.servers": bootstrap})


def test_a_brokers_metadata_log_and_snapshot_print_as_kafkas_decoder_prints_them(kafka_broker):
    """Topics, added partitions, topic and broker configs, a deleted topic, client quotas, SCRAM
    credentials, producer ids; the broker's own registration, feature levels and KRaft control records."""
    from confluent_kafka.admin import NewPartitions

    harness = _kafka_dump()
    broker = kafka_broker(**{"metadata.log.max.snapshot.interval.ms": 500})
    boot = broker.bootstrap
    harness.create_topic(boot, "kept", 2, {"cleanup.policy": "compact", "retention.ms": "3600000"})
    harness.create_topic(boot, "gone", 1)
    admin = _admin(boot)
    admin.create_partitions([NewPartitions("kept", 4)])["kept"].result(30)
    admin.delete_topics(["gone"], operation_timeout=30)["gone"].result(30)
    harness.run_kafka_configs(boot, "--entity-type", "clients", "--entity-name", "c1", "--alter",
                              "--add-config", "producer_byte_rate=1048576,consumer_byte_rate=2.5E7")  # fmt: skip
    harness.run_kafka_configs(boot, "--entity-type", "users", "--entity-name", "alice", "--alter",
                              "--add-config", "SCRAM-SHA-256=[iterations=4096,password=secret]")  # fmt: skip
    harness.run_kafka_configs(boot, "--entity-type", "brokers", "--entity-default", "--alter",
                              "--add-config", "log.retention.ms=86400000")  # fmt: skip
    harness.produce(boot, "kept", [harness.SentRecord(b"k", b"v", (), TS, 0)], idempotent=True)
    metadata = broker.log_dir / METADATA_LOG_DIR
    deadline = time.monotonic() + 30
    while not [p for p in metadata.glob("*.checkpoint") if not p.name.startswith("00000000000000000000-")]:
        assert time.monotonic() < deadline, "the controller wrote no snapshot"
        time.sleep(0.2)
    broker.stop()
    files = sorted(metadata.glob("*.checkpoint")) + sorted(metadata.glob("*.log"))
    for args in ([DECODER], [DECODER, "--skip-record-metadata"]):
        _compare_with_kafka(harness, files, args)
    printed = harness.run_dump_log_segments(files, DECODER).stdout
    for kind in ("TOPIC_RECORD", "PARTITION_RECORD", "PARTITION_CHANGE_RECORD", "REMOVE_TOPIC_RECORD",
                 "CONFIG_RECORD", "CLIENT_QUOTA_RECORD", "USER_SCRAM_CREDENTIAL_RECORD", "PRODUCER_IDS_RECORD",
                 "FEATURE_LEVEL_RECORD", "REGISTER_BROKER_RECORD"):  # fmt: skip
        assert f'"type":"{kind}"' in printed, kind
    assert "SnapshotHeader" in printed and "Error at" not in printed


# ------------------------------------------------------------------------------------- decoder classes
def _decoder_class_segment(root: Path) -> Path:
    from kafka_log_core.format import record_batch
    from kafka_log_core.format.record_batch import Record

    records = [
        Record(0, TS, struct.pack(">i", -7), struct.pack(">q", 2**40)),
        Record(1, TS, struct.pack(">i", 7) + b"extra", struct.pack(">q", -1) + b"x"),
        Record(2, TS, None, struct.pack(">q", 5)),
        Record(3, TS, struct.pack(">i", 2**31 - 1), None),
    ]
    return write(root / "numbers-0", segment_name(0, ".log"), record_batch.build_batch(0, records))


@pytest.mark.parametrize(
    "args",
    [
        ["--key-decoder-class", "org.apache.kafka.tools.api.IntegerDecoder",
         "--value-decoder-class", "org.apache.kafka.tools.api.LongDecoder"],
        ["--key-decoder-class", "org.apache.kafka.tools.api.StringDecoder"],
        ["--value-decoder-class"],  # no class: StringDecoder
        ["--key-decoder-class", "org.apache.kafka.tools.api.IntegerDecoder", "--skip-record-metadata"],
    ],
    ids=["integer-long", "string", "default-class", "skip-metadata"],
)  # fmt: skip
def test_the_decoder_classes_kafka_ships_print_as_kafka_prints_them(kafka_jars, tmp_path, args):
    _compare_with_kafka(_kafka_dump(), [_decoder_class_segment(tmp_path)], args)


# ------------------------------------------------------------------------------------- remote log metadata
def _remote_segment(start: int, end: int, epochs: list[tuple[int, int]], state: int, *, snapshot=False,
                    custom: bytes | None = None, txn_empty: bool | None = None) -> bytes:  # fmt: skip
    tip = string("orders") + bytes(range(16)) + struct.pack(">i", 3) + tagged()
    head = bytes(range(16, 32)) if snapshot else tip + bytes(range(32, 48)) + tagged()
    body = head + struct.pack(">qqiqq", start, end, 7, TS + 5, TS + 9)
    body += uvarint(len(epochs) + 1) + b"".join(struct.pack(">iq", e, o) + tagged() for e, o in epochs)
    body += struct.pack(">i", 4096) + (b"\x00" if custom is None else uvarint(len(custom) + 1) + custom)
    body += struct.pack(">b", state)
    body += tagged() if txn_empty is None else tagged((0, b"\x01" if txn_empty else b"\x00"))
    return frame(3 if snapshot else 0, 0, body)


def remote_log_metadata_values(rng: random.Random) -> list[bytes]:
    tip = string("orders") + bytes(range(16)) + struct.pack(">i", 3) + tagged()
    segment_id = tip + bytes(range(32, 48)) + tagged()
    values = []
    for snapshot in (False, True):
        values += [
            _remote_segment(
                0, 99, [(0, 0), (3, 50), (1, 20)], 1, snapshot=snapshot, custom=b"abc", txn_empty=True
            ),
            _remote_segment(5, 5, [(2, 5), (2, 6)], 3, snapshot=snapshot, txn_empty=False),
            _remote_segment(
                -1, 5, [], 9, snapshot=snapshot
            ),  # every constructor check fails: the first is said
            _remote_segment(10, 5, [], 0, snapshot=snapshot),
            _remote_segment(0, 5, [], 9, snapshot=snapshot),
            _remote_segment(0, 5, [(0, 0)], 4, snapshot=snapshot),
        ]
    for state in (0, 2, 3, 4, -1):
        values.append(
            frame(
                1, 0, segment_id + struct.pack(">iq", 2, TS) + b"\x03xy" + struct.pack(">b", state) + tagged()
            )
        )
    for state in (0, 1, 2, 3):
        values.append(frame(2, 0, tip + struct.pack(">iqb", 2, TS, state) + tagged()))
    values += every_type_and_version(rng, REMOTE_LOG_METADATA_TYPES)
    return values + [frame(4, 0, tagged()), frame(0, 1, tagged()), b"", b"\x01\x02\x00\x00\x00"]


def test_remote_log_metadata_records_print_as_kafkas_decoder_prints_them(kafka_jars, tmp_path):
    from kafka_log_core.format import record_batch
    from kafka_log_core.format.record_batch import Record

    harness = _kafka_dump()
    values = remote_log_metadata_values(random.Random(44))
    batches = [metadata_batch(0, values)]
    batches.append(record_batch.build_batch(len(values), [Record(len(values), TS, None, None)]))
    log = write(tmp_path / "__remote_log_metadata-0", segment_name(0, ".log"), b"".join(batches))
    for args in (
        ["--remote-log-metadata-decoder"],
        ["--remote-log-metadata-decoder", "--skip-record-metadata"],
    ):
        _compare_with_kafka(harness, [log], args)
    printed = run_dump("--files", log, "--remote-log-metadata-decoder").stdout
    for kind in ("RemoteLogSegmentMetadata{", "RemoteLogSegmentMetadataUpdate{", "RemotePartitionDeleteMetadata{",
                 "RemoteLogSegmentMetadataSnapshot{"):  # fmt: skip
        assert kind in printed, kind
