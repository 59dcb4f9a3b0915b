"""Kafka's log cleaner, pinned on real segment files: what survives a pass (spec cleaner-and-retention
§3–§5), tombstones and their delete horizon, the offset map of pass 1.

The cleaner's other cases, by section: ``test_cleaner_range`` (§2, the cleanable range and the dirty
ratio), ``test_cleaner_transactions`` (§6, transactions and markers; R2.1, producers' last batches),
``test_cleaner_formats`` (compressed, legacy and log-append-time batches), ``test_cleaner_files`` (§7, the
files and the swap).

Every case lays a partition directory out batch by batch (``tests/logbuild.py``), runs the planner and
one or more cleaning rounds, and compares what is left with survivors worked out by hand from Kafka's
rules -- the working is in the comments next to each case. Names follow the Kafka test they mirror
(LogCleanerTest, LogCleanerManagerTest, MemoryRecordsTest); the cases are our own. Every directory a
round leaves behind is re-read independently (``cleaner_harness.check_dir``).
"""

from __future__ import annotations

import hashlib

import pytest

from kafka_log_core.format import compression
from kafka_log_core.kernels.offset_map import OffsetMap
from kafka_log_core.rules import cleaner
from kafka_log_core.settings.config import BrokerConfig, LogConfig
from kafka_log_core.settings.kafka_version import KafkaVersion
from tests.logbuild import TS, batch, write_segment
from tests.rules.cleaner_harness import (
    BIG,
    DAY,
    ENTRY_HEAD,
    HORIZON_BIT,
    MAX_INT,
    NOW,
    batches,
    clean,
    data_keys,
    data_offsets,
    data_records,
    files_of,
    layout,
    map_get,
    open_log,
    part,
    seg_file,
    segment_bases,
    shape,
    single,
    tiny_map,
)


# ========================================================================== §3–§5: what survives a pass
def test_clean_segments_keeps_the_latest_value_per_key_and_the_batch_offset_ranges(tmp_path):
    # LogCleanerTest.testCleanSegments / testCleaningWithDeletes, MemoryRecordsTest.testFilterToPreservesProducerInfo
    # and testFilterToPreservesPartitionLeaderEpoch.
    b0 = batch(0, [("a", "1"), ("b", "1"), ("c", "1")], pid=7, epoch=0, seq=10)
    b1 = batch(
        3, [("a", "2"), ("d", "1"), ("b", "2", [("h", b"x")]), ("e", "1")], pid=7, epoch=0, seq=13,
        partition_leader_epoch=5,
    )  # fmt: skip
    b2 = batch(7, [("d", "2"), ("f", "1")])
    b3 = single(9, "c", "2")
    layout(tmp_path, {0: [b0, b1], 7: [b2, b3], 10: [single(10, "a", "3")]})
    active_before = files_of(part(tmp_path), 10)

    result = clean(tmp_path)

    # Map over [0, 10): a->3, b->5, c->9, d->7, e->6, f->8; L = 9.
    # b0: every record superseded; not producer 7's last batch (that ends at 6), next offset 3 != 10 -> gone.
    # b1: a@3, b@5, e@6 are the latest, d@4 is not -> rebuilt keeping base 3, lastOffsetDelta 3, seq 13.
    # b2, b3: every record kept -> copied byte for byte. Segments 0 and 7 merge into segment 0.
    assert result.end_offset == 10
    assert segment_bases(tmp_path) == [0, 10]
    assert data_records(tmp_path) == [
        (3, b"a", b"2"), (5, b"b", b"2"), (6, b"e", b"1"), (7, b"d", b"2"), (8, b"f", b"1"), (9, b"c", b"2"),
        (10, b"a", b"3"),
    ]  # fmt: skip
    rebuilt, *copied, _active = batches(tmp_path)
    assert (rebuilt.base_offset, rebuilt.last_offset, rebuilt.count) == (3, 6, 3)
    assert (rebuilt.producer_id, rebuilt.producer_epoch, rebuilt.base_sequence) == (7, 0, 13)
    assert rebuilt.last_sequence == 16
    assert rebuilt.leader_epoch == 5
    assert rebuilt.attributes == 0
    assert [r.timestamp for r in rebuilt.records] == [TS, TS + 2, TS + 3]
    assert (rebuilt.base_timestamp, rebuilt.max_timestamp) == (TS, TS + 3)
    assert [r.headers for r in rebuilt.records] == [(), (("h", b"x"),), ()]
    assert [b.raw for b in copied] == [b2, b3]
    assert files_of(part(tmp_path), 10) == active_before


