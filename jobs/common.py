"""What every job shares: the options, the driver's listing of partition directories, the Spark map over
them, and the result table (printed, written as JSON/Parquet). Jobs stay thin: the work of one
partition is a function in ``kafka_log_core.work.tasks``.

A job lists before it starts Spark, so that a mistake is said at once, in one line, with exit status 2:
a ``--topic`` that is not a regex or matches no topic, a ``--log-dir`` holding no partition directory
(a partition directory itself, the parent of log dirs, an empty one). A job that writes refuses a log dir
it cannot write (a read-only backup) in one line, exit 1; dry runs and the report only read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
import re
import socket
import subprocess
import sys
import textwrap
import threading
import time
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click
from pyspark.sql.types import (
    BooleanType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from jobs import bins, progress
from kafka_log_core.errors import KafkaLogError, describe_os_error
from kafka_log_core.format import compression
from kafka_log_core.format.checkpoints import LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA
from kafka_log_core.format.filenames import (
    LOG_SUFFIX,
    list_partition_dirs,
    parse_segment_file,
    scan_partition_dirs,
)
from kafka_log_core.log import locks
from kafka_log_core.log.partition_log import LogDirState
from kafka_log_core.rules import recovery
from kafka_log_core.settings.config import ConfigSet
from kafka_log_core.settings.log_dir_config import describe, resolve_log_dir_configs
from kafka_log_core.work.rows import INT32, columns
from kafka_log_core.work.tasks import UNKNOWN_SETTINGS, JobOptions, PartitionTask

DEFAULT_CONF_DIR = Path("conf")
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")  # Spark's log: errors only (see the file)
_SPARK_TYPES = {int: LongType(), float: DoubleType(), bool: BooleanType(), str: StringType()}


def spark_field(name: str, hint: Any) -> StructField:
    """One result column from a row field's type (:mod:`kafka_log_core.work.rows`): ``X | None`` nullable,
    ``int`` a long, ``Int32`` an integer, ``float`` a double, ``bool`` a boolean, ``str`` a string."""
    nullable = False
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint):
        nullable = True
        (hint,) = [a for a in typing.get_args(hint) if a is not type(None)]
    if typing.get_origin(hint) is typing.Annotated:
        base, *marks = typing.get_args(hint)
        if base is int and INT32 in marks:
            return StructField(name, IntegerType(), nullable)
        hint = base
    if hint not in _SPARK_TYPES:
        raise TypeError(f"result column {name}: no Spark type for {hint!r}")
    return StructField(name, _SPARK_TYPES[hint], nullable)


def row_schema(row_type: type) -> StructType:
    """A job's result table as a Spark schema, from its row dataclass: its columns in field order."""
    hints = typing.get_type_hints(row_type, include_extras=True)
    return StructType([spark_field(name, hints[name]) for name in columns(row_type)])


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
            "--topic",
            "topic_regex",
            default=None,
            callback=check_topic_regex,
            help="Only topics matching this regex (full match).",
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
            "--recover-truncating",
            is_flag=True,
            help="Recover as the broker's log loader does even where it deletes valid data (truncating at the "
            "first invalid batch and deleting the later segments of a crashed dir); by default only a crash's "
            "torn or zero-filled tail is truncated, and a partition with valid data past an invalid batch is "
            "refused.",
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
        click.option(
            "--verbose",
            is_flag=True,
            help="Show Spark's own start-up lines and warnings (default: errors only).",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


# compact and dump: the most one batch's records may decompress to (``compression.MAX_BATCH_BYTES``)
max_batch_bytes_option = click.option(
    compression.LIMIT_OPTION,
    "max_batch_bytes",
    type=click.IntRange(min=1),
    default=compression.MAX_BATCH_BYTES,
    show_default=True,
    metavar="BYTES",
    help="The most one batch's records may decompress to: a larger batch is refused as a compression bomb would "
    "be (its partition fails, nothing changes); raise it for a topic whose batches are larger.",
)


def topic_pattern(topic_regex: str | None) -> re.Pattern | None:
    """``--topic`` compiled, or a usage error naming what is wrong with the regex."""
    if topic_regex is None:
        return None
    try:
        return re.compile(topic_regex)
    except re.error as err:
        raise click.BadParameter(
            f"{topic_regex!r} is not a regular expression: {err}", param_hint="'--topic'"
        ) from None


def check_topic_regex(ctx, param, value):
    topic_pattern(value)
    return value


@dataclass(frozen=True)
class Listing:
    tasks: list[PartitionTask]
    failed: list[dict]  # rows for log dirs that could not be read at all
    notes: list[str]
    skipped: list[dict] = dataclasses.field(default_factory=list)  # rows for directories not worked on


def list_tasks(log_dirs: Sequence[str], topic_regex: str | None, *, writing: bool) -> Listing:
    """The driver's listing: one task per selected partition directory. A usage error (exit 2) when nothing
    is selected, saying why; a ClickException (exit 1) when a job that writes can do nothing because no
    log dir can be written."""
    pattern = topic_pattern(topic_regex)
    tasks: list[PartitionTask] = []
    failed: list[dict] = []
    notes: list[str] = []
    empty: list[str] = []  # why a log dir holds no partition directory
    missed: list[str] = []  # why --topic selects nothing in a log dir
    refused: list[str] = []  # log dirs a writing job cannot write
    skipped: list[dict] = []  # aliases and names Kafka would not create
    seen_dirs: dict[tuple[int, int], str] = {}  # log dirs by identity: one given twice is listed once
    seen: dict[tuple[int, int], Path] = {}  # partition directories by identity, over every log dir
    for log_dir in log_dirs:
        d = Path(log_dir)
        if not d.is_dir():
            raise click.UsageError(f"--log-dir {log_dir}: not a directory")
        st = d.stat()
        if (st.st_dev, st.st_ino) in seen_dirs:
            notes.append(f"--log-dir {log_dir} is the same directory as --log-dir {seen_dirs[st.st_dev, st.st_ino]}: "
                         "listed once")  # fmt: skip
            continue
        seen_dirs[st.st_dev, st.st_ino] = log_dir
        try:
            scanned = scan_partition_dirs(d)
        except OSError as err:
            failed.append(_dir_row(log_dir, f"cannot list {log_dir}: {describe_os_error(err)}"))
            continue
        partitions = []
        for tp, path in scanned.found:
            first = seen.setdefault(scanned.identities[tp], path)
            if first == path:
                partitions.append((tp, path))
            elif pattern is None or pattern.fullmatch(tp.topic):
                reason = f"{path}: the same directory as {first}: an alias, skipped (worked on as {first})"
                skipped.append(_dir_row(log_dir, reason, tp.topic, tp.partition, status="skipped"))
        skipped += [_dir_row(log_dir, s.reason, s.tp.topic, s.tp.partition, status="skipped")
                    for s in scanned.skipped if pattern is None or pattern.fullmatch(s.tp.topic)]  # fmt: skip
        if not partitions:
            empty.append(no_partitions_hint(d))
            continue
        selected = [(tp, p) for tp, p in partitions if pattern is None or pattern.fullmatch(tp.topic)]
        if not selected:
            missed.append(no_topic_hint(topic_regex or "", pattern, d, [tp.topic for tp, _ in partitions]))
            continue
        partitions = selected
        problem = locks.not_writable(d) if writing else None
        if problem:
            refused.append(problem)
            failed.append(_dir_row(log_dir, problem))
            continue
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
            msg = f"log-dir file unreadable (the broker would take this log dir offline): {err}"
            failed += [_dir_row(log_dir, msg, tp.topic, tp.partition) for tp, _ in partitions]
            continue
        for tp, _ in partitions:
            # Absolute: an executor resolves a relative path against its own working directory.
            tasks.append(
                PartitionTask(os.path.abspath(log_dir), tp.topic, tp.partition, state.for_partition(tp))
            )
    if not tasks and not failed and not skipped:
        raise click.UsageError("\n".join(empty + missed))
    if not tasks and len(refused) == len(failed):
        raise click.ClickException("\n".join(refused))
    # Among log dirs that have work: one without partitions is said; one without the topic is usual (JBOD).
    return Listing(tasks, failed, notes + empty, skipped)


_SHOWN = 20  # topic names listed in a hint


def no_partitions_hint(d: Path) -> str:
    """Why ``d`` holds no partition directory, and what the user probably meant."""
    said = f"no partition directories (<topic>-<partition>) under {d}"
    try:
        names = sorted(os.listdir(d))
    except OSError as err:
        return f"{said}: {err.strerror}"
    if not names:
        return f"{said}: it is empty"
    if any(parse_segment_file(n) for n in names) or {PARTITION_METADATA, LEADER_EPOCH_CHECKPOINT} & set(
        names
    ):
        return f"{said}; it looks like a partition directory: pass its parent, --log-dir {d.parent}"
    below = []
    for name in names[:200]:
        sub = d / name
        try:
            if sub.is_dir() and list_partition_dirs(sub):
                below.append(sub)
        except OSError:
            continue
    if below:
        shown = " ".join(f"--log-dir {b}" for b in below[:5]) + (" …" if len(below) > 5 else "")
        return f"{said}; it looks like a directory of log dirs: pass them, {shown}"
    if all(n.startswith("__cluster_metadata-") or n.startswith(".") or (d / n).is_file() for n in names):
        return f"{said}: only log-dir files and the cluster metadata log"
    return f"{said} (none of its {len(names)} entries is named <topic>-<partition>)"


def no_topic_hint(regex: str, pattern: re.Pattern | None, d: Path, topics: Sequence[str]) -> str:
    """Why ``--topic`` selects nothing in ``d``: the topics there, and one it matches only in part."""
    names = sorted(set(topics))
    listed = ", ".join(names[:_SHOWN]) + (f" … ({len(names)} topics)" if len(names) > _SHOWN else "")
    hint = (
        f"no topic under {d} matches --topic {regex!r}: the regex must match the whole topic name; "
        f"topics here: {listed}"
    )
    partly = [t for t in names if pattern is not None and pattern.search(t)]
    if partly:
        hint += f" (it matches only part of {partly[0]}: add .* for the rest)"
    return hint


def _dir_row(log_dir: str, reason: str, topic: str = "", partition: int = -1, status: str = "failed") -> dict:
    return {"log_dir": log_dir, "topic": topic, "partition": partition, "status": status, "reason": reason}


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
    # Keyed like the tasks: by absolute path (executors resolve relative paths elsewhere).
    return {os.path.abspath(log_dir): config.configs for log_dir, config in resolved.items()}


def tell(line: str) -> None:
    """A note for the user on stderr -- unless stderr is merged into a stdout that is not a terminal
    (spark-submit runs the driver that way), where it would corrupt the JSON result; the result rows carry
    the same facts."""
    if not progress.merged_streams():
        click.echo(line, err=True)


def spark_session(
    master: str | None, app: str, conf: dict[str, str] | None = None, *, verbose: bool = False
):  # fmt: skip
    """The job's SparkSession (``conf``: settings only a new session can take, e.g. packages to load).
    Which Python the executors run:

    * under spark-submit, whatever the submitter configured (``spark.pyspark.python``, which Spark passes
      on as ``PYSPARK_PYTHON``, the ``PYSPARK_PYTHON`` variable, an ``--archives`` environment), else
      Spark's default ``python3`` on each executor's ``PATH``: the driver's own interpreter is never
      assumed to exist on another machine;
    * embedded (this process starts Spark: ``kafka-log-jobs …``, a test, a notebook) with a local
      master, this very interpreter, unless ``PYSPARK_PYTHON`` says otherwise: the executors are
      processes of this machine.

    What Spark itself prints: errors only, unless ``verbose`` (then Spark's defaults, warnings included).
    Embedded, the JVM starts with :data:`LOG4J_CONFIG` and its standard error passes through
    :func:`_forward_jvm_stderr`, which drops the JVM's own start-up warning; under spark-submit the JVM
    was started before us (the README says how to give it the same file), and the level is set once we run.
    Spark's console progress bar is off: the job shows its own (:mod:`jobs.progress`).
    """
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit (or the pyspark shell) started us
    embedded_local = not submitted and (master is None or is_local_master(master))
    if embedded_local:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # embedded: stay on loopback
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    options = {"spark.app.name": app, "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
    if master or not submitted:
        options["spark.master"] = master or "local[*]"
    options.update(conf or {})
    # SparkContext._gateway: no JVM yet in this process (a test session or a notebook may have one).
    if not submitted and not verbose and SparkContext._gateway is None:
        from pyspark.java_gateway import launch_gateway

        spark_conf = SparkConf().setAll(list(options.items()))
        spark_conf.set("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}")
        gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.PIPE})
        threading.Thread(
            target=_forward_jvm_stderr, args=(gateway.proc.stderr,), name="spark stderr", daemon=True
        ).start()
        SparkContext(conf=spark_conf, gateway=gateway)
        session = SparkSession.builder.getOrCreate()
    else:
        builder = SparkSession.builder
        for key, value in options.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN" if verbose else "ERROR")
    if not is_local_master(session.sparkContext.master or "") and "PYSPARK_PYTHON" not in os.environ:
        click.echo(
            "note: nothing sets the executors' Python (spark.pyspark.python): they run python3 from their "
            "PATH. Ship the environment `make dist` builds: --archives "
            "dist/kafka-log-jobs-env.tar.gz#environment --conf spark.pyspark.python=./environment/bin/python",
            err=True,
        )
    return session


