"""PartitionWriter: the broker's roll rules, index upkeep, producer/transaction state and metadata files.

Expected layouts are recomputed here from first principles (batch positions parsed with plain struct,
the index rule applied naively) and records are read back with kafka-python's decoder, so nothing is
compared with the writer's own view of what it wrote.
"""

from __future__ import annotations

import json
import os
import random
import struct
from dataclasses import dataclass
from pathlib import Path

import pytest
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kafka_log_core.errors import CorruptRecordError, RefusedError, UsageError
from kafka_log_core.format import record_batch
from kafka_log_core.format.record_batch import CONTROL_ABORT, CONTROL_COMMIT, Header, Record
from kafka_log_core.log.index_builder import IndexBuilder
from kafka_log_core.log.log_dir import write_log_dir_checkpoints
from kafka_log_core.simulator.writer import PartitionWriter

T0 = 1_767_225_600_000
MAX_INT = 2**31 - 1


# ---------------------------------------------------------------------------------------------- helpers
@dataclass(frozen=True)
class RawBatch:
    position: int
    base_offset: int
    last_offset: int
    max_timestamp: int
    size: int


def layout(path: Path) -> list[RawBatch]:
    """Batches of a v2 .log, parsed with plain struct (baseOffset, batchLength, lastOffsetDelta, maxTimestamp)."""
    data = path.read_bytes()
    out, pos = [], 0
    while pos < len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        assert data[pos + 16] == 2
        (delta,) = struct.unpack_from(">i", data, pos + 23)
        (max_ts,) = struct.unpack_from(">q", data, pos + 35)
        out.append(RawBatch(pos, base, base + delta, max_ts, 12 + length))
        pos += 12 + length
    assert pos == len(data)
    return out


def seg(directory: Path, base: int, suffix: str) -> Path:
    return directory / f"{base:020d}{suffix}"


def bases(directory: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in directory.glob("*.log"))


def offset_entries(directory: Path, base: int) -> list[tuple[int, int]]:
    return list(struct.iter_unpack(">ii", seg(directory, base, ".index").read_bytes()))


def time_entries(directory: Path, base: int) -> list[tuple[int, int]]:
    return list(struct.iter_unpack(">qi", seg(directory, base, ".timeindex").read_bytes()))


def txn_entries(directory: Path, base: int) -> list[tuple[int, int, int, int, int]]:
    return list(struct.iter_unpack(">hqqqq", seg(directory, base, ".txnindex").read_bytes()))


def snapshot_entries(path: Path) -> list[tuple]:
    data = path.read_bytes()
    version, _crc, count = struct.unpack_from(">hIi", data)
    assert version == 1 and len(data) == 10 + 46 * count
    return list(struct.iter_unpack(">qhiqiqiq", data[10:]))


def kafka_python_records(directory: Path) -> list[tuple]:
    """(offset, timestamp, key, value, headers) of every data record, via kafka-python, CRCs checked."""
    out = []
    for log in sorted(directory.glob("*.log")):
        records = MemoryRecords(log.read_bytes())
        while (batch := records.next_batch()) is not None:
            assert batch.validate_crc()
            if not batch.is_control_batch:
                out += [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]
    return out


def rec(ts: int, key: bytes | None = b"k", value: bytes | None = b"v" * 20, headers=()) -> Record:
    return Record(-1, ts, key, value, tuple(headers))


def batch_size(n_records: int = 1, value_len: int = 20) -> int:
    return len(record_batch.build_batch(0, [Record(i, T0, b"k", b"v" * value_len) for i in range(n_records)]))


@pytest.fixture
def pdir(tmp_path: Path) -> Path:
    return tmp_path / "logs" / "topic-0"


# ---------------------------------------------------------------------------------------------- roll rules
@pytest.mark.parametrize(
    ("extra", "expected_bases"),
    [(0, [0, 3]), (-1, [0, 2, 4])],
    ids=["segment_bytes=3B holds 3", "segment_bytes=3B-1 holds 2"],
)
def test_rolls_when_size_exceeds_segment_bytes_minus_incoming(pdir, extra, expected_bases):
    size = batch_size()
    with PartitionWriter(pdir, segment_bytes=3 * size + extra) as w:
        for _ in range(5):
            w.append_records([rec(T0)], now_ms=T0)
    assert bases(pdir) == expected_bases
    for base in expected_bases:
        assert all(b.size == size for b in layout(seg(pdir, base, ".log")))
    assert seg(pdir, 0, ".log").stat().st_size == (expected_bases[1]) * size


def test_append_larger_than_segment_bytes_is_refused(pdir):
    with PartitionWriter(pdir, segment_bytes=batch_size() - 1) as w:
        with pytest.raises(RefusedError, match="exceeds segment.bytes"):
            w.append_records([rec(T0)], now_ms=T0)
        assert w.log_end_offset == 0