def test_recleaning_a_compacted_batch_keeps_its_offset_range_and_recopies_the_clean_prefix(tmp_path):
    # MemoryRecordsTest.testFilterToAlreadyCompactedLog; spec §4 G1 (the clean prefix is rewritten and merged).
    b1 = batch(3, [("a", "2"), ("d", "1"), ("b", "2"), ("e", "1")], pid=7, epoch=0, seq=13)
    layout(tmp_path, {
        0: [batch(0, [("a", "1"), ("b", "1"), ("c", "1")], pid=7, epoch=0, seq=10), b1],
        7: [batch(7, [("d", "2"), ("f", "1")]), single(9, "c", "2")],
        10: [single(10, "a", "3")],
    })  # fmt: skip
    clean(tmp_path)  # as in the case above: batch 3..6 now holds offsets 3, 5, 6
    write_segment(part(tmp_path), 11, [single(11, "b", "3")])  # roll: segment 10 is no longer active

    result = clean(tmp_path, NOW + 1000)

    # Checkpoint 10, U = 11: map a->10, L = 10. The clean prefix (segment 0) is recopied with segment 10.
    # Batch 3..6: a@3 < 10 goes; b@5 stays (b@11 is beyond the round, not in the map); e@6 stays.
    assert result.end_offset == 11
    assert segment_bases(tmp_path) == [0, 11]
    assert shape(tmp_path) == [(3, 6, [5, 6]), (7, 8, [7, 8]), (9, 9, [9]), (10, 10, [10]), (11, 11, [11])]
    first = batches(tmp_path)[0]
    assert (first.base_sequence, first.base_timestamp, first.max_timestamp) == (13, TS + 2, TS + 3)


def _group(segments, max_size, max_index, upper):
    return [
        [s.base_offset for s in g] for g in cleaner.group_segments(list(segments), max_size, max_index, upper)
    ]


def test_segment_grouping_by_log_size(tmp_path):
    # LogCleanerTest.testSegmentGrouping: greedy groups, Σ size + size(next) <= segment.bytes.
    layout(tmp_path, {i: [single(i, "hello", "hello")] for i in range(10)})
    segments = open_log(tmp_path).segments
    size = segments[0].size
    assert {s.size for s in segments} == {size}  # premise: identical segments
    assert _group(segments, MAX_INT, MAX_INT, 10) == [list(range(10))]
    assert _group(segments, 1, MAX_INT, 10) == [[i] for i in range(10)]
    threes = [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]
    assert _group(segments, 3 * size, MAX_INT, 10) == threes
    assert _group(segments, 3 * size + size - 1, MAX_INT, 10) == threes
    assert _group(segments, 3 * size - 1, MAX_INT, 10) == [[0, 1], [2, 3], [4, 5], [6, 7], [8, 9]]


