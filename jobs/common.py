"""What every job shares: the options, the driver's listing of partition directories, the Spark map over
them, and the result table (printed, written as JSON/Parquet). Jobs stay thin: the work of one
partition is a function in ``kafka_log_core.tasks``.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import click
from pyspark.sql.types import DataType, IntegerType, LongType, StringType, StructField, StructType

from kafka_log_core import locks, recovery
from kafka_log_core.config import ConfigSet
from kafka_log_core.errors import KafkaLogError
from kafka_log_core.filenames import list_partition_dirs
from kafka_log_core.log_dir_config import describe, resolve_log_dir_configs
from kafka_log_core.partition_log import LogDirState
from kafka_log_core.tasks import UNKNOWN_SETTINGS, JobOptions, PartitionTask

DEFAULT_CONF_DIR = Path("conf")
#: What the broker's log loader recovered in a partition (null when it recovered nothing).
RECOVERY_RESULT_COLUMNS = (
    ("recovered_segments", LongType()),
    ("recovered_bytes", LongType()),
    ("truncated_bytes", LongType()),
    ("truncated_records", LongType()),
)


def result_schema(*columns: tuple[str, DataType]) -> StructType:
    """A job's result table: which partition, its status and why, the job's own nullable ``columns``
    (name, Spark type), and how long it took."""
    return StructType(
        [
            StructField("log_dir", StringType(), False),
            StructField("topic", StringType(), False),
            StructField("partition", IntegerType(), False),
            StructField("status", StringType(), False),
            StructField("reason", StringType(), True),
            *(StructField(name, kind, True) for name, kind in columns),
            StructField("duration_ms", LongType(), True),
        ]
    )


def shared_options(func: Callable) -> Callable:
    """The options of compact, retain and report, in one place."""
    options = [
        click.option(
            "--log-dir",
            "log_dirs",
            multiple=True,
            required=True,
            type=click.Path(file_okay=False),
            help="A Kafka log.dirs entry (repeatable).",
        ),
        click.option(
            "--topic", "topic_regex", default=None, help="Only topics matching this regex (full match)."
        ),
        click.option(
            "--conf-dir",
            type=click.Path(file_okay=False),
            default=None,
            help="Directory with *.properties (broker level) and topics/<topic>.properties; default ./conf.",
        ),
        click.option(
            "--config",
            "config_files",
            multiple=True,
            type=click.Path(dir_okay=False),
            help="A broker properties file (repeatable), e.g. the broker's server.properties.",
        ),
        click.option(
            "--topic-config",
            "topic_configs",
            multiple=True,
            metavar="TOPIC:KEY=VALUE",
            help="A per-topic override with a topic-level name (repeatable).",
        ),
        click.option(
            "--set",
            "sets",
            multiple=True,
            metavar="KEY=VALUE",
            help="Override on top of everything (broker- or topic-level name; repeatable).",
        ),
        click.option(
            "--kafka-version",
            default=None,
            metavar="X.Y[.Z]",
            help="The Kafka release whose rules apply when the log dir does not say (metadata.version), "
            "or a later patch or release than it says.",
        ),
        click.option(
            "--assume-broker-defaults",
            is_flag=True,
            help="Give topics with no known configuration (no metadata log, topic file or --topic-config) the "
            "broker defaults instead of refusing to act on them.",
        ),
        click.option(
            "--metadata-log-dir",
            "metadata_log_dirs",
            multiple=True,
            type=click.Path(file_okay=False),
            help="A log dir holding the cluster's __cluster_metadata-0, when none of the --log-dir does.",
        ),
        click.option("--now-ms", type=int, default=None, help="The time the rules use (default: the clock)."),
        click.option(
            "--require-high-watermark",
            is_flag=True,
            help="Fail partitions without a replication-offset-checkpoint entry instead of using the LEO.",
        ),
        click.option(
            "--no-recover",
            is_flag=True,
            help="Do not recover partitions of a log dir without .kafka_cleanshutdown (or with a missing index) as "
            "the broker's log loader would: refuse those whose segment files it would change.",
        ),
        click.option(
            "--output",
            type=click.Choice(["table", "json"]),
            default=None,
            help="Result format on standard output (default: table on a terminal, else json).",
        ),
        click.option(
            "--report-path",
            type=click.Path(dir_okay=False),
            default=None,
            help="Also write the result table to PATH (.json or .parquet).",
        ),
        click.option(
            "--master", default=None, help="Spark master URL (default: spark-submit's, else local[*])."
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@dataclass(frozen=True)
class Listing:
    tasks: list[PartitionTask]
    failed: list[dict]  # rows for log dirs that could not be read at all
    notes: list[str]


def list_tasks(log_dirs: Sequence[str], topic_regex: str | None, *, writing: bool) -> Listing:
    pattern = re.compile(topic_regex) if topic_regex else None
    tasks: list[PartitionTask] = []
    failed: list[dict] = []
    notes: list[str] = []
    for log_dir in log_dirs:
        d = Path(log_dir)
        if not d.is_dir():
            raise click.UsageError(f"--log-dir {log_dir}: not a directory")
        try:
            partitions = list_partition_dirs(d)
        except OSError as err:
            failed.append(_dir_row(log_dir, f"cannot list {log_dir}: {err}"))
            continue
        partitions = [(tp, p) for tp, p in partitions if pattern is None or pattern.fullmatch(tp.topic)]
        held = locks.broker_holds(d)
        if held and writing:
            msg = f"{d / '.lock'} is held by a running Kafka broker: stop it before running a job that writes"
            failed += [_dir_row(log_dir, msg, tp.topic, tp.partition) for tp, _ in partitions] or [
                _dir_row(log_dir, msg)
            ]
            continue
        if held:
            notes.append(f"{log_dir}: a running broker holds this log dir; figures may change under us")
        try:
            state = LogDirState.read(d)
        except KafkaLogError as err:
            msg = f"log-dir checkpoint unreadable (the broker would take this log dir offline): {err}"
            failed += [_dir_row(log_dir, msg, tp.topic, tp.partition) for tp, _ in partitions]
            continue
        for tp, _ in partitions:
            tasks.append(PartitionTask(os.fspath(log_dir), tp.topic, tp.partition, state.for_partition(tp)))
    return Listing(tasks, failed, notes)


def _dir_row(log_dir: str, reason: str, topic: str = "", partition: int = -1) -> dict:
    return {"log_dir": log_dir, "topic": topic, "partition": partition, "status": "failed", "reason": reason}


def load_configs(
    log_dirs, conf_dir, config_files, topic_configs, sets, kafka_version=None, assume_broker_defaults=False,
    metadata_log_dirs=(),
) -> dict[str, ConfigSet]:  # fmt: skip
    """Each log dir's configuration (its cluster metadata, Kafka release, and the user's files and flags);
    says on stderr where the settings come from."""
    conf = Path(conf_dir) if conf_dir else (DEFAULT_CONF_DIR if DEFAULT_CONF_DIR.is_dir() else None)
    try:
        resolved = resolve_log_dir_configs(
            list(log_dirs), conf_dir=conf, config_files=list(config_files), topic_configs=list(topic_configs),
            sets=list(sets), kafka_version=kafka_version, assume_broker_defaults=assume_broker_defaults,
            metadata_log_dirs=list(metadata_log_dirs),
        )  # fmt: skip
    except KafkaLogError as err:
        raise click.UsageError(str(err)) from err
    for log_dir, config in resolved.items():
        for line in describe(log_dir, config):
            tell(line)
    return {log_dir: config.configs for log_dir, config in resolved.items()}


def tell(line: str) -> None:
    """A note for the user on stderr -- unless stderr is merged into a stdout that is not a terminal
    (spark-submit runs the driver that way), where it would corrupt the JSON result; the result rows carry
    the same facts."""
    try:
        out, err = os.fstat(1), os.fstat(2)
        merged = (out.st_dev, out.st_ino) == (err.st_dev, err.st_ino) and not os.isatty(1)
    except OSError:
        merged = False
    if not merged:
        click.echo(line, err=True)


def spark_session(master: str | None, app: str):
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.appName(app)
    if master:
        builder = builder.master(master)
    elif "PYSPARK_GATEWAY_PORT" not in os.environ:  # not under spark-submit: embedded Spark
        builder = builder.master("local[*]")
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # embedded: stay on loopback
    session = (
        builder.config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "true" if sys.stderr.isatty() else "false")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("WARN")
    return session


def filthiest_first(row: dict) -> tuple:
    return (-(row.get("dirty_ratio") or 0.0), row["log_dir"], row["topic"], row["partition"])


def by_partition(row: dict) -> tuple:
    return (row["log_dir"], row["topic"], row["partition"])


def run_job(
    spark, log_dirs, topic_regex, fn: Callable[[PartitionTask], dict], row_defaults: dict, *, writing: bool,
    order: Callable[[dict], tuple] = by_partition,
) -> list[dict]:  # fmt: skip
    """The driver of every job: list partition directories, map ``fn`` over them on the executors, add a
    failed row for whatever could not even be listed, and sort the rows."""
    listing = list_tasks(log_dirs, topic_regex, writing=writing)
    for note in listing.notes:
        tell(note)
    rows = run_distributed(spark, listing.tasks, fn)
    if writing:  # every partition of a crashed log dir recovered: mark it cleanly shut down
        for note in recovery.finish_log_dirs(rows):
            tell(note)
    rows += [dict(row_defaults, **r) for r in listing.failed]
    rows.sort(key=order)
    said = set()
    for row in rows:  # one line per topic whose deciding settings are unknown
        reason = row.get("reason") or ""
        if row.get("status") == "failed" and reason.startswith(UNKNOWN_SETTINGS) and row["topic"] not in said:
            said.add(row["topic"])
            tell(f"{row['log_dir']}: {reason}")
    return rows


def run_distributed(spark, tasks: list[PartitionTask], fn: Callable[[PartitionTask], dict]) -> list[dict]:
    """Map ``fn`` over the tasks, one Spark task per partition directory."""
    if not tasks:
        return []
    rdd = spark.sparkContext.parallelize(tasks, numSlices=len(tasks))
    return rdd.map(fn).collect()


def emit(
    rows: list[dict],
    schema,
    columns: Sequence[str],
    spark,
    output: str | None,
    report_path: str | None,
    title: str,
) -> None:
    """Print the result table (stdout: only the JSON array with --output json) and write the report."""
    full = [{c: r.get(c) for c in columns} for r in rows]
    fmt = output or ("table" if sys.stdout.isatty() else "json")
    if fmt == "json":
        sys.stdout.write(json.dumps(full, default=str) + "\n")
    else:
        click.echo(format_table(full, columns, title))
    if report_path:
        if report_path.endswith(".parquet"):
            write_parquet(full, schema, report_path)
        else:
            Path(report_path).write_text(json.dumps(full, default=str, indent=1) + "\n")


def arrow_schema(schema):
    """The Spark result schema as an Arrow schema (nullable integers stay integers in Parquet)."""
    import pyarrow as pa

    types = {"string": pa.string(), "integer": pa.int32(), "long": pa.int64(), "double": pa.float64(),
             "boolean": pa.bool_()}  # fmt: skip
    return pa.schema([pa.field(f.name, types[f.dataType.typeName()], f.nullable) for f in schema.fields])


def write_parquet(rows: list[dict], schema, path: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows, schema=arrow_schema(schema)), path)


def format_table(rows: list[dict], columns: Sequence[str], title: str) -> str:
    shown = (
        [c for c in columns if c != "log_dir"]
        if len({r.get("log_dir") for r in rows}) <= 1
        else list(columns)
    )
    cells = [[_cell(r.get(c)) for c in shown] for r in rows]
    widths = [max([len(c)] + [len(x[i]) for x in cells]) for i, c in enumerate(shown)]
    widths = [min(w, 80) for w in widths]
    line = "  ".join(c.ljust(w) for c, w in zip(shown, widths, strict=True))
    out = [title, line, "  ".join("-" * w for w in widths)]
    for x in cells:
        out.append("  ".join(v[:w].ljust(w) for v, w in zip(x, widths, strict=True)))
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.get("status", "?")] = counts.get(r.get("status", "?"), 0) + 1
    out.append(f"{len(rows)} partitions: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return "\n".join(out)


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def job_options(now_ms: int | None, **kw) -> JobOptions:
    return JobOptions(now_ms=int(time.time() * 1000) if now_ms is None else now_ms, **kw)


def exit_status(rows: list[dict]) -> int:
    return 1 if any(r.get("status") == "failed" for r in rows) else 0
