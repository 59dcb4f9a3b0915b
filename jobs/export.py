"""Export: topics as tables. The ``kafka-log`` data source's ``latest`` view (one row per key: what a
consumer that rebuilt its state from the topic holds) or its records, written as Parquet, as a Delta Lake
table or as an Iceberg table, partitioned by topic, ready for SQL; with ``--schemas`` typed by the Schema
Registry's schemas (a table per topic and a side table of undecodable records); with ``--incremental``
merged by key into the table's last export (docs/tables.md; the tables: jobs/tables.py; the writes:
jobs/export_writes.py).

spark-submit jobs/export.py --log-dir /data/kafka-logs --out /tables/orders [--format parquet|delta|iceberg] ...
kafka-log-jobs export --log-dir /data/kafka-logs --out /tables/orders [options]

Each table changes in one commit (Spark's overwrite for Parquet; a Delta commit; an Iceberg snapshot), so a
run killed at any instant and run again ends with the same tables. A partition that cannot be read is left
out, with one failed row naming the file and position; the other partitions are exported. The result table
has one row per partition: its rows in the table and their first and last offsets, read back from the
table, its rows in the side table, and where and why it was read from.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

import click

from jobs import export_writes as writes
from jobs import options, output, runner, tables
from jobs.context import JobContext
from jobs.output import row_schema
from jobs.tables import IcebergCatalog, Table
from kafka_log_core.errors import KafkaLogError, UsageError
from kafka_log_core.format import compression
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.log.listing import PartitionTask
from kafka_log_core.work.outcome import Status
from kafka_log_core.work.rows import Int32
from spark_udfs import loaded, marks, packages, planning, registry_topic
from spark_udfs.decoded import TopicDecoders
from spark_udfs.errors import PartitionReadError, failed_partition
from spark_udfs.options import ReadOptions


@dataclass(frozen=True, slots=True)
class ExportRow:
    """One partition's result of the export: its rows in the table, their first and last offsets."""

    log_dir: str
    topic: str
    partition: Int32
    status: str
    reason: str | None = None
    rows: int | None = None
    first_offset: int | None = None
    last_offset: int | None = None
    undecodable: int | None = None  # with schemas: the partition's rows in the side table
    read_from: int | None = None  # the offset this export read the partition from
    note: str | None = None  # full, or the incremental step: new, since, whole (why), gone
    duration_ms: int | None = None  # the jobs' common column; an export is one Spark job, not per partition


SCHEMA = row_schema(ExportRow)
COLUMNS = [f.name for f in SCHEMA.fields]
VIEWS = ("latest", "records")
FORMATS = tables.FORMATS


@dataclass(frozen=True)
class ExportSettings:
    out: str
    view: str = "latest"
    fmt: str = "parquet"
    isolation_level: str = "read_committed"
    include_headers: bool = False
    options: tuple[tuple[str, str], ...] = ()  # more kafka-log options, e.g. startingOffsets
    schemas: str = "none"  # none | log | a .json file of the registry's schemas | a registry URL
    schemas_topic: str = "_schemas"
    incremental: bool = False
    catalog: IcebergCatalog | None = None  # --format iceberg
    namespace: str = "kafka"
    table: str = "topics"  # the Iceberg table of a bytes export
    max_batch_bytes: int = compression.MAX_BATCH_BYTES  # --max-decompressed-batch-bytes


def source_options(
    log_dirs: Sequence[str], topic_regex: str | None, settings: ExportSettings
) -> dict[str, str]:
    """The ``kafka-log`` options of an export (``paths`` as Spark passes several load paths)."""
    options = {
        "paths": json.dumps(list(log_dirs)),
        "level": settings.view,
        "kafka.isolation.level": settings.isolation_level,
        "includeHeaders": str(settings.include_headers).lower(),
        compression.LIMIT_SOURCE_OPTION: str(settings.max_batch_bytes),
    }
    if topic_regex:  # as the other jobs' --topic: a full match, internal topics included
        options.update({"subscribePattern": topic_regex, "kafka.exclude.internal.topics": "false"})
    options.update(dict(settings.options))
    return options