@pytest.mark.parametrize("rising_timestamps", [True, False], ids=["time-index-binds", "offset-index-binds"])
def test_segment_grouping_by_index_sizes(tmp_path, rising_timestamps):
    # Both indexes are held to segment.index.bytes separately (Σ 8·entries and Σ 12·entries).
    segs = {}
    for base in range(0, 15, 3):
        segs[base] = [
            single(base + j, f"k{j}", "v" * 30, ts=TS + (base + j if rising_timestamps else 0))
            for j in range(3)
        ]
    layout(tmp_path, segs, interval=50)
    segments = open_log(tmp_path).segments
    index_sizes = {s.index_path.stat().st_size for s in segments}
    time_sizes = {s.time_index_path.stat().st_size for s in segments}
    # Premise: batches at positions 0, ~100, ~200 -> 2 offset entries (16 bytes); with rising timestamps
    # 2 time entries (24 bytes), with constant timestamps only the first one (12 bytes).
    assert index_sizes == {16} and time_sizes == ({24} if rising_timestamps else {12})
    if rising_timestamps:
        assert _group(segments, MAX_INT, 48, 15) == [[0, 3], [6, 9], [12]]  # 24 + 24 <= 48 < 72
        assert _group(segments, MAX_INT, 47, 15) == [
            [0],
            [3],
            [6],
            [9],
            [12],
        ]  # offset index alone would pair
    else:
        assert _group(segments, MAX_INT, 32, 15) == [[0, 3], [6, 9], [12]]  # 16 + 16 <= 32 < 48
        assert _group(segments, MAX_INT, 31, 15) == [[0], [3], [6], [9], [12]]  # time index alone would pair


