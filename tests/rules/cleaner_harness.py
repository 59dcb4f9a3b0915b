"""The cleaner's tests' shared parts: a partition laid out batch by batch, one planned cleaning round, and
the directory a round leaves behind read back through a path the cleaner does not use.

kafka-python's ``MemoryRecords`` decodes every batch with its CRC checked, the framing is walked here
with ``struct``, and the ``.index`` / ``.timeindex`` files must equal the indexes recomputed here from
the new ``.log`` with the broker's recovery rule (format spec §9–§10).
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from kafka.record.memory_records import MemoryRecords

from kafka_log_core.format import checkpoints, compression, legacy_records, record_batch
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.format.legacy_records import LegacyRecord
from kafka_log_core.kernels import key_digest
from kafka_log_core.kernels.offset_map import OffsetMap
from kafka_log_core.log.partition_log import LogDirState, PartitionLog
from kafka_log_core.rules import cleaner
from kafka_log_core.settings.config import BrokerConfig, LogConfig
from tests.logbuild import TS, batch, make_log

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
BIG = 2**31  # a cleaning group's offsets span less than this


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
    return legacy_records.encode_message(offset, magic, as_bytes(key), as_bytes(value), ts if magic else -1)


def legacy_wrapper(entries, *, magic=1, codec=compression.GZIP):
    """A compressed magic 0/1 wrapper; entries are (offset, key, value, timestamp)."""
    records = [
        LegacyRecord(o, magic, 0, ts if magic else -1, 0, as_bytes(k), as_bytes(v)) for o, k, v, ts in entries
    ]
    return legacy_records.encode_wrapper(records, magic, codec)


def as_bytes(x):
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
