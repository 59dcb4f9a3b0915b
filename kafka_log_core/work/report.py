"""The dry-run report of one partition: what compaction and retention would do, changing nothing.

One row per partition directory, in the shape of the report job's schema. Read-only by construction:
no partition lock is taken (nothing is written, and a broker may even hold the log dir), loader
leftovers are not resolved — the row says what the loader would do with them — and the cleaner
checkpoint is not reset when it is out of range. Like every task, it never raises: a partition that
cannot be read is one ``failed`` row with the file and position.

The figures are the ones the jobs act on:

* the dirty-ratio columns are :func:`cleaner.plan_cleaning`'s, so the report and the compact job agree
  on the same input;
* ``duplicate_share`` is counted, not sampled: pass 1 of the cleaner (:func:`cleaner.build_offset_map`)
  over the dirty section, superseded keyed records / keyed records scanned. Aborted transactional data
  is skipped as the cleaner skips it. The map counts against the broker's own
  ``log.cleaner.dedupe.buffer.size`` — past that the cleaner would stop its round there too, and the
  share covers the part one round would clean — and allocates only what the section can fill;
* ``reclaimable_bytes`` is an estimate: ``cleanable_bytes × duplicate_share + retention_bytes`` (records
  assumed to be of equal size), capped at the partition's size. :class:`~kafka_log_core.work.estimate.CompactionEstimate` holds the
  compaction part; ``compact --dry-run`` shows the same figures in its rows.
"""

from __future__ import annotations

import dataclasses

from kafka_log_core.log.partition_log import PartitionLog
from kafka_log_core.rules import cleaner, retention
from kafka_log_core.rules.producer_state import build_producer_table
from kafka_log_core.settings.config import ConfigSet, LogConfig, TopicSettings
from kafka_log_core.work.estimate import estimate_compaction
from kafka_log_core.work.outcome import Status, TaskOutcome
from kafka_log_core.work.rows import ReportRow, RowDraft
from kafka_log_core.work.tasks import (
    Configs,
    JobOptions,
    PartitionTask,
    configs_for,
    prepare,
    retention_settings_unknown,
    run_guarded,
    stray_reason,
    topic_settings,
    unknown_settings_reason,
)

UNKNOWN = "unknown"


def config_columns(settings: TopicSettings) -> dict:
    """The effective cleanup.policy, retention.ms, retention.bytes and min.cleanable.dirty.ratio and where
    each came from; ``unknown`` (value null) where the value would be a guess."""
    columns: dict = {}
    for name, column in (
        ("cleanup.policy", "cleanup_policy"),
        ("retention.ms", "retention_ms"),
        ("retention.bytes", "retention_bytes_setting"),
        ("min.cleanable.dirty.ratio", "min_cleanable_dirty_ratio"),
    ):
        source_column = column.removesuffix("_setting") + "_source"
        if settings.unknown(name):
            columns[column] = UNKNOWN if name == "cleanup.policy" else None
            columns[source_column] = UNKNOWN
        else:
            value = settings.value(name)
            columns[column] = ",".join(sorted(value)) if name == "cleanup.policy" else value
            columns[source_column] = settings.source(name)
    return columns


def report_partition(
    task: PartitionTask, configs: Configs, opts: JobOptions, *, count_duplicates: bool = True
) -> dict:
    """The result row of :func:`report_task`."""
    return report_task(task, configs, opts, count_duplicates=count_duplicates).row


