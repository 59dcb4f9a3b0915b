"""Kafka's log cleaner, pinned on real segment files (spec cleaner-and-retention §2–§7, §11–§13).

Every case lays a partition directory out batch by batch (``tests/logbuild.py``), runs the planner and
one or more cleaning rounds, and compares what is left with survivors worked out by hand from Kafka's
rules -- the working is in the comments next to each case. Names follow the Kafka test they mirror
(LogCleanerTest, LogCleanerManagerTest, MemoryRecordsTest); the cases are our own.

Every directory a round leaves behind is re-read through a path the cleaner does not use:
kafka-python's ``MemoryRecords`` decodes every batch with its CRC checked, the framing is walked here
with ``struct``, and the ``.index`` / ``.timeindex`` files must equal the indexes recomputed here from
the new ``.log`` with the broker's recovery rule (format spec §9–§10).
"""

from __future__ import annotations

import gzip
import hashlib
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from kafka.record.memory_records import MemoryRecords

from kafka_log_core.errors import CorruptDataError
from kafka_log_core.format import checkpoints, compression, legacy_records, record_batch
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.format.legacy_records import LegacyRecord
from kafka_log_core.format.record_batch import Record
from kafka_log_core.kernels import key_digest
from kafka_log_core.kernels.offset_map import OffsetMap
from kafka_log_core.log.partition_log import LogDirState, PartitionLog
from kafka_log_core.rules import cleaner
from kafka_log_core.settings.config import BrokerConfig, LogConfig
from kafka_log_core.settings.kafka_version import KafkaVersion
from tests.logbuild import TS, batch, make_log, marker, write_segment

TP = TopicPartition("t", 0)
DAY = 86_400_000  # delete.retention.ms and producer.id.expiration.ms defaults
NOW = TS + 60_000  # cleaning time of a first pass: one minute after the records were written
MAX_INT = 2**31 - 1

COMPACT = LogConfig(cleanup_policy=frozenset({"compact"}))
BROKER = BrokerConfig()
# Kafka's unit tests keep producers in memory whatever the clock says; offline, a producer is active
# while now - lastTimestamp < producer.id.expiration.ms, so multi-day cases stretch the expiration.
KEEP_PRODUCERS = BrokerConfig(producer_id_expiration_ms=MAX_INT)
FORGET_PRODUCERS = BrokerConfig(producer_id_expiration_ms=1)

V2_LAST_OFFSET_DELTA = struct.Struct(">i")  # at byte 23 of a v2 batch
V2_MAX_TIMESTAMP = struct.Struct(">q")  # at byte 35 of a v2 batch
ENTRY_HEAD = struct.Struct(">qi")  # offset, size: the first 12 bytes of every batch
TXN_ENTRY = struct.Struct(">hqqqq")  # version, producer id, first offset, last offset, LSO
LAT = record_batch.LOG_APPEND_TIME
HORIZON_BIT = 0x40


# =============================================================================================== layout
def part(log_dir: Path) -> Path:
    return log_dir / TP.dir_name


def layout(log_dir: Path, segments: dict[int, list[bytes]], **kw) -> Path:
    return make_log(log_dir, TP.topic, TP.partition, segments, **kw)


def set_checkpoint(log_dir: Path, name: str, offset: int | None) -> None:
    path = log_dir / name
    if offset is None:
        path.unlink(missing_ok=True)
    else:
        checkpoints.write_offset_checkpoint(path, {TP: offset})


def open_log(log_dir: Path) -> PartitionLog:
    return PartitionLog.open(log_dir, TP, LogDirState.read(log_dir).for_partition(TP))


def plan(log_dir: Path, now: int = NOW, cfg: LogConfig = COMPACT, broker: BrokerConfig = BROKER):
    return cleaner.plan_cleaning(open_log(log_dir), cfg, broker, now)


_KEEP = object()


