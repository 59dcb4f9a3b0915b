"""Retention sweep: time, size and log-start-offset rules, as the broker applies them.

spark-submit jobs/retain.py --log-dir /data/kafka-logs [options]
kafka-log-jobs retain --log-dir /data/kafka-logs [options]
"""

from __future__ import annotations

import functools
import re
import sys

import click

from jobs import options, output, runner
from jobs.context import JobContext
from jobs.output import row_schema
from kafka_log_core.work.rows import RetainRow
from kafka_log_core.work.tasks import retain_task

SCHEMA = row_schema(RetainRow)
COLUMNS = [f.name for f in SCHEMA.fields]
_LSO = re.compile(r"(?P<topic>.+):(?P<partition>\d+)=(?P<offset>-1|\d+)")  # -1: the high watermark


def parse_log_start_offsets(values) -> tuple[tuple[str, int, int], ...]:
    out = []
    for value in values:
        m = _LSO.fullmatch(value)
        if not m:
            raise click.BadParameter(
                f"{value!r}: expected TOPIC:PARTITION=OFFSET (-1: the high watermark)",
                param_hint="'--log-start-offset'",
            )
        out.append((m["topic"], int(m["partition"]), int(m["offset"])))
    return tuple(out)


def run(spark, log_dirs, topic_regex, configs, opts, listing=None) -> list[dict]:
    fn = functools.partial(retain_task, configs=configs, opts=opts)
    return runner.run_job(
        spark, log_dirs, topic_regex, fn, RetainRow, writing=not opts.dry_run, listing=listing,
        title="retain (dry run)" if opts.dry_run else "retain",
    )  # fmt: skip


@click.command("retain")
@options.job_context(*options.JOB, options.WRITE)
@click.option("--dry-run", is_flag=True, help="Compute and print the plan, change nothing.")
@click.option(
    "--force",
    is_flag=True,
    help="Allow retention.ms below one hour, or deleting every non-empty segment of a partition.",
)
@click.option(
    "--log-start-offset",
    "log_start_offsets",
    multiple=True,
    metavar="TOPIC:PARTITION=OFFSET",
    help="Advance a partition's log start offset (offline DeleteRecords, -1: to the high watermark; repeatable).",
)
def command(job: JobContext, dry_run: bool, force: bool, log_start_offsets: tuple[str, ...]) -> None:
    """Delete segments by retention.ms, retention.bytes and the log start offset, as the broker does."""
    spark_started = job.start_spark("retain")  # Spark's core, while the job lists and reads settings
    listing = job.listing(writing=not dry_run)  # mistakes said at once
    configs = job.configs()
    opts = job.options(
        dry_run=dry_run, force=force, log_start_offsets=parse_log_start_offsets(log_start_offsets)
    )
    spark = spark_started()
    rows = run(spark, job.log_dirs, job.topic_regex, configs, opts, listing)
    job.output.emit(rows, SCHEMA, "retention plan (dry run)" if dry_run else "retention", dry_run=dry_run)
    sys.exit(output.exit_status(rows))


if __name__ == "__main__":
    command()
