"""`kafka-log-jobs dump` on indexes, transaction indexes and producer snapshots, as Kafka 4.x's
kafka-dump-log prints them (how the expected lines are made: ``test_dump``).
"""

from __future__ import annotations

import struct

import pytest

from kafka_log_core.format import offset_index, record_batch, time_index, txn_index
from kafka_log_core.format.offset_index import OffsetPosition
from kafka_log_core.format.producer_snapshot import ProducerSnapshotEntry, encode_producer_snapshot
from kafka_log_core.format.record_batch import Record
from kafka_log_core.format.time_index import TimestampOffset
from kafka_log_core.javacompat import JavaHashMap, java_string_hash
from tests.tools.dump_harness import (
    E8,
    E9_EMPTY,
    E9_ONE,
    TS,
    run_dump,
    segment_name,
    write,
)


# ---------------------------------------------------------------------------------------------- indexes
@pytest.fixture
def indexed_segment(tmp_path):
    """Four batches at base offset 0 and the index entries the broker would write with a 100-byte interval."""
    batches = [
        record_batch.build_batch(0, [Record(0, TS + 1000, b"k", b"v")]),
        record_batch.build_batch(
            1, [Record(1, TS + 1005, b"k", b"v" * 40), Record(2, TS + 1002, b"k", b"w")]
        ),
        record_batch.build_batch(3, [Record(3, TS + 1003, b"k", b"v" * 40)]),
        record_batch.build_batch(4, [Record(4 + i, TS + 1010 - i, b"k", b"v" * 30) for i in range(6)]),
    ]
    positions = [sum(map(len, batches[:i])) for i in range(4)]
    log = write(tmp_path, segment_name(0, ".log"), b"".join(batches))
    return log, positions


def test_offset_index_lists_offset_and_position_per_entry(tmp_path, indexed_segment):
    log, pos = indexed_segment
    index = log.with_suffix(".index")
    offset_index.write_offset_index(index, 0, [OffsetPosition(2, pos[1]), OffsetPosition(9, pos[3])])
    result = run_dump("--files", index)
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.splitlines() == [
        f"Dumping {index}",
        f"offset: 2 position: {pos[1]}",
        f"offset: 9 position: {pos[3]}",
    ]


def test_verify_index_only_reports_entries_whose_batch_ends_elsewhere(tmp_path, indexed_segment):
    log, pos = indexed_segment
    index = log.with_suffix(".index")
    # Entry offsets must be the batch's last offset: 1 and 4 are first offsets of their batches.
    offset_index.write_offset_index(
        index, 0, [OffsetPosition(1, pos[1]), OffsetPosition(3, pos[2]), OffsetPosition(4, pos[3])]
    )
    result = run_dump("--files", index, "--verify-index-only")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [f"Dumping {index}"]
    assert result.stderr.splitlines() == [
        f"Mismatches in :{index}",
        "  Index offset: 4, log offset: 9",  # Kafka lists them from the highest index offset down
        "  Index offset: 1, log offset: 2",
    ]


def test_index_stops_at_a_zero_entry_after_the_first(tmp_path, indexed_segment):
    log, pos = indexed_segment
    index = write(tmp_path, segment_name(0, ".index"), struct.pack(">ii", 2, pos[1]) + bytes(16))
    assert run_dump("--files", index).stdout.splitlines() == [
        f"Dumping {index}",
        f"offset: 2 position: {pos[1]}",
    ]


def test_index_sanity_check_prints_kafkas_verdicts(tmp_path, indexed_segment):
    log, pos = indexed_segment
    index, times = log.with_suffix(".index"), log.with_suffix(".timeindex")
    index.write_bytes(b"")
    times.write_bytes(b"")
    result = run_dump("--files", f"{index},{times}", "--index-sanity-check")
    assert result.stdout.splitlines() == [
        f"Dumping {index}",
        f"{index} is empty.",
        f"Dumping {times}",
        f"{times} passed sanity check.",
    ]
    offset_index.write_offset_index(index, 0, [OffsetPosition(2, pos[1])])
    assert (
        run_dump("--files", index, "--index-sanity-check").stdout.splitlines()[1]
        == f"{index} passed sanity check."
    )


def test_index_failing_the_sanity_check_is_an_error(tmp_path, indexed_segment):
    log, pos = indexed_segment
    index = write(tmp_path, segment_name(0, ".index"), struct.pack(">ii", 2, pos[1]) + b"\x00\x00\x00")
    result = run_dump("--files", index, "--index-sanity-check")
    assert result.exit_code == 1
    (error,) = result.stderr.splitlines()
    assert error.startswith(f"error: {index} at position 8: ") and "11 bytes" in error


def test_index_entry_pointing_past_the_log_is_an_error_naming_the_entry(tmp_path, indexed_segment):
    log, pos = indexed_segment
    index = log.with_suffix(".index")
    offset_index.write_offset_index(
        index, 0, [OffsetPosition(2, pos[1]), OffsetPosition(9, log.stat().st_size + 8)]
    )
    result = run_dump("--files", index)
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [f"Dumping {index}", f"offset: 2 position: {pos[1]}"]
    (error,) = result.stderr.splitlines()
    assert error.startswith(f"error: {index} at position 8: entry 1 (offset 9)")


def test_time_index_lists_timestamp_and_offset_per_entry(tmp_path, indexed_segment):
    log, pos = indexed_segment
    offset_index.write_offset_index(log.with_suffix(".index"), 0, [OffsetPosition(2, pos[1])])
    times = log.with_suffix(".timeindex")
    time_index.write_time_index(times, 0, [TimestampOffset(TS + 1005, 2), TimestampOffset(TS + 1010, 9)])
    result = run_dump("--files", times)
    assert result.exit_code == 0 and result.stderr == ""
    assert result.stdout.splitlines() == [
        f"Dumping {times}",
        f"timestamp: {TS + 1005} offset: 2",
        f"timestamp: {TS + 1010} offset: 9",
    ]


