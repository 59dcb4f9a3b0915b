"""Typed, incrementally maintained tables of a real broker's topics (issue 28).

One real broker for the module (tests/kafka_harness.py), its cleaner on:

1. The registry's ``_schemas`` topic gets its records as the registry writes them (key and value JSON,
   tests/registry/registry_records.py says where the format comes from): an Avro, a Protobuf and a JSON
   Schema subject, each with two versions (a field added with a default, a field removed). Producers
   write the Confluent wire format (payloads by fastavro, protoc's classes, json) to three compacted
   topics: values of both versions, updates, tombstones, an aborted transaction, a value naming an id the
   registry does not have and a truncated one.
2. A ``read_committed`` consumer reads every topic and decodes what the broker serves with the latest
   schemas, independently of our decoder: the state it rebuilds is what the tables must hold.
3. The broker stops; ``export --schemas log --incremental`` writes Iceberg and Delta tables (the first run
   is a full export), read back through Spark SQL (and pyiceberg).
4. The broker starts again: more updates, deletes, new keys, a once-undecodable key written properly;
   its cleaner compacts. It stops; the second incremental export equals the consumer's state and a fresh
   full export of the same log dir.
"""

from __future__ import annotations

import concurrent.futures
import io
import json
import time
from dataclasses import dataclass
from pathlib import Path

import fastavro
import pytest

from jobs import export
from jobs.tables import IcebergCatalog
from tests.broker.test_broker_interop import report_timings, start_with_spark
from tests.kafka_harness import (
    SMALL_SEGMENT_CONFIG,
    KafkaBroker,
    Transaction,
    consume_all,
    create_topic,
    latest_offsets,
    produce,
    produce_transactions,
    wait_for_broker_cleaning,
)
from tests.registry import producers
from tests.registry import registry_records as rr

pytestmark = pytest.mark.broker

AVRO_V1 = producers.ORDER_V1
AVRO_V2 = json.dumps(
    {"type": "record", "name": "Order", "namespace": "shop",
     "fields": [{"name": "id", "type": "long"}, {"name": "qty", "type": "long"},
                {"name": "status", "type": "string", "default": "new"}]}
)  # fmt: skip
PROTO_V1 = 'syntax = "proto3";\npackage ship;\nmessage Shipment {\n  int64 id = 1;\n  string carrier = 2;\n  int32 qty = 3;\n}\n'
PROTO_V2 = (
    'syntax = "proto3";\npackage ship;\nmessage Shipment {\n  int64 id = 1;\n  int32 qty = 3;\n'
    "  optional string note = 4;\n}\n"
)
JSON_V1 = json.dumps(
    {"type": "object", "properties": {"id": {"type": "integer"}, "city": {"type": "string"}}}
)
JSON_V2 = json.dumps(
    {"type": "object",
     "properties": {"id": {"type": "integer"}, "zone": {"type": "string", "default": "none"}}}
)  # fmt: skip
TOPICS = {  # topic: (schema type, (v1 id, v1 text), (v2 id, v2 text))
    "orders": ("AVRO", (1, AVRO_V1), (2, AVRO_V2)),
    "shipments": ("PROTOBUF", (3, PROTO_V1), (4, PROTO_V2)),
    "events": ("JSON", (5, JSON_V1), (6, JSON_V2)),
}
TOPIC_CONFIG = {
    "cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", "delete.retention.ms": str(7 * 86_400_000),
    **SMALL_SEGMENT_CONFIG,
}  # fmt: skip
UNKNOWN_ID = 999
FORMATS = ("iceberg", "delta")