_JVM_START_UP = re.compile(rb"WARNING: Using incubator modules: ")  # Spark's --add-modules, said by every JVM


def _forward_jvm_stderr(pipe) -> None:
    """Copy the embedded JVM's standard error (Spark's log, the Python workers' errors) to ours, without
    the JVM's start-up warning about the incubator module Spark loads."""
    for line in iter(pipe.readline, b""):
        if not _JVM_START_UP.match(line):
            os.write(2, line)


def is_local_master(master: str) -> bool:
    """``local``, ``local[N]``, ``local[*]``, ``local[N,F]``: executors in the driver's own JVM, on this
    machine (``local-cluster[…]`` is a cluster: separate executor processes, as on real nodes)."""
    return master == "local" or master.startswith("local[")


def filthiest_first(row: dict) -> tuple:
    return (-(row.get("dirty_ratio") or 0.0), row["log_dir"], row["topic"], row["partition"])


def by_partition(row: dict) -> tuple:
    return (row["log_dir"], row["topic"], row["partition"])


def run_job(
    spark, log_dirs, topic_regex, fn: Callable[[PartitionTask], dict], row_type: type, *, writing: bool,
    order: Callable[[dict], tuple] = by_partition, listing: Listing | None = None, title: str = "job",
) -> list[dict]:  # fmt: skip
    """The driver of every job: list partition directories (unless the command already did, before
    starting Spark), map ``fn`` over them on the executors with the progress shown, add a failed row for
    whatever could not even be listed (a ``row_type`` row, as the others), and sort the rows, each a dict
    of the row type's columns."""
    if listing is None:
        listing = list_tasks(log_dirs, topic_regex, writing=writing)
    for note in listing.notes:
        tell(note)
    rows = run_distributed(spark, listing.tasks, fn, row_type, title=title)
    if writing:  # every partition of a crashed log dir recovered: mark it cleanly shut down
        for note in recovery.finish_log_dirs(rows):
            tell(note)
    given = {os.path.abspath(d): os.fspath(d) for d in log_dirs}
    for row in rows:  # the log dir as the user wrote it
        row["log_dir"] = given.get(row["log_dir"], row["log_dir"])
    rows += [dataclasses.asdict(row_type(**r)) for r in listing.failed + listing.skipped]
    shown = columns(row_type)
    rows = [{c: row[c] for c in shown} for row in rows]  # the table's columns (not the driver's own fields)
    rows.sort(key=order)
    said = set()
    for row in rows:  # one line per topic whose deciding settings are unknown
        reason = row.get("reason") or ""
        if row.get("status") == "failed" and reason.startswith(UNKNOWN_SETTINGS) and row["topic"] not in said:
            said.add(row["topic"])
            tell(f"{row['log_dir']}: {reason}")
    return rows


