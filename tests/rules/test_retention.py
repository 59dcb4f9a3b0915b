"""Retention of one partition: Kafka's deleteOldSegments rules, the roll, the guard, crash safety.

Every partition is laid out with tests/logbuild.py (real files in tmp_path); expected results are
written down from the rule in each test, never taken from the planner.
"""

from __future__ import annotations

import contextlib
import os
import pickle
from pathlib import Path

import pytest

from kafka_log_core import fsutil
from kafka_log_core.errors import SafetyGuardError, UsageError
from kafka_log_core.format import checkpoints, record_batch
from kafka_log_core.format.checkpoints import EpochEntry
from kafka_log_core.format.filenames import TopicPartition, segment_file
from kafka_log_core.format.producer_snapshot import (
    ProducerSnapshotEntry,
    read_producer_snapshot,
    write_producer_snapshot,
)
from kafka_log_core.log.partition_log import LogDirState, PartitionLog
from kafka_log_core.rules import leftovers, retention
from kafka_log_core.rules.retention import (
    HW_FROM_CHECKPOINT,
    HW_FROM_LOG_END,
    LOG_START_OFFSET,
    RETENTION_BYTES,
    RETENTION_MS,
    apply_retention,
    plan_retention,
    update_log_dir_checkpoints,
)
from kafka_log_core.settings.config import BrokerConfig, LogConfig
from tests.logbuild import TS, batch, make_log

TP = TopicPartition("t", 0)
DAY = 86_400_000
NOW = TS + 30 * DAY
OLD = NOW - 8 * DAY  # past the default retention.ms (7 days)
NEW = NOW - 1 * DAY  # within it
DELETE = frozenset({"delete"})
COMPACT = frozenset({"compact"})


def cfg(policy=DELETE, retention_ms=7 * DAY, retention_bytes=-1) -> LogConfig:
    return LogConfig(cleanup_policy=policy, retention_ms=retention_ms, retention_bytes=retention_bytes)


def seg(base: int, n: int, ts: int, **kw) -> list[bytes]:
    """``n`` one-record batches at offsets base..base+n-1, all with timestamp ``ts`` (equal sizes)."""
    return [batch(base + i, [("key", "value")], ts=ts, **kw) for i in range(n)]


def build(tmp_path: Path, segments: dict[int, list[bytes]], *, hw=None, mtime_ms=OLD) -> Path:
    return make_log(tmp_path, TP.topic, TP.partition, segments, hw=hw, mtime_ms=mtime_ms)


def open_log(log_dir: Path) -> PartitionLog:
    return PartitionLog.open(log_dir, TP, LogDirState.read(log_dir).for_partition(TP))


def live_bases(directory: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in directory.glob("*.log"))


def log_size(directory: Path, base: int) -> int:
    return segment_file(directory, base, ".log").stat().st_size


