"""The options the jobs share, each defined once, and the decorator that builds the command's
:class:`~jobs.context.JobContext` from them.

``@job_context(LOG_DIRS, CONFIG, RUN, OUTPUT, SPARK)`` above a command's own options adds the groups'
options (before the command's own in ``--help``), builds the context from their values, keeps it as the
click context's ``obj`` and calls the command with it first, followed by the command's own options only.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import click

from jobs.context import ConfigSources, JobContext, topic_pattern
from jobs.output import Output
from kafka_log_core.format import compression
from kafka_log_core.log import locks

LOG_DIR_HELP = "A Kafka log.dirs entry (repeatable)."


def log_dir_option(*, exists: bool = False, help: str = LOG_DIR_HELP) -> Callable:
    """``--log-dir`` (repeatable, required), as every command takes it."""
    return click.option(
        "--log-dir",
        "log_dirs",
        multiple=True,
        required=True,
        type=click.Path(file_okay=False, exists=exists),
        help=help,
    )


def check_topic_regex(ctx, param, value):
    topic_pattern(value)
    return value


def topic_option() -> Callable:
    return click.option(
        "--topic",
        "topic_regex",
        default=None,
        callback=check_topic_regex,
        help="Only topics matching this regex (full match).",
    )


# The most one batch's records may decompress to (``compression.MAX_BATCH_BYTES``): every command that
# decompresses a batch takes it -- compact, report and export (the READ group, into the job context),
# dump and offsets (their own). retain does not: it reads batch headers, and the only records it decodes
# are transaction markers, one small record in a control batch, which Kafka always writes uncompressed.
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


# How long a job that writes waits for a partition another kafka-log-jobs job is writing (compact, retain:
# the WRITE group). A dry run locks nothing and never waits.
busy_timeout_option = click.option(
    "--busy-timeout",
    "busy_timeout_s",
    type=click.FloatRange(min=0),
    default=locks.BUSY_TIMEOUT_S,
    show_default=True,
    metavar="SECONDS",
    help="How long to wait for a partition another kafka-log-jobs job is writing before skipping it (a later "
    "run takes it up); 0: skip it at once.",
)


# The groups: (option decorators, the context field each value goes to). -------------------------------
LOG_DIRS = [log_dir_option(), topic_option()]
CONFIG = [
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
]
RUN = [
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
]
OUTPUT = [
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
]
SPARK = [
    click.option("--master", default=None, help="Spark master URL (default: spark-submit's, else local[*])."),
    click.option(
        "--verbose",
        is_flag=True,
        help="Show Spark's own start-up lines and warnings (default: errors only).",
    ),
]
READ = [max_batch_bytes_option]  # compact, report, export: the jobs that decompress batches
WRITE = [busy_timeout_option]  # compact, retain: the jobs that write
JOB = [LOG_DIRS, CONFIG, RUN, OUTPUT, SPARK]  # compact, retain, report

_SOURCES = ("conf_dir", "config_files", "topic_configs", "sets", "kafka_version", "assume_broker_defaults",
            "metadata_log_dirs")  # fmt: skip
_SHARED = ("log_dirs", "topic_regex", *_SOURCES, "now_ms", "require_high_watermark", "no_recover",
           "recover_truncating", "output", "report_path", "master", "verbose", "max_batch_bytes",
           "busy_timeout_s")  # fmt: skip


def context_of(values: dict) -> JobContext:
    """The context from the shared options' values (those a command does not take keep their defaults)."""
    return JobContext(
        log_dirs=tuple(values["log_dirs"]),
        topic_regex=values.get("topic_regex"),
        sources=ConfigSources(**{name: values[name] for name in _SOURCES if name in values}),
        now_ms=values.get("now_ms"),
        require_high_watermark=values.get("require_high_watermark", False),
        recover=not values.get("no_recover", False),
        recover_truncating=values.get("recover_truncating", False),
        output=Output(values.get("output"), values.get("report_path")),
        master=values.get("master"),
        verbose=values.get("verbose", False),
        max_batch_bytes=values.get("max_batch_bytes", compression.MAX_BATCH_BYTES),
        busy_timeout_s=values.get("busy_timeout_s", locks.BUSY_TIMEOUT_S),
    )


def job_context(*groups: list[Callable]) -> Callable:
    """Add the groups' options to a command, and call it with the :class:`JobContext` they make first."""

    def decorate(command: Callable) -> Callable:
        @functools.wraps(command)
        def run(**values):
            shared = {name: values.pop(name) for name in _SHARED if name in values}
            job = context_of(shared)
            click.get_current_context().obj = job
            return command(job, **values)

        for group in reversed(groups):
            for option in reversed(group):
                run = option(run)
        return run

    return decorate