def clean(
    log_dir: Path,
    now: int = NOW,
    cfg: LogConfig = COMPACT,
    broker: BrokerConfig = BROKER,
    *,
    first_dirty=_KEEP,
    offset_map: OffsetMap | None = None,
) -> cleaner.CleanResult:
    """One cleaning round as the broker runs it: plan from the checkpoint (``first_dirty`` rewrites it
    first, None removes it), clean, store the new checkpoint, then re-read the directory independently."""
    if first_dirty is not _KEEP:
        set_checkpoint(log_dir, "cleaner-offset-checkpoint", first_dirty)
    log = open_log(log_dir)
    the_plan = cleaner.plan_cleaning(log, cfg, broker, now)
    result = cleaner.clean_log(log, the_plan, cfg, broker, now, offset_map=offset_map)
    set_checkpoint(log_dir, "cleaner-offset-checkpoint", result.end_offset)
    check_dir(part(log_dir), cfg.index_interval_bytes)
    return result


def tiny_map(keys: int) -> OffsetMap:
    """A map that is full after ``keys`` distinct keys: slots = memory / 24, capacity = slots * 0.75."""
    slots = {1: 2, 2: 3, 3: 4}[keys]
    offset_map = OffsetMap(24 * slots, 0.75)
    assert offset_map.capacity == keys  # premise
    return offset_map


def empty_batch(base, last, *, pid, epoch, seq=-1, txn=False, control=False, max_ts=TS):
    return record_batch.build_batch(
        base, [], producer_id=pid, producer_epoch=epoch, base_sequence=seq, is_transactional=txn,
        is_control=control, last_offset_delta=last - base, max_timestamp=max_ts,
    )  # fmt: skip


def write_txnindex(directory: Path, base: int, entries: list[tuple[int, int, int, int]]) -> None:
    """(producer id, first offset, last offset, LSO) entries, 34 bytes each (format spec §11)."""
    data = b"".join(TXN_ENTRY.pack(0, *e) for e in entries)
    (directory / f"{base:020d}.txnindex").write_bytes(data)


def txnindex(directory: Path) -> dict[int, list[tuple[int, int, int, int]]]:
    out = {}
    for path in sorted(directory.glob("*.txnindex")):
        data = path.read_bytes()
        assert len(data) % TXN_ENTRY.size == 0, path
        out[int(path.name.split(".")[0])] = [
            TXN_ENTRY.unpack_from(data, i)[1:] for i in range(0, len(data), TXN_ENTRY.size)
        ]
    return out


def legacy(offset, key, value, *, magic=1, ts=TS):
    return legacy_records.encode_message(offset, magic, _b(key), _b(value), ts if magic else -1)


def legacy_wrapper(entries, *, magic=1, codec=compression.GZIP):
    """A compressed magic 0/1 wrapper; entries are (offset, key, value, timestamp)."""
    records = [LegacyRecord(o, magic, 0, ts if magic else -1, 0, _b(k), _b(v)) for o, k, v, ts in entries]
    return legacy_records.encode_wrapper(records, magic, codec)


def _b(x):
    return x.encode() if isinstance(x, str) else x


# =============================================================================== independent reading
@dataclass(frozen=True)
class Rec:
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple = ()


@dataclass(frozen=True)
class Seen:
    """One batch of a cleaned .log as kafka-python decodes it (legacy: one shallow entry)."""

    magic: int
    base_offset: int
    last_offset: int
    attributes: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    leader_epoch: int
    count: int
    records: tuple[Rec, ...]
    raw: bytes

    @property
    def codec(self) -> int:
        return self.attributes & 0x07

    @property
    def is_control(self) -> bool:
        return self.magic == 2 and bool(self.attributes & 0x20)

    @property
    def is_transactional(self) -> bool:
        return self.magic == 2 and bool(self.attributes & 0x10)

    @property
    def has_horizon(self) -> bool:
        return self.magic == 2 and bool(self.attributes & HORIZON_BIT)

    @property
    def last_sequence(self) -> int:
        return self.base_sequence + (self.last_offset - self.base_offset)

    @property
    def offsets(self) -> list[int]:
        return [r.offset for r in self.records]


