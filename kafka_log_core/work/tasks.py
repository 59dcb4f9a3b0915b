"""Per-partition work units: what one Spark task (or one local call) does for one partition directory.

The driver lists partition directories and reads the log-dir checkpoint files once; each task gets a
small picklable :class:`~kafka_log_core.log.listing.PartitionTask` and gives back a
:class:`~kafka_log_core.work.outcome.TaskOutcome`: one result row (a row of :mod:`kafka_log_core.work.rows`,
as a dict) and what the driver does next. ``compact_task``, ``retain_task`` (and ``report.report_task``)
give the outcome, ``compact_partition``, ``retain_partition`` (and ``report_partition``) only its row, for a
local caller. A task never raises for bad data or a refused operation: it reports the partition as
``failed`` with a one-line reason naming the file and position, leaves it as it was, and the other
partitions go on.

A task that writes plans under the partition's lock from what is on disk then (:func:`holding`): the
checkpoint entries are read again, since another job may have cleaned or trimmed the partition after the
driver's listing; a partition another job is writing is waited for (``JobOptions.busy_timeout_s``), and
``skipped`` with that reason when the other job still writes it then. Every update of a
log-dir checkpoint file is a read-modify-write under the log dir's checkpoint lock, so concurrent jobs on
different partitions never lose each other's entries.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import time
import traceback
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from kafka_log_core.errors import (
    ConfigError,
    HighWatermarkMissingError,
    InsufficientSpaceError,
    KafkaLogError,
    PartitionBusyError,
    RefusedError,
    describe_os_error,
)
from kafka_log_core.format import compression
from kafka_log_core.format.filenames import LOG_SUFFIX, DirFiles, TopicPartition
from kafka_log_core.log import locks
from kafka_log_core.log.listing import PartitionTask
from kafka_log_core.log.log_dir import read_partition_checkpoints, update_checkpoints
from kafka_log_core.log.partition_log import CLEANER_OFFSET_CHECKPOINT, PartitionLog
from kafka_log_core.log.segment import check_indexes
from kafka_log_core.rules import cleaner, leftovers, recovery, retention, split_cleaning
from kafka_log_core.rules.producer_state import build_producer_table
from kafka_log_core.settings.config import ConfigSet, LogConfig, TopicSettings
from kafka_log_core.work import compact_run
from kafka_log_core.work.estimate import estimate_compaction
from kafka_log_core.work.outcome import Status, TaskOutcome
from kafka_log_core.work.rows import CompactRow, R, RetainRow, RowDraft


@dataclass(frozen=True, slots=True)
class JobOptions:
    now_ms: int
    dry_run: bool = False
    require_high_watermark: bool = False
    force: bool = False
    log_start_offsets: tuple[tuple[str, int, int], ...] = ()  # (topic, partition, offset)
    recover: bool = True  # False (--no-recover): refuse partitions the broker's loader would change
    recover_truncating: bool = False  # --recover-truncating: the loader's rule where it deletes valid data
    rounds: int = (
        1  # compact: cleaning rounds per run, each one broker round; 0 = until nothing more to clean
    )
    split_above: int | None = None  # compact: split rounds whose cleanable bytes exceed this (split_cleaning)
    # compact, report: the most one batch may decompress to
    max_batch_bytes: int = compression.MAX_BATCH_BYTES
    # compact, retain: how long to wait for a partition another job is writing before skipping it
    busy_timeout_s: float = locks.BUSY_TIMEOUT_S

    def log_start_offset_for(self, tp: TopicPartition) -> int | None:
        """The ``--log-start-offset`` the operator gave for this partition, if any."""
        return next((o for t, p, o in self.log_start_offsets if (t, p) == (tp.topic, tp.partition)), None)


Configs = ConfigSet | Mapping[str, ConfigSet]  # one for every log dir, or each log dir's own


def configs_for(configs: Configs, log_dir: str) -> ConfigSet:
    return configs if isinstance(configs, ConfigSet) else configs[log_dir]


def topic_settings(task: PartitionTask, configs: ConfigSet) -> TopicSettings:
    """The topic's settings; a ConfigError when its settings in the metadata log cannot be used."""
    settings = configs.settings(task.topic)
    if settings.error is not None:
        raise ConfigError(f"topic {task.topic}: {settings.error}")
    return settings


