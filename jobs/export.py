"""Export: topics as tables. The ``kafka-log`` data source's ``latest`` view (one row per key: what a
consumer that rebuilt its state from the topic holds) or its records, written as Parquet or as a Delta
Lake table, partitioned by topic, ready for SQL.

spark-submit jobs/export.py --log-dir /data/kafka-logs --out /tables/orders [--format parquet|delta] ...
kafka-log-jobs export --log-dir /data/kafka-logs --out /tables/orders [options]

The table is replaced as a whole (Spark's overwrite; a Delta overwrite is one commit), so a run killed at
any instant and run again ends with the same table. A partition that cannot be read is left out, with one
failed row naming the file and position; the other partitions are exported. The result table has one row
per partition: its rows in the table and their first and last offsets, read back from the table.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import click

from jobs import options, output, runner
from jobs.context import JobContext
from jobs.output import row_schema
from kafka_log_core.errors import KafkaLogError, UsageError
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.log.listing import PartitionTask
from kafka_log_core.work.outcome import Status
from kafka_log_core.work.rows import Int32
from spark_udfs import packages, planning
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
    duration_ms: int | None = None  # the jobs' common column; an export is one Spark job, not per partition


SCHEMA = row_schema(ExportRow)
COLUMNS = [f.name for f in SCHEMA.fields]
VIEWS = ("latest", "records")
FORMATS = ("parquet", "delta")


@dataclass(frozen=True)
class ExportSettings:
    out: str
    view: str = "latest"
    fmt: str = "parquet"
    isolation_level: str = "read_committed"
    include_headers: bool = False
    options: tuple[tuple[str, str], ...] = ()  # more kafka-log options, e.g. startingOffsets


def source_options(
    log_dirs: Sequence[str], topic_regex: str | None, settings: ExportSettings
) -> dict[str, str]:
    """The ``kafka-log`` options of an export (``paths`` as Spark passes several load paths)."""
    options = {
        "paths": json.dumps(list(log_dirs)),
        "level": settings.view,
        "kafka.isolation.level": settings.isolation_level,
        "includeHeaders": str(settings.include_headers).lower(),
    }
    if topic_regex:  # as the other jobs' --topic: a full match, internal topics included
        options.update({"subscribePattern": topic_regex, "kafka.exclude.internal.topics": "false"})
    options.update(dict(settings.options))
    return options


def _assign(options: dict[str, str], partitions: Sequence[TopicPartition]) -> dict[str, str]:
    topics: dict[str, list[int]] = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(tp.partition)
    narrowed = {k: v for k, v in options.items() if k not in ("subscribePattern", "subscribe", "assign")}
    return {**narrowed, "assign": json.dumps(topics)}


def list_partitions(options: dict[str, str]) -> list[PartitionTask]:
    """The partitions an export reads (a bad option or log dir raises UsageError)."""
    return planning.find_partitions(ReadOptions.parse(options))


def check_partitions(
    spark, options: dict[str, str]
) -> tuple[dict[TopicPartition, ExportRow], dict[TopicPartition, str]]:
    """The partitions the export cannot read whole, each with its failed row: planned on the driver,
    then every split read through once on the executors without decoding records (``rows.check_split``:
    what the write would visit). Nothing raises, so nothing is printed but our one line per failure.
    Also the notes of the partitions read as the broker's loader would leave them (a crashed log dir)."""
    read = ReadOptions.parse(options)
    planned = planning.plan_partitions(read)
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
    """Write the table; return one result row per partition (exported or failed)."""
    import spark_udfs

    spark_udfs.register(spark)
    options = source_options(log_dirs, topic_regex, settings)
    sources = list_partitions(options)
    failed, notes = check_partitions(spark, options)
    for row in failed.values():
        output.tell(f"{row.log_dir}: {row.topic}-{row.partition}: {row.reason}")
    while True:
        todo = [s for s in sources if s.tp not in failed]
        if not todo:
            break
        reader = spark.read.format("kafka-log")
        for key, value in _assign(options, [s.tp for s in todo]).items():
            reader = reader.option(key, value)
        try:
            _write(reader.load(), settings)
            break
        except Exception as err:  # a Spark error; the partition it names, if any, is left out
            found = failed_partition(str(err))
            if found is None:
                raise
            tp = TopicPartition(found.topic, found.partition)
            if tp in failed or tp not in {s.tp for s in todo}:
                raise
            failed[tp] = ExportRow(
                found.log_dir, tp.topic, tp.partition, status=Status.FAILED, reason=found.reason
            )
    counts = _read_back(spark, settings) if len(failed) < len(sources) else {}
    rows = []
    for s in sources:
        if s.tp in failed:
            rows.append(dataclasses.asdict(failed[s.tp]))
            continue
        n, first, last = counts.get((s.topic, s.partition), (0, None, None))
        row = ExportRow(
            s.log_dir,
            s.topic,
            s.partition,
            Status.EXPORTED,
            notes.get(s.tp),
            rows=n,
            first_offset=first,
            last_offset=last,
        )
        rows.append(dataclasses.asdict(row))
    return sorted(rows, key=runner.by_partition)