def partition_bytes(task: PartitionTask) -> int:
    """Bytes of a partition directory's ``.log`` files as the driver sees them (0 when it cannot be read):
    what its task reads, to size the Spark tasks and start the largest first. One ``stat`` per segment
    (the index and checkpoint files are small beside them)."""
    try:
        with os.scandir(os.path.join(task.log_dir, task.tp.dir_name)) as entries:
            return sum(
                e.stat(follow_symlinks=False).st_size
                for e in entries
                if e.name.endswith(LOG_SUFFIX) and e.is_file(follow_symlinks=False)
            )
    except OSError:
        return 0


def run_distributed(
    spark, tasks: list[PartitionTask], fn: Callable[[PartitionTask], dict], row_type: type | None = None,
    title: str | None = None,
) -> list[dict]:  # fmt: skip
    """Map ``fn`` over the tasks in Spark tasks that each run a bin of partitions (:mod:`jobs.bins`: sized
    by bytes, the largest partitions started first); the rows come back in the order of ``tasks``. With a
    ``title``, the progress is shown as the partitions finish (:mod:`jobs.progress`)."""
    if not tasks:
        return []
    sizes = [partition_bytes(t) for t in tasks]
    guarded = functools.partial(on_executor, fn=fn, row_type=row_type)
    shown = None
    if title is not None:
        order = bins.launch_order(sizes, spark.sparkContext.defaultParallelism)
        shown = progress.Progress(title, [tasks[i].tp.dir_name for i in order], [sizes[i] for i in order])
    failed = functools.partial(failed_row, row_type=row_type)
    return bins.run_bins(
        spark, tasks, sizes, guarded, failed, environment_failure, shown=shown, what=title or "job"
    )