def stray_reason(task: PartitionTask, configs: ConfigSet) -> str | None:
    """Why the partition directory is not the cluster metadata's partition (never touched then)."""
    if configs.cluster is None:
        return None
    return configs.cluster.stray_reason(Path(task.log_dir) / task.tp.dir_name, task.topic, task.partition)


UNKNOWN_SETTINGS = "no configuration known for topic "


def unknown_settings_reason(topic: str, names: list[str], consequence: str, configs: ConfigSet) -> str:
    """The one line for a topic whose deciding settings would be guesses."""
    metadata = configs.metadata_problem or "no cluster metadata log lists the topic"
    return (
        f"{UNKNOWN_SETTINGS}{topic} ({', '.join(names)} unknown: {metadata}, and no "
        f"conf/topics/{topic}.properties or --topic-config {topic}:KEY=VALUE names it): {consequence}; "
        "tell it with a topic file, --topic-config, or --assume-broker-defaults"
    )


def run_guarded(task: PartitionTask, row_type: type[R], body: Callable[[RowDraft[R]], None]) -> TaskOutcome:
    """Run ``body`` to fill the task's ``row_type`` row; turn any error into a failed row with a one-line
    reason (the columns filled before the error stay). The outcome, ready to cross to the driver."""
    started = time.monotonic()
    row = RowDraft.of(row_type, log_dir=task.log_dir, topic=task.topic, partition=task.partition)
    try:
        body(row)
    except PartitionBusyError as err:  # another job writes it now: its result stands, nothing failed
        row.set(status=Status.SKIPPED, reason=str(err))
    except KafkaLogError as err:
        row.set(status=Status.FAILED, reason=str(err))
    except OSError as err:
        row.set(status=Status.FAILED, reason=describe_os_error(err))
    except Exception as err:  # a bug: still one line in the table, with where it happened
        where = traceback.extract_tb(err.__traceback__)[-1]
        row.set(
            status=Status.FAILED,
            reason=f"internal error {type(err).__name__}: {err} ({os.path.basename(where.filename)}:{where.lineno})",
        )
    row.set(duration_ms=int((time.monotonic() - started) * 1000))
    return TaskOutcome(task, row.as_dict(), row.recovered)


def prepare(
    task: PartitionTask, cfg: LogConfig, opts: JobOptions, notes: list[str], cs: ConfigSet, row: RowDraft
) -> PartitionLog:
    """What the broker's loader does first: leftovers of an unfinished operation resolved, segments
    recovered (after an unclean shutdown, or where an index is missing) -- applied, or in a dry run only
    described and looked at as they would be -- then the partition opened and checked; HW rule applied."""
    directory = os.path.join(task.log_dir, task.tp.dir_name)
    files: DirFiles | None = DirFiles.scan(directory)  # one listing for every check while nothing changes
    plan = leftovers.plan_leftovers(directory, files)
    if not plan.empty:
        verb = "would resolve" if opts.dry_run else "resolved"
        notes.append(f"{verb} leftovers of an unfinished operation: {'; '.join(plan.describe())}")
        if not opts.dry_run:
            leftovers.apply_leftovers(plan)
            files = None
    check_inside(task.log_dir, directory)
    log, files = load(task, cfg, opts, notes, cs, row, files)
    for segment in log.segments:
        entry = None if files is None else files.segment_entry(segment.base_offset, LOG_SUFFIX)
        if entry is None or entry.is_symlink():  # the listing knows which names are symlinks
            check_inside(task.log_dir, segment.log_path)
        if files is not None:
            segment.read_indexes(files)
        check_indexes(segment)
    log.validate_offsets()
    if not log.high_watermark_from_checkpoint:
        if opts.require_high_watermark:
            raise HighWatermarkMissingError(
                f"{Path(task.log_dir) / 'replication-offset-checkpoint'}: no entry for {task.tp} "
                "(--require-high-watermark)"
            )
        notes.append(
            f"no high watermark in replication-offset-checkpoint: used the log end offset {log.log_end_offset}"
        )
    return log