def _write(df, settings: ExportSettings) -> None:
    writer = df.write.mode("overwrite").partitionBy("topic")
    if settings.fmt == "delta":
        writer.format("delta").option("overwriteSchema", "true").save(settings.out)
    else:
        writer.parquet(settings.out)


def _read_back(spark, settings: ExportSettings) -> dict[tuple[str, int], tuple[int, int, int]]:
    from pyspark.sql import functions as F

    table = spark.read.format(settings.fmt).load(settings.out)
    counts = F.count("*").alias("rows"), F.min("offset").alias("first"), F.max("offset").alias("last")
    found = table.groupBy("topic", "partition").agg(*counts).collect()
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
)  # fmt: skip
@click.option("--out", required=True, help="Where the table goes (a directory; replaced).")
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
    help="Parquet files, or a Delta Lake table.",
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
def command(job: JobContext, out, view, fmt, isolation_level, include_headers, more_options):  # fmt: skip
    """Write topics as a table (Parquet or Delta, partitioned by topic): the latest view or the records."""
    settings = ExportSettings(out, view, fmt, isolation_level, include_headers, _key_values(more_options))
    try:
        list_partitions(source_options(job.log_dirs, job.topic_regex, settings))
    except UsageError as err:
        raise click.UsageError(str(err)) from err
    except KafkaLogError as err:  # e.g. a malformed checkpoint: the broker would take the log dir offline
        click.echo(f"error: {err}", err=True)
        sys.exit(1)
    conf = (
        {**packages.packages_conf([packages.delta_package()]), **packages.delta_conf()}
        if fmt == "delta"
        else {}
    )
    spark = job.spark("export", conf)
    if fmt == "delta" and not packages.has_delta(spark):
        raise click.UsageError(
            f"--format delta needs Delta Lake in the Spark session: spark-submit --packages "
            f"{packages.delta_package()} --conf spark.sql.extensions={packages.DELTA_EXTENSION} "
            f"--conf spark.sql.catalog.spark_catalog={packages.DELTA_CATALOG} jobs/export.py ..."
        )
    try:
        rows = run(spark, job.log_dirs, job.topic_regex, settings)
    except Exception as err:  # a Spark failure that names no partition: one line, not a traceback
        click.echo(f"error: export to {out} failed: {_first_line(err)}", err=True)
        sys.exit(1)
    job.output.emit(rows, SCHEMA, f"export ({view}, {fmt}) to {out}")
    sys.exit(output.exit_status(rows))


def _first_line(err: BaseException) -> str:
    lines = [line.strip() for line in str(err).splitlines() if line.strip()]
    return lines[0] if lines else type(err).__name__


if __name__ == "__main__":
    command()