def list_partitions(options: dict[str, str]) -> list[PartitionTask]:
    """The partitions an export reads (a bad option or log dir raises UsageError)."""
    return planning.find_partitions(ReadOptions.parse(options))


def check_partitions(
    spark, options: dict[str, str], clusters: loaded.Clusters | None = None
) -> tuple[dict[TopicPartition, ExportRow], dict[TopicPartition, str]]:
    """The partitions a read with ``options`` cannot read whole, each with its failed row: planned on the
    driver, then every split read through once on the executors without decoding records
    (``rows.check_split``: what the write would visit -- for an incremental export only what it reads
    since the table's marks). Nothing raises, so nothing is printed but our one line per failure. Also
    the notes of the partitions read as the broker's loader would leave them (a crashed log dir)."""
    read = ReadOptions.parse(options)
    planned = planning.plan_partitions(read, clusters)
    failed = {}
    notes = {}
    for source, outcome in planned:
        if isinstance(outcome, PartitionReadError):
            reason = str(outcome.__cause__ or outcome)
            failed[source.tp] = ExportRow(
                source.log_dir, source.topic, source.partition, Status.FAILED, reason
            )
        elif outcome.note is not None:
            notes[source.tp] = outcome.note
    splits = planning.splits_of(planned, read)
    if splits:
        found = spark.sparkContext.parallelize(splits, len(splits)).map(
            functools.partial(_check, options=read)
        )
        for split, reason in zip(splits, found.collect(), strict=True):
            s = split.source
            if reason is not None and s.tp not in failed:
                failed[s.tp] = ExportRow(s.log_dir, s.topic, s.partition, Status.FAILED, reason)
    return failed, notes


def _check(split: planning.Split, options: ReadOptions) -> str | None:
    from spark_udfs import rows

    return rows.check_split(split, options)


def run(spark, log_dirs: Sequence[str], topic_regex: str | None, settings: ExportSettings) -> list[dict]:
    """Write the tables; return one result row per partition (exported or failed)."""
    import spark_udfs

    spark_udfs.register(spark)
    options = source_options(log_dirs, topic_regex, settings)
    sources = list_partitions(options)
    failed: dict[TopicPartition, ExportRow] = {}
    results: dict[TopicPartition, ExportRow] = {}
    with tempfile.TemporaryDirectory(prefix="kafka-log-export-") as directory:
        for group in _groups(sources, options, settings, directory):
            results.update(_export_group(spark, group, sources, failed, settings))
    for row in failed.values():
        output.tell(f"{row.log_dir}: {row.topic}-{row.partition}: {row.reason}")
    rows = [dataclasses.asdict(failed.get(s.tp) or results[s.tp]) for s in sources]
    return sorted(rows, key=runner.by_partition)


def _groups(sources, options: dict[str, str], settings: ExportSettings, directory: str) -> list[writes.Group]:
    """The tables of the export: one for every partition (bytes), or one per topic (schemas; a registry
    URL asked once, its answers saved in ``directory`` for every read of the export)."""
    options = {k: v for k, v in options.items() if k not in ("subscribePattern", "subscribe", "assign")}
    base_settings = {
        "view": settings.view, "isolation": settings.isolation_level, "headers": settings.include_headers,
        "options": sorted(settings.options), "schemas": settings.schemas != registry_topic.NONE,
    }  # fmt: skip
    if settings.schemas == registry_topic.NONE:
        table = table_of(settings, None, side=False)
        tps = tuple(s.tp for s in sources)
        return (
            [writes.Group(table, None, tps, options, base_settings, partition_by=("topic",))] if tps else []
        )
    schemas = registry_topic.pinned(settings.schemas, directory)
    store = registry_topic.load(schemas, settings.schemas_topic, tuple(json.loads(options["paths"])))
    groups = []
    for topic in sorted({s.topic for s in sources}):
        decoders = TopicDecoders.of(store, topic)  # type: ignore[arg-type]
        ids = {
            "key": None if decoders.key is None else decoders.key.latest.id,
            "value": None if decoders.value is None else decoders.value.latest.id,
        }
        topic_options = {**options, "schemas": schemas, "schemasTopic": settings.schemas_topic}
        groups.append(
            writes.Group(
                table_of(settings, topic, side=False), table_of(settings, topic, side=True),
                tuple(s.tp for s in sources if s.topic == topic), topic_options, {**base_settings, "schema_ids": ids},
                key_decoded=decoders.key is not None, value_decoded=decoders.value is not None,
            )
        )  # fmt: skip
    return groups