@contextlib.contextmanager
def holding(task: PartitionTask, opts: JobOptions) -> Iterator[PartitionTask]:
    """For a job that writes: the partition held against brokers and other jobs, and the task with the
    partition's checkpoint entries as they are on disk now (the plan must not be made from the driver's
    listing: another job may have cleaned or trimmed the partition since). A dry run holds nothing and
    keeps the listing's entries."""
    if opts.dry_run:
        yield task
        return
    with locks.partition_lock(task.log_dir, task.tp, opts.busy_timeout_s):
        # an interrupted split run's scratch directory
        split_cleaning.remove_scratch(os.path.join(task.log_dir, task.tp.dir_name))
        yield dataclasses.replace(task, checkpoints=read_partition_checkpoints(task.log_dir, task.tp))


def load(
    task: PartitionTask, cfg: LogConfig, opts: JobOptions, notes: list[str], cs: ConfigSet, row: RowDraft,
    files: DirFiles | None = None,
) -> tuple[PartitionLog, DirFiles | None]:  # fmt: skip
    """The partition after the loader's recovery (:mod:`recovery`): applied, described (dry run), or
    refused (``--no-recover``) when it would change a segment file. ``files``: the partition directory's
    listing when nothing changed it since; returned when the log was opened from it (else None)."""
    directory = os.path.join(task.log_dir, task.tp.dir_name)
    ckpt = task.checkpoints
    if files is None:
        files = DirFiles.scan(directory)
    if opts.dry_run and _broker_holds(task.log_dir):
        notes.append("a running broker holds the log dir: it has loaded (and recovered) the partition itself")
        return PartitionLog.open(task.log_dir, task.tp, ckpt, files), files
    if recovery.nothing_to_load(directory, ckpt, files):  # most partitions: the listing shows nothing to do
        return PartitionLog.open(task.log_dir, task.tp, ckpt, files), files
    return _recovered(task, cfg, opts, notes, cs, row), None


def _recovered(
    task: PartitionTask, cfg: LogConfig, opts: JobOptions, notes: list[str], cs: ConfigSet, row: RowDraft
) -> PartitionLog:
    """:func:`load` of a partition the loader's recovery must look at (its plan made and applied or said)."""
    directory = Path(task.log_dir) / task.tp.dir_name
    ckpt = task.checkpoints
    plan = recovery.plan_recovery(
        directory,
        task.tp,
        ckpt,
        cfg,
        now_ms=opts.now_ms,
        producer_id_expiration_ms=cs.broker.producer_id_expiration_ms,
    )
    if not plan.ran:  # a clean load: a missing .timeindex, producer snapshots the loader deletes
        if plan.changes_anything and not opts.dry_run:
            recovery.apply_recovery(plan)
        if plan.changes_segment_files:
            notes.append(
                ("would create" if opts.dry_run else "created")
                + " empty .timeindex files (the loader's rule)"
            )
        if plan.snapshots_deleted:
            notes.append(
                ("would delete" if opts.dry_run else "deleted")
                + f" the producer snapshots at {', '.join(map(str, plan.snapshots_deleted))} (the loader's rule:"
                " at or below the log start offset, or not at a segment base)"
            )
        return PartitionLog.open(task.log_dir, task.tp, ckpt)
    if plan.destroys_valid_data and opts.recover and not opts.recover_truncating:
        with_option = f"; with {recovery.RECOVER_TRUNCATING} it would recover: {plan.describe()}"
        raise recovery.ValidDataRefusedError(plan.refusal() + (with_option if opts.dry_run else ""))
    row.set(
        recovered_segments=plan.segments_checked,
        recovered_bytes=plan.bytes_checked,
        truncated_bytes=plan.bytes_truncated,
        truncated_records=plan.records_truncated,
    )
    hw, hw_note = recovered_high_watermark(task, cs, plan)
    after = plan.checkpoints_after(ckpt, hw)
    if not opts.recover:
        if plan.changes_segment_files:
            raise RefusedError(
                f"{directory}: the broker's log loader would change this partition first ({plan.describe()}); "
                "not touched (--no-recover): run without --no-recover to recover it as the broker does"
            )
        notes.append(f"--no-recover: the broker's recovery would change no segment file ({plan.describe()})")
        return PartitionLog.open(task.log_dir, task.tp, ckpt)
    if opts.dry_run:
        notes.append(f"would recover: {plan.describe()}; {hw_note}")
        return recovery.recovered_view(PartitionLog.open(task.log_dir, task.tp, ckpt), plan, after)
    recovery.apply_recovery(plan)
    if not plan.clean_shutdown:
        recovery.update_log_dir_checkpoints(task.log_dir, task.tp, plan, hw)
        row.recovered = recovery.RecoveredPartition(
            task.log_dir, task.tp, recovery.clean_shutdown_marker(cs.version)
        )
    notes.append(f"recovered: {plan.describe()}; {hw_note}")
    return PartitionLog.open(task.log_dir, task.tp, after)