class Codec:
    """One topic's two schema versions: how a producer encodes, how the test's consumer decodes."""

    def __init__(self, topic: str, tmp: Path) -> None:
        self.kind, (self.v1_id, self.v1), (self.v2_id, self.v2) = TOPICS[topic]
        if self.kind == "PROTOBUF":
            self.m1 = producers.proto_module(tmp, f"{topic}1", self.v1).Shipment
            self.m2 = producers.proto_module(tmp, f"{topic}2", self.v2).Shipment

    def encode(self, version: int, i: int) -> bytes:
        schema_id = self.v1_id if version == 1 else self.v2_id
        if self.kind == "AVRO":
            value = (
                {"id": i, "name": f"n{i}", "qty": i}
                if version == 1
                else {"id": i, "qty": 100 + i, "status": f"s{i}"}
            )
            return producers.frame(
                schema_id, producers.avro_payload(self.v1 if version == 1 else self.v2, value)
            )
        if self.kind == "PROTOBUF":
            message = (
                self.m1(id=i, carrier="c", qty=i)
                if version == 1
                else self.m2(id=i, qty=100 + i, note=f"n{i}")
            )
            return producers.frame(schema_id, message.SerializeToString(), [0])
        value = {"id": i, "city": "x"} if version == 1 else {"id": i, "zone": f"z{i}"}
        return producers.frame(schema_id, producers.json_payload(value))

    def decode(self, data: bytes) -> dict:
        """What a consumer gets with the latest schema (reader schema, the latest message class, the
        latest JSON Schema's properties with their defaults)."""
        schema_id = int.from_bytes(data[1:5], "big")
        if data[0] != 0 or schema_id not in (self.v1_id, self.v2_id):
            raise ValueError(f"schema id {schema_id} is not registered")
        if self.kind == "AVRO":
            writer = fastavro.parse_schema(json.loads(self.v1 if schema_id == self.v1_id else self.v2))
            return fastavro.schemaless_reader(
                io.BytesIO(data[5:]), writer, fastavro.parse_schema(json.loads(self.v2))
            )
        if self.kind == "PROTOBUF":
            m = self.m2.FromString(data[6:])
            return {"id": m.id, "qty": m.qty, "note": m.note if m.HasField("note") else None}
        value = json.loads(data[5:])
        return {"id": value.get("id"), "zone": value.get("zone", "none")}


def _registry_records() -> list[tuple[bytes, bytes | None]]:
    records = [(rr.noop_key(), None)]
    for topic, (kind, (id1, text1), (id2, text2)) in TOPICS.items():
        records += [
            rr.schema_record(f"{topic}-value", 1, id1, text1, kind),
            rr.config_record(f"{topic}-value"),
        ]
        records.append(rr.schema_record(f"{topic}-value", 2, id2, text2, kind))
    return records


def _first_writes(codec: Codec) -> list[tuple[bytes, bytes | None]]:
    records = [(b"k%02d" % i, codec.encode(1, i)) for i in range(12)]
    records += [(b"k%02d" % i, codec.encode(2, i)) for i in range(6, 16)]
    records += [(b"k%02d" % i, None) for i in (0, 1, 2)]
    good = codec.encode(2, 30)
    records += [(b"k20", producers.frame(UNKNOWN_ID, good[5:])), (b"k21", good[:-2])]
    return records


def _second_writes(codec: Codec) -> list[tuple[bytes, bytes | None]]:
    records = [(b"k%02d" % i, codec.encode(2, 50 + i)) for i in (3, 4, 7, 8)]
    records += [(b"k%02d" % i, None) for i in (9, 10)]
    records += [(b"k%02d" % i, codec.encode(2, i)) for i in range(40, 44)]
    records += [(b"k20", codec.encode(2, 20))]  # the undecodable key, decodable now
    return records * 3  # the same again: the cleaner has something to remove


def _consumer_state(bootstrap: str, topic: str, codec: Codec) -> tuple[dict, set]:
    """key -> decoded value of the latest view, and the keys whose latest value does not decode."""
    state: dict[bytes, dict] = {}
    undecodable: set[bytes] = set()
    for record in consume_all(bootstrap, topic, isolation_level="read_committed"):
        state.pop(record.key, None)
        undecodable.discard(record.key)
        if record.value is None:
            continue
        try:
            state[record.key] = codec.decode(record.value)
        except Exception:  # the consumer's own decoders refuse it
            undecodable.add(record.key)
    return state, undecodable