@pytest.mark.parametrize(
    ("bases", "empty", "upper", "expected"),
    [
        # est(S) = firstUncleanable - 1 for the last segment: 2^31 - 1 - 0 fits, 2^31 - 0 does not.
        ([0, 100], [], BIG, [[0, 100]]),
        ([0, 100], [], BIG + 1, [[0], [100]]),
        # est(S) = base(next) - 1 = 2^31 + 9 does not fit with 0; the next pair spans 24 offsets.
        ([0, BIG - 5, BIG + 10], [], BIG + 20, [[0], [BIG - 5, BIG + 10]]),
        # An empty segment joins whatever its offsets (no empty segment left every 2^31 offsets).
        ([0, BIG + 5], [BIG + 5], 2 * BIG, [[0, BIG + 5]]),
        ([0, BIG + 5, BIG + 6], [BIG + 5], BIG + 10, [[0, BIG + 5], [BIG + 6]]),
        # testSegmentGroupingFollowingLoadOfZeroIndex: the estimate, not the index, decides.
        ([0, MAX_INT // 2], [], MAX_INT + 2, [[0], [MAX_INT // 2]]),
    ],
    ids=[
        "span-fits",
        "span-one-too-many",
        "estimate-from-next-base",
        "empty-joins",
        "empty-then-too-far",
        "zero-index",
    ],
)
def test_segment_grouping_keeps_each_group_within_a_2_31_offset_span(tmp_path, bases, empty, upper, expected):
    # LogCleanerTest.testSegmentGroupingWithSparseOffsets / ...AndEmptySegments / ...FollowingLoadOfZeroIndex
    segs = {b: ([] if b in empty else [single(b, "hello", "hello")]) for b in bases}
    if bases[-1] == MAX_INT // 2:
        segs[0] = [single(0, "hello"), single(1, "hello")]
        segs[MAX_INT // 2] = [single(MAX_INT // 2, "hello"), single(MAX_INT + 1, "hello")]
    layout(tmp_path, segs)
    assert _group(open_log(tmp_path).segments, MAX_INT, MAX_INT, upper) == expected


def test_groups_follow_segment_bytes_and_an_emptied_group_is_installed_as_an_empty_segment(tmp_path):
    # Spec §4 G3 and LogCleanerTest.testSegmentGroupingWithSparseOffsetsAndEmptySegments (second round).
    cfg = LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=1024 * 1024)
    big = "x" * 600_000
    layout(tmp_path, {0: [single(0, "a", big)], 1: [single(1, "a", big + "y")], 2: []})

    result = clean(tmp_path, cfg=cfg)

    # 600 kB + 600 kB > 1 MiB: two groups. Group 0 loses a@0 (superseded; next offset 1 != U = 2): an empty
    # segment keeps base 0. Group 1 keeps a@1.
    assert result.groups == 2
    assert segment_bases(tmp_path) == [0, 1, 2]
    assert seg_file(tmp_path, 0, ".log").stat().st_size == 0
    assert data_records(tmp_path) == [(1, b"a", (big + "y").encode())]

    write_segment(part(tmp_path), 2, [single(2, "b", "1")])
    write_segment(part(tmp_path), 3, [])
    result = clean(tmp_path, cfg=cfg)

    # Now 0 + 600 kB + small fits one group: segments 0, 1 and 2 become segment 0.
    assert result.groups == 1
    assert segment_bases(tmp_path) == [0, 3]
    assert data_records(tmp_path) == [(1, b"a", (big + "y").encode()), (2, b"b", b"1")]


def test_cleaning_with_unkeyed_messages_removes_them(tmp_path):
    # LogCleanerTest.testCleaningWithUnkeyedMessages
    layout(tmp_path, {
        0: [batch(0, [(None, "u0"), (None, "u1")]), batch(2, [("k", "v"), (None, "u3")])],
        4: [single(4, None, "u4"), single(5, "k2")],
        6: [single(6, None, "u6")],
    })  # fmt: skip
    clean(tmp_path)
    # Every unkeyed record at or below L = 5 goes; the active segment is not touched.
    assert shape(tmp_path) == [(2, 3, [2]), (5, 5, [5]), (6, 6, [6])]
    assert data_records(tmp_path) == [(2, b"k", b"v"), (5, b"k2", b"v"), (6, None, b"u6")]


@pytest.mark.parametrize(("active_base", "expected"), [
    (3, [(0, 0, [0]), (1, 2, []), (3, 3, [3])]),
    (10, [(0, 0, [0]), (10, 10, [10])]),
], ids=["ends-at-the-round-bound", "offset-gap-before-the-bound"])  # fmt: skip
def test_clean_segments_retaining_last_empty_batch(tmp_path, active_base, expected):
    # LogCleanerTest.testCleanSegmentsRetainingLastEmptyBatch (spec R2.2) as of 4.0-4.3: a batch whose next
    # offset is the round's first uncleanable offset stays as a header-only batch even when all its records go.
    gz = batch(1, [(None, "u1"), (None, "u2")], codec=compression.GZIP, ts=TS + 5)
    layout(tmp_path, {0: [single(0, "a", "1"), gz], active_base: [single(active_base, "a", "2")]})
    clean(tmp_path, broker=BrokerConfig(kafka_version=KafkaVersion(4, 3)))
    assert shape(tmp_path) == expected
    if active_base == 3:
        empty = batches(tmp_path)[1]
        assert (empty.count, empty.attributes, empty.base_timestamp, empty.max_timestamp) == (
            0,
            0,
            -1,
            TS + 6,
        )
        assert (empty.producer_id, empty.producer_epoch, empty.base_sequence) == (-1, -1, -1)
        assert len(empty.raw) == 61


@pytest.mark.parametrize(("version", "hw", "kept"), [
    ("3.9.1", None, False),  # no rule R2.2 before KAFKA-17076
    ("4.3.1", None, True),  # the batch ends at the round's bound (3)
    ("4.4.0", None, False),  # KAFKA-20452: it must end at the high watermark (4, the log end offset)
    ("4.4.0", 3, True),  # the high watermark at the round's bound
], ids=["3.9.1", "4.3.1", "4.4.0-hw-at-leo", "4.4.0-hw-at-the-bound"])  # fmt: skip
def test_from_4_4_the_empty_batch_kept_is_the_one_ending_at_the_high_watermark(tmp_path, version, hw, kept):
    # Cleaner.cleanInto: RETAIN_EMPTY for batch.nextOffset() == upperBoundOffsetOfCleaningRound up to 4.3.1,
    # == log.highWatermark() in 4.4.0. Offsets 1-2 are unkeyed, so nothing in that batch survives.
    gz = batch(1, [(None, "u1"), (None, "u2")], codec=compression.GZIP, ts=TS + 5)
    layout(tmp_path, {0: [single(0, "a", "1"), gz], 3: [single(3, "a", "2")]}, hw=hw)
    clean(tmp_path, broker=BrokerConfig(kafka_version=KafkaVersion.parse(version)))
    assert shape(tmp_path) == [(0, 0, [0])] + ([(1, 2, [])] if kept else []) + [(3, 3, [3])]


# ================================================================================ tombstones (R3.7, R4)
def _tombstone_log(tmp_path, tombstone_ts=TS):
    layout(tmp_path, {
        0: [
            batch(0, [("a", "1"), ("b", "1")]),
            batch(2, [("a", None), ("c", "1", [("h", b"x")])], ts=tombstone_ts, partition_leader_epoch=3),
        ],
        4: [single(4, "d", "1")],
    })  # fmt: skip


def test_tombstone_is_kept_on_the_first_pass_and_a_delete_horizon_is_stamped(tmp_path):
    # MemoryRecordsTest.testBaseTimestampToDeleteHorizonConversion
    _tombstone_log(tmp_path)
    clean(tmp_path)
    # Map a->2, b->1, c->3. Batch 0..1 keeps b@1 (no tombstone: no horizon, baseTimestamp = TS + 1).
    # Batch 2..3 keeps both records, but holds a tombstone without a horizon: rebuilt with attribute
    # bit 6 and baseTimestamp = NOW + delete.retention.ms; record timestamps and maxTimestamp unchanged.
    first, second, _active = batches(tmp_path)
    assert (first.attributes, first.base_timestamp, first.offsets) == (0, TS + 1, [1])
    assert second.attributes == HORIZON_BIT
    assert second.base_timestamp == NOW + DAY
    assert second.max_timestamp == TS + 1
    assert [(r.offset, r.value, r.timestamp) for r in second.records] == [(2, None, TS), (3, b"1", TS + 1)]
    assert second.records[1].headers == (("h", b"x"),)
    assert (second.leader_epoch, second.last_offset) == (3, 3)


def test_clean_tombstone_horizon_counts_from_cleaning_time_not_record_time(tmp_path):
    # LogCleanerTest.testCleanTombstone: a tombstone whose own timestamp is older than delete.retention.ms.
    old = NOW - DAY - 10_000
    layout(tmp_path, {0: [single(0, "0", "0", ts=NOW + DAY + 10_000)], 1: [single(1, "0", None, ts=old)],
                      2: [single(2, "1", "1")]})  # fmt: skip
    clean(tmp_path)
    tomb = batches(tmp_path)[0]
    assert (tomb.last_offset, tomb.offsets, tomb.base_timestamp) == (1, [1], NOW + DAY)
    assert tomb.records[0].timestamp == old

    write_segment(part(tmp_path), 3, [single(3, "2", "2")])
    clean(
        tmp_path
    )  # same clock, checkpoint 2: the tombstone is in the clean prefix, still before its horizon
    assert shape(tmp_path) == [(1, 1, [1]), (2, 2, [2]), (3, 3, [3])]


def test_tombstone_is_removed_by_a_pass_at_its_horizon(tmp_path):
    _tombstone_log(tmp_path)
    clean(tmp_path)
    horizon = NOW + DAY
    with_horizon = batches(tmp_path)[1].raw

    write_segment(part(tmp_path), 5, [single(5, "e", "1")])
    clean(tmp_path, horizon - 1)
    # a is not in the map (dirty section 4..4), so a@2 is its latest; now < horizon: kept, batch copied as is.
    assert batches(tmp_path)[1].raw == with_horizon

    write_segment(part(tmp_path), 6, [single(6, "f", "1")])
    clean(tmp_path, horizon)
    # now >= horizon: the tombstone goes; c@3 stays and its batch keeps the horizon it already had.
    assert data_records(tmp_path) == [
        (1, b"b", b"1"), (3, b"c", b"1"), (4, b"d", b"1"), (5, b"e", b"1"), (6, b"f", b"1"),
    ]  # fmt: skip
    rebuilt = batches(tmp_path)[1]
    assert (rebuilt.base_offset, rebuilt.last_offset, rebuilt.count) == (2, 3, 1)
    assert (rebuilt.attributes, rebuilt.base_timestamp, rebuilt.records[0].timestamp) == (
        HORIZON_BIT,
        horizon,
        TS + 1,
    )


# ============================================================================ §3: the offset map (pass 1)
def _keys_log(tmp_path, keys, active=None):
    layout(tmp_path, {0: [single(i, str(k), str(k)) for i, k in enumerate(keys)], active or len(keys): []})


def test_partial_segment_clean_progresses_one_key_at_a_time(tmp_path):
    # LogCleanerTest.testPartialSegmentClean: a map that holds one key.
    _keys_log(tmp_path, [0, 1, 0, 1, 0])

    # Checkpoint 2: 0@2 goes into the map, 1@3 finds it full -> L = 2. 0@0 is superseded; 1@1 is not in
    # the map (kept); everything after L is kept untouched.
    result = clean(tmp_path, first_dirty=2, offset_map=tiny_map(1))
    assert (result.end_offset, result.map_full) == (3, True)
    assert (data_keys(tmp_path), data_offsets(tmp_path)) == (["1", "0", "1", "0"], [1, 2, 3, 4])

    result = clean(tmp_path, offset_map=tiny_map(1))  # from the stored checkpoint 3: 1@3 in the map
    assert (result.end_offset, result.map_full) == (4, True)
    assert data_offsets(tmp_path) == [2, 3, 4]

    result = clean(tmp_path, offset_map=tiny_map(1))  # from 4: 0@4 fits, the segment is done -> L = 4
    assert (result.end_offset, result.map_full) == (5, False)
    assert (data_keys(tmp_path), data_offsets(tmp_path)) == (["1", "0"], [3, 4])


@pytest.mark.parametrize(("segment", "end_offset"), [
    ([single(0, "a", "1"), single(1, "b", "1"), single(2, "a", "2"), single(3, "c", "1")], 2),
    ([batch(0, [("a", "1"), ("b", "1"), ("a", "2"), ("c", "1")]), single(4, "b", "2")], 2),
], ids=["one-record-batches", "inside-one-batch"])  # fmt: skip
def test_full_map_stops_the_pass_even_for_a_key_already_in_the_map(tmp_path, segment, end_offset):
    # Spec M3: once the map holds its capacity, the next keyed record stops pass 1 -- even a2, whose key
    # is already there. L stays at b1 (offset 1), so the checkpoint may land inside a batch, and a@0 is the
    # latest offset the map knows for a: nothing is removed.
    last = ENTRY_HEAD.unpack_from(segment[-1])[0]  # the last batch holds one record
    layout(tmp_path, {0: segment, last + 1: []})
    result = clean(tmp_path, offset_map=tiny_map(2))
    assert (result.end_offset, result.map_full) == (end_offset, True)
    assert data_offsets(tmp_path) == list(range(last + 1))


def test_build_partial_offset_map_holds_only_dirty_offsets(tmp_path):
    # LogCleanerTest.testBuildPartialOffsetMap: a two-key map from offset 2.
    _keys_log(tmp_path, [0, 1, 2, 3, 4])
    offset_map = tiny_map(2)
    result = cleaner.build_offset_map(open_log(tmp_path), 2, 5, offset_map)
    assert (result.end_offset, result.full, offset_map.size) == (4, True, 2)
    assert [map_get(offset_map, k) for k in "01234"] == [-1, -1, 2, 3, -1]


def test_build_offset_map_reaches_the_range_end_across_offset_gaps(tmp_path):
    # LogCleanerTest.testBuildOffsetMap / testBuildOffsetMapFakeLarge (spec M4).
    layout(tmp_path, {
        0: [single(i, str(i)) for i in range(10)], 15: [single(i, str(i)) for i in range(15, 25)], 30: [],
    })  # fmt: skip
    for start, end in [(0, 15), (15, 30), (0, 30)]:
        offset_map = OffsetMap(24 * 1000, 0.75)
        result = cleaner.build_offset_map(open_log(tmp_path), start, end, offset_map)
        present = [i for i in (*range(10), *range(15, 25)) if start <= i < end]
        assert (result.end_offset, offset_map.size, result.full) == (end, len(present), False)
        assert [map_get(offset_map, str(i)) for i in present] == present
        assert map_get(offset_map, str(start - 1)) == map_get(offset_map, str(end)) == -1


def test_build_offset_map_fake_large(tmp_path):
    layout(tmp_path, {0: [single(0, "0")], 7206178: [single(7206178, "1")], 7206179: []})
    offset_map = OffsetMap(24 * 1000, 0.75)
    result = cleaner.build_offset_map(open_log(tmp_path), 0, 7206179, offset_map)
    assert (result.end_offset, offset_map.size) == (7206179, 2)
    assert (map_get(offset_map, "0"), map_get(offset_map, "1")) == (0, 7206178)


@pytest.mark.parametrize("segments", [
    {0: [single(i, str(i)) for i in range(10)], 11: [single(11, "1015")]},
    {0: [single(i, str(i)) for i in range(10)], 15: [single(i, str(i)) for i in range(15, 25)],
     30: [single(30, "1015")]},
], ids=["one-gap", "gaps-in-two-segments"])  # fmt: skip
def test_cleaning_beyond_missing_offsets(tmp_path, segments):
    # LogCleanerTest.testCleaningBeyondMissingOffsets: the next dirty offset lands on the active base.
    layout(tmp_path, segments)
    active = max(segments)
    assert clean(tmp_path).end_offset == active
    assert segment_bases(tmp_path) == [0, active]


def test_keys_with_the_same_md5_digest_are_the_same_key(tmp_path):
    # Spec M1: the map is keyed by MD5(key); two keys with the same digest are one key to Kafka, so the
    # older one is superseded by the newer.
    assert _MD5_A != _MD5_B and hashlib.md5(_MD5_A).digest() == hashlib.md5(_MD5_B).digest()  # premise
    layout(tmp_path, {0: [single(0, _MD5_A, "1"), single(1, _MD5_B, "2")], 2: [single(2, "z")]})
    clean(tmp_path)
    assert data_records(tmp_path) == [(1, _MD5_B, b"2"), (2, b"z", b"v")]


# The classic 128-byte MD5 collision pair (Wang & Yu, 2004).
_MD5_A = bytes.fromhex(
    "d131dd02c5e6eec4693d9a0698aff95c2fcab58712467eab4004583eb8fb7f8955ad340609f4b30283e488832571415a085125e8f7cdc99fd9"
    "1dbdf280373c5bd8823e3156348f5bae6dacd436c919c6dd53e2b487da03fd02396306d248cda0e99f33420f577ee8ce54b67080a80d1ec6"
    "9821bcb6a8839396f9652b6ff72a70"
)
_MD5_B = bytes.fromhex(
    "d131dd02c5e6eec4693d9a0698aff95c2fcab50712467eab4004583eb8fb7f8955ad340609f4b30283e4888325f1415a085125e8f7cdc99fd9"
    "1dbd7280373c5bd8823e3156348f5bae6dacd436c919c6dd53e23487da03fd02396306d248cda0e99f33420f577ee8ce54b67080280d1ec6"
    "9821bcb6a8839396f965ab6ff72a70"
)