_BROKER_CHECK_SECONDS = 1.0  # a dry run asks again whether a broker holds the log dir after this long
_broker_seen: dict[str, tuple[float, bool]] = {}


def _broker_holds(log_dir: str) -> bool:
    """:func:`locks.broker_holds`, asked at most once a second per log dir (a lock probe per partition
    cost a tenth of a millisecond: as much as the rest of an empty partition's dry run)."""
    now = time.monotonic()
    seen = _broker_seen.get(log_dir)
    if seen is None or now - seen[0] > _BROKER_CHECK_SECONDS:
        seen = _broker_seen[log_dir] = (now, locks.broker_holds(log_dir))
    return seen[1]


def recovered_high_watermark(
    task: PartitionTask, cs: ConfigSet, plan: recovery.RecoveryPlan
) -> tuple[int | None, str]:
    """(new high watermark or None, a note): :func:`recovery.high_watermark_after`."""
    return recovery.high_watermark_after(plan, task.tp, task.checkpoints.high_watermark, cs.cluster)


def check_inside(log_dir: str | os.PathLike[str], path: str | os.PathLike[str]) -> None:
    """Refuse a partition directory or segment that is a symlink leading out of the log dir."""
    if not os.path.islink(path):
        return
    root = Path(log_dir).resolve()
    target = Path(path).resolve()
    if root not in target.parents:
        raise RefusedError(f"{path} is a symbolic link to {target}, outside the log dir {root}: not touched")


def check_free_space(directory: Path, needed: int) -> None:
    free = shutil.disk_usage(directory).free
    if free < needed:
        raise InsufficientSpaceError(
            f"{directory}: {free} bytes free, the cleaned copy needs up to {needed} bytes; nothing was changed"
        )


def compact_partition(
    task: PartitionTask, configs: Configs, opts: JobOptions, split_runner: Callable | None = None
) -> dict:
    """The result row of :func:`compact_task`."""
    return compact_task(task, configs, opts, split_runner).row


def compact_task(
    task: PartitionTask, configs: Configs, opts: JobOptions, split_runner: Callable | None = None
) -> TaskOutcome:
    """Compaction of one partition, as Kafka's log cleaner. ``split_runner``: how split rounds run their
    pieces (``split_cleaning.Runner``; the Spark driver passes its own). Without it, a round above
    ``opts.split_above`` leaves the partition with status ``split``."""
    cs = configs_for(configs, task.log_dir)

    def body(row: RowDraft[CompactRow]) -> None:
        settings = topic_settings(task, cs)
        cfg = settings.config
        notes: list[str] = []
        row.set(settings=settings.describe("cleanup.policy", "min.cleanable.dirty.ratio"))
        stray = stray_reason(task, cs)
        if stray is not None:
            row.set(reason=stray)
            return
        if settings.unknown("cleanup.policy"):
            consequence = "not compacted (it may not be a compacted topic)"
            row.set(
                status=Status.FAILED,
                reason=unknown_settings_reason(task.topic, ["cleanup.policy"], consequence, cs),
            )
            return
        not_compacted = cfg.not_compacted_reason()
        if not_compacted is not None:
            row.set(reason=not_compacted)
            return
        with holding(task, opts) as current:
            log = prepare(current, cfg, opts, notes, cs, row)
            tally = compact_run.RunTally()
            unknown = retention_settings_unknown(settings)
            while True:  # each round as another run would do it: cleaning, then the thread's retention
                cleaned, more = _compact_round(current, log, cfg, cs, opts, notes, row, tally, split_runner)
                if row.value("status") is Status.SPLIT:  # the driver cleans it (and runs retention) later
                    return
                if cleaned:
                    current, log = _reopen(current)
                deleted = compact_run.retention_after_cleaning(
                    current.log_dir, current.tp, log, cfg, cs, opts.now_ms, opts.dry_run, unknown, notes, row, tally
                )  # fmt: skip
                if not more or tally.rounds == opts.rounds:
                    break
                if deleted:
                    current, log = _reopen(current)
            row.set(reason=tally.describe(notes, opts.dry_run))

    return run_guarded(task, CompactRow, body)


