"""The ``tables`` section of the benchmark: export as tables (issue 28).

``python -m bench.tables --work DIR [--quick] [--master local[2]]`` prints one JSON object. One log dir,
written by the simulator's broker-like writer: the registry's ``_schemas`` topic and two topics of the
same records (2 partitions, 100 records a batch, half the keys repeated): ``bytes_t`` with plain values,
``avro_t`` with the same values as Avro in the Confluent wire format. In one Spark session, after a
warm-up on a small copy:

* ``records``: ``export --view records`` to Parquet, bytes and Avro (``--schemas log``, typed columns):
  rows per second per core (wall time, the master's cores);
* ``incremental``: the latest view of ``avro_t`` into Iceberg; 1 % more records (updates and new keys);
  then an incremental export against a fresh full export of the same log dir, side by side, and the two
  tables compared (equal rows).
"""

from __future__ import annotations

import argparse
import io
import json
import random
import shutil
import sys
import time
from pathlib import Path

import fastavro

SCHEMA = {
    "type": "record", "name": "Order", "namespace": "bench",
    "fields": [{"name": "id", "type": "long"}, {"name": "customer", "type": "string"},
               {"name": "qty", "type": "int"}, {"name": "price", "type": "double"},
               {"name": "status", "type": "string"}],
}  # fmt: skip
SCHEMA_ID = 1
PARTITIONS = 2
BATCH = 100
NOW_MS = 1_767_225_600_000
FULL_RECORDS = 2_000_000  # per topic
QUICK_RECORDS = 40_000


def _value(i: int, key: int, parsed) -> bytes:
    out = io.BytesIO()
    out.write(b"\x00" + SCHEMA_ID.to_bytes(4, "big"))
    record = {
        "id": key,
        "customer": f"customer-{key % 9973:05d}",
        "qty": i % 50,
        "price": i * 0.25,
        "status": "open",
    }
    fastavro.schemaless_writer(out, parsed, record)
    return out.getvalue()


def _registry(log_dir: Path) -> None:
    from kafka_log_core.format.record_batch import Record
    from kafka_log_core.simulator.writer import PartitionWriter

    key = json.dumps(
        {"keytype": "SCHEMA", "subject": "avro_t-value", "version": 1, "magic": 1}, separators=(",", ":")
    )
    value = json.dumps(
        {
            "subject": "avro_t-value",
            "version": 1,
            "id": SCHEMA_ID,
            "schema": json.dumps(SCHEMA),
            "deleted": False,
        },
        separators=(",", ":"),
    )
    with PartitionWriter(log_dir / "_schemas-0") as writer:
        writer.append_records([Record(0, NOW_MS, key.encode(), value.encode())], now_ms=NOW_MS)


def append(log_dir: Path, start: int, count: int, keys: int, seed: int) -> None:
    """``count`` records (numbers start..start+count) to both topics, keys drawn from ``keys``."""
    from kafka_log_core.format.record_batch import Record
    from kafka_log_core.simulator.writer import PartitionWriter

    parsed = fastavro.parse_schema(SCHEMA)
    rng = random.Random(seed)
    for topic in ("bytes_t", "avro_t"):
        writers = [
            PartitionWriter(log_dir / f"{topic}-{p}", segment_bytes=64 << 20) for p in range(PARTITIONS)
        ]
        rng.seed(seed)
        pending: list[list[Record]] = [[] for _ in range(PARTITIONS)]
        for i in range(start, start + count):
            key = rng.randrange(keys)
            value = _value(i, key, parsed)
            partition = key % PARTITIONS
            pending[partition].append(
                Record(0, NOW_MS + i, b"key-%d" % key, value if topic == "avro_t" else value[5:])
            )
            if len(pending[partition]) == BATCH:
                writers[partition].append_records(pending[partition], now_ms=NOW_MS)
                pending[partition] = []
        for partition, records in enumerate(pending):
            if records:
                writers[partition].append_records(records, now_ms=NOW_MS)
        for writer in writers:
            writer.close()