def test_batch_above_max_message_bytes_is_refused(pdir):
    with PartitionWriter(pdir, max_message_bytes=batch_size() - 1) as w:
        with pytest.raises(RefusedError, match="max.message.bytes"):
            w.append_records([rec(T0)], now_ms=T0)


def test_rolls_by_time_once_incoming_max_timestamp_is_past_segment_ms(pdir):
    with PartitionWriter(pdir, segment_ms=1000) as w:
        for ts in (T0, T0 + 400, T0 + 1000, T0 + 1001, T0 + 2001, T0 + 2002):
            w.append_records([rec(ts)], now_ms=T0)  # the clock does not matter when batches carry timestamps
    assert bases(pdir) == [0, 3, 5]
    assert [b.max_timestamp for b in layout(seg(pdir, 3, ".log"))] == [T0 + 1001, T0 + 2001]


def test_time_roll_subtracts_the_segments_jitter(pdir):
    with PartitionWriter(pdir, segment_ms=10_000, segment_jitter_ms=5_000, random_seed=7) as w:
        jitter = w.active_segment_jitter_ms
        assert 0 < jitter < 5_000
        w.append_records([rec(T0)], now_ms=T0)
        w.append_records([rec(T0 + 10_000 - jitter)], now_ms=T0)
        assert w.segment_bases == [0]
        w.append_records([rec(T0 + 10_000 - jitter + 1)], now_ms=T0)
        assert w.segment_bases == [0, 2]


def test_jitter_is_kafkas_formula_and_deterministic_with_random_seed(tmp_path):
    def jitters(seed: int, jitter_ms: int, segment_ms: int) -> list[int]:
        with PartitionWriter(
            tmp_path / f"j{seed}x{jitter_ms}-0",
            segment_ms=segment_ms,
            segment_jitter_ms=jitter_ms,
            random_seed=seed,
        ) as w:
            found = []
            for _ in range(5):
                found.append(w.active_segment_jitter_ms)
                w.append_records([rec(T0)], now_ms=T0)
                w.roll(now_ms=T0)
            return found

    def expected(seed: int, jitter_ms: int, segment_ms: int) -> list[int]:
        rng = random.Random(seed)
        rng.getrandbits(128)  # the topic id is drawn first
        values = []
        for _ in range(5):
            n = rng.getrandbits(32)
            n = n - 2**32 if n >= 2**31 else n
            values.append((0 if n == -(2**31) else abs(n)) % min(jitter_ms, segment_ms))
        return values

    assert jitters(3, 5_000, 60_000) == expected(3, 5_000, 60_000)
    assert all(j < 1_000 for j in jitters(4, 50_000, 1_000))  # bounded by segment.ms too
    assert jitters(5, 0, 60_000) == [0] * 5


def test_time_roll_uses_the_clock_when_the_first_batch_has_no_timestamp(pdir):
    with PartitionWriter(pdir, segment_ms=1000) as w:
        w.append_records([rec(-1)], now_ms=T0)  # the segment is "created" by the first append's clock
        w.append_records([rec(-1)], now_ms=T0 + 1000)
        assert w.segment_bases == [0]
        w.append_records([rec(-1)], now_ms=T0 + 1001)
        assert w.segment_bases == [0, 2]


def test_compacted_topic_rolls_at_max_compaction_lag(pdir):
    with PartitionWriter(pdir, segment_ms=10_000, max_compaction_lag_ms=500) as w:
        for ts in (T0, T0 + 500, T0 + 501):
            w.append_records([rec(ts)], now_ms=T0)
        assert w.segment_bases == [0, 2]


def test_rolls_when_offset_index_is_full(pdir):
    # 40 bytes: 5 offset slots, 3 time slots (full at 2); constant timestamps keep the time index at 1 entry
    with PartitionWriter(pdir, segment_index_bytes=40, index_interval_bytes=0) as w:
        for _ in range(8):
            w.append_records([rec(T0)], now_ms=T0)
        assert [r.reason for r in w.rolls] == ["offset index full"]
    assert bases(pdir) == [0, 6]
    assert len(offset_entries(pdir, 0)) == 5
    assert time_entries(pdir, 0) == [(T0, 0)]


def test_rolls_when_time_index_is_full(pdir):
    # 48 bytes: 6 offset slots, 4 time slots, the last kept for the final entry -> full at 3
    with PartitionWriter(pdir, segment_index_bytes=48, index_interval_bytes=0) as w:
        for i in range(6):
            w.append_records([rec(T0 + i)], now_ms=T0)
        assert [r.reason for r in w.rolls] == ["time index full"]
    assert bases(pdir) == [0, 4]
    positions = [b.position for b in layout(seg(pdir, 0, ".log"))]
    assert offset_entries(pdir, 0) == [(1, positions[1]), (2, positions[2]), (3, positions[3])]
    assert time_entries(pdir, 0) == [(T0 + 1, 1), (T0 + 2, 2), (T0 + 3, 3)]