def table_of(settings: ExportSettings, topic: str | None, *, side: bool) -> Table:
    """The table a topic goes to (``topic`` None: the one table of a bytes export), or its side table of
    undecodable records (``side``)."""
    if settings.fmt == tables.ICEBERG:
        if topic is None:
            return Table(
                settings.fmt, catalog=settings.catalog, namespace=settings.namespace, name=settings.table
            )
        namespace = f"{settings.namespace}_undecodable" if side else settings.namespace
        return Table(settings.fmt, catalog=settings.catalog, namespace=namespace, name=topic)
    if topic is None:
        return Table(settings.fmt, path=settings.out)
    return Table(settings.fmt, path=os.path.join(settings.out, "undecodable" if side else "topics", topic))


def _export_group(
    spark, group: writes.Group, sources, failed: dict[TopicPartition, ExportRow], settings: ExportSettings
) -> dict[TopicPartition, ExportRow]:
    """One group's tables written; the exported partitions' rows. A partition that cannot be read goes
    to ``failed`` and the group is planned again without it: found on the driver (its state now), by
    the check of what the write reads, or named by the write's Spark error."""
    by_tp = {s.tp: s for s in sources}
    clusters = loaded.Clusters(planning.expand_paths(tuple(json.loads(group.options["paths"]))))
    while True:
        todo = [tp for tp in group.partitions if tp not in failed]
        read = writes.read_options(group)
        state = group.table.state(spark) if settings.incremental else None
        now, last_batches = {}, {}
        for tp in todo:
            mark = None if state is None else state.partitions.get(tp.dir_name)
            try:
                now[tp], last_batches[tp] = marks.partition_now(
                    read, by_tp[tp], None if mark is None else mark.end, clusters
                )
            except (KafkaLogError, OSError) as err:
                s = by_tp[tp]
                failed[tp] = ExportRow(s.log_dir, s.topic, s.partition, Status.FAILED, str(err))
        now = {tp: n for tp, n in now.items() if tp not in failed}
        new_marks = {tp.dir_name: n.mark(last_batches[tp]) for tp, n in now.items()}
        planned = writes.plan(group, spark, state, now, settings.incremental)
        read_now = writes.write_options(group, planned, now)
        unreadable, notes = check_partitions(spark, read_now, clusters) if now else ({}, {})
        unreadable = {tp: row for tp, row in unreadable.items() if tp in now}
        if unreadable:  # planned again without them: an incremental plan keeps their rows and marks
            failed.update(unreadable)
            continue
        try:
            if planned.full:
                if now:
                    writes.write_full(spark, group, now, new_marks)
            else:
                kept = _kept_marks(state, [tp for tp in group.partitions if tp in failed])
                writes.write_incremental(spark, group, planned, now, new_marks, kept)
            break
        except Exception as err:  # a Spark error; the partition it names, if any, is left out
            found = failed_partition(str(err))
            if found is None:
                raise
            tp = TopicPartition(found.topic, found.partition)
            if tp in failed or tp not in todo:
                raise
            failed[tp] = ExportRow(
                found.log_dir, tp.topic, tp.partition, status=Status.FAILED, reason=found.reason
            )
    counts = _read_back(spark, group.table) if now else {}
    undecodable = _read_back(spark, group.side) if now and group.side is not None else {}
    out = {}
    for tp in now:
        s = by_tp[tp]
        n, first, last = counts.get((tp.topic, tp.partition), (0, None, None))
        name = tp.dir_name
        step = None if planned.partitions is None else planned.partitions.get(name)
        out[tp] = ExportRow(
            s.log_dir, s.topic, s.partition, Status.EXPORTED, notes.get(tp), rows=n, first_offset=first, last_offset=last,
            undecodable=undecodable.get((tp.topic, tp.partition), (0,))[0] if group.side is not None else None,
            read_from=now[tp].log_start if step is None else step.read_from,
            note=planned.why if step is None else (step.step.value + (f": {step.reason}" if step.reason else "")),
        )  # fmt: skip
    return out


