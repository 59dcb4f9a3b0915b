"""Nightly compaction: Kafka's log cleaner over every compacted partition of the given log dirs.

spark-submit jobs/compact.py --log-dir /data/kafka-logs [options]
kafka-log-jobs compact --log-dir /data/kafka-logs [options]
"""

from __future__ import annotations

import functools
import os
import sys

import click

from jobs import common
from jobs.split import SparkSplitRunner
from kafka_log_core.work.rows import CompactRow
from kafka_log_core.work.tasks import ALL_ROUNDS, SPLIT, compact_partition

DEFAULT_SPLIT_ABOVE = 4 * 1024**3  # 4 GiB

SCHEMA = common.row_schema(CompactRow)
COLUMNS = [f.name for f in SCHEMA.fields]


def run(spark, log_dirs, topic_regex, configs, opts, listing=None) -> list[dict]:
    """Compact every selected partition; rows come back filthiest first. A partition whose round is
    larger than ``opts.split_above`` comes back from its task as ``split``: the driver then cleans it
    with tasks of its own (``jobs/split.py``), one such partition after the other."""
    if listing is None:
        listing = common.list_tasks(log_dirs, topic_regex, writing=not opts.dry_run)
    fn = functools.partial(compact_partition, configs=configs, opts=opts)
    rows = common.run_job(
        spark, log_dirs, topic_regex, fn, CompactRow, writing=not opts.dry_run, order=common.filthiest_first,
        listing=listing, title="compact (dry run)" if opts.dry_run else "compact",
    )  # fmt: skip
    tasks = {(os.path.abspath(t.log_dir), t.topic, t.partition): t for t in listing.tasks}
    runner = None
    for i, row in enumerate(rows):
        if row.get("status") != SPLIT:
            continue
        runner = runner or SparkSplitRunner(spark)
        task = tasks[(os.path.abspath(row["log_dir"]), row["topic"], row["partition"])]
        common.tell(f"{task.tp.dir_name}: {row['reason']} across the cluster")
        rows[i] = dict(compact_partition(task, configs, opts, split_runner=runner), log_dir=row["log_dir"])
    return rows


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
@common.shared_options
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
@common.max_batch_bytes_option
def command(log_dirs, topic_regex, conf_dir, config_files, topic_configs, sets, kafka_version,
            assume_broker_defaults, metadata_log_dirs, now_ms, require_high_watermark, no_recover,
            recover_truncating, output, report_path, master, verbose, dry_run, rounds, split_above,
            max_batch_bytes):  # fmt: skip
    """Compact partitions whose cleanup.policy includes compact, as Kafka's log cleaner would."""
    listing = common.list_tasks(
        log_dirs, topic_regex, writing=not dry_run
    )  # mistakes said before Spark starts
    configs = common.load_configs(
        log_dirs, conf_dir, config_files, topic_configs, sets, kafka_version, assume_broker_defaults,
        metadata_log_dirs,
    )  # fmt: skip
    opts = common.job_options(
        now_ms, dry_run=dry_run, require_high_watermark=require_high_watermark, recover=not no_recover,
        recover_truncating=recover_truncating, rounds=rounds, split_above=split_above,
        max_batch_bytes=max_batch_bytes,
    )  # fmt: skip
    spark = common.spark_session(master, "kafka-log-jobs compact", verbose=verbose)
    rows = run(spark, log_dirs, topic_regex, configs, opts, listing)
    title = "compaction plan (dry run)" if dry_run else "compaction"
    common.emit(rows, SCHEMA, COLUMNS, spark, output, report_path, title, dry_run=dry_run)
    sys.exit(common.exit_status(rows))


if __name__ == "__main__":
    command()
