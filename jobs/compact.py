"""Nightly compaction: Kafka's log cleaner over every compacted partition of the given log dirs.

spark-submit jobs/compact.py --log-dir /data/kafka-logs [options]
kafka-log-jobs compact --log-dir /data/kafka-logs [options]
"""

from __future__ import annotations

import functools
import sys

import click

from jobs import options, output, runner
from jobs.context import JobContext
from jobs.output import row_schema, tell
from jobs.split import SparkSplitRunner
from kafka_log_core.work.outcome import Status, TaskOutcome
from kafka_log_core.work.rows import CompactRow
from kafka_log_core.work.tasks import ALL_ROUNDS, compact_task

DEFAULT_SPLIT_ABOVE = 4 * 1024**3  # 4 GiB

SCHEMA = row_schema(CompactRow)
COLUMNS = [f.name for f in SCHEMA.fields]


def run(spark, log_dirs, topic_regex, configs, opts, listing=None) -> list[dict]:
    """Compact every selected partition; rows come back filthiest first. A partition whose round is
    larger than ``opts.split_above`` comes back from its task as ``split``: the driver then cleans it,
    from the same task, with tasks of its own (``jobs/split.py``), one such partition after the other.
    (Its plan is made again: the executor let go of the partition's lock, and a plan is made under the
    lock from what is on disk then.)"""

    def clean_split(outcomes: list[TaskOutcome]) -> list[TaskOutcome]:
        split_runner = None
        for i, outcome in enumerate(outcomes):
            if outcome.status is not Status.SPLIT:
                continue
            split_runner = split_runner or SparkSplitRunner(spark)
            tell(f"{outcome.task.tp.dir_name}: {outcome.row['reason']} across the cluster")
            outcomes[i] = compact_task(outcome.task, configs, opts, split_runner=split_runner)
        return outcomes

    fn = functools.partial(compact_task, configs=configs, opts=opts)
    return runner.run_job(
        spark, log_dirs, topic_regex, fn, CompactRow, writing=not opts.dry_run, listing=listing,
        title="compact (dry run)" if opts.dry_run else "compact", order=runner.FILTHIEST_FIRST, then=clean_split,
    )  # fmt: skip


def parse_rounds(ctx, param, value) -> int:
    if value == "all":
        return ALL_ROUNDS
    try:
        rounds = int(value)
    except ValueError:
        rounds = -1
    if rounds < 1:
        raise click.BadParameter(f"{value!r}: expected a number of rounds >= 1, or 'all'")
    return rounds


@click.command("compact")
@options.job_context(*options.JOB, options.READ, options.WRITE)
@click.option("--dry-run", is_flag=True, help="Compute and print the plan, change nothing.")
@click.option(
    "--rounds",
    default="1",
    show_default=True,
    callback=parse_rounds,
    metavar="N|all",
    help="Cleaning rounds per partition in this run, each one broker round (the same as running "
    "the job N times); 'all': until the dirty section is clean or nothing more can be cleaned.",
)
@click.option(
    "--split-above",
    type=click.IntRange(min=0),
    default=DEFAULT_SPLIT_ABOVE,
    show_default=True,
    metavar="BYTES",
    help="Clean a partition whose cleanable section exceeds BYTES in one round over "
    "every key, cut into parallel tasks (0: always).",
)
def command(job: JobContext, dry_run: bool, rounds: int, split_above: int) -> None:
    """Compact partitions whose cleanup.policy includes compact, as Kafka's log cleaner would."""
    spark_started = job.start_spark("compact")  # Spark's core, while the job lists and reads settings
    listing = job.listing(writing=not dry_run)  # mistakes said at once
    configs = job.configs()
    opts = job.options(dry_run=dry_run, rounds=rounds, split_above=split_above)
    spark = spark_started()
    rows = run(spark, job.log_dirs, job.topic_regex, configs, opts, listing)
    job.output.emit(rows, SCHEMA, "compaction plan (dry run)" if dry_run else "compaction", dry_run=dry_run)
    sys.exit(output.exit_status(rows))


if __name__ == "__main__":
    command()