def report_task(
    task: PartitionTask, configs: Configs, opts: JobOptions, *, count_duplicates: bool = True
) -> TaskOutcome:
    """The report of one partition (``count_duplicates=False`` skips reading keys)."""
    if not opts.dry_run:
        opts = dataclasses.replace(opts, dry_run=True)  # the report never changes anything
    cs = configs_for(configs, task.log_dir)

    def body(row: RowDraft[ReportRow]) -> None:
        settings = topic_settings(task, cs)
        cfg = settings.config
        notes: list[str] = []
        row.set(**config_columns(settings))
        stray = stray_reason(task, cs)
        if stray is not None:
            row.set(status=Status.SKIPPED, reason=stray)
            return
        # a dry run: leftovers and recovery described, not applied
        log = prepare(task, cfg, opts, notes, cs, row)
        row.set(
            segments=len(log.segments),
            total_bytes=log.size_in_bytes,
            log_start_offset=log.log_start_offset,
            log_end_offset=log.log_end_offset,
            oldest_segment_age_ms=opts.now_ms - log.segments[0].largest_timestamp if log.segments else None,
        )
        compaction_bytes = 0
        if settings.unknown("cleanup.policy"):
            row.set(
                compact_reason=unknown_settings_reason(
                    task.topic, ["cleanup.policy"], "the compact job refuses it", cs
                )
            )
        elif cfg.compact:
            producers = build_producer_table(log, opts.now_ms, cs.broker.producer_id_expiration_ms)
            plan = cleaner.plan_cleaning(log, cfg, cs.broker, opts.now_ms, producers)
            if plan.checkpoint_reset:
                notes.append(
                    f"cleaner checkpoint out of range: the cleaner would reset it to the log start offset "
                    f"{plan.log_start_offset}"
                )
            row.set(
                clean_bytes=plan.clean_bytes,
                cleanable_bytes=plan.cleanable_bytes,
                dirty_ratio=plan.dirty_ratio,
                first_dirty_offset=plan.first_dirty_offset,
                first_uncleanable_offset=plan.first_uncleanable_offset,
                would_compact=plan.eligible,
                compact_reason=plan.reason,
            )
            if count_duplicates:
                estimate = estimate_compaction(
                    log, plan, cs.broker, notes, max_batch_bytes=opts.max_batch_bytes
                )
                row.set(duplicate_share=estimate.share)
                compaction_bytes = estimate.bytes
        else:  # the cleaner never looks at it: no dirty section, no ratio
            row.set(compact_reason=cfg.not_compacted_reason())
        unknown = retention_settings_unknown(settings)
        if unknown:
            row.set(
                retention_reason=unknown_settings_reason(task.topic, unknown, "the retain job refuses it", cs)
            )
        else:
            row.set(**retention_figures(log, cfg, cs, opts))
        row.set(
            reclaimable_bytes=min(log.size_in_bytes, compaction_bytes + (row.value("retention_bytes") or 0))
        )
        row.set(reason="; ".join(notes))

    return run_guarded(task, ReportRow, body)


# ------------------------------------------------------------------------------------------ retention
def retention_figures(log: PartitionLog, cfg: LogConfig, configs: ConfigSet, opts: JobOptions) -> dict:
    """The retention columns: what the retain job would delete now, and why (the guard reported, not raised)."""
    override = opts.log_start_offset_for(log.tp)
    no_retention = retention.no_retention_reason(cfg, configs.broker, override)
    if no_retention is not None:
        return dict(retention_reason=no_retention, retention_log_start_offset=log.log_start_offset)
    plan = retention.plan_retention(
        log, cfg, opts.now_ms, log_start_offset_override=override, force=True,
        broker=configs.broker,
    )  # fmt: skip
    rules: dict[str, int] = {}
    for d in plan.deletions:
        rules[d.reason] = rules.get(d.reason, 0) + 1
    if plan.deletions:
        parts = [", ".join(f"{n} segments by {rule}" for rule, n in rules.items())]
        parts.append(f"log start offset {plan.log_start_offset} -> {plan.new_log_start_offset}")
        if plan.roll:
            parts.append("an empty segment would be rolled at the log end offset first")
    elif cfg.delete:
        parts = ["nothing to delete"]
    else:
        policy = ",".join(sorted(cfg.cleanup_policy)) or "(empty)"
        parts = [f"nothing to delete (cleanup.policy={policy}: only the log start offset rule applies)"]
    if plan.guard_violations:
        parts.append(f"the retain job refuses this without --force: {'; '.join(plan.guard_violations)}")
    parts += plan.warnings
    return dict(
        retention_segments=len(plan.deletions),
        retention_bytes=plan.bytes_deleted,
        retention_reason="; ".join(parts),
        retention_log_start_offset=plan.new_log_start_offset,
    )
