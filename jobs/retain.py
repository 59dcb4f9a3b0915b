"""Retention sweep: time, size and log-start-offset rules, as the broker applies them.

spark-submit jobs/retain.py --log-dir /data/kafka-logs [options]
kafka-log-jobs retain --log-dir /data/kafka-logs [options]
"""

from __future__ import annotations

import functools
import re
import sys

import click

from jobs import common
from kafka_log_core.work.rows import RetainRow
from kafka_log_core.work.tasks import retain_partition

SCHEMA = common.row_schema(RetainRow)
COLUMNS = [f.name for f in SCHEMA.fields]
_LSO = re.compile(r"(?P<topic>.+):(?P<partition>\d+)=(?P<offset>\d+)")


def parse_log_start_offsets(values) -> tuple[tuple[str, int, int], ...]:
    out = []
    for value in values:
        m = _LSO.fullmatch(value)
        if not m:
            raise click.BadParameter(
                f"{value!r}: expected TOPIC:PARTITION=OFFSET", param_hint="'--log-start-offset'"
            )
        out.append((m["topic"], int(m["partition"]), int(m["offset"])))
    return tuple(out)


def run(spark, log_dirs, topic_regex, configs, opts, listing=None) -> list[dict]:
    fn = functools.partial(retain_partition, configs=configs, opts=opts)
    return common.run_job(
        spark, log_dirs, topic_regex, fn, RetainRow, writing=not opts.dry_run, listing=listing,
        title="retain (dry run)" if opts.dry_run else "retain",
    )  # fmt: skip


@click.command("retain")
@common.shared_options
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
    help="Advance a partition's log start offset (offline DeleteRecords; repeatable).",
)
def command(log_dirs, topic_regex, conf_dir, config_files, topic_configs, sets, kafka_version,
            assume_broker_defaults, metadata_log_dirs, now_ms, require_high_watermark, no_recover,
            recover_truncating, output, report_path, master, verbose, dry_run, force, log_start_offsets):  # fmt: skip
    """Delete segments by retention.ms, retention.bytes and the log start offset, as the broker does."""
    spark_started = common.start_spark(master, "kafka-log-jobs retain", verbose=verbose)
    listing = common.list_tasks(log_dirs, topic_regex, writing=not dry_run)  # mistakes said at once
    configs = common.load_configs(
        log_dirs, conf_dir, config_files, topic_configs, sets, kafka_version, assume_broker_defaults,
        metadata_log_dirs,
    )  # fmt: skip
    opts = common.job_options(
        now_ms, dry_run=dry_run, require_high_watermark=require_high_watermark, recover=not no_recover, force=force,
        recover_truncating=recover_truncating, log_start_offsets=parse_log_start_offsets(log_start_offsets),
    )  # fmt: skip
    spark = spark_started()
    rows = run(spark, log_dirs, topic_regex, configs, opts, listing)
    common.emit(
        rows,
        SCHEMA,
        COLUMNS,
        spark,
        output,
        report_path,
        "retention plan (dry run)" if dry_run else "retention",
        dry_run=dry_run,
    )
    sys.exit(common.exit_status(rows))


if __name__ == "__main__":
    command()