def _frames(data: bytes, path: Path):
    """(position, raw bytes, last offset, max timestamp) of every batch, walked with struct only."""
    pos = 0
    while pos < len(data):
        assert len(data) - pos >= 12 + 14, f"{path}: {len(data) - pos} trailing bytes at {pos}"  # v0 minimum
        offset, size = ENTRY_HEAD.unpack_from(data, pos)
        end = pos + 12 + size
        assert end <= len(data), f"{path}: batch at {pos} overruns the file"
        raw = data[pos:end]
        magic = raw[16]
        if magic == 2:
            last = offset + V2_LAST_OFFSET_DELTA.unpack_from(raw, 23)[0]
            max_ts = V2_MAX_TIMESTAMP.unpack_from(raw, 35)[0]
        else:
            assert magic in (0, 1), f"{path}: magic {magic} at {pos}"
            last = offset
            max_ts = struct.unpack_from(">q", raw, 18)[0] if magic == 1 else -1
        yield pos, raw, last, max_ts
        pos = end


def decode_log(path: Path) -> list[Seen]:
    data = path.read_bytes()
    frames = list(_frames(data, path))
    mr = MemoryRecords(data)
    out = []
    for pos, raw, last, max_ts in frames:
        b = mr.next_batch()
        assert b is not None, f"{path}: kafka-python sees fewer batches than the framing"
        magic = raw[16]
        if magic == 2:
            assert b.validate_crc(), f"{path}: bad CRC32C in the batch at position {pos}"
            records = tuple(Rec(r.offset, r.key, r.value, r.timestamp, tuple(r.headers)) for r in b)
            assert len(records) == b.records_count, f"{path}: batch at {pos}"
            out.append(
                Seen(2, b.base_offset, b.last_offset, b.attributes, b.first_timestamp, b.max_timestamp,
                     b.producer_id, b.producer_epoch, b.base_sequence, b.leader_epoch, len(records),
                     records, raw)
            )  # fmt: skip
        else:
            assert b.validate_crc(), f"{path}: bad CRC32 in the legacy entry at position {pos}"
            inner = list(b)
            assert all(r.validate_crc() for r in inner), f"{path}: bad inner CRC32 at position {pos}"
            records = tuple(
                Rec(r.offset, r.key, r.value, -1 if r.timestamp is None else r.timestamp) for r in inner
            )
            base = records[0].offset if records else last
            out.append(
                Seen(magic, base, last, raw[17], -1, max_ts, -1, -1, -1, -1, len(records), records, raw)
            )
    assert mr.next_batch() is None
    return out


def expected_indexes(data: bytes, base: int, interval: int, path: Path) -> tuple[bytes, bytes]:
    """Offset and time index of a .log as the broker's recovery builds them (format spec §9–§10)."""
    offsets, times = [], []
    last_indexed = 0
    max_ts, max_ts_offset = -1, base

    def maybe_append_time():
        if max_ts > (times[-1][0] if times else -1):
            times.append((max_ts, max_ts_offset - base))

    for pos, _raw, last, batch_max_ts in _frames(data, path):
        if batch_max_ts > max_ts:
            max_ts, max_ts_offset = batch_max_ts, last
        if pos - last_indexed > interval:
            offsets.append((last - base, pos))
            last_indexed = pos
            maybe_append_time()
    maybe_append_time()
    return (
        b"".join(struct.pack(">ii", *e) for e in offsets),
        b"".join(struct.pack(">qi", *e) for e in times),
    )


def read_dir(directory: Path) -> dict[int, list[Seen]]:
    return {int(p.name.split(".")[0]): decode_log(p) for p in sorted(directory.glob("*.log"))}


