"""Time, size and log-start-offset retention of one partition, as ``UnifiedLog.deleteOldSegments``
(spec: cleaner-and-retention §8, Kafka 4.x).

Plan, then apply:

* :func:`plan_retention` runs the rules in Kafka's order (D1): the log-start-offset rule for every
  policy, then -- only when ``cleanup.policy`` contains ``delete`` -- the size rule and the time rule.
  ``compact`` and the empty policy (Kafka 4.2: "infinite retention") get the log-start-offset rule only.
  Each rule walks a prefix of the segments (D2): ``S`` may go while ``HW >= upper(S)`` (``upper`` is the
  next base, or the LEO for the last segment), the rule's predicate holds (D3), and ``S`` is not an
  empty last segment. The rule's prefix then leaves the list and the log start offset moves to the next
  base (D5) before the next rule runs. If a rule would take every segment, a new empty segment is rolled
  at the LEO first (D4), so the LEO never changes. ``log_start_offset_override`` is DeleteRecords: it
  raises the log start offset (never lowers it; above the HW is refused; -1 means the HW) before the
  first rule, and is refused on a topic whose ``cleanup.policy`` lacks ``delete``, as Kafka refuses it
  (``Partition.deleteRecordsOnLeader``).
* :func:`apply_retention` carries a plan out in an order where a crash at any point leaves a directory
  that the loader (``leftovers``) and a rerun bring to the uninterrupted result:

  a. roll: the producer snapshot at the new base (unless one is there), then empty ``.index``,
     ``.timeindex`` and ``.log`` (an index without its ``.log`` is removed by the loader);
  b. oldest segment first: its producer snapshot, then ``.log``, ``.index``, ``.timeindex``,
     ``.txnindex`` are renamed ``+.deleted``, and the directory is fsynced -- so the live segments are
     always a suffix of the old list, and a live ``.log`` still has its snapshot to be removed;
  c. ``leader-epoch-checkpoint`` truncated from the new log start offset (D7), atomically;
  d. the ``.deleted`` files are removed at once and the directory fsynced.

  ``file.delete.delay.ms`` exists so that readers of a live broker's memory-mapped files finish before
  the files go. Offline nobody holds them (the job holds the partition lock and the broker is stopped),
  so step (d) does not wait; the ``.deleted`` names still matter for a crash between (b) and (d).
* :func:`update_log_dir_checkpoints` is the caller's last step: ``log-start-offset-checkpoint`` gets an
  entry only when the log start offset is above the first segment's base (D8), an existing
  ``recovery-point-offset-checkpoint`` entry below it is raised to it, ``cleaner-offset-checkpoint`` is
  left to the cleaner's reset (C2). These files are shared by the log dir, hence the checkpoint lock.

Choices where Kafka's live state has no offline equivalent:

* No ``replication-offset-checkpoint`` entry: the HW is taken as the LEO (the broker would delete
  nothing until replication sets it); the plan names the source.
* The snapshot written on roll holds the broker's in-memory producer table: the newest readable
  snapshot up to the LEO plus a replay of batch headers after it (nothing after a clean shutdown without
  snapshots). Expired producers are not dropped. The broker's next load deletes it anyway (it is at the
  log start offset), so it matters only to a live broker.
* The epoch checkpoint is rewritten whenever truncating it from the log start offset changes it, not
  only when the start moved in this run: a rerun after a crash before (c) must still do it (the
  broker's loader applies the same truncation, so the result is the one a broker reaches).
* Kafka drops the last deletable segment from a roll when it is an empty segment at the new base. A
  deletable last segment is never empty, so its base is below the LEO: that case cannot arise here.
* D0 (with ``log.cleaner.enable=false`` compacted logs get no retention at all) needs the broker
  configuration and is the job's decision, not this module's.

Safety guard (like Delta's VACUUM check): ``retention.ms`` below one hour (0 included, -1 excluded)
with ``delete`` in the policy, or a plan that deletes every non-empty segment, raises
:class:`SafetyGuardError` naming ``--force`` unless ``force=True``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kafka_log_core import fsutil, storage
from kafka_log_core.errors import SafetyGuardError, UsageError
from kafka_log_core.format import checkpoints
from kafka_log_core.format.filenames import (
    SEGMENT_FILE_SUFFIXES,
    SNAPSHOT_SUFFIX,
    TopicPartition,
    segment_file,
)
from kafka_log_core.log.log_dir import update_checkpoints
from kafka_log_core.log.partition_log import PartitionLog
from kafka_log_core.log.segment_files import (
    create_empty_segment,
    mark_deleted,
    remove_deleted,
    write_leader_epochs,
    write_snapshot,
)
from kafka_log_core.rules.producer_state import build_producer_table
from kafka_log_core.settings.config import BrokerConfig, LogConfig

RETENTION_MS = "retention.ms"
RETENTION_BYTES = "retention.bytes"
LOG_START_OFFSET = "log start offset"
GUARD_MIN_RETENTION_MS = 3_600_000  # below one hour needs --force
FORCE_FLAG = "--force"
# DeleteRecordsRequest.HIGH_WATERMARK: the offset -1 means the high watermark
DELETE_RECORDS_HIGH_WATERMARK = -1
HW_FROM_CHECKPOINT = "replication-offset-checkpoint"
HW_FROM_LOG_END = "log end offset (no replication-offset-checkpoint entry)"


@dataclass(frozen=True, slots=True)
class SegmentDeletion:
    base_offset: int
    next_offset: int  # upper bound checked against the HW: the next segment's base, or the LEO
    size: int  # bytes of the .log
    largest_timestamp: int  # last time-index timestamp, else the .log mtime
    reason: str  # RETENTION_MS, RETENTION_BYTES or LOG_START_OFFSET


@dataclass(frozen=True)
class RetentionPlan:
    """What retention would do to one partition. Picklable; planning changed nothing."""

    directory: Path
    tp: TopicPartition
    now_ms: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    high_watermark_source: str
    deletions: tuple[SegmentDeletion, ...]
    new_log_start_offset: int
    new_first_segment_base: int  # base of the first segment left (the rolled one after a roll)
    roll: bool  # every segment goes: an empty segment is created at the LEO first
    warnings: tuple[str, ...]
    guard_violations: tuple[str, ...]
    forced: bool

    @property
    def bytes_deleted(self) -> int:
        return sum(d.size for d in self.deletions)

    @property
    def deleted_base_offsets(self) -> tuple[int, ...]:
        return tuple(d.base_offset for d in self.deletions)

    @property
    def changes_anything(self) -> bool:
        return bool(self.deletions) or self.new_log_start_offset != self.log_start_offset


@dataclass(frozen=True)
class RetentionResult:
    plan: RetentionPlan
    files_deleted: tuple[str, ...]  # names in the partition directory, without the .deleted marker
    rolled: bool
    producer_snapshot_written: bool
    leader_epoch_checkpoint_rewritten: bool

    @property
    def segments_deleted(self) -> int:
        return len(self.plan.deletions)

    @property
    def bytes_deleted(self) -> int:
        return self.plan.bytes_deleted

    @property
    def new_log_start_offset(self) -> int:
        return self.plan.new_log_start_offset


# ============================================================================================ planning
@dataclass(frozen=True, slots=True)
class _RolledSegment:
    """The empty segment a roll would create (its .log mtime, the fallback timestamp, is now)."""

    base_offset: int
    largest_timestamp: int
    size: int = 0


class _Walk:
    """The segment list while the rules run: prefixes leave it, the log start offset follows."""

    def __init__(self, log: PartitionLog, now_ms: int, log_start: int, hw: int) -> None:
        self.segments: list = list(log.segments)
        self.now_ms, self.log_start, self.hw = now_ms, log_start, hw
        self.leo = log.log_end_offset
        self.deletions: list[SegmentDeletion] = []
        self.roll = False
        self.warnings: list[str] = []

    def run(self, reason: str, predicate) -> None:
        """Kafka's deletableSegments + deleteSegments for one rule."""
        count = 0
        for i, segment in enumerate(self.segments):
            following = self.segments[i + 1] if i + 1 < len(self.segments) else None
            upper = following.base_offset if following is not None else self.leo
            if not (self.hw >= upper and predicate(segment, following)):
                break
            if following is None and segment.size == 0:
                break
            count += 1
        if count == 0:
            return
        if count == len(self.segments):  # D4: never leave the log without a segment
            self.segments.append(_RolledSegment(self.leo, self.now_ms))
            self.roll = True
        for i, segment in enumerate(self.segments[:count]):
            upper = self.segments[i + 1].base_offset
            self.deletions.append(
                SegmentDeletion(segment.base_offset, upper, segment.size, segment.largest_timestamp, reason)
            )
        del self.segments[:count]
        self.log_start = max(self.log_start, self.segments[0].base_offset)

    def start_offset_rule(self) -> None:
        self.run(LOG_START_OFFSET, lambda s, nxt: nxt is not None and nxt.base_offset <= self.log_start)

    def size_rule(self, retention_bytes: int) -> None:
        total = sum(s.size for s in self.segments)
        if retention_bytes < 0 or total < retention_bytes:
            return
        excess = total - retention_bytes

        def over(segment, _following) -> bool:
            nonlocal excess
            if excess - segment.size < 0:
                return False
            excess -= segment.size
            return True

        self.run(RETENTION_BYTES, over)

    def time_rule(self, retention_ms: int) -> None:
        if retention_ms < 0:
            return

        def expired(segment, _following) -> bool:
            ts = segment.largest_timestamp
            if self.now_ms < ts:  # KAFKA-18929 (4.1): Kafka logs this as a warning
                self.warnings.append(
                    f"segment {segment.base_offset}: largest timestamp {ts} is {ts - self.now_ms} ms after "
                    f"now ({self.now_ms}); time retention cannot delete it or any later segment"
                )
            return self.now_ms - ts > retention_ms

        self.run(RETENTION_MS, expired)


