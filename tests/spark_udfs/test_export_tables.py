"""export into Iceberg (the embedded SQLite catalog, read back by Spark SQL and by pyiceberg), typed by
the registry's schemas with a side table of undecodable records, and incrementally: after more writes,
a tombstone and retention, an incremental export equals a full one."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from jobs import export
from jobs.tables import IcebergCatalog
from kafka_log_core.format import checkpoints
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.registry import rest
from tests.logbuild import mark_clean_shutdown, write_segment
from tests.registry import producers, stand_in
from tests.spark_udfs.schema_topics import ORDER_V2, avro_orders
from tests.spark_udfs.test_data_source import _payments_dir, _rebuilt_state, kp_batch

pytestmark = pytest.mark.spark


def _iceberg(tmp_path: Path, name: str, **kw) -> export.ExportSettings:
    catalog = IcebergCatalog(name, str(tmp_path / "warehouse"))
    return export.ExportSettings(str(tmp_path / "warehouse"), fmt="iceberg", catalog=catalog, **kw)


def _configure(spark, settings):
    settings.catalog.configure(spark)
    return settings


def test_latest_view_as_an_iceberg_table_read_by_spark_sql_and_pyiceberg(spark, tmp_path):
    written = _payments_dir(tmp_path / "logs")
    settings = _configure(spark, _iceberg(tmp_path, "ice_bytes"))
    rows = export.run(spark, [str(tmp_path / "logs")], None, settings)
    state = _rebuilt_state(written, committed=True, ends={})
    assert {r["status"] for r in rows} == {"exported"} and sum(r["rows"] for r in rows) == len(state)
    table = spark.sql("SELECT topic, partition, key, value, offset FROM ice_bytes.kafka.topics").collect()
    expected = {(r.topic, r.partition, r.key, r.value, r.offset) for r in state.values()}
    assert {tuple(r) for r in table} == expected

    from pyiceberg.catalog.sql import SqlCatalog

    warehouse = tmp_path / "warehouse"
    catalog = SqlCatalog("ice_bytes", uri=f"sqlite:///{warehouse}/catalog.db", warehouse=warehouse.as_uri())
    found = catalog.load_table("kafka.topics").scan().to_arrow().to_pylist()
    assert {(r["topic"], r["partition"], r["key"], r["value"], r["offset"]) for r in found} == expected


def test_typed_tables_and_the_side_table_of_undecodable_records(spark, tmp_path):
    expected = avro_orders(tmp_path / "logs")
    out = tmp_path / "delta"
    settings = export.ExportSettings(str(out), fmt="delta", schemas="log")
    rows = export.run(spark, [str(tmp_path / "logs")], "orders", settings)
    last = {}
    for row in expected:
        last[row["key"]] = row
    good = {k: r for k, r in last.items() if r["value"] is not None}
    bad = {k: r for k, r in last.items() if r["error"] is not None}
    assert [(r["topic"], r["rows"], r["undecodable"]) for r in rows] == [("orders", len(good), len(bad))]
    table = spark.read.format("delta").load(str(out / "topics" / "orders"))
    assert "decodeError" not in table.columns and "keyBytes" not in table.columns  # the key is bytes
    assert {r["key"]: r["value"].asDict() for r in table.collect()} == {
        k: r["value"] for k, r in good.items()
    }
    side = spark.read.format("delta").load(str(out / "undecodable" / "orders")).collect()
    assert {r["key"]: (r["offset"], r["value"]) for r in side} == {
        k: (r["offset"], r["valueBytes"]) for k, r in bad.items()
    }
    assert all(r["error"] in s["reason"] for s in side for r in [bad[s["key"]]])


def _more_orders(log_dir: Path) -> None:
    """A second segment: k0 and k9 written, k2 tombstoned, k3 undecodable now, k7 decodable now."""
    frame = producers.frame
    records = [
        (
            b"k0",
            frame(2, producers.avro_payload(ORDER_V2, {"id": 0, "qty": 99, "email": None, "status": "x"})),
            [],
        ),
        (
            b"k9",
            frame(2, producers.avro_payload(ORDER_V2, {"id": 9, "qty": 9, "email": "n", "status": "y"})),
            [],
        ),
        (b"k2", None, []),
        (b"k3", b"not avro", []),
        (
            b"k7",
            frame(2, producers.avro_payload(ORDER_V2, {"id": 7, "qty": 7, "email": None, "status": "z"})),
            [],
        ),
    ]
    data, _ = kp_batch(12, records)
    write_segment(log_dir / "orders-0", 12, [data])


@pytest.mark.parametrize("fmt", ["delta", "iceberg"])
def test_an_incremental_export_equals_a_full_one(spark, tmp_path, fmt):
    logs = tmp_path / "logs"
    avro_orders(logs)

    def settings(where: str, incremental: bool) -> export.ExportSettings:
        if fmt == "iceberg":
            return _configure(
                spark, _iceberg(tmp_path / where, f"ice_{where}", schemas="log", incremental=incremental)
            )
        return export.ExportSettings(
            str(tmp_path / where), fmt="delta", schemas="log", incremental=incremental
        )

    def tables(s: export.ExportSettings):
        main, side = export.table_of(s, "orders", side=False), export.table_of(s, "orders", side=True)
        rows = sorted(tuple(r) for r in main.read(spark).drop("timestamp").collect())
        return rows, sorted(tuple(r) for r in side.read(spark).drop("timestamp").collect())

    def incremental_and_full(full: str) -> list[dict]:
        """The incremental export and a full one of the same log dir at once, from threads of the one
        session (their own tables and catalogs): each is a chain of small jobs that leaves cores idle."""
        both = (settings("inc", True), settings(full, False))
        with ThreadPoolExecutor(2) as pool:
            running = [pool.submit(export.run, spark, [str(logs)], "orders", s) for s in both]
            incremental, _ = (future.result() for future in running)
            return incremental

    first = export.run(spark, [str(logs)], "orders", settings("inc", True))
    assert first[0]["note"] == "the table has no export state yet"
    _more_orders(logs)
    second = incremental_and_full("full1")
    assert (second[0]["note"], second[0]["read_from"]) == ("since", 12)
    assert tables(settings("inc", True)) == tables(settings("full1", False))
    # retention: the log start moves past the first segment
    checkpoints.write_offset_checkpoint(
        logs / "log-start-offset-checkpoint", {TopicPartition("orders", 0): 12}
    )
    for suffix in (".log", ".index", ".timeindex"):
        (logs / "orders-0" / f"{0:020d}{suffix}").unlink()
    third = incremental_and_full("full2")
    assert (third[0]["note"], third[0]["read_from"]) == ("since", 17)  # rows below 12 deleted
    assert tables(settings("inc", True)) == tables(settings("full2", False))
    assert json.loads(json.dumps(third))  # the rows are plain data


def test_a_registry_url_exports_the_tables_a_schema_file_of_its_answers_exports(spark, tmp_path, monkeypatch):
    """The stand-in registry holds the orders schemas (ids 1, 2) ``avro_orders`` writes with, and asks for
    a password: the export asks it once on the driver (the reads decode with that snapshot)."""
    expected = avro_orders(tmp_path / "logs")
    monkeypatch.setenv(rest.USER_INFO_ENV, "reader:pw")
    seen: list = []

    def read(name: str, table: str) -> list:
        return sorted(
            (r.asDict(recursive=True) for r in spark.read.format("delta").load(str(tmp_path / name / table / "orders")).collect()),
            key=lambda r: r["offset"],
        )  # fmt: skip

    found = {}
    with stand_in.registry(authorization="Basic cmVhZGVyOnB3", seen=seen) as url:  # base64("reader:pw")
        for name, schemas in (("url", url), ("file", stand_in.schema_file(tmp_path))):
            settings = export.ExportSettings(str(tmp_path / name), fmt="delta", schemas=schemas)
            rows = export.run(spark, [str(tmp_path / "logs")], "orders", settings)
            found[name] = (
                [(r["topic"], r["rows"], r["undecodable"]) for r in rows],
                read(name, "topics"),
                read(name, "undecodable"),
            )
    assert found["url"] == found["file"]
    subjects = {answer["subject"] for answer, _ in stand_in.VERSIONS}
    assert len(seen) == 1 + 2 * len(subjects) + len(stand_in.VERSIONS)  # asked once: listings, versions
    last = {row["key"]: row for row in expected}
    assert {r["key"]: r["value"] for r in found["url"][1]} == {
        k: r["value"] for k, r in last.items() if r["value"] is not None
    }
    assert {r["key"] for r in found["url"][2]} == {k for k, r in last.items() if r["error"] is not None}


def test_an_incremental_export_reads_only_what_was_written_since_the_tables_marks(spark, tmp_path):
    """A byte of the first segment damaged after the first export: the incremental export, reading from
    the table's mark (offset 12, the second segment), never visits it and merges the new records as a full
    export of the undamaged log does; a full export of the damaged log reads it and leaves the partition
    out, naming the file."""
    logs = tmp_path / "logs"
    avro_orders(logs)

    def settings(where: str, incremental: bool) -> export.ExportSettings:
        return export.ExportSettings(
            str(tmp_path / where), fmt="delta", schemas="log", incremental=incremental
        )

    def table(where: str) -> list:
        found = export.table_of(settings(where, False), "orders", side=False).read(spark)
        return sorted(tuple(r) for r in found.drop("timestamp").collect())

    export.run(spark, [str(logs)], "orders", settings("inc", True))
    _more_orders(logs)
    export.run(spark, [str(logs)], "orders", settings("undamaged", False))
    first = logs / "orders-0" / f"{0:020d}.log"
    data = bytearray(first.read_bytes())
    data[-1] ^= 0xFF  # in the records of the segment's last batch: its CRC no longer matches
    first.write_bytes(bytes(data))
    mark_clean_shutdown(logs)  # no crash recovery to plan: only the reads visit the batches
    second = export.run(spark, [str(logs)], "orders", settings("inc", True))
    assert [(r["status"], r["note"], r["read_from"]) for r in second] == [("exported", "since", 12)]
    assert table("inc") == table("undamaged")
    damaged = export.run(spark, [str(logs)], "orders", settings("full", False))
    assert [r["status"] for r in damaged] == ["failed"] and str(first) in damaged[0]["reason"]