ALL_ROUNDS = 0  # --rounds all


def _reopen(current: PartitionTask) -> tuple[PartitionTask, PartitionLog]:
    """The partition as this task left it on disk, its checkpoint entries read again."""
    current = dataclasses.replace(
        current, checkpoints=read_partition_checkpoints(current.log_dir, current.tp)
    )
    return current, PartitionLog.open(current.log_dir, current.tp, current.checkpoints)


def _compact_round(
    current: PartitionTask, log: PartitionLog, cfg: LogConfig, cs: ConfigSet, opts: JobOptions, notes: list[str],
    row: RowDraft[CompactRow], tally: compact_run.RunTally, split_runner: Callable | None,
) -> tuple[bool, bool]:  # fmt: skip
    """One cleaning round after ``tally.rounds`` rounds of this run; fills ``row`` and ``tally`` (the reason
    is the caller's). Returns (cleaned, more): more when another round may clean more (this one left part
    of its dirty section dirty)."""
    producers = build_producer_table(log, opts.now_ms, cs.broker.producer_id_expiration_ms)
    plan = cleaner.plan_cleaning(log, cfg, cs.broker, opts.now_ms, producers)
    done = tally.rounds
    if done == 0:
        row.set(
            records_before=0,
            records_after=0,
            tombstones_removed=0,
            map_utilization=0.0,
            dirty_ratio=plan.dirty_ratio,
            first_dirty_offset=plan.first_dirty_offset,
            first_uncleanable_offset=plan.first_uncleanable_offset,
            bytes_before=log.size_in_bytes,
            bytes_after=log.size_in_bytes,
        )
    if plan.checkpoint_reset:
        notes.append(
            f"cleaner checkpoint out of range: reset to the log start offset {plan.log_start_offset}"
        )
    if not plan.eligible:
        if plan.checkpoint_reset and not opts.dry_run:
            update_checkpoints(
                current.log_dir, current.tp, {CLEANER_OFFSET_CHECKPOINT: plan.first_dirty_offset}
            )
        tally.first_reason(plan.reason)
        return False, False
    split = opts.split_above is not None and plan.cleanable_bytes > opts.split_above
    if opts.dry_run or split:  # what the round reads: offsets a broker wrote (clean_log checks on its walks)
        log.check_batch_offsets(plan.first_uncleanable_offset)
    if opts.dry_run:
        estimate = estimate_compaction(
            log, plan, cs.broker, notes, count_records=True, max_batch_bytes=opts.max_batch_bytes
        )
        tally.first_reason(f"{plan.reason}; {estimate.describe()}")
        records = estimate.records or 0
        row.set(
            status=Status.WOULD_CLEAN,
            records_before=records,
            records_after=records - estimate.duplicates,
            bytes_after=log.size_in_bytes - estimate.bytes,
            tombstones_removed=None,
            map_utilization=None,
        )
        return False, False
    if split and split_runner is None:  # an executor: the driver cleans it with tasks of its own
        if done == 0:
            row.set(
                status=Status.SPLIT,
                reason=f"cleanable section of {plan.cleanable_bytes} bytes: split cleaning",
            )
        return False, False
    check_free_space(
        log.directory,
        sum(s.size for s in log.segments if s.base_offset < plan.first_uncleanable_offset),
    )
    clean_left = tally.clean_records_left(log, plan.first_dirty_offset)
    result = None
    if split:
        try:
            result = split_cleaning.clean_log_split(
                log,
                plan,
                cfg,
                cs.broker,
                opts.now_ms,
                producers,
                split_runner or split_cleaning.run_local,
                opts.max_batch_bytes,
            )
            notes.append(f"split cleaning: {result.groups} groups in parallel tasks, every key in one round")
        except split_cleaning.NotSplittable as err:
            notes.append(f"{err}")
    if result is None:
        result = cleaner.clean_log(
            log, plan, cfg, cs.broker, opts.now_ms, producers, max_batch_bytes=opts.max_batch_bytes
        )
    update_checkpoints(current.log_dir, current.tp, {CLEANER_OFFSET_CHECKPOINT: result.end_offset})
    after = PartitionLog.open(current.log_dir, current.tp, current.checkpoints)
    s = result.stats
    more = result.end_offset < plan.first_uncleanable_offset and result.end_offset > plan.first_dirty_offset
    if result.map_full and not (more and (done + 1 < opts.rounds or opts.rounds == ALL_ROUNDS)):
        notes.append(
            f"offset map full ({cs.broker.log_cleaner_dedupe_buffer_size} bytes): cleaned up to offset "
            f"{result.end_offset}, the rest on the next run"
        )
    tally.first_reason(plan.reason)
    tally.cleaned(s, clean_left, result.end_offset, row)
    row.set(status=Status.CLEANED, bytes_after=after.size_in_bytes, map_utilization=result.map_utilization)
    return True, more