_DEFAULT_BROKER = BrokerConfig()
NO_CLEANER = "compacted topic and log.cleaner.enable=false: the broker applies no retention"


def applies_rules(cfg: LogConfig, broker: BrokerConfig) -> bool:
    """Whether the broker deletes segments of this log at all (rule D0): not a compacted topic's on a
    broker whose cleaner is disabled (its retention thread skips compacted logs, and no cleaner thread
    runs)."""
    return not (cfg.compact and not broker.log_cleaner_enable)


def no_retention_reason(
    cfg: LogConfig, broker: BrokerConfig, log_start_offset_override: int | None
) -> str | None:
    """Why the broker applies no retention to this log at all (rule D0), or None: a compacted topic on a
    broker whose cleaner is disabled is left alone -- unless the operator moves the log start offset
    (DeleteRecords moves it; no segment is deleted: :func:`plan_retention` with the ``broker``)."""
    if not applies_rules(cfg, broker) and log_start_offset_override is None:
        return NO_CLEANER
    return None


def plan_retention(
    log: PartitionLog,
    cfg: LogConfig,
    now_ms: int,
    *,
    log_start_offset_override: int | None = None,
    force: bool = False,
    broker: BrokerConfig = _DEFAULT_BROKER,
) -> RetentionPlan:
    """What ``deleteOldSegments`` would delete now; SafetyGuardError unless the guard passes or ``force``.
    Where ``broker`` deletes no segment of this log (:func:`applies_rules`) only ``log_start_offset_override``
    moves the log start offset."""
    segment_rules = applies_rules(cfg, broker)
    hw = log.high_watermark
    hw_source = HW_FROM_CHECKPOINT if log.high_watermark_from_checkpoint else HW_FROM_LOG_END
    walk = _Walk(log, now_ms, log.log_start_offset, hw)
    if log_start_offset_override is not None:
        if not cfg.delete:  # Partition.deleteRecordsOnLeader: PolicyViolationException
            policy = ",".join(sorted(cfg.cleanup_policy)) or "(empty)"
            raise UsageError(
                f"--log-start-offset {log.tp}={log_start_offset_override}: cleanup.policy={policy} does not "
                f"include delete; Kafka refuses DeleteRecords on such a topic (the configured policy)"
            )
        if log_start_offset_override == DELETE_RECORDS_HIGH_WATERMARK:
            log_start_offset_override = hw
        if log_start_offset_override < 0 or log_start_offset_override > hw:
            raise UsageError(
                f"--log-start-offset {log.tp}={log_start_offset_override}: expected an offset from 0 to the "
                f"high watermark {hw} ({hw_source}); Kafka refuses DeleteRecords above the high watermark"
            )
        if log_start_offset_override < walk.log_start:
            walk.warnings.append(
                f"--log-start-offset {log_start_offset_override} is below the log start offset "
                f"{walk.log_start}: ignored, the log start offset never moves back"
            )
        walk.log_start = max(walk.log_start, log_start_offset_override)
    if segment_rules:
        walk.start_offset_rule()
    else:
        walk.warnings.append(f"{NO_CLEANER}: the log start offset moves, no segment is deleted")
    if cfg.delete and segment_rules:
        walk.size_rule(cfg.retention_bytes)
        walk.time_rule(cfg.retention_ms)
    violations = []
    if cfg.delete and 0 <= cfg.retention_ms < GUARD_MIN_RETENTION_MS:
        violations.append(f"retention.ms={cfg.retention_ms} is below one hour ({GUARD_MIN_RETENTION_MS} ms)")
    deleted = {d.base_offset for d in walk.deletions}
    non_empty = [s.base_offset for s in log.segments if s.size > 0]
    if non_empty and all(base in deleted for base in non_empty):
        violations.append(
            f"the plan deletes every non-empty segment ({len(deleted)} segments, "
            f"{sum(d.size for d in walk.deletions)} bytes)"
        )
    plan = RetentionPlan(
        log.directory, log.tp, now_ms, log.log_start_offset, walk.leo, hw, hw_source,
        tuple(walk.deletions), walk.log_start,
        walk.segments[0].base_offset if walk.segments else walk.log_start, walk.roll,
        tuple(walk.warnings), tuple(violations), force,
    )  # fmt: skip
    _check_guard(plan)
    return plan