@dataclass
class Phase:
    expected: dict[str, tuple[dict, set]]
    rows: dict[str, list[dict]]


@dataclass
class Scenario:
    log_dir: Path
    work: Path
    first: Phase
    second: Phase
    full: dict[str, list[dict]]


def _settings(work: Path, fmt: str, name: str) -> export.ExportSettings:
    out = work / name
    if fmt == "iceberg":
        catalog = IcebergCatalog(name, str(out))
        return export.ExportSettings(str(out), fmt=fmt, schemas="log", incremental=True, catalog=catalog)
    return export.ExportSettings(str(out), fmt=fmt, schemas="log", incremental=True)


def _export(spark, log_dir: Path, settings: export.ExportSettings) -> list[dict]:
    if settings.catalog is not None:
        settings.catalog.configure(spark)
    return export.run(spark, [str(log_dir)], "orders|shipments|events", settings)


def _exports(spark, log_dir: Path, work: Path, names: dict[str, str]) -> dict[str, list[dict]]:
    """The exports of ``names`` (key: (format, table dir name)), each into tables of its own, at once
    from threads of the one Spark session: each is a chain of small Spark jobs that leaves most of the
    two cores idle, and they share nothing (their own tables, catalogs and session properties)."""
    with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
        running = {
            key: pool.submit(_export, spark, log_dir, _settings(work, fmt, name))
            for key, (fmt, name) in names.items()
        }
        return {key: future.result() for key, future in running.items()}


def _tables(spark, settings: export.ExportSettings) -> dict[str, tuple[dict, set]]:
    """Each topic's table and side table as Spark SQL reads them (an Iceberg catalog table, or
    delta.`path`): key -> the typed value, and the keys of the undecodable records."""
    out = {}
    for topic in TOPICS:
        main = spark.sql(f"SELECT key, value FROM {export.table_of(settings, topic, side=False).sql}")
        side = spark.sql(f"SELECT key, reason FROM {export.table_of(settings, topic, side=True).sql}")
        out[topic] = (
            {r["key"]: r["value"].asDict() for r in main.collect()},
            {r["key"] for r in side.collect()},
        )
    return out


@pytest.fixture(scope="module")
def scenario(kafka_jars, tmp_path_factory, pytestconfig, request) -> Scenario:
    started = time.monotonic()
    timings = {}
    work = tmp_path_factory.mktemp("tables")
    log_dir = work / "log-dir"
    broker = KafkaBroker(log_dir, work / "broker", {"log.cleaner.backoff.ms": "200"}, lib_dir=kafka_jars)
    codecs = {topic: Codec(topic, work / "proto") for topic in TOPICS}
    try:
        broker.format()
        spark = start_with_spark(broker, request)
        timings["broker start + Spark"] = time.monotonic() - started
        t = time.monotonic()
        create_topic(broker.bootstrap, "_schemas", 1, {"cleanup.policy": "compact"})
        produce(broker.bootstrap, "_schemas", _registry_records())
        for topic, codec in codecs.items():
            create_topic(broker.bootstrap, topic, 2, TOPIC_CONFIG)
            produce(broker.bootstrap, topic, _first_writes(codec))
            aborted = [(b"k%02d" % i, codec.encode(2, 90 + i)) for i in (11, 12, 13)]
            produce_transactions(
                broker.bootstrap, topic, [Transaction(aborted, commit=False)], transactional_id=f"t-{topic}"
            )
        first = {topic: _consumer_state(broker.bootstrap, topic, codec) for topic, codec in codecs.items()}
        ends = {topic: latest_offsets(broker.bootstrap, topic) for topic in TOPICS}
        broker.stop()
        timings["produce, consume, stop"] = time.monotonic() - t
        t = time.monotonic()
        first_rows = _exports(spark, log_dir, work, {fmt: (fmt, f"{fmt}_inc") for fmt in FORMATS})
        first_phase = Phase(first, first_rows)
        timings["first exports"] = time.monotonic() - t
        t = time.monotonic()

        broker.start()
        for topic, codec in codecs.items():
            produce(broker.bootstrap, topic, _second_writes(codec))
            # Rolls every partition's active segment past the first export's end (SMALL_SEGMENT_BYTES), so
            # that the cleaner may clean past it: records sent to each partition, a key of its own each.
            rolls = [(b"roll%d" % p, codec.encode(2, 99), None, None, p) for p in (0, 1)]
            produce(broker.bootstrap, topic, rolls * 150)
        timings["restart, produce"] = time.monotonic() - t
        t = time.monotonic()
        for topic in TOPICS:
            for partition, end in ends[topic].items():
                if end:
                    wait_for_broker_cleaning(log_dir, topic, partition, end, timeout=120)
        timings["the broker's cleaner"] = time.monotonic() - t
        t = time.monotonic()
        second = {topic: _consumer_state(broker.bootstrap, topic, codec) for topic, codec in codecs.items()}
        broker.stop()
        timings["consume, stop"] = time.monotonic() - t
        t = time.monotonic()
        # The second incremental exports and the full ones of the same log dir, all at once.
        exported = _exports(
            spark, log_dir, work,
            {(kind, fmt): (fmt, f"{fmt}_{kind}") for kind in ("inc", "full") for fmt in FORMATS},
        )  # fmt: skip
        second_rows = {fmt: exported["inc", fmt] for fmt in FORMATS}
        full = {fmt: exported["full", fmt] for fmt in FORMATS}
        timings["second and full exports"] = time.monotonic() - t
        timings["set-up total"] = time.monotonic() - started
        report_timings(pytestconfig, "broker tables", timings)
        return Scenario(log_dir, work, first_phase, Phase(second, second_rows), full)
    finally:
        if broker.running:
            broker.stop()