def failed_row(task: PartitionTask, reason: str, row_type: type | None = None) -> dict:
    """A failed result row for ``task`` (of ``row_type``, when given)."""
    row = dict(log_dir=task.log_dir, topic=task.topic, partition=task.partition, status="failed", reason=reason,
               duration_ms=0)  # fmt: skip
    return row if row_type is None else dataclasses.asdict(row_type(**row))


def environment_failure(message: str) -> click.ClickException | None:
    """The one line a job stops with when a Spark task failed before our code ran, because of the
    executors' Python (None for any other failure)."""
    hint = _environment_hint(message)
    if hint is None:
        return None
    return click.ClickException(
        f"{hint}: ship the job's environment built from this checkout (`make dist`, then spark-submit "
        "--archives dist/kafka-log-jobs-env.tar.gz#environment --conf "
        "spark.pyspark.python=./environment/bin/python; see the README's cluster section)"
    )


def map_in_order(spark, tasks: Sequence, fn: Callable, shown: progress.Progress | None = None) -> list:
    """``fn`` over ``tasks`` with one slice (one Spark task) each: Spark launches a stage's tasks in
    partition order, so ``tasks[0]`` starts first. Results come back in the same order. ``shown`` follows
    the tasks as they finish."""
    sc = spark.sparkContext
    done = sc.accumulator([], progress.DoneList()) if shown is not None else None
    rdd = sc.parallelize(list(enumerate(tasks)), numSlices=len(tasks))
    watching = shown.watching(sc, done) if shown is not None else contextlib.nullcontext()
    with watching:
        try:
            return rdd.map(functools.partial(_reporting, fn=fn, done=done)).collect()
        except Exception as err:
            stop = environment_failure(str(err))
            if stop is None:
                raise
            raise stop from None