def check_dir(directory: Path, interval: int = 4096) -> dict[int, list[Seen]]:
    """Everything a broker would trust after a clean shutdown: no leftovers of the swap, every batch
    decodable with a valid CRC, offsets increasing and inside their segment, exact trimmed indexes."""
    leftovers = [n for n in os.listdir(directory) if n.endswith((".cleaned", ".swap", ".deleted"))]
    assert leftovers == []
    segments = read_dir(directory)
    bases = sorted(segments)
    previous_last = -1
    for i, base in enumerate(bases):
        log = directory / f"{base:020d}.log"
        want_index, want_time = expected_indexes(log.read_bytes(), base, interval, log)
        assert (directory / f"{base:020d}.index").read_bytes() == want_index, f"{log}: offset index"
        assert (directory / f"{base:020d}.timeindex").read_bytes() == want_time, f"{log}: time index"
        upper = bases[i + 1] if i + 1 < len(bases) else 2**63
        for b in segments[base]:
            assert base <= b.base_offset <= b.last_offset < upper, f"{log}: batch {b.base_offset}"
            assert b.base_offset > previous_last, f"{log}: batch {b.base_offset} overlaps"
            assert all(b.base_offset <= o <= b.last_offset for o in b.offsets)
            assert b.offsets == sorted(set(b.offsets))
            previous_last = b.last_offset
    for base, entries in txnindex(directory).items():
        assert base in segments and all(e[2] >= base for e in entries)
    return segments


# ------------------------------------------------------------------------------------------ views
def batches(log_dir: Path) -> list[Seen]:
    return [b for seg in read_dir(part(log_dir)).values() for b in seg]


def data_records(log_dir: Path) -> list[tuple[int, bytes | None, bytes | None]]:
    return [(r.offset, r.key, r.value) for b in batches(log_dir) if not b.is_control for r in b.records]


def last_offsets(log_dir: Path) -> list[int]:
    return [b.last_offset for b in batches(log_dir)]


def marker_offsets(log_dir: Path) -> list[int]:
    return [r.offset for b in batches(log_dir) if b.is_control for r in b.records]


def shape(log_dir: Path) -> list[tuple[int, int, list[int]]]:
    """(base offset, last offset, offsets of the records present) of every batch."""
    return [(b.base_offset, b.last_offset, b.offsets) for b in batches(log_dir)]


def segment_bases(log_dir: Path) -> list[int]:
    return sorted(int(p.name.split(".")[0]) for p in part(log_dir).glob("*.log"))


