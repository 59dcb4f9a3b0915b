"""One ``compact`` run over one partition as the broker's cleaner thread would go: cleaning rounds, each
followed by the thread's retention, and the figures of every round added up into the partition's one row.

The broker's retention thread leaves every log whose ``cleanup.policy`` includes ``compact`` to the
cleaner thread, which after each cleaning attempt runs ``deleteOldSegments`` on every compacted log it
may clean (``LogCleaner.CleanerThread.cleanFilthiestLog``: ``LogCleanerManager.deletableLogs``, then
``UnifiedLog.deleteOldSegments``): the log-start-offset rule, and on ``compact,delete`` logs the size
and time rules too (:mod:`kafka_log_core.rules.retention`). A partition that failed is not cleaned by
that thread again (``isUncleanablePartition``): a failed round raises before this retention.

The row's columns over several rounds (docs/guide.md, "compact's result columns") describe the run,
never one round: ``dirty_ratio``, ``first_dirty_offset``, ``first_uncleanable_offset`` and the reason's
first part are the partition's state before the run (why it was cleaned); ``records_before`` are the
records of every segment the run's rounds rewrote, as they were before the run (round 1 reads the log's
segments from its start through the one holding its end offset, each later round the same again plus
segments the earlier rounds left dirty: its new records are what it read less what the earlier rounds
left in the segments they rewrote); ``records_after`` what is left of them after the last round and its
retention; the byte, tombstone and retention columns add up over the run; ``map_utilization`` is the
last round's.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from kafka_log_core.errors import SafetyGuardError
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.log.partition_log import PartitionLog
from kafka_log_core.rules import retention
from kafka_log_core.rules.cleaner import CleanStats
from kafka_log_core.settings.config import ConfigSet, LogConfig
from kafka_log_core.work.estimate import records_in
from kafka_log_core.work.outcome import Status
from kafka_log_core.work.rows import CompactRow, RowDraft


@dataclass
class RunTally:
    """What the rounds of one run add up to, while it runs."""

    reason: str = ""  # round 1's: why the run cleaned, or did not
    rounds: int = 0  # rounds that cleaned
    records_before: int = 0
    end_offset: int = 0  # the last cleaned round's end: the cleaned section is [log start, end_offset)
    deletions: int = 0  # segments the cleaner thread's retention deleted
    rules: set[str] = field(default_factory=set)
    log_start_offset: int | None = None  # after the last deletion

    def first_reason(self, reason: str) -> None:
        self.reason = self.reason or reason

    def clean_records_left(self, log: PartitionLog, first_dirty_offset: int) -> int:
        """Before a round after the first: the records the earlier rounds left in the segments they
        rewrote (a round rewrites whole segments, past its end offset up to the next segment)."""
        if not self.rounds or not log.segments:
            return 0
        return records_in(log, log.segments[0].base_offset, section_end(log, first_dirty_offset))

    def cleaned(self, stats: CleanStats, clean_left: int, end_offset: int, row: RowDraft[CompactRow]) -> None:
        """A round cleaned: ``clean_left`` from :meth:`clean_records_left` before it."""
        self.records_before += stats.records_read - clean_left
        self.rounds += 1
        self.end_offset = end_offset
        removed = stats.tombstones_read - stats.tombstones_retained
        row.set(
            records_before=self.records_before,
            records_after=stats.records_retained,
            tombstones_removed=(row.row.tombstones_removed or 0) + removed,
        )

    def describe(self, notes: list[str], dry_run: bool) -> str:
        said = [self.reason, *notes]
        if self.deletions or self.log_start_offset is not None:
            verb = "would then delete" if dry_run else "then deleted"
            said.append(
                f"the cleaner thread's retention {verb} {self.deletions} segments by "
                f"{', '.join(sorted(self.rules)) or 'no rule'}, log start offset {self.log_start_offset}"
            )
        if self.rounds > 1:
            said.append(f"{self.rounds} rounds")
        return "; ".join(part for part in said if part)


def retention_after_cleaning(
    log_dir: str, tp: TopicPartition, log: PartitionLog, cfg: LogConfig, cs: ConfigSet, now_ms: int,
    dry_run: bool, unknown: list[str], notes: list[str], row: RowDraft[CompactRow], tally: RunTally,
) -> bool:  # fmt: skip
    """The cleaner thread's ``deleteOldSegments`` after a round (module doc); in a dry run planned on the
    log as it is. ``unknown``: the retention settings whose value would be a guess: nothing deleted,
    like the safety guard's refusal, said in ``notes`` -- the cleaning stands. True when segments were
    deleted (the partition is to be opened again)."""
    if retention.no_retention_reason(cfg, cs.broker, None) is not None:
        return False
    segments = log.segments
    if not cfg.delete and (len(segments) < 2 or segments[1].base_offset > log.log_start_offset):
        return False  # the log-start-offset rule alone deletes nothing: most compacted logs, at once
    if unknown:
        _note(notes, f"retention not applied ({', '.join(unknown)} unknown): retain applies it once known")
        return False
    try:
        plan = retention.plan_retention(log, cfg, now_ms)
    except SafetyGuardError as err:
        _note(notes, f"retention not applied: {err} ({retention.FORCE_FLAG} is retain's)")
        return False
    row.set(
        segments_deleted=(row.row.segments_deleted or 0) + len(plan.deletions),
        bytes_deleted=(row.row.bytes_deleted or 0) + plan.bytes_deleted,
        bytes_after=(row.row.bytes_after or 0) - plan.bytes_deleted,
    )
    if not plan.changes_anything:
        return False
    tally.deletions += len(plan.deletions)
    tally.rules.update(d.reason for d in plan.deletions)
    tally.log_start_offset = plan.new_log_start_offset
    row.set(log_start_offset_after=plan.new_log_start_offset)
    status = Status(row.row.status)
    if status is Status.SKIPPED:
        row.set(status=Status.WOULD_DELETE if dry_run else Status.DELETED)
    if dry_run:
        return False
    if tally.rounds and plan.deletions:  # the records of the cleaned section that retention deletes
        upper = min(plan.deletions[-1].next_offset, section_end(log, tally.end_offset))
        gone = (
            records_in(log, plan.deletions[0].base_offset, upper)
            if plan.deletions[0].base_offset < upper
            else 0
        )
        row.set(records_after=(row.row.records_after or 0) - gone)
    result = retention.apply_retention(log, plan, cfg)
    retention.update_log_dir_checkpoints(log_dir, tp, result)
    return True


def section_end(log: PartitionLog, end_offset: int) -> int:
    """Where the segments a round ending at ``end_offset`` rewrote end: the first segment base at or
    above it, else the log end offset."""
    return next((s.base_offset for s in log.segments if s.base_offset >= end_offset), log.log_end_offset)


def _note(notes: list[str], note: str) -> None:
    if note not in notes:  # said once over the rounds
        notes.append(note)