def retention_settings_unknown(settings: TopicSettings) -> list[str]:
    """The settings that decide what retention deletes and whose value would be a guess."""
    if settings.unknown("cleanup.policy"):
        return ["cleanup.policy"]
    if not settings.config.delete:
        return []
    return [name for name in ("retention.ms", "retention.bytes") if settings.unknown(name)]


def retain_partition(task: PartitionTask, configs: Configs, opts: JobOptions) -> dict:
    """The result row of :func:`retain_task`."""
    return retain_task(task, configs, opts).row


def retain_task(task: PartitionTask, configs: Configs, opts: JobOptions) -> TaskOutcome:
    """Retention of one partition (time, size, log start offset), as UnifiedLog.deleteOldSegments."""
    cs = configs_for(configs, task.log_dir)

    def body(row: RowDraft[RetainRow]) -> None:
        settings = topic_settings(task, cs)
        cfg = settings.config
        notes: list[str] = []
        row.set(settings=settings.describe("cleanup.policy", "retention.ms", "retention.bytes"))
        stray = stray_reason(task, cs)
        if stray is not None:
            row.set(reason=stray)
            return
        unknown = retention_settings_unknown(settings)
        if unknown:
            consequence = "nothing deleted (retention would delete by a guessed setting)"
            row.set(
                status=Status.FAILED, reason=unknown_settings_reason(task.topic, unknown, consequence, cs)
            )
            return
        override = opts.log_start_offset_for(task.tp)
        with holding(task, opts) as current:
            log = prepare(current, cfg, opts, notes, cs, row)
            row.set(log_start_offset_before=log.log_start_offset, log_start_offset_after=log.log_start_offset)
            no_retention = retention.no_retention_reason(cfg, cs.broker, override)
            if no_retention is not None:
                row.set(reason=no_retention)
                return
            plan = retention.plan_retention(
                log, cfg, opts.now_ms, log_start_offset_override=override, force=opts.force,
                broker=cs.broker,
            )  # fmt: skip
            notes += list(plan.warnings)
            rules = sorted({d.reason for d in plan.deletions})
            row.set(
                segments_deleted=len(plan.deletions),
                bytes_deleted=plan.bytes_deleted,
                log_start_offset_after=plan.new_log_start_offset,
            )
            if not plan.changes_anything:
                row.set(reason="; ".join(["nothing to delete", *notes]))
                return
            summary = f"{len(plan.deletions)} segments by {', '.join(rules) or 'no rule'}" + (
                "; rolled an empty active segment first" if plan.roll else ""
            )
            if opts.dry_run:
                row.set(status=Status.WOULD_DELETE, reason="; ".join([summary, *notes]))
                return
            result = retention.apply_retention(log, plan, cfg)
            retention.update_log_dir_checkpoints(task.log_dir, task.tp, result)
            row.set(status=Status.DELETED, reason="; ".join([summary, *notes]))

    return run_guarded(task, RetainRow, body)