def _check_guard(plan: RetentionPlan) -> None:
    if plan.guard_violations and not plan.forced:
        raise SafetyGuardError(
            f"{plan.directory}: refusing retention: {'; '.join(plan.guard_violations)}. "
            f"Check the configuration, or pass {FORCE_FLAG} to run anyway"
        )


# ============================================================================================ applying
def apply_retention(log: PartitionLog, plan: RetentionPlan, cfg: LogConfig) -> RetentionResult:
    """Carry out ``plan`` (made for ``log`` with ``cfg``); applying the same plan twice is harmless."""
    if plan.directory != log.directory:
        raise UsageError(f"{log.directory}: the retention plan was made for {plan.directory}")
    _check_guard(plan)
    if cfg.delete and 0 <= cfg.retention_ms < GUARD_MIN_RETENTION_MS and not plan.forced:
        raise SafetyGuardError(
            f"{plan.directory}: retention.ms={cfg.retention_ms} is below one hour; pass {FORCE_FLAG}"
        )
    directory = log.directory
    snapshot_written = _roll(log, plan.log_end_offset) if plan.roll else False
    marked: list[Path] = []
    for deletion in plan.deletions:  # the snapshot first: a live .log still has its snapshot to remove
        marked += mark_deleted(directory, deletion.base_offset, (SNAPSHOT_SUFFIX, *SEGMENT_FILE_SUFFIXES))
        fsutil.fsync_dir(directory)
    epochs_rewritten = _truncate_leader_epochs(directory, plan.new_log_start_offset)
    removed = remove_deleted(directory, marked)
    return RetentionResult(plan, tuple(removed), plan.roll, snapshot_written, epochs_rewritten)