def test_a_time_index_with_one_slot_gives_every_append_its_own_segment(pdir):
    # 16 bytes: one time slot, reserved for the final entry, so the index is always full; the empty first
    # segment is replaced in place (LocalLog.roll, KAFKA-6388) instead of leaving an empty segment behind
    with PartitionWriter(pdir, segment_index_bytes=16) as w:
        for i in range(3):
            w.append_records([rec(T0 + i)], now_ms=T0)
    assert bases(pdir) == [0, 1, 2]
    assert [time_entries(pdir, b) for b in (0, 1, 2)] == [[(T0, 0)], [(T0 + 1, 0)], [(T0 + 2, 0)]]


def test_rolls_when_the_relative_offset_would_overflow(pdir):
    with PartitionWriter(pdir) as w:
        w.append_records([rec(T0)], now_ms=T0)
        w.append_batch(record_batch.build_batch(MAX_INT, [Record(MAX_INT, T0, b"a", b"1")]), now_ms=T0)
        assert w.segment_bases == [0]  # relative offset 2^31-1 still fits
        w.append_batch(
            record_batch.build_batch(MAX_INT + 1, [Record(MAX_INT + 1, T0, b"b", b"2")]), now_ms=T0
        )
        assert w.segment_bases == [0, MAX_INT + 1]
        assert w.rolls[-1].reason == "offset overflow"
    assert offset_entries(pdir, MAX_INT + 1) == []
    assert [r[0] for r in kafka_python_records(pdir)] == [0, MAX_INT, MAX_INT + 1]


def test_legacy_message_set_rolls_to_last_offset_minus_int_max(pdir):
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1 << 20)
    builder.append(MAX_INT + 11, timestamp=T0, key=b"old", value=b"format")
    with PartitionWriter(pdir) as w:
        for _ in range(5):
            w.append_records([rec(T0)], now_ms=T0)
        assert w.append_batch(bytes(builder.build()), now_ms=T0) == (MAX_INT + 11, MAX_INT + 11)
        # the broker does not decompress legacy data to learn its first offset: base = last - (2^31 - 1)
        assert w.segment_bases == [0, 11]
        assert w.leader_epochs == []  # a legacy append clears the epoch cache
    assert (pdir / "leader-epoch-checkpoint").read_text() == "0\n0\n"


# ---------------------------------------------------------------------------------------------- indexes
def naive_indexes(batches: list[RawBatch], base: int, interval: int) -> tuple[list, list]:
    offsets, times = [], []
    last_indexed, max_ts, max_ts_offset = 0, -1, base
    for b in batches:
        if b.max_timestamp > max_ts:
            max_ts, max_ts_offset = b.max_timestamp, b.last_offset
        if b.position - last_indexed > interval:
            offsets.append((b.last_offset - base, b.position))
            last_indexed = b.position
            if max_ts > (times[-1][0] if times else -1):
                times.append((max_ts, max_ts_offset - base))
    if max_ts > (times[-1][0] if times else -1):
        times.append((max_ts, max_ts_offset - base))
    return offsets, times


def test_index_entries_follow_index_interval_bytes(pdir):
    rng = random.Random(11)
    with PartitionWriter(pdir, index_interval_bytes=300, segment_bytes=20_000) as w:
        for i in range(300):
            records = [
                rec(
                    T0 + i * 10 + rng.randrange(-50, 50),
                    b"k%d" % rng.randrange(9),
                    b"v" * rng.randrange(0, 200),
                )
                for _ in range(rng.randint(1, 4))
            ]
            w.append_records(records, now_ms=T0, codec=rng.choice([0, 0, 1, 3]))
    assert len(bases(pdir)) > 2
    for base in bases(pdir):
        batches = layout(seg(pdir, base, ".log"))
        want_offsets, want_times = naive_indexes(batches, base, 300)
        assert len(want_offsets) > 5
        assert offset_entries(pdir, base) == want_offsets
        assert time_entries(pdir, base) == want_times


def test_fresh_segments_match_the_recovery_index_rebuild(pdir):
    with PartitionWriter(pdir, index_interval_bytes=100, segment_bytes=3000) as w:
        for i in range(60):
            w.append_records([rec(T0 + (i * 37) % 500, value=b"x" * (i % 50))], now_ms=T0)
    for base in bases(pdir):
        builder = IndexBuilder(base, index_interval_bytes=100)
        for b in layout(seg(pdir, base, ".log")):
            builder.append(b.position, b.last_offset, b.max_timestamp)
        offsets, times = builder.finish()
        assert seg(pdir, base, ".index").read_bytes() == offsets.encode()
        assert seg(pdir, base, ".timeindex").read_bytes() == times.encode()


