"""Kafka's log cleaner: the cleanable range and the dirty ratio (spec cleaner-and-retention §2), on real
segment files; how the cases are built and checked: ``test_cleaner``.
"""

from __future__ import annotations

import pytest

from kafka_log_core.settings.config import BrokerConfig, LogConfig
from tests.logbuild import TS, batch, marker, write_segment
from tests.rules.cleaner_harness import (
    BROKER,
    NOW,
    clean,
    data_offsets,
    data_records,
    files_of,
    layout,
    marker_offsets,
    part,
    plan,
    set_checkpoint,
    single,
    txn,
)


# ================================================================== §2: the cleanable range and the ratio
def test_active_segment_is_never_cleaned_and_supersedes_nothing(tmp_path):
    # LogCleanerManagerTest.testCleanableOffsetsActiveSegment
    layout(
        tmp_path, {0: [single(0, "a", "1"), single(1, "a", "2")], 2: [single(2, "a", "3"), single(3, "b")]}
    )
    active_before = files_of(part(tmp_path), 2)
    assert plan(tmp_path).first_uncleanable_offset == 2
    clean(tmp_path)
    assert data_records(tmp_path) == [(1, b"a", b"2"), (2, b"a", b"3"), (3, b"b", b"v")]
    assert files_of(part(tmp_path), 2) == active_before


def test_undecided_transactional_data_is_not_cleanable(tmp_path):
    # LogCleanerManagerTest.testUndecidedTransactionalDataNotCleanable; LogCleanerTest.testCleaningWithUncleanableSection
    layout(tmp_path, {
        0: [single(0, "a", "1"), single(1, "b", "1")],
        2: [single(2, "a", "2"), txn(3, ["c"], pid=5, seq=0)],  # producer 5's transaction is open
        4: [single(4, "b", "2")],
        5: [single(5, "d", "1")],
    })  # fmt: skip
    untouched = {base: files_of(part(tmp_path), base) for base in (2, 4, 5)}
    the_plan = plan(tmp_path)
    # LSO = 3; the segment holding it (base 2) is the first uncleanable one.
    assert (the_plan.last_stable_offset, the_plan.first_uncleanable_offset) == (3, 2)
    assert clean(tmp_path).end_offset == 2
    assert data_offsets(tmp_path) == [0, 1, 2, 3, 4, 5]  # a@0, b@1 survive: their successors lie beyond 2
    assert {base: files_of(part(tmp_path), base) for base in (2, 4, 5)} == untouched

    write_segment(part(tmp_path), 5, [single(5, "d", "1"), marker(6, True, 5)])  # the commit lands
    write_segment(part(tmp_path), 7, [single(7, "e", "1")])
    the_plan = plan(tmp_path)
    assert (the_plan.last_stable_offset, the_plan.first_uncleanable_offset) == (8, 7)
    clean(tmp_path)
    assert data_offsets(tmp_path) == [2, 3, 4, 5, 7]
    assert marker_offsets(tmp_path) == [6]


def test_high_watermark_bounds_the_cleanable_range(tmp_path):
    layout(tmp_path, {0: [single(0, "a"), single(1, "b")], 2: [single(2, "a"), single(3, "c")], 4: [single(4, "d")]},
           hw=3)  # fmt: skip
    the_plan = plan(tmp_path)
    assert (the_plan.last_stable_offset, the_plan.first_uncleanable_offset) == (3, 2)
    clean(tmp_path)
    assert data_offsets(tmp_path) == [0, 1, 2, 3, 4]