def _kept_marks(state, unread: list[TopicPartition]) -> dict:
    """The marks of partitions that could not be read this time: their rows and marks stay as they are."""
    if state is None:
        return {}
    names = [tp.dir_name for tp in unread]
    return {name: state.partitions[name] for name in names if name in state.partitions}


def _read_back(spark, table: Table) -> dict[tuple[str, int], tuple[int, int, int]]:
    from pyspark.sql import functions as F

    counts = F.count("*").alias("rows"), F.min("offset").alias("first"), F.max("offset").alias("last")
    found = table.read(spark).groupBy("topic", "partition").agg(*counts).collect()
    return {(r["topic"], r["partition"]): (r["rows"], r["first"], r["last"]) for r in found}


def _key_values(values: Sequence[str]) -> tuple[tuple[str, str], ...]:
    out = []
    for value in values:
        key, sep, rest = value.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"{value!r}: expected KEY=VALUE", param_hint="'--option'")
        out.append((key.strip(), rest))
    return tuple(out)


@click.command("export")
@options.job_context(
    [options.log_dir_option(help="A Kafka log.dirs entry (repeatable; several = one JBOD broker)."),
     options.topic_option()],
    options.OUTPUT,
    options.SPARK,
    options.READ,
)  # fmt: skip
@click.option(
    "--out",
    required=True,
    help="Where the tables go: a directory (Parquet, Delta: replaced; with --schemas OUT/topics/<topic> and "
    "OUT/undecodable/<topic>), or Iceberg's warehouse.",
)
@click.option(
    "--view",
    type=click.Choice(VIEWS),
    default="latest",
    show_default=True,
    help="latest: one row per key (tombstoned keys absent); records: every record.",
)
@click.option(
    "--format",
    "fmt",
    type=click.Choice(FORMATS),
    default="parquet",
    show_default=True,
    help="Parquet files, a Delta Lake table, or an Iceberg table (catalog: below).",
)
@click.option(
    "--schemas",
    default="none",
    show_default=True,
    metavar="none|log|FILE.json|URL",
    help="Typed keys and values from the Schema Registry's schemas: its _schemas topic in the log dirs "
    "(log), a file of its schemas, or a live registry http(s)://host:port (asked on the driver); one table "
    "per topic and a side table of undecodable records.",
)
@click.option(
    "--schemas-topic", default="_schemas", show_default=True, help="The registry's topic (kafkastore.topic)."
)
@click.option(
    "--incremental",
    is_flag=True,
    help="Latest view into Delta or Iceberg: read only what was written since the table's last export "
    "and merge it by key (a full export when the table has none).",
)
@click.option(
    "--catalog-name", default="kafka_log", show_default=True, help="Iceberg: the Spark catalog's name."
)
@click.option(
    "--catalog-type",
    type=click.Choice(tables.CATALOG_TYPES),
    default="jdbc",
    show_default=True,
    help="Iceberg: the catalog (jdbc: a SQLite file OUT/catalog.db unless --catalog-uri).",
)
@click.option(
    "--catalog-uri", default=None, help="Iceberg: the catalog's uri (a REST or Hive catalog, a JDBC URL)."
)
@click.option(
    "--catalog-option",
    "catalog_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Iceberg: more catalog properties.",
)
@click.option("--namespace", default="kafka", show_default=True, help="Iceberg: the tables' namespace.")
@click.option(
    "--table", "table_name", default="topics", show_default=True, help="Iceberg: the table without --schemas."
)
@click.option(
    "--isolation-level",
    type=click.Choice(["read_committed", "read_uncommitted"]),
    default="read_committed",
    show_default=True,
    help="Aborted transactions left out, or kept.",
)
@click.option("--include-headers", is_flag=True, help="Add the records' headers column.")
@click.option(
    "--option",
    "more_options",
    multiple=True,
    metavar="KEY=VALUE",
    help="Any kafka-log read option, e.g. startingOffsets={...} or includeBatchColumns=true.",
)
def command(job: JobContext, out, view, fmt, schemas, schemas_topic, incremental, catalog_name, catalog_type,
            catalog_uri, catalog_options, namespace, table_name, isolation_level, include_headers,
            more_options):  # fmt: skip
    """Write topics as tables (Parquet, Delta or Iceberg): the latest view or the records, as bytes or typed
    by the Schema Registry's schemas, in full or incrementally."""
    if incremental and (view != "latest" or fmt == tables.PARQUET):
        raise click.UsageError("--incremental merges the latest view into a Delta or Iceberg table")
    try:
        registry_topic.check(schemas)
    except UsageError as err:
        raise click.UsageError(str(err)) from err
    catalog = None
    if fmt == tables.ICEBERG:
        try:
            catalog = IcebergCatalog(
                catalog_name, out, catalog_type, catalog_uri, _key_values(catalog_options)
            )
        except UsageError as err:
            raise click.UsageError(str(err)) from err
    settings = ExportSettings(
        out, view, fmt, isolation_level, include_headers, _key_values(more_options), schemas, schemas_topic,
        incremental, catalog, namespace, table_name, job.max_batch_bytes,
    )  # fmt: skip
    try:
        list_partitions(source_options(job.log_dirs, job.topic_regex, settings))
    except UsageError as err:
        raise click.UsageError(str(err)) from err
    except KafkaLogError as err:  # e.g. a malformed checkpoint: the broker would take the log dir offline
        click.echo(f"error: {err}", err=True)
        sys.exit(1)
    conf = {}
    if fmt == tables.DELTA:
        conf = {**packages.packages_conf([packages.delta_package()]), **packages.extensions_conf(delta=True)}
    elif fmt == tables.ICEBERG:
        conf = {
            **packages.packages_conf(packages.iceberg_packages()),
            **packages.extensions_conf(iceberg=True),
        }
        conf.update(catalog.conf())  # type: ignore[union-attr]
    spark = job.spark("export", conf)
    if fmt == tables.ICEBERG and not packages.has_iceberg(spark):
        raise click.UsageError(
            f"--format iceberg needs Iceberg in the Spark session: spark-submit --packages "
            f"{','.join(packages.iceberg_packages())} --conf spark.sql.extensions={packages.ICEBERG_EXTENSION} "
            "jobs/export.py ..."
        )
    if fmt == "delta" and not packages.has_delta(spark):
        raise click.UsageError(
            f"--format delta needs Delta Lake in the Spark session: spark-submit --packages "
            f"{packages.delta_package()} --conf spark.sql.extensions={packages.DELTA_EXTENSION} "
            f"--conf spark.sql.catalog.spark_catalog={packages.DELTA_CATALOG} jobs/export.py ..."
        )
    try:
        if catalog is not None:
            catalog.configure(spark)
        rows = run(spark, job.log_dirs, job.topic_regex, settings)
    except UsageError as err:
        raise click.UsageError(str(err)) from err
    except Exception as err:  # a Spark failure that names no partition: one line, not a traceback
        click.echo(f"error: export to {out} failed: {_first_line(err)}", err=True)
        sys.exit(1)
    job.output.emit(rows, SCHEMA, f"export ({view}, {fmt}{', typed' if schemas != 'none' else ''}) to {out}")
    sys.exit(output.exit_status(rows))


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


if __name__ == "__main__":
    command()