def test_roll_and_close_leave_trimmed_indexes_with_the_final_time_entry(pdir):
    with PartitionWriter(pdir, index_interval_bytes=0, segment_bytes=batch_size() * 3) as w:
        for ts in (T0 + 5, T0 + 1, T0 + 9, T0 + 2, T0 + 3):
            w.append_records([rec(ts)], now_ms=T0)
        assert seg(pdir, 3, ".index").stat().st_size == 0  # the active segment's indexes are written on close
    # segment 0: entries at batches 1 and 2; the max (T0+9, offset 2) is already the last entry
    assert offset_entries(pdir, 0) == [(1, batch_size()), (2, 2 * batch_size())]
    assert time_entries(pdir, 0) == [(T0 + 5, 0), (T0 + 9, 2)]
    # segment 3: only offset 4 is indexed, with the max so far (T0+3 at offset 4); the final entry adds nothing
    assert offset_entries(pdir, 3) == [(1, batch_size())]
    assert time_entries(pdir, 3) == [(T0 + 3, 1)]
    assert seg(pdir, 3, ".index").stat().st_size == 8
    assert seg(pdir, 3, ".timeindex").stat().st_size == 12


def test_final_time_entry_records_a_max_timestamp_that_was_never_indexed(pdir):
    with PartitionWriter(pdir, index_interval_bytes=10_000) as w:
        for ts in (T0, T0 + 50, T0 + 20):
            w.append_records([rec(ts)], now_ms=T0)
    assert offset_entries(pdir, 0) == []
    assert time_entries(pdir, 0) == [(T0 + 50, 1)]


# ---------------------------------------------------------------------------------------------- records
@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4], ids=["none", "gzip", "snappy", "lz4", "zstd"])
def test_written_segments_read_back_with_kafka_python(pdir, codec):
    rng = random.Random(codec)
    expected = []
    with PartitionWriter(pdir, segment_bytes=4000) as w:
        for i in range(80):
            records = []
            for j in range(rng.randint(1, 5)):
                key = None if rng.random() < 0.1 else b"key-%d" % rng.randrange(20)
                value = None if rng.random() < 0.1 else os.urandom(rng.randrange(0, 90))
                headers = (Header("h", b"%d" % j),) if j % 2 else ()
                records.append(Record(12345, T0 + i, key, value, headers))  # the offset given is ignored
            first, last = w.append_records(records, now_ms=T0 + i, codec=codec)
            assert (first, last) == (len(expected), len(expected) + len(records) - 1)
            expected += [
                (len(expected) + n, r.timestamp, r.key, r.value, [(h.key, h.value) for h in r.headers])
                for n, r in enumerate(records)
            ]
    assert len(bases(pdir)) > 2
    assert kafka_python_records(pdir) == expected


def test_log_append_time_stamps_the_batch_with_the_clock(pdir):
    with PartitionWriter(pdir) as w:
        w.append_records([rec(T0 - 5_000), rec(T0 - 4_000)], now_ms=T0, timestamp_type=1)
    batch = MemoryRecords(seg(pdir, 0, ".log").read_bytes()).next_batch()
    assert batch.timestamp_type == 1
    assert [r.timestamp for r in batch] == [T0, T0]
    assert time_entries(pdir, 0) == [(T0, 1)]


def test_append_batch_keeps_offsets_and_allows_gaps(pdir):
    with PartitionWriter(pdir) as w:
        w.append_records([rec(T0)], now_ms=T0)
        data = record_batch.build_batch(10, [Record(10, T0, b"a", b"1"), Record(12, T0, b"b", b"2")])
        assert w.append_batch(data, now_ms=T0) == (10, 12)
        assert w.log_end_offset == 13
        assert w.append_records([rec(T0)], now_ms=T0) == (13, 13)
    assert [r[0] for r in kafka_python_records(pdir)] == [0, 10, 12, 13]


def test_append_batch_below_log_end_offset_is_refused(pdir):
    with PartitionWriter(pdir) as w:
        w.append_records([rec(T0), rec(T0)], now_ms=T0)
        with pytest.raises(RefusedError, match="first offset 1 of the append is below the log end offset 2"):
            w.append_batch(record_batch.build_batch(1, [Record(1, T0, b"a", b"1")]), now_ms=T0)
        out_of_order = record_batch.build_batch(5, [Record(5, T0, b"a", b"1")]) + record_batch.build_batch(
            4, [Record(4, T0, b"a", b"1")]
        )
        with pytest.raises(RefusedError, match="out of order"):
            w.append_batch(out_of_order, now_ms=T0)
        assert w.log_end_offset == 2


def test_append_batch_with_a_bad_crc_is_refused(pdir):
    data = bytearray(record_batch.build_batch(0, [Record(0, T0, b"a", b"1")]))
    data[-1] ^= 0xFF
    with PartitionWriter(pdir) as w, pytest.raises(CorruptRecordError, match="CRC32C mismatch"):
        w.append_batch(bytes(data), now_ms=T0)