def files_of(directory: Path, base: int) -> dict[str, tuple[bytes, int]]:
    """Contents and mtime (ns) of a segment's files, to prove a segment was left alone."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(directory.glob(f"{base:020d}.*"))}


def map_get(offset_map: OffsetMap, key: str) -> int:
    raw = np.frombuffer(key.encode(), dtype=np.uint8)
    hi, lo = key_digest.hash_keys(raw, np.array([0], dtype=np.int64), np.array([len(raw)], dtype=np.int64))
    return int(offset_map.get_many(hi, lo, np.array([True]))[0])


def txn(base, keys, pid, *, seq=None, **kw):
    """A transactional batch of producer ``pid`` (epoch 0) with key = value = str(k)."""
    kvs = [(str(k), str(k)) for k in keys]
    return batch(base, kvs, pid=pid, epoch=0, seq=base if seq is None else seq, txn=True, **kw)


def single(base, key, value="v", **kw):
    return batch(base, [(key, value)], **kw)


def data_keys(log_dir: Path) -> list[str]:
    return [r.key.decode() for b in batches(log_dir) if not b.is_control for r in b.records]


def data_offsets(log_dir: Path) -> list[int]:
    return [r.offset for b in batches(log_dir) if not b.is_control for r in b.records]


def last_sequences(log_dir: Path) -> dict[int, int]:
    return {
        b.producer_id: b.last_sequence for b in batches(log_dir) if not b.is_control and b.producer_id >= 0
    }


def mtime_ms(path: Path) -> int:
    return path.stat().st_mtime_ns // 1_000_000


def seg_file(log_dir: Path, base: int, suffix: str) -> Path:
    return part(log_dir) / f"{base:020d}{suffix}"


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


BIG = 2**31


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


# ================================================================================ formats (R4, R5)
@pytest.mark.parametrize("with_tombstone", [False, True], ids=["values", "with-tombstone"])
def test_filter_to_preserves_log_append_time(tmp_path, with_tombstone):
    # MemoryRecordsTest.testFilterToPreservesLogAppendTime: a rebuilt LogAppendTime batch keeps its
    # maxTimestamp (every record reads it); baseTimestamp is that time, or the horizon when one is stamped.
    appended = TS + 500
    last = ("c", None) if with_tombstone else ("c", "1")
    layout(tmp_path, {0: [batch(0, [("a", "1"), ("b", "1"), last], timestamp_type=LAT, max_timestamp=appended),
                          single(3, "a", "2")], 4: []})  # fmt: skip
    clean(tmp_path)
    rebuilt = batches(tmp_path)[0]
    assert (rebuilt.base_offset, rebuilt.last_offset, rebuilt.offsets) == (0, 2, [1, 2])
    assert rebuilt.attributes == (0x08 | (HORIZON_BIT if with_tombstone else 0))
    assert rebuilt.max_timestamp == appended
    assert rebuilt.base_timestamp == (NOW + DAY if with_tombstone else appended)
    assert [r.timestamp for r in rebuilt.records] == [appended, appended]


@pytest.mark.parametrize("codec", [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD],
                         ids=["gzip", "snappy", "lz4", "zstd"])  # fmt: skip
def test_compressed_batches_keep_their_codec(tmp_path, codec):
    # LogCleanerParameterizedIntegrationTest (all codecs): rebuilt batches are recompressed with their codec.
    whole = batch(4, [("b", "2"), ("e", "1")], codec=codec)
    layout(tmp_path, {0: [batch(0, [("a", "1"), ("b", "1"), ("c", "1"), ("d", "1")], codec=codec), whole],
                      6: [single(6, "z")]})  # fmt: skip
    clean(tmp_path)
    rebuilt, copied, _active = batches(tmp_path)
    assert (rebuilt.codec, rebuilt.base_offset, rebuilt.last_offset, rebuilt.count) == (codec, 0, 3, 3)
    assert [(r.offset, r.key) for r in rebuilt.records] == [(0, b"a"), (2, b"c"), (3, b"d")]
    assert copied.raw == whole


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4],
                         ids=["uncompressed", "gzip", "snappy", "lz4"])  # fmt: skip
def test_legacy_batches_are_cleaned(tmp_path, magic, codec):
    # Magic 0/1 entries: uncompressed entries are kept or dropped whole; a compressed wrapper is rebuilt
    # with the same magic and codec, offset = last kept offset (v1 inner offsets relative to the first kept).
    middle = [(1, "b", "1", TS + 1), (2, "a", "2", TS + 2), (3, "c", "1", TS + 3)]
    if codec == compression.NONE:
        entries = [legacy(o, k, v, magic=magic, ts=t) for o, k, v, t in middle]
    else:
        entries = [legacy_wrapper(middle, magic=magic, codec=codec)]
    layout(tmp_path, {0: [legacy(0, "a", "1", magic=magic), *entries, legacy(4, "b", "2", magic=magic, ts=TS + 4)],
                      5: [legacy(5, "d", "1", magic=magic, ts=TS + 5)]})  # fmt: skip
    clean(tmp_path)
    # Map a->2, b->4, c->3: a@0 and b@1 are superseded.
    assert data_records(tmp_path) == [(2, b"a", b"2"), (3, b"c", b"1"), (4, b"b", b"2"), (5, b"d", b"1")]
    assert {b.magic for b in batches(tmp_path)} == {magic}
    if codec != compression.NONE:
        wrapper = batches(tmp_path)[0]
        assert (wrapper.codec, wrapper.base_offset, wrapper.last_offset) == (codec, 2, 3)
        assert wrapper.max_timestamp == (TS + 3 if magic else -1)
        assert [r.timestamp for r in wrapper.records] == ([TS + 2, TS + 3] if magic else [-1, -1])


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize(("first_dirty", "expected"), [
    (None, [(0, b"a", None), (1, b"b", b"1"), (2, b"c", None), (3, b"d", b"1"), (4, b"e", b"1"), (5, b"f", b"1")]),
    (4, [(1, b"b", b"1"), (2, b"c", None), (3, b"d", b"1"), (4, b"e", b"1"), (5, b"f", b"1")]),
], ids=["first-pass", "after-a-clean-prefix"])  # fmt: skip
def test_legacy_tombstones_expire_by_segment_mtime(tmp_path, magic, first_dirty, expected):
    # Spec R3.7 for magic 0/1: legacyHorizon = mtime(last clean segment) - delete.retention.ms (0 without a
    # clean prefix); a legacy tombstone is kept iff mtime(its segment) > legacyHorizon.
    d = part(tmp_path)
    write_segment(d, 0, [legacy(0, "a", None, magic=magic), legacy(1, "b", "1", magic=magic)], mtime_ms=TS)
    write_segment(d, 2, [legacy(2, "c", None, magic=magic), legacy(3, "d", "1", magic=magic)],
                  mtime_ms=TS + DAY + 5_000)  # fmt: skip
    write_segment(d, 4, [legacy(4, "e", "1", magic=magic)], mtime_ms=TS + DAY + 6_000)
    write_segment(d, 5, [legacy(5, "f", "1", magic=magic)])
    # With checkpoint 4: legacyHorizon = TS + DAY + 5 s - DAY = TS + 5 s; segment 0 (mtime TS) is older.
    clean(tmp_path, first_dirty=first_dirty)
    assert data_records(tmp_path) == expected
    assert mtime_ms(seg_file(tmp_path, 0, ".log")) == TS + DAY + 6_000


def _wrapper_inner_messages(raw: bytes) -> list[tuple[int, int, int, int]]:
    """(inner offset, magic, attributes, timestamp) of a gzip magic-1 wrapper, parsed by hand."""
    assert raw[16] == 1 and raw[17] & 0x07 == compression.GZIP
    (value_len,) = struct.unpack_from(">i", raw, 30)
    inner = gzip.decompress(raw[34 : 34 + value_len])
    out, pos = [], 0
    while pos < len(inner):
        offset, size = ENTRY_HEAD.unpack_from(inner, pos)
        magic, attributes = inner[pos + 16], inner[pos + 17]
        ts = struct.unpack_from(">q", inner, pos + 18)[0] if magic == 1 else None
        out.append((offset, magic, attributes, ts))
        pos += 12 + size
    return out


def _handmade_wrapper(wrapper_offset, inner_entries, *, inner_magic, attributes=compression.GZIP, ts=-1):
    inner = b"".join(
        legacy_records.encode_message(rel, inner_magic, _b(k), _b(v), t, a)
        for rel, k, v, t, a in inner_entries
    )
    value = compression.compress(compression.GZIP, inner, 1)
    return legacy_records.encode_message(wrapper_offset, 1, None, value, ts, attributes)


def test_clean_corrupt_message_set(tmp_path):
    # LogCleanerTest.testCleanCorruptMessageSet (KAFKA-4298): magic-1 gzip wrappers around magic-0 messages
    # are rewritten with inner magic 1, duplicates or not.
    dup = _handmade_wrapper(
        28, [(i, str(k), str(25 + i), -1, 0) for i, k in enumerate([0, 1, 0, 1])], inner_magic=0
    )
    no_dup = _handmade_wrapper(
        51, [(i, str(k), str(50 + i), -1, 0) for i, k in enumerate([3, 4])], inner_magic=0
    )
    layout(tmp_path, {0: [dup, no_dup], 52: []})
    clean(tmp_path)
    assert [(o, v) for o, _k, v in data_records(tmp_path)] == [(o, str(o).encode()) for o in (27, 28, 50, 51)]
    for b in batches(tmp_path):
        assert [m[1] for m in _wrapper_inner_messages(b.raw)] == [1] * b.count


def test_legacy_log_append_time_wrapper_keeps_the_append_time(tmp_path):
    # A v1 LogAppendTime wrapper: the broker stamped only the wrapper (time W, attribute bit 3).
    w = TS + 900
    wrapper = _handmade_wrapper(2, [(0, "a", "1", TS + 1, 0), (1, "b", "1", TS + 2, 0)], inner_magic=1,
                                attributes=compression.GZIP | 0x08, ts=w)  # fmt: skip
    layout(tmp_path, {0: [wrapper, legacy(3, "a", "2")], 4: []})
    clean(tmp_path)
    rebuilt = batches(tmp_path)[0]
    assert (rebuilt.base_offset, rebuilt.last_offset, rebuilt.attributes, rebuilt.max_timestamp) == (
        2,
        2,
        0x09,
        w,
    )
    assert [(r.offset, r.key, r.timestamp) for r in rebuilt.records] == [(2, b"b", w)]
    assert [(m[0], m[3]) for m in _wrapper_inner_messages(rebuilt.raw)] == [(0, w)]


def test_rebuilt_legacy_log_append_time_inner_messages_carry_the_timestamp_type(tmp_path):
    # MemoryRecordsBuilder.appendLegacyRecord -> LegacyRecord.write(..., timestampType): inner attributes = 0x08.
    w = TS + 900
    wrapper = _handmade_wrapper(2, [(0, "a", "1", TS + 1, 0), (1, "b", "1", TS + 2, 0)], inner_magic=1,
                                attributes=compression.GZIP | 0x08, ts=w)  # fmt: skip
    layout(tmp_path, {0: [wrapper, legacy(3, "a", "2")], 4: []})
    clean(tmp_path)
    assert _wrapper_inner_messages(batches(tmp_path)[0].raw) == [(0, 1, 0x08, w)]


@pytest.mark.parametrize(("version", "hw"), [("4.3.1", None), ("4.4.0", 2)], ids=["4.3.1", "4.4.0-hw-at-2"])
def test_legacy_last_batch_of_the_round_without_kept_records_is_kept_unchanged(tmp_path, version, hw):
    # Spec R5: where rule R2.2 keeps the entry ending at 2 (the round's bound up to 4.3, the high watermark
    # from 4.4) the broker throws (empty batches are v2 only); we keep the entry as it is.
    unkeyed = legacy(1, None, "u")
    layout(tmp_path, {0: [legacy(0, "a", "1"), unkeyed], 2: [legacy(2, "b", "1")]}, hw=hw)
    clean(tmp_path, broker=BrokerConfig(kafka_version=KafkaVersion.parse(version)))
    assert batches(tmp_path)[1].raw == unkeyed
    assert data_records(tmp_path) == [(0, b"a", b"1"), (1, None, b"u"), (2, b"b", b"1")]


def test_from_4_4_a_legacy_entry_emptied_at_a_bound_below_the_high_watermark_goes(tmp_path):
    # Rule R2.2 of 4.4 does not reach it (the high watermark is the log end, 3): DELETE_EMPTY, no throw.
    layout(tmp_path, {0: [legacy(0, "a", "1"), legacy(1, None, "u")], 2: [legacy(2, "b", "1")]})
    clean(tmp_path, broker=BrokerConfig(kafka_version=KafkaVersion(4, 4)))
    assert data_records(tmp_path) == [(0, b"a", b"1"), (2, b"b", b"1")]


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
