"""Kafka's log cleaner: the files a round writes and the swap (spec cleaner-and-retention §7), on real
segment files; how the cases are built and checked: ``test_cleaner``.
"""

from __future__ import annotations

import os

import pytest

from kafka_log_core.errors import CorruptDataError
from kafka_log_core.format import compression, record_batch
from kafka_log_core.format.record_batch import Record
from kafka_log_core.rules import cleaner
from kafka_log_core.settings.config import LogConfig
from tests.logbuild import TS, batch, marker, write_segment
from tests.rules.cleaner_harness import (
    BIG,
    BROKER,
    COMPACT,
    DAY,
    KEEP_PRODUCERS,
    NOW,
    TXN_ENTRY,
    batches,
    clean,
    data_keys,
    data_offsets,
    data_records,
    files_of,
    layout,
    legacy,
    marker_offsets,
    mtime_ms,
    open_log,
    part,
    seg_file,
    segment_bases,
    shape,
    single,
    txn,
    txnindex,
    write_txnindex,
)


# ============================================================================== §7: files and the swap
def test_new_segment_files_take_the_mtime_of_the_last_source_segment(tmp_path):
    cfg = LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=1024 * 1024)
    big = "x" * 600_000
    d = part(tmp_path)
    mtimes = {0: TS + 3_000, 1: TS + 1_000, 2: TS + 2_000}
    write_segment(d, 0, [single(0, "a", big)], mtime_ms=mtimes[0])
    write_segment(d, 1, [single(1, "b", big)], mtime_ms=mtimes[1])
    write_segment(d, 2, [single(2, "c")], mtime_ms=mtimes[2])
    write_segment(d, 3, [])
    clean(tmp_path, cfg=cfg)  # groups [0] and [1, 2]
    assert segment_bases(tmp_path) == [0, 1, 3]
    for base, want in ((0, mtimes[0]), (1, mtimes[2])):
        assert [mtime_ms(seg_file(tmp_path, base, s)) for s in (".log", ".index", ".timeindex")] == [want] * 3


def test_size_trimmed_for_preallocated_and_compacted_topic(tmp_path):
    # LogCleanerTest.testSizeTrimmedForPreallocatedAndCompactedTopic
    cfg = LogConfig(cleanup_policy=frozenset({"compact"}), segment_bytes=1024 * 1024, preallocate=True)
    layout(tmp_path, {0: [single(i, str(i % 2), str(i % 2)) for i in range(5)], 5: []})
    clean(tmp_path, cfg=cfg, first_dirty=2)
    assert seg_file(tmp_path, 0, ".log").stat().st_size == sum(len(b.raw) for b in batches(tmp_path))
    assert data_offsets(tmp_path) == [3, 4]


def test_indexes_of_a_rewritten_segment_follow_the_broker_rule(tmp_path):
    # check_dir compares every .index/.timeindex with the recovery rule; here the interval makes entries.
    cfg = LogConfig(cleanup_policy=frozenset({"compact"}), index_interval_bytes=100)
    layout(tmp_path, {0: [batch(i, [(f"k{i % 7}", "v" * 40)], ts=TS + (i * 37) % 11) for i in range(30)],
                      30: []}, interval=100)  # fmt: skip
    clean(tmp_path, cfg=cfg)
    assert len(seg_file(tmp_path, 0, ".index").read_bytes()) >= 8 * 2  # premise: entries were written
    assert data_offsets(tmp_path) == list(range(23, 30))


def test_producer_snapshots_of_replaced_segment_bases_are_deleted(tmp_path):
    empty_snapshot = bytes.fromhex("0001 48674BC7 00000000")  # format spec E9
    d = part(tmp_path)
    layout(tmp_path, {0: [single(0, "a", "1")], 5: [single(5, "a", "2")], 10: [single(10, "b")]})
    for base in (5, 10):
        (d / f"{base:020d}.snapshot").write_bytes(empty_snapshot)
    clean(tmp_path)
    assert sorted(p.name for p in d.glob("*.snapshot")) == [f"{10:020d}.snapshot"]
    assert segment_bases(tmp_path) == [0, 10]


def test_large_message(tmp_path):
    # LogCleanerTest.testLargeMessage / testMessageLargerThanMaxMessageSize: batches larger than the I/O
    # buffers and than max.message.bytes are read whole.
    big = os.urandom(2 * 1024 * 1024)
    layout(tmp_path, {0: [single(0, "a", big), single(1, "a", "small"), single(2, "b", big)], 3: []})
    clean(tmp_path)
    assert data_records(tmp_path) == [(1, b"a", b"small"), (2, b"b", big)]


def test_corrupt_message_size_larger_than_bytes_available(tmp_path):
    # LogCleanerTest.testCorruptMessageSizeLargerThanBytesAvailable: refused, nothing written or renamed.
    layout(tmp_path, {0: [single(0, "a", "1"), single(1, "b", "1")[:-5]], 2: [single(2, "c")]})
    before = {p.name: p.read_bytes() for p in part(tmp_path).iterdir()}
    with pytest.raises(CorruptDataError, match=r"00000000000000000000\.log"):
        log = open_log(tmp_path)
        cleaner.clean_log(log, cleaner.plan_cleaning(log, COMPACT, BROKER, NOW), COMPACT, BROKER, NOW)
    assert {p.name: p.read_bytes() for p in part(tmp_path).iterdir()} == before