def test_verify_index_only_reports_time_index_mismatches_in_kafkas_words(tmp_path, indexed_segment):
    log, pos = indexed_segment
    offset_index.write_offset_index(log.with_suffix(".index"), 0, [OffsetPosition(2, pos[1])])
    entries = (
        struct.pack(">qi", TS + 1004, 2) + struct.pack(">qi", TS + 1003, 3) + struct.pack(">qi", TS + 1020, 5)
    )
    times = write(tmp_path, segment_name(0, ".timeindex"), entries)
    result = run_dump("--files", times, "--verify-index-only")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [f"Dumping {times}"]
    assert result.stderr.splitlines() == [
        f"Found timestamp mismatch in :{times}",
        f"  Index timestamp: {TS + 1004}, log timestamp: {TS + 1005}",
        f"Found out of order timestamp in :{times}",
        f"  Index timestamp: {TS + 1003}, Previously indexed timestamp: {TS + 1004}",
        f"The following indexed offsets are not found in :{times}",
        "Indexed offset: 5, found log offset: 9",
    ]


def test_reports_of_several_files_follow_javas_hash_map_order():
    # String.hashCode values anyone can check in Java: "Aa" and "BB" collide; one char hashes to itself.
    assert java_string_hash("hello") == 99162322
    assert java_string_hash("Aa") == java_string_hash("BB") == 2112
    assert java_string_hash("é") == 0xE9
    files: JavaHashMap[list] = JavaHashMap()
    for key in ["b", "BB", "a", "Aa"]:
        files.compute_if_absent(key, list)
    # 16 buckets, (h ^ h >>> 16) & 15: "Aa"/"BB" -> 0 (newest first), "a" = 97 -> 1, "b" = 98 -> 2.
    assert list(files.keys()) == ["Aa", "BB", "a", "b"]


def test_java_hash_map_order_changes_when_the_thirteenth_entry_makes_the_table_grow():
    files: JavaHashMap[list] = JavaHashMap()
    fillers = [chr(c) for c in range(ord("B"), ord("L") + 1)]  # 66..76: buckets 2..12 of 16 and of 32
    for key in ["a", "q", *fillers]:  # 97 and 113 share bucket 1 of 16
        files.compute_if_absent(key, list)
    assert list(files.keys()) == ["q", "a", *fillers]
    files.compute_if_absent("a", list)  # 13 > 3/4 of 16: the next call doubles the table first
    assert list(files.keys()) == ["a", *fillers, "q"]  # 113 & 31 = 17


def test_txn_index_lists_aborted_transactions(tmp_path):
    path = write(tmp_path, segment_name(150, ".txnindex"), E8 + E8[:20])  # a partial entry is ignored
    result = run_dump("--files", path)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        f"Dumping {path}",
        "version: 0 producerId: 1000 firstOffset: 150 lastOffset: 160 lastStableOffset: 161",
    ]


def test_txn_index_with_a_future_version_is_an_error_after_the_good_entries(tmp_path):
    later = txn_index.encode_txn_index([txn_index.AbortedTxn(1001, 170, 180, 181)])
    path = write(tmp_path, segment_name(150, ".txnindex"), E8 + b"\x01" + later[1:])
    result = run_dump("--files", path)
    assert result.exit_code == 1
    assert result.stdout.splitlines()[1:] == [
        "version: 0 producerId: 1000 firstOffset: 150 lastOffset: 160 lastStableOffset: 161"
    ]
    assert result.stderr.startswith(f"error: {path} at position 34: ")


def test_producer_snapshot_lists_each_producer(tmp_path):
    path = write(tmp_path, segment_name(205, ".snapshot"), E9_ONE)
    assert run_dump("--files", path).stdout.splitlines() == [
        f"Dumping {path}",
        f"producerId: 1000 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        f"lastTimestamp: {TS} firstSequence: 0 lastSequence: 4 lastOffset: 204 offsetDelta: 4 timestamp: {TS}",
    ]
    empty = write(tmp_path, segment_name(0, ".snapshot"), E9_EMPTY)
    assert run_dump("--files", empty).stdout.splitlines() == [f"Dumping {empty}"]


def test_producer_without_a_batch_has_no_sequence_fields_and_open_transaction_is_shown(tmp_path):
    entries = [
        ProducerSnapshotEntry(5, 3, 0, 1200, 2, TS, 7, 1100),
        ProducerSnapshotEntry(6, 0, -1, -1, 0, TS + 1, -1, -1),
    ]
    path = write(tmp_path, segment_name(1201, ".snapshot"), encode_producer_snapshot(entries))
    assert run_dump("--files", path).stdout.splitlines()[1:] == [
        f"producerId: 5 producerEpoch: 3 coordinatorEpoch: 7 currentTxnFirstOffset: OptionalLong[1100] "
        f"lastTimestamp: {TS} firstSequence: 2147483646 lastSequence: 0 lastOffset: 1200 offsetDelta: 2 timestamp: {TS}",
        f"producerId: 6 producerEpoch: 0 coordinatorEpoch: -1 currentTxnFirstOffset: OptionalLong.empty "
        f"lastTimestamp: {TS + 1}",
    ]


def test_corrupt_producer_snapshot_is_an_error(tmp_path):
    data = bytearray(E9_ONE)
    data[-1] ^= 0xFF
    path = write(tmp_path, segment_name(205, ".snapshot"), bytes(data))
    result = run_dump("--files", path)
    assert result.exit_code == 1
    assert result.stdout.splitlines() == [f"Dumping {path}"]
    assert result.stderr.startswith(f"error: {path} at position 2: ")