# ---------------------------------------------------------------------------------------------- reopening
def test_reopened_writer_continues_at_the_log_end_offset(pdir):
    settings = {"segment_bytes": batch_size() * 4, "index_interval_bytes": 0}
    with PartitionWriter(pdir, **settings) as w:
        for i in range(6):
            w.append_records([rec(T0 + i, value=b"a" * 20)], now_ms=T0)
    with PartitionWriter(pdir, **settings) as w:
        assert (w.log_end_offset, w.active_base_offset, w.active_segment_size) == (6, 4, 2 * batch_size())
        assert w.append_records([rec(T0 + 6)], now_ms=T0) == (6, 6)
        assert w.append_records([rec(T0 + 7)], now_ms=T0) == (7, 7)
        assert w.append_records([rec(T0 + 8)], now_ms=T0) == (8, 8)
    assert bases(pdir) == [0, 4, 8]
    assert [r[0] for r in kafka_python_records(pdir)] == list(range(9))


def test_reopened_segment_restarts_the_index_interval_like_the_broker(pdir):
    with PartitionWriter(pdir, index_interval_bytes=0) as w:
        for i in range(3):
            w.append_records([rec(T0 + i)], now_ms=T0)
    assert [o for o, _ in offset_entries(pdir, 0)] == [1, 2]
    with PartitionWriter(pdir, index_interval_bytes=0) as w:
        for i in range(3, 6):
            w.append_records([rec(T0 + i)], now_ms=T0)
    # a loaded segment starts with 0 bytes since the last entry: offset 3 (first after reopen) is skipped
    positions = {b.last_offset: b.position for b in layout(seg(pdir, 0, ".log"))}
    assert offset_entries(pdir, 0) == [
        (1, positions[1]),
        (2, positions[2]),
        (4, positions[4]),
        (5, positions[5]),
    ]
    assert time_entries(pdir, 0) == [(T0 + 1, 1), (T0 + 2, 2), (T0 + 4, 4), (T0 + 5, 5)]


def test_reopen_rebuilds_missing_indexes_by_the_recovery_rule(pdir):
    with PartitionWriter(pdir, index_interval_bytes=0) as w:
        for i in range(4):
            w.append_records([rec(T0 + i)], now_ms=T0)
    before = seg(pdir, 0, ".index").read_bytes(), seg(pdir, 0, ".timeindex").read_bytes()
    seg(pdir, 0, ".index").unlink()
    with PartitionWriter(pdir, index_interval_bytes=0):
        pass
    assert (seg(pdir, 0, ".index").read_bytes(), seg(pdir, 0, ".timeindex").read_bytes()) == before


def test_reopen_refuses_a_truncated_active_segment(pdir):
    with PartitionWriter(pdir) as w:
        w.append_records([rec(T0)], now_ms=T0)
    log = seg(pdir, 0, ".log")
    log.write_bytes(log.read_bytes()[:-3])
    with pytest.raises(CorruptRecordError, match="truncated segment"):
        PartitionWriter(pdir)


def test_writer_refuses_a_directory_with_leftover_swap_files(pdir):
    with PartitionWriter(pdir) as w:
        w.append_records([rec(T0)], now_ms=T0)
    seg(pdir, 0, ".log.swap").write_bytes(b"")
    with pytest.raises(RefusedError, match=r"\.log\.swap: left over"):
        PartitionWriter(pdir)


def test_writer_refuses_a_directory_that_is_not_a_partition(tmp_path):
    with pytest.raises(UsageError, match="<topic>-<partition>"):
        PartitionWriter(tmp_path / "not_a_partition")


# ---------------------------------------------------------------------------------------------- transactions
def test_abort_marker_adds_a_txn_index_entry_with_the_lso(pdir):
    with PartitionWriter(pdir) as w:
        w.append_records(
            [rec(T0), rec(T0)],
            now_ms=T0,
            producer_id=1,
            producer_epoch=0,
            base_sequence=0,
            is_transactional=True,
        )
        w.append_records(
            [rec(T0)], now_ms=T0, producer_id=2, producer_epoch=3, base_sequence=0, is_transactional=True
        )
        assert w.open_transactions == {1: 0, 2: 2}
        assert (
            w.append_control(CONTROL_ABORT, producer_id=1, producer_epoch=0, coordinator_epoch=5, now_ms=T0)
            == 3
        )
        w.append_records(
            [rec(T0)], now_ms=T0, producer_id=1, producer_epoch=0, base_sequence=2, is_transactional=True
        )
        w.append_control(CONTROL_COMMIT, producer_id=1, producer_epoch=0, coordinator_epoch=5, now_ms=T0)
        assert (
            w.append_control(CONTROL_ABORT, producer_id=2, producer_epoch=3, coordinator_epoch=5, now_ms=T0)
            == 6
        )
        assert w.open_transactions == {}
    # (version, producer id, first offset, marker offset, LSO): while producer 2's transaction (from 2) is
    # open the LSO is 2; afterwards nothing is open and the LSO is the marker's offset + 1. COMMITs add nothing.
    assert txn_entries(pdir, 0) == [(0, 1, 0, 3, 2), (0, 2, 2, 6, 7)]