def dir_state(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def run(log_dir: Path, config: LogConfig, **kw) -> retention.RetentionResult:
    log = open_log(log_dir)
    plan = plan_retention(log, config, NOW, **kw)
    result = apply_retention(log, plan, config)
    update_log_dir_checkpoints(log_dir, TP, result)
    return result


# ============================================================================================ time rule
def test_time_rule_deletes_the_expired_prefix_only(tmp_path):
    # max timestamps: OLD, OLD, NEW, OLD(active). The walk stops at the first segment still in retention,
    # so the old active segment behind it stays.
    d = build(
        tmp_path, {0: seg(0, 5, OLD), 5: seg(5, 5, OLD), 10: seg(10, 5, NEW), 15: seg(15, 5, OLD)}, hw=20
    )
    plan = plan_retention(open_log(tmp_path), cfg(), NOW)
    assert [(x.base_offset, x.reason) for x in plan.deletions] == [(0, RETENTION_MS), (5, RETENTION_MS)]
    assert [x.largest_timestamp for x in plan.deletions] == [OLD, OLD]
    assert plan.new_log_start_offset == 10 and not plan.roll
    run(tmp_path, cfg())
    assert live_bases(d) == [10, 15]


def test_time_rule_is_strictly_greater_than_retention(tmp_path):
    build(tmp_path, {0: seg(0, 2, NOW - 7 * DAY), 2: seg(2, 2, NOW - 7 * DAY - 1), 4: seg(4, 1, NEW)}, hw=5)
    # segment 0: now - ts == retention.ms -> kept (and it stops the walk)
    assert plan_retention(open_log(tmp_path), cfg(), NOW).deletions == ()


def test_time_rule_uses_the_log_mtime_when_the_time_index_is_empty(tmp_path):
    # Segment 0's records are recent but its .timeindex is empty (e.g. recreated by the loader), so its
    # .log mtime (old) decides; segment 5's records are old but its mtime is recent and its index too.
    d = build(tmp_path, {0: seg(0, 5, NEW), 5: seg(5, 5, OLD), 10: seg(10, 5, NEW)}, hw=15, mtime_ms=NEW)
    segment_file(d, 0, ".timeindex").write_bytes(b"")
    os.utime(segment_file(d, 0, ".log"), ns=(OLD * 10**6, OLD * 10**6))
    plan = plan_retention(open_log(tmp_path), cfg(), NOW)
    assert [(x.base_offset, x.largest_timestamp) for x in plan.deletions] == [(0, OLD), (5, OLD)]

    # the other way round: old records, empty index, recent mtime -> kept, and nothing after it goes
    segment_file(d, 0, ".timeindex").write_bytes(b"")
    os.utime(segment_file(d, 0, ".log"), ns=(NEW * 10**6, NEW * 10**6))
    assert plan_retention(open_log(tmp_path), cfg(), NOW).deletions == ()


def test_future_timestamp_blocks_time_retention_and_is_reported(tmp_path):
    future = NOW + DAY
    build(
        tmp_path, {0: seg(0, 5, OLD), 5: seg(5, 5, future), 10: seg(10, 5, OLD), 15: seg(15, 1, OLD)}, hw=16
    )
    plan = plan_retention(open_log(tmp_path), cfg(), NOW)
    assert plan.deleted_base_offsets == (0,)
    assert len(plan.warnings) == 1
    assert "segment 5" in plan.warnings[0] and f"{DAY} ms after now" in plan.warnings[0]


# ============================================================================================ size rule
def test_size_rule_deletes_whole_segments_oldest_first_counting_the_active_one(tmp_path):
    d = build(
        tmp_path, {0: seg(0, 5, NEW), 5: seg(5, 5, NEW), 10: seg(10, 5, NEW), 15: seg(15, 5, NEW)}, hw=20
    )
    s = log_size(d, 0)
    assert all(log_size(d, b) == s for b in (5, 10, 15))
    total = 4 * s  # the active segment counts
    # excess = 2s + 1: two whole segments fit in it, a third does not (no partial deletion)
    config = cfg(retention_bytes=total - (2 * s + 1))
    plan = plan_retention(open_log(tmp_path), config, NOW)
    assert [(x.base_offset, x.reason, x.size) for x in plan.deletions] == [
        (0, RETENTION_BYTES, s),
        (5, RETENTION_BYTES, s),
    ]
    assert plan.bytes_deleted == 2 * s
    # (had the active segment not counted, the excess would have been s + 1: one segment)
    # at or under the limit nothing goes; one segment over, the oldest one goes
    assert plan_retention(open_log(tmp_path), cfg(retention_bytes=total), NOW).deletions == ()
    assert plan_retention(open_log(tmp_path), cfg(retention_bytes=total + 1), NOW).deletions == ()
    assert plan_retention(open_log(tmp_path), cfg(retention_bytes=total - s), NOW).deleted_base_offsets == (
        0,
    )


def test_size_rule_runs_after_the_start_offset_rule_and_before_the_time_rule(tmp_path):
    d = build(
        tmp_path, {0: seg(0, 5, NEW), 5: seg(5, 5, NEW), 10: seg(10, 5, OLD), 15: seg(15, 5, NEW)}, hw=20
    )
    s = log_size(d, 0)
    # override 6: the start-offset rule takes 0; the size total is then 3s, excess s -> 5 goes; the time
    # rule then sees 10 (old) and deletes it, stopping at 15.
    plan = plan_retention(open_log(tmp_path), cfg(retention_bytes=2 * s), NOW, log_start_offset_override=6)
    assert [(x.base_offset, x.reason) for x in plan.deletions] == [
        (0, LOG_START_OFFSET),
        (5, RETENTION_BYTES),
        (10, RETENTION_MS),
    ]
    assert plan.new_log_start_offset == 15


# ============================================================================================ log start offset
def test_log_start_offset_mid_segment_deletes_nothing_until_a_whole_segment_lies_below(tmp_path):
    # UnifiedLogTest.testLogDeletionAfterDeleteRecords: three segments of five offsets, HW = LEO = 15.
    d = build(tmp_path, {0: seg(0, 5, NEW), 5: seg(5, 5, NEW), 10: seg(10, 5, NEW)}, hw=15)
    no_time = cfg(retention_ms=-1)
    result = run(tmp_path, no_time, log_start_offset_override=1)
    assert result.plan.deletions == () and result.new_log_start_offset == 1
    assert live_bases(d) == [0, 5, 10]
    assert checkpoints.read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint") == {TP: 1}

    result = run(tmp_path, no_time, log_start_offset_override=6)
    assert result.plan.deleted_base_offsets == (0,) and result.new_log_start_offset == 6
    assert live_bases(d) == [5, 10]

    result = run(tmp_path, no_time, log_start_offset_override=15)
    assert result.plan.deleted_base_offsets == (5,) and result.new_log_start_offset == 15
    assert live_bases(d) == [10]  # the active segment stays even though every offset in it is below
    assert open_log(tmp_path).log_start_offset == 15


def test_log_start_override_is_refused_above_the_hw_and_never_moves_back(tmp_path):
    build(tmp_path, {0: seg(0, 5, NEW), 5: seg(5, 5, NEW)}, hw=7)
    with pytest.raises(UsageError, match="high watermark 7"):
        plan_retention(open_log(tmp_path), cfg(), NOW, log_start_offset_override=8)
    checkpoints.write_offset_checkpoint(tmp_path / "log-start-offset-checkpoint", {TP: 3})
    plan = plan_retention(open_log(tmp_path), cfg(), NOW, log_start_offset_override=2)
    assert plan.new_log_start_offset == 3 and "never moves back" in plan.warnings[0]


def test_log_start_override_of_minus_one_is_the_high_watermark(tmp_path):
    # DeleteRecordsRequest.HIGH_WATERMARK (-1): Partition.deleteRecordsOnLeader deletes up to the HW
    build(tmp_path, {0: seg(0, 5, NEW), 5: seg(5, 5, NEW)}, hw=7)
    plan = plan_retention(open_log(tmp_path), cfg(), NOW, log_start_offset_override=-1)
    assert plan.new_log_start_offset == 7 and plan.deleted_base_offsets == (0,)
    with pytest.raises(UsageError, match="from 0 to the high watermark"):
        plan_retention(open_log(tmp_path), cfg(), NOW, log_start_offset_override=-2)


@pytest.mark.parametrize("policy", [COMPACT, frozenset()])
def test_log_start_override_is_refused_without_delete_in_the_policy(tmp_path, policy):
    # Partition.deleteRecordsOnLeader: PolicyViolationException unless cleanup.policy includes delete
    build(tmp_path, {0: seg(0, 5, NEW), 5: seg(5, 5, NEW)}, hw=10)
    with pytest.raises(UsageError, match="does not include delete; Kafka refuses DeleteRecords"):
        plan_retention(open_log(tmp_path), cfg(policy), NOW, log_start_offset_override=6)
    both = plan_retention(open_log(tmp_path), cfg(COMPACT | DELETE), NOW, log_start_offset_override=6)
    assert both.new_log_start_offset == 6 and both.deleted_base_offsets == (0,)


def test_delete_records_on_a_compact_delete_topic_with_the_cleaner_disabled_deletes_no_segment(tmp_path):
    # LogManager.cleanupLogs skips compacted logs when there is no cleaner (log.cleaner.enable=false), so
    # DeleteRecords only moves the log start offset (maybeIncrementLogStartOffset); expired segments stay
    build(tmp_path, {0: seg(0, 5, OLD), 5: seg(5, 5, OLD), 10: seg(10, 5, NEW)}, hw=15)
    config, broker = cfg(COMPACT | DELETE), BrokerConfig(log_cleaner_enable=False)
    assert retention.no_retention_reason(config, broker, None) is not None
    assert retention.no_retention_reason(config, broker, 7) is None
    result = run(tmp_path, config, log_start_offset_override=7, broker=broker)
    assert result.plan.deletions == () and result.new_log_start_offset == 7
    assert "no segment is deleted" in result.plan.warnings[0]
    assert checkpoints.read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint") == {TP: 7}
    assert live_bases(tmp_path / "t-0") == [0, 5, 10]


# ============================================================================================ high watermark
def test_nothing_at_or_above_the_high_watermark_is_deleted(tmp_path):
    # testCannotDeleteSegmentsAtOrAboveHighWatermark: every segment is expired
    build(tmp_path, {0: seg(0, 5, OLD), 5: seg(5, 5, OLD), 10: seg(10, 5, OLD)}, hw=7)
    plan = plan_retention(open_log(tmp_path), cfg(), NOW)
    assert plan.high_watermark == 7 and plan.high_watermark_source == HW_FROM_CHECKPOINT
    assert plan.deleted_base_offsets == (0,)  # upper 5 <= 7; segment 5's upper 10 > 7

    checkpoints.write_offset_checkpoint(tmp_path / "replication-offset-checkpoint", {TP: 10})
    assert plan_retention(open_log(tmp_path), cfg(), NOW).deleted_base_offsets == (0, 5)  # HW >= upper


def test_without_a_replication_checkpoint_the_hw_is_the_leo(tmp_path):
    build(tmp_path, {0: seg(0, 5, OLD), 5: seg(5, 3, NEW)})
    plan = plan_retention(open_log(tmp_path), cfg(), NOW)
    assert (plan.high_watermark, plan.high_watermark_source) == (8, HW_FROM_LOG_END)
    assert plan.deleted_base_offsets == (0,)


# ============================================================================================ roll (D4)
def test_single_expired_segment_rolls_and_keeps_the_leo(tmp_path):
    d = build(tmp_path, {0: seg(0, 3, OLD)}, hw=3)
    with pytest.raises(SafetyGuardError, match="--force"):
        plan_retention(open_log(tmp_path), cfg(), NOW)
    result = run(tmp_path, cfg(), force=True)
    assert result.plan.roll and result.plan.deleted_base_offsets == (0,)
    assert sorted(p.name for p in d.iterdir()) == [
        "00000000000000000003.index",
        "00000000000000000003.log",
        "00000000000000000003.snapshot",
        "00000000000000000003.timeindex",
    ]
    assert all(segment_file(d, 3, s).stat().st_size == 0 for s in (".log", ".index", ".timeindex"))
    log = open_log(tmp_path)
    assert (log.log_end_offset, log.log_start_offset) == (3, 3)


def test_only_an_empty_active_segment_is_never_deleted(tmp_path):
    # testThatGarbageCollectingSegmentsDoesntChangeOffset with nothing appended: the only segment is
    # empty (old mtime, retention.bytes 0) and is never deletable.
    build(tmp_path, {0: []}, hw=0)
    assert plan_retention(open_log(tmp_path), cfg(retention_bytes=0), NOW).deletions == ()


def test_an_empty_last_segment_is_kept_without_a_roll(tmp_path):
    build(tmp_path, {0: seg(0, 5, OLD), 5: []}, hw=5)
    plan = plan_retention(open_log(tmp_path), cfg(), NOW, force=True)
    assert plan.deleted_base_offsets == (0,) and not plan.roll and plan.new_log_start_offset == 5


def test_garbage_collecting_every_segment_does_not_change_the_offset(tmp_path):
    # testThatGarbageCollectingSegmentsDoesntChangeOffset / testRetentionDeletesProducerStateSnapshots:
    # three segments of an idempotent producer, snapshots at the roll offsets 5 and 10 (as the broker
    # takes them), a transactional producer committed in the last segment.
    pid, tpid = 7, 9
    last = [
        batch(10, [("key", "value")], ts=OLD, pid=pid, epoch=0, seq=10),  # sequence 10 at offset 10
        batch(11, [("key", "value")], ts=OLD, pid=pid, epoch=0, seq=11),
        batch(12, [("a", "1"), ("b", "2")], ts=OLD + 5, pid=tpid, epoch=2, seq=0, txn=True),  # 12..13
        record_batch.build_control_batch(
            14,
            record_batch.CONTROL_COMMIT,
            producer_id=tpid,
            producer_epoch=2,
            coordinator_epoch=3,
            timestamp=OLD + 9,
        ),
    ]
    d = build(tmp_path, {0: seg(0, 5, OLD), 5: seg(5, 5, OLD), 10: last}, hw=15)
    write_producer_snapshot(
        segment_file(d, 5, ".snapshot"), [ProducerSnapshotEntry(pid, 0, 4, 4, 0, OLD, -1, -1)]
    )
    write_producer_snapshot(
        segment_file(d, 10, ".snapshot"), [ProducerSnapshotEntry(pid, 0, 9, 9, 0, OLD, -1, -1)]
    )
    result = run(tmp_path, cfg(), force=True)
    assert result.plan.deleted_base_offsets == (0, 5, 10) and result.plan.roll
    assert result.producer_snapshot_written
    log = open_log(tmp_path)
    assert (log.log_end_offset, log.log_start_offset, live_bases(d)) == (15, 15, [15])
    assert sorted(p.name for p in d.glob("*.snapshot")) == ["00000000000000000015.snapshot"]
    # The table at offset 15: the snapshot at 10 plus segment 10 replayed by hand.
    assert read_producer_snapshot(segment_file(d, 15, ".snapshot")) == [
        ProducerSnapshotEntry(pid, 0, 11, 11, 0, OLD, -1, -1),
        ProducerSnapshotEntry(tpid, 2, 1, 13, 1, OLD + 9, 3, -1),
    ]
    # a second run finds nothing more to delete
    again = plan_retention(open_log(tmp_path), cfg(), NOW)
    assert again.deletions == () and again.new_log_start_offset == 15


def test_an_existing_snapshot_at_the_leo_is_kept_on_roll(tmp_path):
    d = build(tmp_path, {0: seg(0, 3, OLD)}, hw=3)
    entries = [ProducerSnapshotEntry(1, 0, 2, 2, 0, OLD, -1, -1)]
    write_producer_snapshot(segment_file(d, 3, ".snapshot"), entries)
    before = segment_file(d, 3, ".snapshot").read_bytes()
    result = run(tmp_path, cfg(), force=True)
    assert not result.producer_snapshot_written
    assert segment_file(d, 3, ".snapshot").read_bytes() == before


# ============================================================================================ policies
@pytest.mark.parametrize("policy", [COMPACT, frozenset()], ids=["compact", "empty"])
def test_compact_and_empty_policies_get_only_the_start_offset_rule(tmp_path, policy):
    build(tmp_path, {0: seg(0, 5, OLD), 5: seg(5, 5, OLD), 10: seg(10, 5, OLD)}, hw=15)
    config = cfg(policy, retention_ms=1, retention_bytes=0)  # would delete everything under `delete`
    assert plan_retention(open_log(tmp_path), config, NOW).deletions == ()  # and no guard: not effective
    # a log start offset from the checkpoint (Kafka refuses DeleteRecords on these topics)
    checkpoints.write_offset_checkpoint(tmp_path / "log-start-offset-checkpoint", {TP: 12})
    plan = plan_retention(open_log(tmp_path), config, NOW)
    assert [(x.base_offset, x.reason) for x in plan.deletions] == [
        (0, LOG_START_OFFSET),
        (5, LOG_START_OFFSET),
    ]


def test_compact_delete_gets_every_rule(tmp_path):
    d = build(
        tmp_path, {0: seg(0, 5, NEW), 5: seg(5, 5, NEW), 10: seg(10, 5, OLD), 15: seg(15, 5, NEW)}, hw=20
    )
    s = log_size(d, 0)
    config = cfg(frozenset({"compact", "delete"}), retention_bytes=2 * s)
    plan = plan_retention(open_log(tmp_path), config, NOW, log_start_offset_override=6)
    assert [x.reason for x in plan.deletions] == [LOG_START_OFFSET, RETENTION_BYTES, RETENTION_MS]


# ============================================================================================ empty segments
def test_empty_segments_in_the_middle(tmp_path):
    # An empty segment's largest timestamp is its mtime: old -> it goes with the others, recent -> it
    # stops the time walk. For the size rule it weighs nothing (excess - 0 >= 0).
    d = build(tmp_path, {0: seg(0, 5, OLD), 5: [], 10: seg(10, 5, OLD), 15: seg(15, 5, NEW)}, hw=20)
    assert plan_retention(open_log(tmp_path), cfg(), NOW).deleted_base_offsets == (0, 5, 10)
    os.utime(segment_file(d, 5, ".log"), ns=(NEW * 10**6, NEW * 10**6))
    assert plan_retention(open_log(tmp_path), cfg(), NOW).deleted_base_offsets == (0,)
    s = log_size(d, 0)
    plan = plan_retention(open_log(tmp_path), cfg(retention_ms=-1, retention_bytes=2 * s), NOW)
    assert plan.deleted_base_offsets == (0, 5)


# ============================================================================================ leader epochs (D7)
def test_leader_epochs_are_truncated_from_the_new_log_start_offset(tmp_path):
    # shouldUpdateOffsetForLeaderEpochsWhenDeletingSegments: epochs (0,0) (1,7) (2,10)
    d = build(tmp_path, {0: seg(0, 5, OLD), 5: seg(5, 5, NEW), 10: seg(10, 5, NEW)}, hw=15)
    epochs = [EpochEntry(0, 0), EpochEntry(1, 7), EpochEntry(2, 10)]
    checkpoints.write_leader_epoch_checkpoint(d / "leader-epoch-checkpoint", epochs)
    result = run(tmp_path, cfg())
    assert result.leader_epoch_checkpoint_rewritten
    assert (d / "leader-epoch-checkpoint").read_bytes() == b"0\n3\n0 5\n1 7\n2 10\n"
    # DeleteRecords to 12 with nothing expired: (0,5) and (1,7) and (2,10) are at or below 12;
    # the last of them is kept, starting at 12. Segment 5 goes with the start-offset rule.
    result = run(tmp_path, cfg(retention_ms=-1), log_start_offset_override=12)
    assert result.plan.deleted_base_offsets == (5,)
    assert (d / "leader-epoch-checkpoint").read_bytes() == b"0\n1\n2 12\n"


# ============================================================================================ snapshots
def test_snapshots_named_by_deleted_bases_are_removed(tmp_path):
    d = build(tmp_path, {0: seg(0, 5, OLD), 5: seg(5, 5, OLD), 10: seg(10, 5, NEW)}, hw=15)
    for offset in (5, 7, 10, 15):  # 7 is a stray snapshot not at any base: Kafka leaves it
        write_producer_snapshot(segment_file(d, offset, ".snapshot"), [])
    result = run(tmp_path, cfg())
    assert result.plan.deleted_base_offsets == (0, 5)
    assert sorted(p.name[:20] for p in d.glob("*.snapshot")) == [f"{o:020d}" for o in (7, 10, 15)]
    assert not list(d.glob("*.deleted"))
    assert "00000000000000000005.snapshot" in result.files_deleted


def test_txn_index_of_a_deleted_segment_goes_too(tmp_path):
    d = build(tmp_path, {0: seg(0, 5, OLD), 5: seg(5, 5, NEW)}, hw=10)
    segment_file(d, 0, ".txnindex").write_bytes(b"")
    run(tmp_path, cfg())
    assert sorted(p.name for p in d.iterdir()) == [
        "00000000000000000005.index",
        "00000000000000000005.log",
        "00000000000000000005.timeindex",
    ]


# ============================================================================================ guard
@pytest.mark.parametrize("retention_ms", [0, 1, 3_599_999])
def test_retention_below_one_hour_needs_force(tmp_path, retention_ms):
    # refused on the setting alone, even when nothing would be deleted (records stamped "now")
    build(tmp_path, {0: seg(0, 5, NOW), 5: seg(5, 5, NOW)}, hw=10)
    with pytest.raises(SafetyGuardError, match=f"retention.ms={retention_ms} .*--force"):
        plan_retention(open_log(tmp_path), cfg(retention_ms=retention_ms), NOW)
    plan = plan_retention(open_log(tmp_path), cfg(retention_ms=retention_ms), NOW, force=True)
    assert plan.forced and plan.deletions == () and len(plan.guard_violations) == 1


@pytest.mark.parametrize("retention_ms", [-1, 3_600_000])
def test_retention_of_one_hour_or_unlimited_passes_the_guard(tmp_path, retention_ms):
    build(tmp_path, {0: seg(0, 5, NOW), 5: seg(5, 5, NOW)}, hw=10)
    assert plan_retention(open_log(tmp_path), cfg(retention_ms=retention_ms), NOW).guard_violations == ()


def test_deleting_every_non_empty_segment_needs_force(tmp_path):
    # the empty active segment survives, but no data would
    build(tmp_path, {0: seg(0, 5, OLD), 5: seg(5, 5, OLD), 10: []}, hw=10)
    with pytest.raises(SafetyGuardError, match="every non-empty segment .*--force"):
        plan_retention(open_log(tmp_path), cfg(), NOW)
    plan = plan_retention(open_log(tmp_path), cfg(), NOW, force=True)
    assert plan.deleted_base_offsets == (0, 5)


def test_deleting_empty_segments_of_a_log_without_data_is_not_guarded(tmp_path):
    build(tmp_path, {0: [], 5: []}, hw=5)  # old mtimes: the first empty segment is expired
    assert plan_retention(open_log(tmp_path), cfg(), NOW).deleted_base_offsets == (0,)


def test_apply_refuses_a_guarded_plan_made_without_force(tmp_path):
    d = build(tmp_path, {0: seg(0, 5, OLD), 5: seg(5, 5, NEW)}, hw=10)
    log = open_log(tmp_path)
    plan = plan_retention(log, cfg(), NOW)
    with pytest.raises(SafetyGuardError, match="--force"):
        apply_retention(log, plan, cfg(retention_ms=1000))
    assert live_bases(d) == [0, 5]


def test_planning_changes_nothing_and_the_plan_pickles(tmp_path):
    d = build(tmp_path, {0: seg(0, 5, OLD), 5: seg(5, 5, OLD)}, hw=10)
    checkpoints.write_leader_epoch_checkpoint(d / "leader-epoch-checkpoint", [EpochEntry(0, 0)])

    def stat_all():
        return {p.name: (p.stat().st_size, p.stat().st_mtime_ns) for p in tmp_path.rglob("*")}

    before = stat_all()
    plan = plan_retention(open_log(tmp_path), cfg(), NOW, log_start_offset_override=7, force=True)
    assert stat_all() == before
    assert pickle.loads(pickle.dumps(plan)) == plan


# ============================================================================================ log-dir checkpoints
def test_log_dir_checkpoints(tmp_path):
    other = TopicPartition("other", 3)
    build(tmp_path, {0: seg(0, 5, OLD), 5: seg(5, 5, NEW), 10: seg(10, 5, NEW)}, hw=15)
    checkpoints.write_offset_checkpoint(tmp_path / "log-start-offset-checkpoint", {other: 40})
    checkpoints.write_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint", {TP: 2, other: 50})
    checkpoints.write_offset_checkpoint(tmp_path / "cleaner-offset-checkpoint", {TP: 1})
    cleaner_before = (tmp_path / "cleaner-offset-checkpoint").read_bytes()

    log = open_log(tmp_path)
    result = apply_retention(log, plan_retention(log, cfg(), NOW, log_start_offset_override=7), cfg())
    written = update_log_dir_checkpoints(tmp_path, TP, result)
    assert set(written) == {"log-start-offset-checkpoint", "recovery-point-offset-checkpoint"}
    # 7 is above the first base 5: listed. The recovery point 2 is raised to 7.
    assert checkpoints.read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint") == {other: 40, TP: 7}
    assert checkpoints.read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {
        TP: 7,
        other: 50,
    }
    assert (tmp_path / "cleaner-offset-checkpoint").read_bytes() == cleaner_before

    # the next deletion lands the start on a segment base: the entry goes
    result = run(tmp_path, cfg(retention_ms=-1), log_start_offset_override=10)
    assert result.plan.new_first_segment_base == 10
    assert checkpoints.read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint") == {other: 40}
    assert checkpoints.read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {
        TP: 10,
        other: 50,
    }


def test_a_missing_recovery_point_entry_stays_missing_and_nothing_changes_without_cause(tmp_path):
    build(tmp_path, {0: seg(0, 5, NEW), 5: seg(5, 5, NEW)}, hw=10)
    log = open_log(tmp_path)
    result = apply_retention(log, plan_retention(log, cfg(), NOW), cfg())
    assert update_log_dir_checkpoints(tmp_path, TP, result) == ()
    assert not (tmp_path / "log-start-offset-checkpoint").exists()
    assert not (tmp_path / "recovery-point-offset-checkpoint").exists()


# ============================================================================================ crash safety
class Crash(BaseException):
    """The process dies: raised instead of a file operation, and for every later one."""


@contextlib.contextmanager
def dies_before_operation(n: int, monkeypatch):
    """Count renames, unlinks and file writes; the ``n``-th (0-based) and all later ones crash."""
    count = {"ops": 0, "crashed": False}

    def wrap(fn):
        def op(*args, **kwargs):
            if count["ops"] >= n:
                count["crashed"] = True
                raise Crash(f"operation {n}")
            count["ops"] += 1
            return fn(*args, **kwargs)

        return op

    with monkeypatch.context() as m:
        m.setattr(os, "replace", wrap(os.replace))
        m.setattr(os, "unlink", wrap(os.unlink))
        m.setattr(fsutil, "write_bytes_fsync", wrap(fsutil.write_bytes_fsync))
        yield count


def _roll_scenario(root: Path) -> dict:
    """Every segment expired: roll, producer snapshot, epochs, a txn index."""
    d = build(root, {0: seg(0, 5, OLD, pid=4, epoch=0, seq=0), 5: seg(5, 5, OLD), 10: seg(10, 5, OLD)}, hw=15)
    segment_file(d, 5, ".txnindex").write_bytes(b"")
    write_producer_snapshot(
        segment_file(d, 5, ".snapshot"), [ProducerSnapshotEntry(4, 0, 4, 4, 0, OLD, -1, -1)]
    )
    write_producer_snapshot(
        segment_file(d, 10, ".snapshot"), [ProducerSnapshotEntry(4, 0, 4, 4, 0, OLD, -1, -1)]
    )
    checkpoints.write_leader_epoch_checkpoint(
        d / "leader-epoch-checkpoint", [EpochEntry(0, 0), EpochEntry(1, 8)]
    )
    checkpoints.write_offset_checkpoint(root / "recovery-point-offset-checkpoint", {TP: 3})
    return {"config": cfg(), "override": None}


def _delete_records_scenario(root: Path) -> dict:
    """compact,delete topic (nothing expired), DeleteRecords into the middle of a segment: no roll,
    log-start entry."""
    d = build(root, {0: seg(0, 5, NEW), 5: seg(5, 5, NEW), 10: seg(10, 5, NEW), 15: seg(15, 5, NEW)}, hw=20)
    for offset in (5, 10, 15, 20):
        write_producer_snapshot(segment_file(d, offset, ".snapshot"), [])
    checkpoints.write_leader_epoch_checkpoint(
        d / "leader-epoch-checkpoint", [EpochEntry(0, 0), EpochEntry(1, 6)]
    )
    checkpoints.write_offset_checkpoint(root / "recovery-point-offset-checkpoint", {TP: 3})
    return {"config": cfg(COMPACT | DELETE), "override": 12}


def _retention_run(root: Path, scenario: dict) -> None:
    run(root, scenario["config"], log_start_offset_override=scenario["override"], force=True)


@pytest.mark.parametrize("make", [_roll_scenario, _delete_records_scenario], ids=["roll", "delete-records"])
@pytest.mark.parametrize("recovery", ["replan", "same-plan"])
def test_a_crash_after_any_file_operation_resolves_to_the_uninterrupted_result(
    tmp_path, monkeypatch, make, recovery
):
    reference = tmp_path / "reference"
    scenario = make(reference)
    before = dir_state(reference)
    _retention_run(reference, scenario)
    expected = dir_state(reference)
    assert expected != before

    n = 0
    while True:
        root = tmp_path / f"crash{n}"
        make(root)
        log = open_log(root)
        plan = plan_retention(
            log, scenario["config"], NOW, log_start_offset_override=scenario["override"], force=True
        )
        with dies_before_operation(n, monkeypatch) as count:
            try:
                result = apply_retention(log, plan, scenario["config"])
                update_log_dir_checkpoints(root, TP, result)
            except Crash:
                pass
        if not count["crashed"]:
            assert dir_state(root) == expected
            break
        # next start: the loader's leftover rules, then the job again
        part = root / TP.dir_name
        leftovers.apply_leftovers(leftovers.plan_leftovers(part))
        if recovery == "replan":
            _retention_run(root, scenario)
        else:
            result = apply_retention(open_log(root), plan, scenario["config"])
            update_log_dir_checkpoints(root, TP, result)
        assert dir_state(root) == expected, f"crash before file operation {n}"
        n += 1
    assert n > 10  # the scenario exercised many intermediate states