@pytest.mark.parametrize("fmt", FORMATS)
def test_the_first_export_holds_what_a_consumer_decodes(scenario, spark, fmt):
    """Run on the final state of the tables: the second phase's; the first phase is checked by its rows."""
    rows = scenario.first.rows[fmt]
    for topic, (state, undecodable) in scenario.first.expected.items():
        mine = [r for r in rows if r["topic"] == topic]
        assert sum(r["rows"] for r in mine) == len(state)
        assert sum(r["undecodable"] for r in mine) == len(undecodable) == 2
        assert {r["note"] for r in mine} == {"the table has no export state yet"}


@pytest.mark.parametrize("fmt", FORMATS)
def test_an_incremental_export_after_writes_deletes_and_compaction_equals_the_consumer_and_a_full_export(
    scenario, spark, fmt
):
    settings = _settings(scenario.work, fmt, f"{fmt}_inc")
    if settings.catalog is not None:
        settings.catalog.configure(spark)
    tables = _tables(spark, settings)
    for topic, (state, undecodable) in scenario.second.expected.items():
        assert tables[topic][0] == state, topic
        assert tables[topic][1] == undecodable, topic
    full_settings = _settings(scenario.work, fmt, f"{fmt}_full")
    if full_settings.catalog is not None:
        full_settings.catalog.configure(spark)
    assert _tables(spark, full_settings) == tables
    notes = {r["note"].split(":")[0] for r in scenario.second.rows[fmt]}
    assert notes <= {"since", "whole"} and "whole" in notes  # the cleaner cleaned past the first export


def test_pyiceberg_reads_the_tables_spark_wrote(scenario):
    from pyiceberg.catalog.sql import SqlCatalog

    out = scenario.work / "iceberg_inc"
    catalog = SqlCatalog("iceberg_inc", uri=f"sqlite:///{out}/catalog.db", warehouse=out.as_uri())
    found = catalog.load_table("kafka.orders").scan().to_arrow().to_pylist()
    state, _ = scenario.second.expected["orders"]
    assert {r["key"]: r["value"] for r in found} == state
    summary = catalog.load_table("kafka.orders").current_snapshot().summary
    assert "kafka-log-jobs.export" in summary.additional_properties