def test_stale_cleaned_files_of_a_group_base_are_replaced(tmp_path):
    # Spec W1: leftovers of an earlier attempt for the same base are deleted before writing.
    d = part(tmp_path)
    layout(tmp_path, {0: [single(0, "a", "1"), single(1, "a", "2")], 2: []})
    (d / f"{0:020d}.log.cleaned").write_bytes(b"stale")
    (d / f"{0:020d}.txnindex.cleaned").write_bytes(TXN_ENTRY.pack(0, 9, 0, 1, 0))
    clean(tmp_path)
    assert data_offsets(tmp_path) == [1]
    assert txnindex(d) == {}


def test_recleaning_a_clean_log_copies_every_batch_unchanged(tmp_path):
    layout(tmp_path, {0: [batch(0, [("a", "1"), ("b", "1")]), batch(2, [("a", "2"), ("c", "1")], codec=compression.LZ4)],
                      4: [single(4, "d")], 5: []})  # fmt: skip
    clean(tmp_path)
    before = files_of(part(tmp_path), 0)
    clean(tmp_path, NOW + 1, first_dirty=0)
    after = files_of(part(tmp_path), 0)
    assert {name: data for name, (data, _) in after.items()} == {
        name: data for name, (data, _) in before.items()
    }


@pytest.mark.parametrize(("abort_epoch", "after_first", "after_horizon"), [
    (0, [(0, 0, []), (1, 1, [1]), (2, 2, [2])], [(0, 0, []), (1, 1, [1]), (2, 2, [2])]),
    (1, [(1, 1, [1]), (2, 2, [2])], [(1, 1, []), (2, 2, [2])]),
], ids=["same-epoch", "epoch-bumped-by-the-marker"])  # fmt: skip
def test_last_record_of_a_producer_follows_its_epoch(tmp_path, abort_epoch, after_first, after_horizon):
    # Spec §11: a marker in the same epoch leaves lastDataOffset alone (the aborted batch stays as the
    # producer's last batch, and keeps its ABORT marker); a marker that bumps the epoch clears it, so the
    # marker itself is the producer's last record and survives its horizon as an empty control batch.
    d = part(tmp_path)
    layout(tmp_path, {0: [txn(0, [1], pid=1, seq=0), marker(1, False, 1, epoch=abort_epoch), single(2, "1", "x")],
                      3: []})  # fmt: skip
    write_txnindex(d, 0, [(1, 0, 1, 0)])
    run = dict(broker=KEEP_PRODUCERS, first_dirty=0)
    clean(tmp_path, **run)
    assert shape(tmp_path) == after_first
    clean(tmp_path, **run)
    clean(tmp_path, NOW + DAY, **run)
    assert shape(tmp_path) == after_horizon
    if abort_epoch == 1:
        empty = batches(tmp_path)[0]
        assert (empty.is_control, empty.producer_epoch, empty.attributes, empty.base_timestamp) == (
            True,
            1,
            0x30,
            -1,
        )


def test_deleted_batches_with_no_messages_read(tmp_path):
    # LogCleanerTest.testDeletedBatchesWithNoMessagesRead
    layout(tmp_path, {0: [txn(0, [1], pid=1), marker(1, False, 1), txn(2, [2], pid=1), txn(3, [2], pid=1),
                          marker(4, True, 1)], 5: []})  # fmt: skip
    write_txnindex(part(tmp_path), 0, [(1, 0, 1, 0)])
    run = dict(broker=KEEP_PRODUCERS, first_dirty=0)
    clean(tmp_path, **run)
    assert (data_keys(tmp_path), data_offsets(tmp_path), marker_offsets(tmp_path)) == (["2"], [3], [1, 4])
    clean(tmp_path, **run)
    clean(tmp_path, NOW + DAY + 1, **run)
    assert (data_keys(tmp_path), data_offsets(tmp_path), marker_offsets(tmp_path)) == (["2"], [3], [4])


def test_segment_with_offset_overflow_is_refused_without_changes(tmp_path):
    # LogCleanerTest.testSegmentWithOffsetOverflow: a legacy segment holding an offset beyond base + 2^31 - 1.
    # The broker splits such a segment and retries; we refuse the round and leave the directory as it was.
    d = part(tmp_path)
    d.mkdir(parents=True)
    (d / f"{0:020d}.log").write_bytes(legacy(0, "a", "1") + legacy(BIG + 5, "a", "2"))
    (d / f"{0:020d}.index").write_bytes(b"")
    (d / f"{0:020d}.timeindex").write_bytes(b"")
    write_segment(d, BIG + 6, [single(BIG + 6, "b")])
    before = {p.name: p.read_bytes() for p in d.iterdir()}
    log = open_log(tmp_path)
    with pytest.raises(CorruptDataError):
        cleaner.clean_log(log, cleaner.plan_cleaning(log, COMPACT, BROKER, NOW), COMPACT, BROKER, NOW)
    assert {p.name: p.read_bytes() for p in d.iterdir()} == before


def test_rebuilt_records_are_written_with_attributes_zero(tmp_path):
    # DefaultRecord.writeTo: "there are no used record attributes at the moment" -> 0 on every rewrite.
    odd = record_batch.build_batch(
        0, [Record(0, TS, b"a", b"1", attributes=0x01), Record(1, TS + 1, b"b", b"1", attributes=0x01)]
    )
    layout(tmp_path, {0: [odd, single(2, "a", "2")], 3: []})
    clean(tmp_path)
    rebuilt = batches(tmp_path)[0]
    assert rebuilt.offsets == [1]
    assert rebuilt.raw[61] < 0x80 and rebuilt.raw[62] == 0  # one-byte length varint, then the attributes