def _roll(log: PartitionLog, base: int) -> bool:
    """Create the empty segment at ``base`` (the LEO); True when a producer snapshot was written."""
    directory = log.directory
    snapshot = segment_file(directory, base, SNAPSHOT_SUFFIX)
    written = False
    if not storage.exists(snapshot):  # ProducerStateManager.takeSnapshot skips an offset already snapshotted
        # The broker's in-memory table at the LEO: nothing expired is dropped between its expiry checks.
        write_snapshot(directory, base, build_producer_table(log, 0, None).snapshot_entries())
        written = True
    create_empty_segment(directory, base)
    return written


def _truncate_leader_epochs(directory: Path, log_start: int) -> bool:
    path = directory / checkpoints.LEADER_EPOCH_CHECKPOINT
    if not storage.exists(path):
        return False
    entries = checkpoints.read_leader_epoch_checkpoint(path)
    truncated = checkpoints.truncate_from_start(entries, log_start)
    if truncated == entries:
        return False
    write_leader_epochs(directory, checkpoints.format_leader_epoch_checkpoint(truncated))
    return True


# ============================================================================================ log-dir files
def update_log_dir_checkpoints(
    log_dir: str | os.PathLike[str], tp: TopicPartition, result: RetentionResult
) -> tuple[str, ...]:
    """Bring this partition's entries of the shared checkpoints in line with ``result`` (D8); returns the
    names of the checkpoint files rewritten. Call after :func:`apply_retention`. Each file is read,
    changed in this partition's entry only and written back under the log dir's checkpoint lock, so jobs
    writing other partitions at the same time lose nothing; entries are written sorted, so the bytes do
    not depend on which job came first."""
    start = result.plan.new_log_start_offset

    def raised(point: int | None) -> int | None:  # a missing entry already means "recover everything"
        return start if point is not None and point < start else point

    return update_checkpoints(
        log_dir,
        tp,
        {
            checkpoints.LOG_START_OFFSET_CHECKPOINT: start
            if start > result.plan.new_first_segment_base
            else None,
            checkpoints.RECOVERY_POINT_CHECKPOINT: raised,
        },
    )
