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
  assumed to be of equal size), capped at the partition's size.
"""

from __future__ import annotations

import dataclasses

from . import cleaner, retention
from .config import BrokerConfig, ConfigSet, LogConfig
from .offset_map import OffsetMap
from .partition_log import PartitionLog
from .producer_state import build_producer_table
from .tasks import JobOptions, PartitionTask, _run_guarded, prepare

REPORT_ROW = dict(
    status="ok", reason="", cleanup_policy="", segments=0, total_bytes=0, clean_bytes=None,
    cleanable_bytes=None, dirty_ratio=None, min_cleanable_dirty_ratio=None, first_dirty_offset=None,
    first_uncleanable_offset=None, would_compact=False, compact_reason="", duplicate_share=None,
    retention_segments=0, retention_bytes=0, retention_reason="", retention_log_start_offset=None,
    retention_ms=None, oldest_segment_age_ms=None, reclaimable_bytes=0, log_start_offset=None,
    log_end_offset=None, duration_ms=0,
)  # fmt: skip


def report_partition(
    task: PartitionTask, configs: ConfigSet, opts: JobOptions, *, count_duplicates: bool = True
) -> dict:
    """The report row of one partition (``count_duplicates=False`` skips reading keys)."""
    opts = dataclasses.replace(opts, dry_run=True)  # the report never changes anything

    def body(row: dict) -> None:
        cfg = configs.for_topic(task.topic)
        notes: list[str] = []
        row.update(
            cleanup_policy=",".join(sorted(cfg.cleanup_policy)),
            min_cleanable_dirty_ratio=cfg.min_cleanable_dirty_ratio,
            retention_ms=cfg.retention_ms,
        )
        log = prepare(task, cfg, opts, notes)  # dry run: leftovers are described, not resolved
        row.update(
            segments=len(log.segments),
            total_bytes=log.size_in_bytes,
            log_start_offset=log.log_start_offset,
            log_end_offset=log.log_end_offset,
            oldest_segment_age_ms=opts.now_ms - log.segments[0].largest_timestamp if log.segments else None,
        )
        if cfg.compact:
            producers = build_producer_table(log, opts.now_ms, configs.broker.producer_id_expiration_ms)
            plan = cleaner.plan_cleaning(log, cfg, configs.broker, opts.now_ms, producers)
            if plan.checkpoint_reset:
                notes.append(
                    f"cleaner checkpoint out of range: the cleaner would reset it to the log start offset "
                    f"{plan.log_start_offset}"
                )
            row.update(
                clean_bytes=plan.clean_bytes,
                cleanable_bytes=plan.cleanable_bytes,
                dirty_ratio=plan.dirty_ratio,
                first_dirty_offset=plan.first_dirty_offset,
                first_uncleanable_offset=plan.first_uncleanable_offset,
                would_compact=plan.eligible,
                compact_reason=plan.reason,
            )
            if count_duplicates:
                row["duplicate_share"] = duplicate_share(log, plan, configs.broker, notes)
        else:  # the cleaner never looks at it: no dirty section, no ratio
            row["compact_reason"] = (
                f"cleanup.policy={row['cleanup_policy'] or '(empty)'} does not include compact"
            )
        row.update(retention_figures(log, cfg, configs, opts))
        compaction_estimate = int((row["cleanable_bytes"] or 0) * (row["duplicate_share"] or 0.0))
        row["reclaimable_bytes"] = min(log.size_in_bytes, compaction_estimate + row["retention_bytes"])
        row["reason"] = "; ".join(notes)

    return _run_guarded(task, REPORT_ROW, body)


def duplicate_share(
    log: PartitionLog, plan: cleaner.CleanPlan, broker: BrokerConfig, notes: list[str]
) -> float | None:
    """Superseded keyed records / keyed records of the dirty section (None when it holds no keyed record)."""
    start, end = plan.first_dirty_offset, plan.first_uncleanable_offset
    if start >= end:
        return None
    # The broker's capacity (where its round would stop), slots allocated only for what the section holds.
    offset_map = OffsetMap(
        cleaner._map_memory(broker),
        broker.log_cleaner_io_buffer_load_factor,
        cleaner.keyed_bound(log, start, end),
    )
    result = cleaner.build_offset_map(log, start, end, offset_map)
    if result.full:
        notes.append(
            f"the cleaner's offset map ({offset_map.capacity} keys, log.cleaner.dedupe.buffer.size) would fill: "
            f"one round cleans up to offset {result.end_offset}, the duplicate share covers that part"
        )
    return result.duplicates / result.keys_put if result.keys_put else None


# ------------------------------------------------------------------------------------------ retention
def retention_figures(log: PartitionLog, cfg: LogConfig, configs: ConfigSet, opts: JobOptions) -> dict:
    """The retention columns: what the retain job would delete now, and why (the guard reported, not raised)."""
    tp = (log.tp.topic, log.tp.partition)
    override = next((o for t, p, o in opts.log_start_offsets if (t, p) == tp), None)
    if cfg.compact and not configs.broker.log_cleaner_enable and override is None:
        return dict(
            retention_reason="compacted topic and log.cleaner.enable=false: the broker applies no retention",
            retention_log_start_offset=log.log_start_offset,
        )
    plan = retention.plan_retention(log, cfg, opts.now_ms, log_start_offset_override=override, force=True)
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