def prepare(work: Path, records: int) -> tuple[Path, Path]:
    """The log dirs the section reads (``records`` a topic, and a small one to warm up on), generated once
    and kept in ``work`` for the next run of the same size (``--prepare``: before a measuring slot)."""
    found = []
    for name, count, keys, seed in (
        (f"source-{records}", records, records // 2, 1),
        ("warm", 2_000, 1_000, 2),
    ):
        where = work / name
        done = where / ".generated"
        if not done.is_file():
            shutil.rmtree(where, ignore_errors=True)
            where.mkdir(parents=True)
            _registry(where)
            append(where, 0, count, keys, seed=seed)
            done.write_text(f"{count}\n")
        found.append(where)
    return found[0], found[1]


def _export(spark, log_dir: Path, topic: str, settings) -> tuple[float, int]:
    from jobs import export
    from kafka_log_core.work.outcome import Status

    if settings.catalog is not None:
        settings.catalog.configure(spark)
    t0 = time.monotonic()
    rows = export.run(spark, [str(log_dir)], topic, settings)
    seconds = time.monotonic() - t0
    failed = [r for r in rows if r["status"] != Status.EXPORTED]
    if failed:
        raise RuntimeError(f"export of {topic} failed: {failed[0]['reason']}")
    return seconds, sum(r["rows"] for r in rows)


def measure(work: Path, *, quick: bool, master: str, records: int | None = None) -> dict:
    from jobs import export
    from jobs.spark import spark_session
    from jobs.tables import IcebergCatalog
    from spark_udfs import packages

    records = records or (QUICK_RECORDS if quick else FULL_RECORDS)
    keys = records // 2
    source, warm = prepare(work, records)
    for stale in [p for p in work.iterdir() if p.is_dir() and p != warm and not p.name.startswith("source-")]:
        shutil.rmtree(stale)
    data = work / "logs"
    shutil.copytree(source, data)  # the 1 % is appended to this copy
    conf = {**packages.packages_conf(packages.iceberg_packages()), **packages.extensions_conf(iceberg=True)}
    spark = spark_session(master, "kafka-log-jobs bench tables", conf=conf)
    cores = spark.sparkContext.defaultParallelism

    def parquet(name: str, schemas: str) -> export.ExportSettings:
        return export.ExportSettings(str(work / name), view="records", schemas=schemas)

    def iceberg(name: str, incremental: bool) -> export.ExportSettings:
        catalog = IcebergCatalog(name, str(work / name))
        return export.ExportSettings(
            str(work / name), fmt="iceberg", schemas="log", incremental=incremental, catalog=catalog
        )

    _export(spark, warm, "bytes_t", parquet("warm_bytes", "none"))
    _export(spark, warm, "avro_t", parquet("warm_avro", "log"))
    _export(spark, warm, "avro_t", iceberg("warm_ice", True))
    out: dict = {"master": master, "cores": cores, "records": records, "keys": keys, "runs": {}}
    for name, topic, schemas in (("records bytes", "bytes_t", "none"), ("records avro", "avro_t", "log")):
        seconds, rows = _export(spark, data, topic, parquet(name.replace(" ", "_"), schemas))
        out["runs"][name] = {"seconds": seconds, "rows": rows, "rows_per_s_per_core": rows / seconds / cores}
    first, first_rows = _export(spark, data, "avro_t", iceberg("inc", True))
    append(data, records, records // 100, keys + records // 200, seed=3)  # 1 %: updates and new keys
    inc, inc_rows = _export(spark, data, "avro_t", iceberg("inc", True))
    full, full_rows = _export(spark, data, "avro_t", iceberg("full", False))
    table = spark.table("inc.kafka.avro_t").drop("timestamp")
    fresh = spark.table("full.kafka.avro_t").drop("timestamp")
    equal = table.exceptAll(fresh).count() == 0 and fresh.exceptAll(table).count() == 0
    out["runs"]["latest iceberg full (first)"] = {"seconds": first, "rows": first_rows}
    out["runs"]["latest iceberg incremental (+1 %)"] = {"seconds": inc, "rows": inc_rows}
    out["runs"]["latest iceberg full (+1 %)"] = {"seconds": full, "rows": full_rows}
    out["incremental_vs_full"] = inc / full
    out["incremental_equals_full"] = equal
    out["avro_vs_bytes"] = out["runs"]["records avro"]["seconds"] / out["runs"]["records bytes"]["seconds"]
    spark.stop()
    return out


def run_section(report, quick: bool, work: Path) -> None:
    """Measure in a process of its own (as every section) and add rows, ratios and the section."""
    from bench.report import Row, section_result

    result = section_result("tables", work, ["--quick"] if quick else [])
    for name, run in result["runs"].items():
        note = f"{run['rows_per_s_per_core']:,.0f} rows/s/core" if "rows_per_s_per_core" in run else ""
        report.rows.append(Row("tables", f"tables {result['master']}: {name}", 0, run["seconds"], run["rows"],
                               cores=result["cores"], note=note))  # fmt: skip
    report.sections["tables"] = {"status": "ok", **result}
    report.ratios["tables_incremental_vs_full"] = result["incremental_vs_full"]
    report.ratios["tables_avro_vs_bytes"] = result["avro_vs_bytes"]


def target(report):
    from bench.report import Target

    found = report.sections.get("tables", {})
    return Target(
        "tables: incremental export after 1 % new records <= 0.5 x a full one", report.ratios.get("tables_incremental_vs_full"),
        0.5, False, "x", "" if not found else f"tables equal: {found.get('incremental_equals_full')}",
    )  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tables", description=__doc__.split("\n\n")[0])
    parser.add_argument("--work", required=True, help="where the data and the tables go")
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_RECORDS:,} records a topic")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--records", type=int, help=f"records a topic (default {FULL_RECORDS:,})")
    parser.add_argument("--prepare", action="store_true", help="only generate the log dirs (kept in --work)")
    args = parser.parse_args(argv)
    records = args.records or (QUICK_RECORDS if args.quick else FULL_RECORDS)
    if args.prepare:
        prepare(Path(args.work), records)
        return 0
    print(json.dumps(measure(Path(args.work), quick=args.quick, master=args.master, records=records)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
