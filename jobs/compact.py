"""Nightly compaction: Kafka's log cleaner over every compacted partition of the given log dirs.

spark-submit jobs/compact.py --log-dir /data/kafka-logs [options]
kafka-log-jobs compact --log-dir /data/kafka-logs [options]
"""

from __future__ import annotations

import functools
import sys

import click

from jobs import common
from kafka_log_core.work.rows import CompactRow
from kafka_log_core.work.tasks import compact_partition

SCHEMA = common.row_schema(CompactRow)
COLUMNS = [f.name for f in SCHEMA.fields]


def run(spark, log_dirs, topic_regex, configs, opts, listing=None) -> list[dict]:
    """Compact every selected partition; rows come back filthiest first."""
    fn = functools.partial(compact_partition, configs=configs, opts=opts)
    return common.run_job(
        spark, log_dirs, topic_regex, fn, CompactRow, writing=not opts.dry_run, order=common.filthiest_first,
        listing=listing, title="compact (dry run)" if opts.dry_run else "compact",
    )  # fmt: skip


@click.command("compact")
@common.shared_options
@click.option("--dry-run", is_flag=True, help="Compute and print the plan, change nothing.")
def command(log_dirs, topic_regex, conf_dir, config_files, topic_configs, sets, kafka_version,
            assume_broker_defaults, metadata_log_dirs, now_ms, require_high_watermark, no_recover, output,
            report_path, master, verbose, dry_run):  # fmt: skip
    """Compact partitions whose cleanup.policy includes compact, as Kafka's log cleaner would."""
    listing = common.list_tasks(
        log_dirs, topic_regex, writing=not dry_run
    )  # mistakes said before Spark starts
    configs = common.load_configs(
        log_dirs, conf_dir, config_files, topic_configs, sets, kafka_version, assume_broker_defaults,
        metadata_log_dirs,
    )  # fmt: skip
    opts = common.job_options(
        now_ms, dry_run=dry_run, require_high_watermark=require_high_watermark, recover=not no_recover
    )
    spark = common.spark_session(master, "kafka-log-jobs compact", verbose=verbose)
    rows = run(spark, log_dirs, topic_regex, configs, opts, listing)
    title = "compaction plan (dry run)" if dry_run else "compaction"
    common.emit(rows, SCHEMA, COLUMNS, spark, output, report_path, title)
    sys.exit(common.exit_status(rows))


if __name__ == "__main__":
    command()