@pytest.mark.parametrize(("lag", "now", "first_uncleanable"), [
    (0, TS + 27_000, 3),  # testCleanableOffsetsForNone: only the active segment bounds
    (15_000, TS + 27_000, 2),  # testCleanableOffsetsForTime: segment 2 (max ts TS+20s) > now - lag
    (15_000, TS + 35_000, 3),  # largest timestamp == now - lag is old enough (strict >)
    (15_000, TS + 10_000, 0),  # testCleanableOffsetsForShortTime: everything too recent
], ids=["no-lag", "recent-segment", "boundary", "all-recent"])  # fmt: skip
def test_min_compaction_lag_bounds_the_cleanable_range(tmp_path, lag, now, first_uncleanable):
    layout(tmp_path, {i: [single(i, "a", str(i), ts=TS + 10_000 * i)] for i in range(4)})
    cfg = LogConfig(cleanup_policy=frozenset({"compact"}), min_compaction_lag_ms=lag)
    the_plan = plan(tmp_path, now, cfg)
    assert the_plan.first_uncleanable_offset == first_uncleanable
    if first_uncleanable == 0:
        assert (the_plan.cleanable_bytes, the_plan.eligible) == (0, False)
    if first_uncleanable == 2:
        untouched = files_of(part(tmp_path), 2)
        clean(tmp_path, now, cfg)
        assert data_offsets(tmp_path) == [1, 2, 3]
        assert files_of(part(tmp_path), 2) == untouched


def test_min_compaction_lag_uses_the_mtime_of_a_segment_without_timestamps(tmp_path):
    d = part(tmp_path)
    write_segment(d, 0, [single(0, "a", "1", ts=-1)], mtime_ms=NOW - 20_000)
    write_segment(d, 1, [single(1, "a", "2", ts=-1)], mtime_ms=NOW - 1_000)
    write_segment(d, 2, [])
    cfg = LogConfig(cleanup_policy=frozenset({"compact"}), min_compaction_lag_ms=5_000)
    assert plan(tmp_path, NOW, cfg).first_uncleanable_offset == 1


def _sizes(tmp_path):
    return {int(p.name.split(".")[0]): p.stat().st_size for p in part(tmp_path).glob("*.log")}


def test_log_to_clean_with_uncleanable_section_counts_bytes(tmp_path):
    # LogCleanerTest.testLogToClean / testLogToCleanWithUncleanableSection (spec C5).
    layout(tmp_path, {i: [single(i, "1", "0" * 25)] for i in range(7)}, hw=4)
    s = _sizes(tmp_path)
    set_checkpoint(tmp_path, "cleaner-offset-checkpoint", 2)
    the_plan = plan(tmp_path)  # clean: segments 0, 1; cleanable: 2, 3; uncleanable from 4 (HW)
    assert (the_plan.first_dirty_offset, the_plan.first_uncleanable_offset) == (2, 4)
    assert (the_plan.clean_bytes, the_plan.cleanable_bytes) == (s[0] + s[1], s[2] + s[3])
    assert the_plan.dirty_ratio == (s[2] + s[3]) / (s[0] + s[1] + s[2] + s[3])

    set_checkpoint(tmp_path, "replication-offset-checkpoint", None)
    set_checkpoint(tmp_path, "cleaner-offset-checkpoint", 6)  # first dirty = active base
    the_plan = plan(tmp_path)
    assert the_plan.total_bytes == sum(s.values()) - s[6]
    assert (the_plan.cleanable_bytes, the_plan.eligible) == (0, False)


def test_segment_holding_a_mid_segment_first_dirty_offset_counts_as_clean_and_cleanable(tmp_path):
    layout(tmp_path, {0: [single(0, "a"), single(1, "b")], 2: [single(2, "c"), single(3, "d")],
                      4: [single(4, "e"), single(5, "f")], 6: [single(6, "g")]})  # fmt: skip
    s = _sizes(tmp_path)
    set_checkpoint(tmp_path, "cleaner-offset-checkpoint", 3)
    the_plan = plan(tmp_path)
    assert (the_plan.clean_bytes, the_plan.cleanable_bytes) == (s[0] + s[2], s[2] + s[4])
    assert the_plan.dirty_ratio == (s[2] + s[4]) / (s[0] + 2 * s[2] + s[4])


