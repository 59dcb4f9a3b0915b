"""Kafka's log cleaner: transactions and their markers (spec cleaner-and-retention §6) and producers' last
batches (R2.1), on real segment files; how the cases are built and checked: ``test_cleaner``.
"""

from __future__ import annotations

import pytest

from kafka_log_core.format import compression, record_batch
from kafka_log_core.format.record_batch import Record
from kafka_log_core.settings.config import LogConfig
from tests.logbuild import TS, batch, marker, write_segment
from tests.rules.cleaner_harness import (
    BROKER,
    DAY,
    FORGET_PRODUCERS,
    KEEP_PRODUCERS,
    NOW,
    batches,
    clean,
    data_keys,
    data_offsets,
    data_records,
    empty_batch,
    last_offsets,
    last_sequences,
    layout,
    marker_offsets,
    part,
    segment_bases,
    shape,
    single,
    tiny_map,
    txn,
    txnindex,
    write_txnindex,
)


# ====================================================================== §6: transactions and markers
def test_basic_transaction_aware_cleaning(tmp_path):
    # LogCleanerTest.testBasicTransactionAwareCleaning
    layout(tmp_path, {
        0: [
            txn(0, [1, 2], pid=1), txn(2, [2, 3], pid=2), txn(4, [3, 4], pid=1),
            marker(6, False, 1), marker(7, True, 2), txn(8, [2], pid=1), marker(9, True, 1),
        ],
        10: [],
    })  # fmt: skip
    write_txnindex(part(tmp_path), 0, [(1, 0, 6, 2)])
    clean(tmp_path)
    # Map (aborted batches skipped): 2->8, 3->3. Producer 1's aborted batches 0..1 and 4..5 go whole; 2@2 is
    # superseded; the ABORT marker stays (its data was seen this pass) and so does its index entry.
    assert (data_keys(tmp_path), data_offsets(tmp_path)) == (["3", "2"], [3, 8])
    assert marker_offsets(tmp_path) == [6, 7, 9]
    assert shape(tmp_path) == [(2, 3, [3]), (6, 6, [6]), (7, 7, [7]), (8, 8, [8]), (9, 9, [9])]
    assert txnindex(part(tmp_path)) == {0: [(1, 0, 6, 2)]}