def test_abort_entry_lands_in_the_segment_that_holds_the_marker(pdir):
    with PartitionWriter(pdir, segment_bytes=batch_size() * 2) as w:
        w.append_records(
            [rec(T0)], now_ms=T0, producer_id=9, producer_epoch=0, base_sequence=0, is_transactional=True
        )
        w.append_records(
            [rec(T0)], now_ms=T0, producer_id=9, producer_epoch=0, base_sequence=1, is_transactional=True
        )
        w.append_control(CONTROL_ABORT, producer_id=9, producer_epoch=0, coordinator_epoch=1, now_ms=T0)
    assert bases(pdir) == [0, 2]
    assert not seg(pdir, 0, ".txnindex").exists()
    assert txn_entries(pdir, 2) == [(0, 9, 0, 2, 3)]


def test_abort_after_reopen_uses_the_transaction_start_from_the_snapshot(pdir):
    with PartitionWriter(pdir) as w:
        w.append_records([rec(T0)], now_ms=T0)
        w.append_records(
            [rec(T0)], now_ms=T0, producer_id=4, producer_epoch=1, base_sequence=0, is_transactional=True
        )
    with PartitionWriter(pdir) as w:
        assert w.open_transactions == {4: 1}
        w.append_control(CONTROL_ABORT, producer_id=4, producer_epoch=1, coordinator_epoch=0, now_ms=T0)
    assert txn_entries(pdir, 0) == [(0, 4, 1, 2, 3)]


def test_non_transactional_batch_during_an_open_transaction_is_refused(pdir):
    with PartitionWriter(pdir) as w:
        w.append_records(
            [rec(T0)], now_ms=T0, producer_id=4, producer_epoch=1, base_sequence=0, is_transactional=True
        )
        with pytest.raises(RefusedError, match="producer 4, whose transaction started at offset 0"):
            w.append_records([rec(T0)], now_ms=T0, producer_id=4, producer_epoch=1, base_sequence=1)
        assert w.log_end_offset == 1


# ---------------------------------------------------------------------------------------------- metadata files
def test_roll_and_close_write_producer_snapshots(pdir):
    with PartitionWriter(pdir, segment_bytes=batch_size(2) * 2) as w:
        w.append_records([rec(T0), rec(T0 + 1)], now_ms=T0, producer_id=7, producer_epoch=2, base_sequence=0)
        w.append_records(
            [rec(T0 + 2), rec(T0 + 3)], now_ms=T0, producer_id=7, producer_epoch=2, base_sequence=2
        )
        w.append_records(
            [rec(T0 + 4), rec(T0 + 5)], now_ms=T0, producer_id=7, producer_epoch=2, base_sequence=4
        )
        w.append_records(
            [rec(T0 + 6)], now_ms=T0, producer_id=8, producer_epoch=0, base_sequence=0, is_transactional=True
        )
    assert bases(pdir) == [0, 4]
    snapshots = sorted(p.name for p in pdir.glob("*.snapshot"))
    assert snapshots == ["00000000000000000004.snapshot", "00000000000000000007.snapshot"]
    # (pid, epoch, last seq, last offset, offset delta, timestamp, coordinator epoch, txn first offset)
    assert snapshot_entries(seg(pdir, 4, ".snapshot")) == [(7, 2, 3, 3, 1, T0 + 3, -1, -1)]
    assert snapshot_entries(seg(pdir, 7, ".snapshot")) == [
        (7, 2, 5, 5, 1, T0 + 5, -1, -1),
        (8, 0, 0, 6, 0, T0 + 6, -1, 6),
    ]


def test_snapshot_lists_producers_in_java_hashmap_order(pdir):
    # Long.hashCode spread over 16 buckets: 16 and 0 share bucket 0 (insertion order), 1 is bucket 1
    with PartitionWriter(pdir) as w:
        for pid in (1, 16, 0):
            w.append_records([rec(T0)], now_ms=T0, producer_id=pid, producer_epoch=0, base_sequence=0)
    assert [e[0] for e in snapshot_entries(seg(pdir, 3, ".snapshot"))] == [16, 0, 1]


def test_closing_an_empty_log_writes_no_snapshot(pdir):
    with PartitionWriter(pdir):
        pass
    assert list(pdir.glob("*.snapshot")) == []
    assert [
        p.stat().st_size for p in (seg(pdir, 0, ".log"), seg(pdir, 0, ".index"), seg(pdir, 0, ".timeindex"))
    ] == [0, 0, 0]