@pytest.mark.parametrize(("min_ratio", "eligible"), [(0.5, False), (0.49, True)])
def test_min_cleanable_dirty_ratio_is_compared_strictly(tmp_path, min_ratio, eligible):
    layout(tmp_path, {0: [single(0, "k0", "v0")], 1: [single(1, "k1", "v1")], 2: [single(2, "k2", "v2")]})
    s = _sizes(tmp_path)
    assert s[0] == s[1]  # premise: ratio exactly 0.5
    set_checkpoint(tmp_path, "cleaner-offset-checkpoint", 1)
    cfg = LogConfig(cleanup_policy=frozenset({"compact"}), min_cleanable_dirty_ratio=min_ratio)
    the_plan = plan(tmp_path, cfg=cfg)
    assert (the_plan.dirty_ratio, the_plan.eligible) == (0.5, eligible)


@pytest.mark.parametrize(("max_lag", "now", "must"), [
    (1000, TS + 1 + 1000, False),  # E = TS + 1 (first batch's *max* timestamp) is not < now - lag
    (1000, TS + 2 + 1000, True),
    (None, NOW, False),
], ids=["at-the-bound", "past-the-bound", "default-lag"])  # fmt: skip
def test_max_compaction_lag_forces_cleaning_below_the_dirty_ratio(tmp_path, max_lag, now, must):
    # LogCleanerIntegrationTest.testMaxLogCompactionLag (spec C6/C7).
    layout(tmp_path, {
        0: [single(i, f"k{i}") for i in range(5)],
        5: [batch(5, [("a", "1"), ("b", "1")], ts=TS)],
        7: [single(7, "c")],
    })  # fmt: skip
    set_checkpoint(tmp_path, "cleaner-offset-checkpoint", 5)
    kw = {} if max_lag is None else {"max_compaction_lag_ms": max_lag}
    the_plan = plan(tmp_path, now, LogConfig(cleanup_policy=frozenset({"compact"}), **kw))
    assert the_plan.dirty_ratio < 0.5  # premise
    assert (the_plan.must_compact, the_plan.eligible) == (must, must)


@pytest.mark.parametrize(("stored", "log_start", "first_dirty", "reset"), [
    (None, None, 0, False),
    (2, None, 2, False),
    (5, None, 5, False),  # == LEO: valid, nothing to clean
    (6, None, 0, True),  # testDirtyOffsetResetIfLargerThanEndOffset
    (1, 2, 2, True),  # testDirtyOffsetResetIfSmallerThanStartOffset
    (2, 2, 2, False),
], ids=["none", "inside", "at-leo", "beyond-leo", "below-log-start", "at-log-start"])  # fmt: skip
def test_cleaner_checkpoint_is_reset_when_outside_the_log(tmp_path, stored, log_start, first_dirty, reset):
    # Spec C2; LogCleanerManagerTest.testCleanableOffsetsNeedsCheckpointReset.
    layout(
        tmp_path,
        {0: [single(0, "a"), single(1, "b")], 2: [single(2, "a"), single(3, "b")], 4: [single(4, "c")]},
    )
    set_checkpoint(tmp_path, "cleaner-offset-checkpoint", stored)
    set_checkpoint(tmp_path, "log-start-offset-checkpoint", log_start)
    the_plan = plan(tmp_path)
    assert (the_plan.first_dirty_offset, the_plan.checkpoint_reset) == (first_dirty, reset)
    if stored == 5:  # testDirtyOffsetLargerThanActiveSegmentBaseOffset
        assert (the_plan.cleanable_bytes, the_plan.eligible) == (0, False)


@pytest.mark.parametrize(("policy", "broker", "eligible"), [
    ({"compact"}, BROKER, True),
    ({"compact", "delete"}, BROKER, True),
    ({"delete"}, BROKER, False),
    ({"compact"}, BrokerConfig(log_cleaner_enable=False), False),
], ids=["compact", "compact-delete", "delete", "cleaner-disabled"])  # fmt: skip
def test_only_compacted_logs_with_the_cleaner_enabled_are_eligible(tmp_path, policy, broker, eligible):
    layout(tmp_path, {0: [single(0, "a"), single(1, "a")], 2: []})
    the_plan = plan(tmp_path, cfg=LogConfig(cleanup_policy=frozenset(policy)), broker=broker)
    assert (the_plan.dirty_ratio, the_plan.eligible) == (1.0, eligible)