def test_multi_pass_segment_cleaning_with_aborted_transactions(tmp_path):
    # LogCleanerTest.testMultiPassSegmentCleaningWithAbortedTransactions: a 3-key map, several passes.
    cfg = LogConfig(cleanup_policy=frozenset({"compact"}), delete_retention_ms=50_000)
    layout(tmp_path, {
        0: [
            txn(0, [1, 2], pid=1), txn(2, [2, 3], pid=2), txn(4, [3, 4], pid=1), marker(6, True, 1),
            marker(7, True, 2), txn(8, [2, 3], pid=1), marker(10, False, 1), txn(11, [4, 5], pid=2),
            txn(13, [5, 6], pid=1), marker(15, True, 1), marker(16, False, 2), txn(17, [6, 7], pid=2),
            marker(19, True, 2),
        ],
        20: [],
    })  # fmt: skip
    aborted = [(1, 8, 10, 11), (2, 11, 16, 17)]
    write_txnindex(part(tmp_path), 0, aborted)

    def all_offsets():
        return [r.offset for b in batches(tmp_path) for r in b.records]

    # Pass 1: 1@0, 2@1 -> 2@2, 3@3 fill the map; 3@4 stops it: L = 3. Aborted data goes, markers stay.
    assert clean(tmp_path, cfg=cfg, first_dirty=0, offset_map=tiny_map(3)).end_offset == 4
    assert [b.base_offset for b in batches(tmp_path)] == [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    assert all_offsets() == [0, 2, 3, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    assert txnindex(part(tmp_path)) == {0: aborted}

    # Pass 2 (from 4): no aborted data is left, so both ABORT markers get a horizon and lose their index
    # entries; 3@3 is superseded by 3@4.
    assert clean(tmp_path, cfg=cfg, offset_map=tiny_map(3)).end_offset == 14
    assert [b.base_offset for b in batches(tmp_path)] == [0, 2, 4, 6, 7, 10, 13, 15, 16, 17, 19]
    assert all_offsets() == [0, 2, 4, 5, 6, 7, 10, 13, 14, 15, 16, 17, 18, 19]
    assert txnindex(part(tmp_path)) == {}
    assert [b.base_timestamp for b in batches(tmp_path) if b.has_horizon] == [NOW + 50_000, NOW + 50_000]

    # Pass 3 (from 14) at the horizon: the ABORT markers at 10 and 16 go; 6@14 is superseded by 6@17.
    assert clean(tmp_path, NOW + 50_000, cfg, offset_map=tiny_map(3)).end_offset == 20
    assert [b.base_offset for b in batches(tmp_path)] == [0, 2, 4, 6, 7, 13, 15, 17, 19]
    assert all_offsets() == [0, 2, 4, 5, 6, 7, 13, 15, 17, 18, 19]
    assert txnindex(part(tmp_path)) == {}


def test_commit_marker_removal(tmp_path):
    # LogCleanerTest.testCommitMarkerRemoval (re-cleaning from 0 where Kafka's test reuses its fake map).
    layout(tmp_path, {0: [txn(0, [1], pid=1), txn(1, [2, 3], pid=1), marker(3, True, 1), txn(4, [2], pid=1),
                          marker(5, True, 1)], 6: []})  # fmt: skip
    clean(tmp_path, broker=KEEP_PRODUCERS)
    # The commit at 3 stays: its transaction's batches were read in this pass (2@1 is superseded).
    assert (data_keys(tmp_path), data_offsets(tmp_path), marker_offsets(tmp_path)) == (
        ["1", "3", "2"],
        [0, 2, 4],
        [3, 5],
    )

    write_segment(part(tmp_path), 6, [txn(6, [1, 3], pid=1), marker(8, True, 1)])
    write_segment(part(tmp_path), 9, [])
    clean(tmp_path, broker=KEEP_PRODUCERS)  # from 6: 1@0 and 3@2 go; the commit at 3 still saw them
    assert (data_keys(tmp_path), data_offsets(tmp_path), marker_offsets(tmp_path)) == (
        ["2", "1", "3"],
        [4, 6, 7],
        [3, 5, 8],
    )

    clean(tmp_path, broker=KEEP_PRODUCERS, first_dirty=0)  # no data of its transaction left: horizon
    commit = batches(tmp_path)[0]
    assert (commit.is_control, commit.has_horizon, commit.base_timestamp) == (True, True, NOW + DAY)
    clean(tmp_path, NOW + DAY - 1, broker=KEEP_PRODUCERS, first_dirty=0)
    assert marker_offsets(tmp_path) == [3, 5, 8]
    clean(tmp_path, NOW + DAY, broker=KEEP_PRODUCERS, first_dirty=0)  # horizon <= now: removed
    assert (data_offsets(tmp_path), marker_offsets(tmp_path)) == ([4, 6, 7], [5, 8])


def test_abort_marker_removal(tmp_path):
    # LogCleanerTest.testAbortMarkerRemoval
    layout(tmp_path, {0: [txn(0, [1], pid=1), txn(1, [2, 3], pid=1), marker(3, False, 1), txn(4, [3], pid=1),
                          marker(5, True, 1)], 6: []})  # fmt: skip
    write_txnindex(part(tmp_path), 0, [(1, 0, 3, 0)])
    clean(tmp_path)
    assert (data_keys(tmp_path), data_offsets(tmp_path), marker_offsets(tmp_path)) == (["3"], [4], [3, 5])
    assert txnindex(part(tmp_path)) == {0: [(1, 0, 3, 0)]}

    clean(tmp_path, first_dirty=0)  # the aborted data is gone: the marker gets a horizon, the entry goes
    assert marker_offsets(tmp_path) == [3, 5]
    assert [(b.base_offset, b.base_timestamp) for b in batches(tmp_path) if b.has_horizon] == [(3, NOW + DAY)]
    assert txnindex(part(tmp_path)) == {}

    clean(tmp_path, NOW + DAY, broker=KEEP_PRODUCERS, first_dirty=0)
    assert (data_offsets(tmp_path), marker_offsets(tmp_path)) == ([4], [5])


def test_commit_marker_retention_with_empty_batch(tmp_path):
    # LogCleanerTest.testCommitMarkerRetentionWithEmptyBatch: empty batches of active producers.
    d = part(tmp_path)
    layout(tmp_path, {
        0: [txn(0, [2, 3], pid=1)],
        2: [txn(2, [2, 3], pid=2), marker(4, True, 2)],
        5: [single(5, "2", "2"), single(6, "3", "3"), marker(7, True, 1)],
        8: [],
    })  # fmt: skip
    run = dict(broker=KEEP_PRODUCERS)
    for _ in range(2):  # the empty batches stay while they hold their producers' last sequence
        clean(tmp_path, first_dirty=0, **run)
        assert (data_keys(tmp_path), marker_offsets(tmp_path)) == (["2", "3"], [4, 7])
        assert last_offsets(tmp_path) == [1, 3, 4, 5, 6, 7]
        empties = [b for b in batches(tmp_path) if b.count == 0]
        assert [(b.producer_id, b.is_transactional, b.base_offset, b.last_offset) for b in empties] == [
            (1, True, 0, 1), (2, True, 2, 3),
        ]  # fmt: skip

    write_segment(d, 8, [txn(8, [1], pid=2), marker(9, True, 2)])
    write_segment(d, 10, [])
    clean(tmp_path, first_dirty=8, **run)  # producer 2's last batch is now 8: its empty batch goes
    assert (data_keys(tmp_path), marker_offsets(tmp_path)) == (["2", "3", "1"], [4, 7, 9])
    assert last_offsets(tmp_path) == [1, 4, 5, 6, 7, 8, 9]
    assert not batches(tmp_path)[1].has_horizon  # the commit at 4 saw its (empty) batch this pass

    clean(tmp_path, first_dirty=0, **run)  # first pass: horizon on the commit at 4
    clean(tmp_path, NOW + DAY + 1, first_dirty=0, **run)  # second pass: it goes
    assert (data_keys(tmp_path), marker_offsets(tmp_path)) == (["2", "3", "1"], [7, 9])
    assert last_offsets(tmp_path) == [1, 5, 6, 7, 8, 9]


def test_abort_marker_retention_with_empty_batch(tmp_path):
    # LogCleanerTest.testAbortMarkerRetentionWithEmptyBatch
    d = part(tmp_path)
    layout(tmp_path, {0: [txn(0, [2, 3], pid=1), marker(2, False, 1)], 3: []})
    write_txnindex(d, 0, [(1, 0, 2, 0)])
    run = dict(broker=KEEP_PRODUCERS, first_dirty=0)
    for now in (NOW, NOW, NOW + DAY + 1):
        clean(tmp_path, now, **run)
        # The aborted batch is producer 1's last: kept empty; reading it keeps the ABORT marker and its entry.
        assert (data_records(tmp_path), marker_offsets(tmp_path), last_offsets(tmp_path)) == ([], [2], [1, 2])
        assert txnindex(d) == {0: [(1, 0, 2, 0)]}
        assert not any(b.has_horizon for b in batches(tmp_path))

    write_segment(d, 3, [txn(3, [1], pid=1), marker(4, True, 1)])
    write_segment(d, 5, [])
    clean(
        tmp_path, NOW + DAY + 1, **run
    )  # no longer the last batch: the empty batch goes, the marker not yet
    assert (data_offsets(tmp_path), marker_offsets(tmp_path), last_offsets(tmp_path)) == (
        [3],
        [2, 4],
        [2, 3, 4],
    )
    assert txnindex(d) == {0: [(1, 0, 2, 0)]}

    clean(tmp_path, NOW + DAY + 1, **run)  # nothing of the transaction left: horizon, index entry dropped
    assert txnindex(d) == {}
    clean(tmp_path, NOW + 2 * DAY + 1, **run)
    assert (data_offsets(tmp_path), marker_offsets(tmp_path), last_offsets(tmp_path)) == ([3], [4], [3, 4])


def test_marker_of_an_active_producer_is_kept_as_an_empty_control_batch(tmp_path):
    # LogCleanerTest.testCleanEmptyControlBatch (first part): spec R2.1 for a producer whose last record is
    # a marker (no data offset): the marker's records go at the horizon, its header stays.
    layout(tmp_path, {0: [marker(0, True, 1), single(1, "2", "2"), single(2, "3", "3")], 3: []})
    clean(tmp_path, broker=KEEP_PRODUCERS)
    assert batches(tmp_path)[0].has_horizon
    clean(tmp_path, NOW + DAY + 1, broker=KEEP_PRODUCERS, first_dirty=0)
    empty = batches(tmp_path)[0]
    assert (empty.base_offset, empty.last_offset, empty.count, empty.attributes) == (0, 0, 0, 0x30)
    assert (empty.base_timestamp, empty.max_timestamp) == (-1, TS)
    assert (empty.producer_id, empty.producer_epoch, empty.base_sequence) == (1, 0, -1)
    assert (last_offsets(tmp_path), data_offsets(tmp_path)) == ([0, 1, 2], [1, 2])


def test_clean_empty_control_batch(tmp_path):
    # LogCleanerTest.testCleanEmptyControlBatch (second part), spec X4: a control batch without records is
    # discardable and, once its producer is no longer in the producer table, it goes.
    layout(tmp_path, {
        0: [empty_batch(0, 0, pid=1, epoch=0, txn=True, control=True), single(1, "2", "2"), single(2, "3", "3")],
        3: [],
    })  # fmt: skip
    clean(tmp_path)
    assert last_offsets(tmp_path) == [1, 2]


def test_cleaning_with_keys_conflicting_with_txn_marker_keys(tmp_path):
    # LogCleanerTest.testCleaningWithKeysConflictingWithTxnMarkerKeys: control records never enter the map
    # and are never deduplicated by key.
    commit_key = record_batch.control_record_key(record_batch.CONTROL_COMMIT)
    layout(tmp_path, {0: [
        txn(0, [1], pid=1), marker(1, True, 1),
        batch(2, [(commit_key, "foo")], pid=2, epoch=0, seq=0, txn=True), marker(3, True, 2),
    ], 4: []})  # fmt: skip
    clean(tmp_path)
    assert (last_offsets(tmp_path), marker_offsets(tmp_path), data_offsets(tmp_path)) == (
        [0, 1, 2, 3],
        [1, 3],
        [0, 2],
    )


def test_aborted_transaction_spanning_segments(tmp_path):
    # LogCleanerTest.testAbortedTransactionSpanningSegments, with the two segments in separate groups.
    cfg = LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=1024 * 1024)
    big = "x" * 600_000
    d = part(tmp_path)
    layout(tmp_path, {
        0: [batch(0, [("1", big)], pid=1, epoch=0, seq=0, txn=True)],
        1: [single(1, "y", big), marker(2, False, 1)],
        3: [],
    })  # fmt: skip
    write_txnindex(d, 1, [(1, 0, 2, 0)])

    result = clean(tmp_path, cfg=cfg)
    # Group [0]: the aborted batch is producer 1's last -> kept empty. Group [1]: the marker saw that batch in
    # this round (one tracker for all groups) -> kept, with its entry in the new segment 1's .txnindex.
    assert (result.groups, segment_bases(tmp_path)) == (2, [0, 1, 3])
    assert shape(tmp_path) == [(0, 0, []), (1, 1, [1]), (2, 2, [2])]
    assert txnindex(d) == {1: [(1, 0, 2, 0)]}

    result = clean(tmp_path, NOW + 10 * DAY, cfg, KEEP_PRODUCERS, first_dirty=0)  # both now fit one group
    assert (result.groups, segment_bases(tmp_path)) == (1, [0, 3])
    assert shape(tmp_path) == [(0, 0, []), (1, 1, [1]), (2, 2, [2])]
    assert txnindex(d) == {0: [(1, 0, 2, 0)]}


def test_committed_transaction_spanning_segments(tmp_path):
    # LogCleanerTest.testCommittedTransactionSpanningSegments
    layout(tmp_path, {0: [txn(0, [1], pid=1)], 1: [marker(1, True, 1)], 2: []})
    for now in (NOW, NOW + DAY + 1):
        clean(tmp_path, now, broker=KEEP_PRODUCERS, first_dirty=0)
        assert (data_offsets(tmp_path), marker_offsets(tmp_path), last_offsets(tmp_path)) == (
            [0],
            [1],
            [0, 1],
        )
        assert not any(b.has_horizon for b in batches(tmp_path))


def test_other_control_records_are_kept_forever(tmp_path):
    # Spec X4: control types other than ABORT/COMMIT are never discardable.
    leader_change = record_batch.build_batch(
        1, [Record(1, TS, record_batch.control_record_key(2), b"\x00\x00\x00\x00")], is_control=True
    )
    layout(tmp_path, {0: [single(0, "a", "1"), leader_change, single(2, "a", "2")], 3: []})
    for now in (NOW, NOW + 10 * DAY):
        clean(tmp_path, now, first_dirty=0)
        assert [b.raw for b in batches(tmp_path)] == [leader_change, single(2, "a", "2")]


# ============================================================================ R2.1: producers' last batches
@pytest.mark.parametrize(("broker", "expected_last_offsets"), [(BROKER, [1, 3, 4]), (FORGET_PRODUCERS, [3, 4])],
                         ids=["producer-active", "producer-expired"])  # fmt: skip
def test_log_cleaner_retains_producer_last_sequence(tmp_path, broker, expected_last_offsets):
    # LogCleanerTest.testLogCleanerRetainsProducerLastSequence; DefaultRecordBatchTest.testWriteEmptyHeader.
    layout(tmp_path, {0: [
        single(0, "0", "0"),
        batch(1, [("0", "1")], pid=1, epoch=0, seq=0, codec=compression.GZIP, partition_leader_epoch=4),
        batch(2, [("0", "2")], pid=2, epoch=0, seq=0),
        batch(3, [("0", "3")], pid=3, epoch=0, seq=0),
        batch(4, [("1", "1")], pid=2, epoch=0, seq=1),
    ], 5: []})  # fmt: skip
    clean(tmp_path, broker=broker)
    # Map 0->3, 1->4. Producer 1's only batch loses its record but is its last batch: kept header-only
    # (codec none, baseTimestamp -1, same offsets/sequence/epoch/leader epoch) while the producer is active.
    assert last_offsets(tmp_path) == expected_last_offsets
    assert (data_keys(tmp_path), data_offsets(tmp_path)) == (["0", "1"], [3, 4])
    if broker is BROKER:
        assert last_sequences(tmp_path) == {1: 0, 2: 1, 3: 0}
        empty = batches(tmp_path)[0]
        assert (empty.count, empty.attributes, empty.base_timestamp, empty.max_timestamp) == (0, 0, -1, TS)
        assert (empty.producer_id, empty.producer_epoch, empty.base_sequence, empty.leader_epoch) == (
            1,
            0,
            0,
            4,
        )


def test_log_cleaner_retains_last_sequence_even_if_transaction_aborted(tmp_path):
    # LogCleanerTest.testLogCleanerRetainsLastSequenceEvenIfTransactionAborted
    d = part(tmp_path)
    layout(
        tmp_path, {0: [txn(0, [1], pid=1, seq=0), txn(1, [2, 3], pid=1, seq=1), marker(3, False, 1)], 4: []}
    )
    write_txnindex(d, 0, [(1, 0, 3, 0)])
    clean(tmp_path, first_dirty=0)
    assert (last_offsets(tmp_path), last_sequences(tmp_path)) == ([2, 3], {1: 2})
    assert (data_records(tmp_path), marker_offsets(tmp_path)) == ([], [3])

    write_segment(d, 4, [txn(4, [1, 5], pid=1, seq=3), marker(6, True, 1)])
    write_segment(d, 7, [])
    clean(tmp_path, first_dirty=0)
    assert (last_offsets(tmp_path), last_sequences(tmp_path)) == ([3, 5, 6], {1: 4})
    assert (data_keys(tmp_path), data_offsets(tmp_path), marker_offsets(tmp_path)) == (
        ["1", "5"],
        [4, 5],
        [3, 6],
    )
    assert txnindex(d) == {0: [(1, 0, 3, 0)]}


def test_duplicate_check_after_cleaning(tmp_path):
    # LogCleanerTest.testDuplicateCheckAfterCleaning: last offsets and sequences survive in the headers.
    def idempotent(base, keys, pid):
        return batch(base, [(str(k), str(k)) for k in keys], pid=pid, epoch=0, seq=0)

    d = part(tmp_path)
    layout(
        tmp_path,
        {0: [idempotent(0, [1, 2, 3], 1), idempotent(3, [3, 1, 4], 2), idempotent(6, [1, 4], 3)], 8: []},
    )
    clean(tmp_path)
    assert (last_offsets(tmp_path), last_sequences(tmp_path)) == ([2, 5, 7], {1: 2, 2: 2, 3: 1})
    assert (data_keys(tmp_path), data_offsets(tmp_path)) == (["2", "3", "1", "4"], [1, 3, 6, 7])

    write_segment(d, 8, [idempotent(8, [2], 4)])
    write_segment(d, 9, [])
    clean(tmp_path)
    assert (last_offsets(tmp_path), last_sequences(tmp_path)) == ([2, 5, 7, 8], {1: 2, 2: 2, 3: 1, 4: 0})
    assert (data_keys(tmp_path), data_offsets(tmp_path)) == (["3", "1", "4", "2"], [3, 6, 7, 8])


def test_empty_batch_removal_with_sequence_reuse(tmp_path):
    # LogCleanerTest.testEmptyBatchRemovalWithSequenceReuse: "last batch" is decided by offset, not sequence.
    layout(tmp_path, {0: [
        txn(0, [1], pid=1, seq=0), marker(1, True, 1), txn(2, [2], pid=1, seq=0), marker(3, True, 1),
        single(4, "1", "1"), single(5, "2", "1"),
    ], 6: []})  # fmt: skip
    clean(tmp_path, broker=KEEP_PRODUCERS)
    assert (marker_offsets(tmp_path), data_offsets(tmp_path), last_offsets(tmp_path)) == (
        [1, 3],
        [4, 5],
        [1, 2, 3, 4, 5],
    )
    clean(tmp_path, broker=KEEP_PRODUCERS, first_dirty=0)
    clean(tmp_path, NOW + DAY + 1, broker=KEEP_PRODUCERS, first_dirty=0)
    assert (marker_offsets(tmp_path), data_offsets(tmp_path), last_offsets(tmp_path)) == (
        [3],
        [4, 5],
        [2, 3, 4, 5],
    )


@pytest.mark.parametrize("broker", [BROKER, FORGET_PRODUCERS], ids=["producer-active", "producer-expired"])
def test_empty_batch_retention_and_deletion(tmp_path, broker):
    # MemoryRecordsTest.testEmptyBatchRetention / testEmptyBatchDeletion
    empty = empty_batch(0, 2, pid=9, epoch=3, seq=7)
    layout(tmp_path, {0: [empty, single(3, "a", "1")], 4: []})
    clean(tmp_path, broker=broker)
    if broker is BROKER:
        assert batches(tmp_path)[0].raw == empty
    else:
        assert last_offsets(tmp_path) == [3]