def test_leader_epoch_checkpoint_records_where_each_epoch_starts(pdir):
    with PartitionWriter(pdir) as w:
        assert (pdir / "leader-epoch-checkpoint").read_bytes() == b""  # created empty with the log
        w.append_records([rec(T0)], now_ms=T0, partition_leader_epoch=0)
        w.append_records([rec(T0)], now_ms=T0, partition_leader_epoch=0)
        w.append_records([rec(T0), rec(T0)], now_ms=T0, partition_leader_epoch=3)
        w.append_records([rec(T0)], now_ms=T0, partition_leader_epoch=3)
    assert (pdir / "leader-epoch-checkpoint").read_text() == "0\n2\n0 0\n3 2\n"


def test_partition_metadata_is_written_once(tmp_path):
    pdir = tmp_path / "orders-3"
    with PartitionWriter(pdir, random_seed=1) as w:
        topic_id = w.topic_id
    text = (pdir / "partition.metadata").read_text()
    assert text == f"version: 0\ntopic_id: {topic_id}"
    assert len(topic_id) == 22 and not topic_id.startswith("-")
    with PartitionWriter(pdir, random_seed=2) as w:
        assert w.topic_id == topic_id
    with PartitionWriter(tmp_path / "orders-4", random_seed=1) as w:
        assert w.topic_id == topic_id  # deterministic with random_seed


def test_set_mtime_survives_the_index_rewrite_on_close(pdir):
    with PartitionWriter(pdir) as w:
        w.append_records([rec(T0)], now_ms=T0)
        w.set_mtime_ms(0, T0 - 86_400_000)
        with pytest.raises(UsageError, match="no segment with base offset 5"):
            w.set_mtime_ms(5, T0)
    for suffix in (".log", ".index", ".timeindex"):
        assert seg(pdir, 0, suffix).stat().st_mtime_ns == (T0 - 86_400_000) * 1_000_000


def test_log_dir_checkpoints_look_like_a_clean_shutdown(tmp_path):
    log_dir = tmp_path / "logs"
    for name, n in (("b-0", 3), ("a-1", 5), ("a-0", 0)):
        with PartitionWriter(log_dir / name) as w:
            for _ in range(n):
                w.append_records([rec(T0)], now_ms=T0)
    leos = write_log_dir_checkpoints(
        log_dir,
        cluster_id="IWNjaYtSS0qXt1CSPOs__Q",
        directory_id="eVuSnpqaQP2qe1v1XrVhpA",
        broker_epoch=9,
        now_ms=T0,
    )
    assert {f"{tp.topic}-{tp.partition}": o for tp, o in leos.items()} == {"a-0": 0, "a-1": 5, "b-0": 3}
    for name in ("recovery-point-offset-checkpoint", "replication-offset-checkpoint"):
        assert (log_dir / name).read_text() == "0\n3\na 0 0\na 1 5\nb 0 3\n"
    assert (log_dir / "log-start-offset-checkpoint").read_text() == "0\n0\n"
    assert (log_dir / "meta.properties").read_text() == (
        "#\n#Thu Jan 01 00:00:00 UTC 2026\nnode.id=1\ndirectory.id=eVuSnpqaQP2qe1v1XrVhpA\nversion=1\n"
        "cluster.id=IWNjaYtSS0qXt1CSPOs__Q\n"
    )
    assert json.loads((log_dir / ".kafka_cleanshutdown").read_text()) == {"version": 0, "brokerEpoch": 9}
    assert (log_dir / ".kafka_cleanshutdown").read_bytes() == b'{"version":0,"brokerEpoch":9}'
    assert (log_dir / "cleaner-offset-checkpoint").read_bytes() == b""
    write_log_dir_checkpoints(log_dir, clean_shutdown=False, recovery_points={})
    assert not (log_dir / ".kafka_cleanshutdown").exists()
    assert (log_dir / "recovery-point-offset-checkpoint").read_text() == "0\n0\n"