def _reporting(item: tuple[int, object], fn: Callable, done) -> object:
    """What a Spark task runs: ``fn`` on its task, then its slice and status added to ``done``."""
    i, task = item
    result = fn(task)
    if done is not None:
        done.add([(i, result.get("status", "done") if isinstance(result, dict) else "done")])
    return result


def _environment_hint(message: str) -> str | None:
    """One line for a Spark task that failed before our code ran, because of the executors' Python."""
    missing = re.search(r"ModuleNotFoundError: No module named '([^']+)'", message)
    if missing:
        return f"the executors' Python cannot import {missing.group(1)!r}"
    stale = re.search(r"AttributeError: Can't get attribute '([^']+)' on <module '([^']+)'", message)
    if stale:
        return (
            f"the executors' {stale.group(2)} has no {stale.group(1)!r}: they run another version of the jobs"
        )
    return None


def on_executor(
    task: PartitionTask, fn: Callable[[PartitionTask], dict], row_type: type | None = None
) -> dict:
    """What a Spark task runs: ``fn`` on the partition, or a failed row (of ``row_type``, when given) naming
    this host and the directory when this executor does not see it (log dirs must be at the same path on
    every node)."""
    if os.path.isdir(os.path.join(task.log_dir, task.tp.dir_name)):
        return fn(task)
    directory = Path(task.log_dir) / task.tp.dir_name
    missing = directory if Path(task.log_dir).is_dir() else Path(task.log_dir)
    reason = (
        f"{missing}: no such directory on executor host {socket.gethostname()} (the driver listed it: "
        "every node must see the log dirs at the same path, on a shared filesystem)"
    )
    return failed_row(task, reason, row_type)