# ---------------------------------------------------------------------------------------------- sample
def test_sample_log_dir_is_reproducible_readable_and_configured(tmp_path):
    from kafka_log_core.format.filenames import list_partition_dirs
    from kafka_log_core.settings import config
    from kafka_log_core.simulator import sample

    dirs = [tmp_path / name / "logs" for name in ("a", "b")]
    for out in dirs:
        sample.generate(out, out.parent / "conf", seed=3)
    contents = [{p.relative_to(out): p.read_bytes() for p in out.rglob("*") if p.is_file()} for out in dirs]
    assert contents[0] == contents[1]
    partitions = {f"{tp.topic}-{tp.partition}": path for tp, path in list_partition_dirs(dirs[0])}
    assert set(partitions) == {
        "orders.compacted-0", "orders.compacted-1", "orders.compacted-2", "clicks-0", "clicks-1", "payments-0", "audit-0",
    }  # fmt: skip
    for path in partitions.values():
        records = kafka_python_records(path)
        assert [r[0] for r in records] == sorted({r[0] for r in records})
        assert len(bases(path)) >= 3
    orders = kafka_python_records(partitions["orders.compacted-0"])
    assert any(r[3] is None for r in orders)  # tombstones
    assert len({r[2] for r in orders}) < len(orders)  # duplicate keys
    clicks = kafka_python_records(partitions["clicks-0"])
    assert min(r[1] for r in clicks) < sample.DEFAULT_NOW_MS - 9 * sample.DAY
    assert max(r[1] for r in clicks) > sample.DEFAULT_NOW_MS - 10 * sample.MINUTE
    (txn_index,) = partitions["payments-0"].glob("*.txnindex")
    assert len(txn_index.read_bytes()) == 34
    configured = config.load_config(dirs[0].parent / "conf")
    assert configured.for_topic("orders.compacted").compact
    assert configured.for_topic("clicks").retention_ms == 7 * sample.DAY
    assert configured.for_topic("audit").retention_bytes == 2 * 1024 * 1024


def test_sample_refuses_to_replace_what_is_not_a_log_dir(tmp_path, capsys):
    from kafka_log_core.simulator import sample

    (tmp_path / "precious").mkdir()
    (tmp_path / "precious" / "notes.txt").write_text("keep me")
    assert sample.main(["--out", str(tmp_path / "precious")]) == 2
    assert sample.main(["--out", str(tmp_path / "precious"), "--fresh"]) == 2
    assert (tmp_path / "precious" / "notes.txt").read_text() == "keep me"
    assert "refusing to delete it" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- real broker
@pytest.fixture
def real_broker(tmp_path: Path):
    """One started Kafka 4.x broker (tests/kafka_harness.py), stopped cleanly at the end."""
    import shutil

    from tests import kafka_harness

    if shutil.which("java") is None or shutil.which("mvn") is None:
        pytest.skip("the real-broker comparison needs java and mvn on PATH")
    broker = kafka_harness.KafkaBroker(
        tmp_path / "broker-logs", tmp_path / "broker-work", lib_dir=kafka_harness.resolve_kafka_jars()
    )
    broker.start()
    yield broker
    broker.stop()


@pytest.mark.broker
def test_replaying_a_real_brokers_batches_reproduces_its_files_byte_for_byte(real_broker, tmp_path):
    """Every batch the broker appended, appended again by the writer with the same topic settings, must
    give the broker's segment boundaries, indexes, txn index, producer snapshots and epochs."""
    from tests import kafka_harness as kh

    settings = {
        "internal.segment.bytes": "4096",
        "index.interval.bytes": "300",
        "segment.ms": str(86_400_000),
    }
    kh.create_topic(real_broker.bootstrap, "replay", 1, settings)
    rng = random.Random(5)
    day = 86_400_000

    def records(count: int, first_ts: int, step: int) -> list:
        return [
            kh.SentRecord(
                b"k%d" % rng.randrange(30), rng.randbytes(rng.randrange(10, 200)), (), first_ts + i * step, 0
            )
            for i in range(count)
        ]

    old = T0 - 3 * day
    kh.produce(real_broker.bootstrap, "replay", records(150, old, 1_000), idempotent=True, compression="lz4")
    kh.produce_transactions(
        real_broker.bootstrap,
        "replay",
        [
            kh.Transaction(records(40, old + day // 2, 10)),
            kh.Transaction(records(30, old + day // 2, 10), commit=False),
        ],
        transactional_id="replay-txn",
    )
    # two days later: time rolls (segment.ms = 1 day) decided by the batches' own timestamps; the
    # transaction markers carry the coordinator's wall clock, which also rolls, on both sides alike
    kh.produce(real_broker.bootstrap, "replay", records(60, old + 2 * day, 500), compression="zstd")
    real_broker.stop()

    source = tmp_path / "broker-logs" / "replay-0"
    target = tmp_path / "copy" / "replay-0"
    with PartitionWriter(target, segment_bytes=4096, index_interval_bytes=300, segment_ms=day) as w:
        for log in kh.segment_files(source):
            data = log.read_bytes()
            for b in layout(log):
                w.append_batch(data[b.position : b.position + b.size], now_ms=T0)
    assert [r.reason for r in w.rolls].count("time") >= 1
    assert len(bases(source)) > 5

    def files(directory: Path) -> dict[str, bytes]:
        keep = (".log", ".index", ".timeindex", ".txnindex", ".snapshot", "leader-epoch-checkpoint")
        return {p.name: p.read_bytes() for p in sorted(directory.iterdir()) if p.name.endswith(keep)}

    broker_files, writer_files = files(source), files(target)
    assert sorted(writer_files) == sorted(broker_files)
    assert any(name.endswith(".txnindex") for name in broker_files)
    for name in broker_files:
        assert writer_files[name] == broker_files[name], name