def emit(
    rows: list[dict],
    schema,
    columns: Sequence[str],
    spark,
    output: str | None,
    report_path: str | None,
    title: str,
    *,
    dry_run: bool = False,
) -> None:
    """Print the result table (stdout: only the JSON array with --output json; the closing summary of a
    run whose recovery truncated records then goes to stderr) and write the report."""
    full = [{c: r.get(c) for c in columns} for r in rows]
    fmt = output or ("table" if sys.stdout.isatty() else "json")
    if fmt == "json":
        sys.stdout.write(json.dumps(full, default=str) + "\n")
        truncated = truncation_summary(full, dry_run)
        if truncated:
            tell(truncated)
    else:
        click.echo(format_table(full, columns, title, dry_run=dry_run))
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


MAX_CELL = 80  # wider cells (reasons, settings) are wrapped onto more lines, never cut


def truncation_summary(rows: list[dict], dry_run: bool) -> str:
    """What recovery truncated over the run ("" when nothing): every run that truncated records says so."""
    hit = [r for r in rows if (r.get("truncated_bytes") or 0) > 0]
    if not hit:
        return ""
    records = sum(r.get("truncated_records") or 0 for r in hit)
    size = sum(r["truncated_bytes"] for r in hit)
    verb = "would truncate" if dry_run else "truncated"
    return (
        f"recovery {verb} {records} record{'' if records == 1 else 's'} ({size} bytes) in {len(hit)} "
        f"partition{'' if len(hit) == 1 else 's'}"
    )


def format_table(rows: list[dict], columns: Sequence[str], title: str, *, dry_run: bool = False) -> str:
    shown = (
        [c for c in columns if c != "log_dir"]
        if len({r.get("log_dir") for r in rows}) <= 1
        else list(columns)
    )
    cells = [[_cell(r.get(c)) for c in shown] for r in rows]
    widths = [max([len(c)] + [len(x[i]) for x in cells]) for i, c in enumerate(shown)]
    widths = [min(w, MAX_CELL) for w in widths]
    line = "  ".join(c.ljust(w) for c, w in zip(shown, widths, strict=True))
    out = [title, line.rstrip(), "  ".join("-" * w for w in widths)]
    for x in cells:
        wrapped = [wrap_cell(v, w) for v, w in zip(x, widths, strict=True)]
        for k in range(max(len(c) for c in wrapped)):
            parts = [(c[k] if k < len(c) else "").ljust(w) for c, w in zip(wrapped, widths, strict=True)]
            out.append("  ".join(parts).rstrip())
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.get("status", "?")] = counts.get(r.get("status", "?"), 0) + 1
    closing = f"{len(rows)} partitions: " + ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    truncated = truncation_summary(rows, dry_run)
    out.append(closing + (f"; {truncated}" if truncated else ""))
    return "\n".join(out)


def wrap_cell(text: str, width: int) -> list[str]:
    """``text`` on lines of at most ``width`` characters, at spaces where it can (paths are split where
    they must, never at their hyphens), losing nothing."""
    if len(text) <= width:
        return [text]
    return textwrap.wrap(text, width, break_long_words=True, break_on_hyphens=False) or [""]


def _cell(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def job_options(now_ms: int | None, **kw) -> JobOptions:
    if kw.get("recover_truncating") and not kw.get("recover", True):
        raise click.UsageError("--recover-truncating and --no-recover exclude each other")
    return JobOptions(now_ms=int(time.time() * 1000) if now_ms is None else now_ms, **kw)


def exit_status(rows: list[dict]) -> int:
    return 1 if any(r.get("status") == "failed" for r in rows) else 0
