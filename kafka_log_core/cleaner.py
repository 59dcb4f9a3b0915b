"""Log compaction of one partition, as Kafka's log cleaner does it (spec: cleaner-and-retention §2–§7).

Plan, then apply:

* :func:`plan_cleaning` — the LogToClean maths: first dirty offset from the cleaner checkpoint,
  first uncleanable offset (active segment, last stable offset, ``min.compaction.lag.ms``), clean and
  cleanable bytes, the dirty ratio, the ``max.compaction.lag.ms`` must-compact rule, eligibility.
* :func:`build_offset_map` — pass 1 over the dirty section: key digest -> latest offset, stopping the
  whole pass when the map is full (the checkpoint then advances only as far as the map covered).
* :func:`clean_log` — pass 2: every segment below the new dirty offset, in size-limited groups, is
  rewritten into ``<base>.*.cleaned`` batch by batch with the broker's retention rules, then swapped in
  (``.cleaned -> .swap``, old files ``.deleted``, ``.swap -> final``, fsyncs) and the cleaner
  checkpoint is written last.
"""

from __future__ import annotations

import heapq
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import numpy as np

from . import compression, fsutil, kernels, record_batch, scan
from .config import BrokerConfig, LogConfig
from .filenames import (
    CLEANED_MARKER,
    DELETED_MARKER,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    SWAP_MARKER,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_file,
)
from .kafka_version import keeps_last_batch_of_round
from .legacy_records import LegacyRecord, encode_wrapper
from .log_file import FileBatch
from .offset_index import IndexBuilder
from .offset_map import OffsetMap
from .partition_log import PartitionLog
from .producer_state import LastRecord, ProducerTable, build_producer_table
from .record_batch import BatchHeader
from .segment import Segment
from .txn_index import AbortedTxn, encode_txn_index

MAX_INT = 2**31 - 1
MAX_LONG = 2**63 - 1


# ============================================================================================ planning
@dataclass(frozen=True)
class CleanPlan:
    """What the cleaner would do with one partition (LogToClean + the selection decision)."""

    first_dirty_offset: int
    first_uncleanable_offset: int
    clean_bytes: int
    cleanable_bytes: int
    must_compact: bool
    checkpoint_reset: bool  # the stored checkpoint was invalid and is reset to the log start offset
    eligible: bool
    reason: str
    last_stable_offset: int
    log_start_offset: int
    log_end_offset: int

    @property
    def total_bytes(self) -> int:
        return self.clean_bytes + self.cleanable_bytes

    @property
    def dirty_ratio(self) -> float:
        return self.cleanable_bytes / self.total_bytes if self.total_bytes else 0.0


def plan_cleaning(
    log: PartitionLog,
    cfg: LogConfig,
    broker: BrokerConfig,
    now_ms: int,
    producers: ProducerTable | None = None,
) -> CleanPlan:
    log_start, leo = log.log_start_offset, log.log_end_offset
    cp = log.checkpoints.cleaner_offset
    checkpoint = log_start if cp is None else cp
    reset = False
    if checkpoint < log_start or checkpoint > leo:
        checkpoint, reset = log_start, True
    first_dirty = checkpoint
    if producers is None:
        producers = build_producer_table(log, now_ms, broker.producer_id_expiration_ms)
    unstable = producers.first_unstable_offset()
    hw = log.high_watermark
    lso = hw if unstable is None or unstable >= hw else unstable
    active = log.active_segment
    bounds = [lso, active.base_offset if active else leo]
    non_active_dirty = [s for s in log.segments_from(first_dirty) if s is not active]
    min_lag = max(cfg.min_compaction_lag_ms, 0)
    if min_lag > 0:
        for s in non_active_dirty:
            if s.largest_timestamp > now_ms - min_lag:
                bounds.append(s.base_offset)
                break
    uncleanable = max(first_dirty, min(bounds))
    # calculateCleanableBytes: round down to the base of the (non-active) segment holding the bound.
    holder = [s for s in log.segments_from(uncleanable) if s is not active]
    first_uncleanable = holder[0].base_offset if holder else (active.base_offset if active else leo)
    clean_bytes = sum(s.size for s in log.segments if s.base_offset < first_dirty)
    cleanable_bytes = sum(
        s.size for s in log.segments_in(min(first_dirty, first_uncleanable), first_uncleanable)
    )
    # maxCompactionDelay
    firsts = [t for s in non_active_dirty if (t := s.first_batch_timestamp) > 0 and t != MAX_LONG]
    earliest = min(firsts) if firsts else MAX_LONG
    must_compact = earliest < now_ms - max(cfg.max_compaction_lag_ms, 0)
    total = clean_bytes + cleanable_bytes
    ratio = cleanable_bytes / total if total else 0.0
    if not cfg.compact:
        eligible, reason = (
            False,
            f"cleanup.policy={','.join(sorted(cfg.cleanup_policy))} does not include compact",
        )
    elif not broker.log_cleaner_enable:
        eligible, reason = False, "log.cleaner.enable=false"
    elif total == 0:
        eligible, reason = False, "nothing to clean (no bytes below the first uncleanable offset)"
    elif must_compact and cleanable_bytes > 0:
        eligible, reason = True, "max.compaction.lag.ms exceeded"
    elif ratio > cfg.min_cleanable_dirty_ratio:
        eligible, reason = (
            True,
            f"dirty ratio {ratio:.4f} > min.cleanable.dirty.ratio {cfg.min_cleanable_dirty_ratio}",
        )
    else:
        eligible, reason = (
            False,
            (f"dirty ratio {ratio:.4f} <= min.cleanable.dirty.ratio {cfg.min_cleanable_dirty_ratio}"),
        )
    return CleanPlan(
        first_dirty, first_uncleanable, clean_bytes, cleanable_bytes, must_compact, reset, eligible, reason,
        lso, log_start, leo,
    )  # fmt: skip


# ============================================================================================ transactions
@dataclass
class _AbortedState:
    txn: AbortedTxn
    last_observed: int | None = None


@dataclass
class TransactionTracker:
    """CleanedTransactionMetadata: which transactional batches are aborted, which markers can go."""

    _heap: list = field(default_factory=list)
    _seen: set = field(default_factory=set)
    ongoing_committed: set = field(default_factory=set)
    ongoing_aborted: dict = field(default_factory=dict)
    cleaned_index: list | None = None  # AbortedTxn entries to write into the current output segment

    def add_aborted(self, txns: list[AbortedTxn]) -> None:
        for t in txns:
            if t not in self._seen:
                self._seen.add(t)
                heapq.heappush(self._heap, (t.first_offset, t.last_offset, t.producer_id, t))

    def _consume_up_to(self, offset: int) -> None:
        while self._heap and self._heap[0][0] <= offset:
            t = heapq.heappop(self._heap)[3]
            self.ongoing_aborted.setdefault(t.producer_id, _AbortedState(t))

    def on_control_batch(self, batch: FileBatch) -> bool:
        self._consume_up_to(batch.last_offset)
        records = batch.records()
        if not records:
            return True  # an empty control batch was already cleaned
        ctype = record_batch.decode_control_record(cast(record_batch.Record, records[0])).type
        pid = batch.producer_id
        if ctype == record_batch.CONTROL_ABORT:
            state = self.ongoing_aborted.pop(pid, None)
            if state is not None and state.last_observed is not None:
                if self.cleaned_index is not None:
                    self.cleaned_index.append(state.txn)
                return False
            return True
        if ctype == record_batch.CONTROL_COMMIT:
            if pid in self.ongoing_committed:
                self.ongoing_committed.discard(pid)
                return False
            return True
        return False

    def on_data_batch(self, batch: FileBatch) -> bool:
        self._consume_up_to(batch.last_offset)
        if not batch.is_transactional:
            return False
        state = self.ongoing_aborted.get(batch.producer_id)
        if state is not None:
            state.last_observed = batch.last_offset
            return True
        self.ongoing_committed.add(batch.producer_id)
        return False

    def should_discard(self, batch: FileBatch) -> bool:
        return self.on_control_batch(batch) if batch.is_control else self.on_data_batch(batch)


# ============================================================================================ pass 1
@dataclass
class MapResult:
    end_offset: int  # next dirty offset after this round
    full: bool
    records_scanned: int
    keys_put: int
    duplicates: int  # keyed dirty records superseded by a later one in the same section


HASH_CACHE_BYTES = 64 * 1024 * 1024  # key digests kept from pass 1 for pass 2 (16 bytes per record)


@dataclass
class PassOneMemo:
    """What pass 1 learnt that pass 2 need not compute again: key digests per batch (within a byte
    budget) and the segments whose every batch was CRC-checked."""

    budget: int = HASH_CACHE_BYTES
    hashes: dict = field(default_factory=dict)
    verified: set = field(default_factory=set)

    def keep(self, segment: Segment, batch: FileBatch, table: scan.RecordTable) -> None:
        cost = table.hash_hi.nbytes + table.hash_lo.nbytes
        if cost <= self.budget:
            self.budget -= cost
            self.hashes[(segment.base_offset, batch.position)] = (table.hash_hi, table.hash_lo)

    def take(self, segment: Segment, batch: FileBatch):
        return self.hashes.pop((segment.base_offset, batch.position), None)


def build_offset_map(
    log: PartitionLog, start: int, end: int, offset_map: OffsetMap, memo: PassOneMemo | None = None
) -> MapResult:
    dirty = log.segments_in(start, end)
    tracker = TransactionTracker()
    tracker.add_aborted(log.collect_aborted_transactions(start, end))
    scanned = puts = 0
    full = False
    for i, segment in enumerate(dirty):
        next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
        position = segment.offset_index.lookup(start).position
        for batch in segment.batches(position):
            batch.verify()
            if batch.is_control:
                tracker.on_control_batch(batch)
            elif not tracker.on_data_batch(batch):
                table = scan.record_table(batch)
                if memo is not None:
                    memo.keep(segment, batch, table)
                mask = table.has_key & (table.offsets >= start)
                n_masked = int(mask.sum())
                consumed = offset_map.put_many(table.hash_hi, table.hash_lo, table.offsets, mask)
                scanned += len(table)
                if consumed < len(table):
                    puts += int(mask[:consumed].sum())
                    full = True
                    break
                puts += n_masked
            if batch.last_offset >= start:
                offset_map.update_latest_offset(batch.last_offset)
        segment.drop_cache()  # pass 2 reads it again: memory stays one segment, not the dirty section
        if full:
            break
        if memo is not None and position == 0:
            memo.verified.add(segment.base_offset)
        offset_map.update_latest_offset(next_start - 1)
    return MapResult(offset_map.latest_offset + 1, full, scanned, puts, puts - offset_map.size)


# ============================================================================================ grouping
def group_segments(
    segments: list[Segment], max_size: int, max_index_size: int, first_uncleanable: int
) -> list[list[Segment]]:
    groups: list[list[Segment]] = []
    rest = list(segments)
    while rest:
        group = [rest.pop(0)]
        log_size = group[0].size
        index_size = _index_bytes(group[0])
        time_size = _time_index_bytes(group[0])
        while rest:
            nxt = rest[0]
            last_offset = rest[1].base_offset - 1 if len(rest) > 1 else first_uncleanable - 1
            if not (
                log_size + nxt.size <= max_size
                and index_size + _index_bytes(nxt) <= max_index_size
                and time_size + _time_index_bytes(nxt) <= max_index_size
                and (nxt.size == 0 or last_offset - group[0].base_offset <= MAX_INT)
            ):
                break
            group.append(rest.pop(0))
            log_size += nxt.size
            index_size += _index_bytes(nxt)
            time_size += _time_index_bytes(nxt)
        groups.append(group)
    return groups


def _index_bytes(s: Segment) -> int:
    return s.index_path.stat().st_size if s.index_path.exists() else 0


def _time_index_bytes(s: Segment) -> int:
    return s.time_index_path.stat().st_size if s.time_index_path.exists() else 0


# ============================================================================================ pass 2
@dataclass
class CleanStats:
    records_read: int = 0
    records_retained: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    tombstones_read: int = 0
    tombstones_retained: int = 0
    batches_emptied: int = 0


class _CleanedSegment:
    """The ``.cleaned`` output of one group, written as it goes (log streamed, indexes at the end)."""

    def __init__(self, directory: Path, base: int, cfg: LogConfig) -> None:
        self.directory, self.base = directory, base
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            stale = segment_file(directory, base, suffix, CLEANED_MARKER)
            if stale.exists():
                stale.unlink()
        self.log_path = segment_file(directory, base, LOG_SUFFIX, CLEANED_MARKER)
        self._f = open(self.log_path, "wb")
        self.position = 0
        self.builder = IndexBuilder(
            base,
            index_interval_bytes=cfg.index_interval_bytes,
            segment_index_bytes=cfg.segment_index_bytes,
            path=self.log_path,
        )
        self.txn_entries: list[AbortedTxn] = []

    def append(self, data: bytes | memoryview, last_offset: int, max_timestamp: int) -> None:
        self.builder.append(self.position, last_offset, max_timestamp)
        self._f.write(data)
        self.position += len(data)

    def finish(self, mtime_ms: int, like: Segment | None = None) -> list[Path]:
        self._f.flush()
        os.fsync(self._f.fileno())
        self._f.close()
        offsets, times = self.builder.finish()
        paths = [self.log_path]
        for suffix, data in ((INDEX_SUFFIX, offsets.encode()), (TIME_INDEX_SUFFIX, times.encode())):
            path = segment_file(self.directory, self.base, suffix, CLEANED_MARKER)
            fsutil.write_bytes_fsync(path, data)
            paths.append(path)
        if self.txn_entries:
            path = segment_file(self.directory, self.base, TXN_INDEX_SUFFIX, CLEANED_MARKER)
            fsutil.write_bytes_fsync(path, encode_txn_index(self.txn_entries))
            paths.append(path)
        for p in paths[:3]:
            os.utime(p, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
        if like is not None:
            _copy_ownership(like, paths)
        return paths

    def abort(self) -> None:
        if not self._f.closed:
            self._f.close()
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            p = segment_file(self.directory, self.base, suffix, CLEANED_MARKER)
            if p.exists():
                p.unlink()


def _copy_ownership(source: Segment, paths: list[Path]) -> None:
    """Rewritten files keep the permissions (and, where we may, the owner) of the files they replace."""
    st = source.log_path.stat()
    for p in paths:
        os.chmod(p, st.st_mode & 0o7777)
        if hasattr(os, "chown") and (p.stat().st_uid, p.stat().st_gid) != (st.st_uid, st.st_gid):
            try:
                os.chown(p, st.st_uid, st.st_gid)
            except PermissionError:
                pass  # not root: the files stay ours, as any copy by this user would


@dataclass(frozen=True)
class _Round:
    offset_map: OffsetMap
    now_ms: int
    delete_retention_ms: int
    upper_bound: int  # first uncleanable offset of the round (-1: the release has no rule R2.2)
    active_producers: dict[int, LastRecord]


def _is_last_of_producer(batch: FileBatch, producers: dict[int, LastRecord]) -> bool:
    last = producers.get(batch.producer_id)
    if last is None:
        return False
    if last.last_data_offset is not None:
        return batch.last_offset == last.last_data_offset
    return batch.is_control and batch.producer_epoch == last.producer_epoch


def _clean_batch(
    batch: FileBatch, rnd: _Round, tracker: TransactionTracker, retain_legacy_deletes: bool, stats: CleanStats,
    hashes: tuple | None = None,
) -> tuple[bytes | memoryview, int] | None:  # fmt: skip
    """Kafka's filterTo for one batch: ``(bytes to write, max timestamp)`` or None to drop it."""
    header = batch.header
    v2 = header if isinstance(header, BatchHeader) else None  # legacy entries: no control, no horizon
    can_discard = tracker.should_discard(batch)
    if v2 is not None and v2.is_control:
        discard_records = can_discard and v2.has_delete_horizon and v2.delete_horizon_ms <= rnd.now_ms
    else:
        discard_records = can_discard
    if batch.producer_id >= 0 and _is_last_of_producer(batch, rnd.active_producers):
        retention = "RETAIN_EMPTY"
    elif batch.next_offset == rnd.upper_bound:
        retention = "RETAIN_EMPTY"
    elif discard_records:
        retention = "DELETE"
    else:
        retention = "DELETE_EMPTY"
    marker_for_empty_txn = can_discard and batch.is_control
    if retention == "DELETE":
        n = v2.records_count if v2 is not None else len(scan.record_table(batch))
        stats.records_read += n
        stats.bytes_read += batch.size_in_bytes
        return None
    table = scan.record_table(batch, hashes)
    if discard_records:
        mode = kernels.KEEP_NONE
    elif batch.is_control:
        mode = kernels.KEEP_ALL
    else:
        mode = kernels.KEEP_BY_RULES
    if v2 is not None:
        retain_deletes = (not v2.has_delete_horizon) or rnd.now_ms < v2.delete_horizon_ms
    else:
        retain_deletes = retain_legacy_deletes
    keys_hi, keys_lo, offs = rnd.offset_map.arrays()
    keep, kept, tombs, kept_tombs, first_ts, max_ts = kernels.decide_keep(
        table.offsets, table.key_len, table.value_null, table.timestamps, table.hash_hi, table.hash_lo,
        keys_hi, keys_lo, offs, rnd.offset_map.latest_offset, retain_deletes, mode,
    )  # fmt: skip
    n = len(table)
    stats.records_read += n
    stats.bytes_read += batch.size_in_bytes
    stats.tombstones_read += tombs
    stats.records_retained += kept
    stats.tombstones_retained += kept_tombs
    if kept:
        if v2 is not None:
            need_horizon = (kept_tombs > 0 or marker_for_empty_txn) and not v2.has_delete_horizon
            if kept == n and not need_horizon:
                return batch.data, batch.max_timestamp
            horizon = rnd.now_ms + rnd.delete_retention_ms if need_horizon else v2.delete_horizon_ms
            return _rebuild_v2(batch, v2, table, keep, horizon, kept, first_ts, max_ts)
        legacy = cast(LegacyRecord, header)
        magic_mismatch = any(r.magic != legacy.magic for r in table.legacy)
        if kept == n and not magic_mismatch:
            return batch.data, batch.max_timestamp
        return _rebuild_legacy(batch, legacy, table, keep)
    if retention == "RETAIN_EMPTY":
        stats.batches_emptied += 1
        if v2 is None:
            return batch.data, batch.max_timestamp  # the broker throws here; we keep the entry unchanged
        data = record_batch.build_batch(
            v2.base_offset, [], timestamp_type=v2.timestamp_type, producer_id=v2.producer_id,
            producer_epoch=v2.producer_epoch, base_sequence=v2.base_sequence,
            partition_leader_epoch=v2.partition_leader_epoch, is_transactional=v2.is_transactional,
            is_control=v2.is_control, last_offset_delta=v2.last_offset_delta,
            max_timestamp=v2.max_timestamp,
        )  # fmt: skip
        return data, v2.max_timestamp
    return None


def _rebuild_v2(
    batch: FileBatch, header: BatchHeader, table: scan.RecordTable, keep: np.ndarray, horizon: int,
    kept: int, first_kept_ts: int, max_kept_ts: int,
) -> tuple[bytes, int]:  # fmt: skip
    log_append = header.timestamp_type == record_batch.LOG_APPEND_TIME
    has_horizon = horizon is not None and horizon >= 0
    if has_horizon:
        base_ts = horizon
    else:
        base_ts = header.max_timestamp if log_append else first_kept_ts
    if log_append:  # the builder appends every record with the batch's append time
        new_tsd = np.full(len(table), header.max_timestamp - base_ts, dtype=np.int64)
    else:
        new_tsd = table.timestamps - base_ts
    area = kernels.rebuild_records(
        table.area, table.rec_end, table.body_start, table.raw_ts_delta, new_tsd, keep
    )
    body = area.tobytes()
    codec = header.compression
    if codec != compression.NONE:
        body = compression.compress(codec, body, record_batch.MAGIC)
    max_ts = header.max_timestamp if log_append else max_kept_ts
    attributes = header.attributes & ~record_batch.DELETE_HORIZON_MASK
    if has_horizon:
        attributes |= record_batch.DELETE_HORIZON_MASK
    data = record_batch._assemble(
        header.base_offset, header.partition_leader_epoch, attributes, header.last_offset_delta, base_ts,
        max_ts, header.producer_id, header.producer_epoch, header.base_sequence, kept, body,
    )  # fmt: skip
    return data, max_ts


def _rebuild_legacy(
    batch: FileBatch, header: LegacyRecord, table: scan.RecordTable, keep: np.ndarray
) -> tuple[bytes | memoryview, int]:
    kept = [r for r, k in zip(table.legacy, keep.tolist(), strict=True) if k]
    log_append = header.magic == 1 and header.timestamp_type == 1
    if header.compression == compression.NONE:
        return batch.data, batch.max_timestamp  # one record per entry: kept whole or dropped whole
    # The builder writes every inner message with the wrapper's magic; under LogAppendTime each carries
    # the append time and the timestamp-type bit.
    inner_attributes = 0x08 if log_append else 0
    inner = [
        LegacyRecord(r.offset, header.magic, inner_attributes, header.timestamp if log_append else r.timestamp, 0,
                     r.key, r.value)
        for r in kept
    ]  # fmt: skip
    wrapper_ts = (
        header.timestamp if log_append else (max(r.timestamp for r in kept) if header.magic == 1 else -1)
    )
    data = encode_wrapper(
        inner, header.magic, header.compression, wrapper_timestamp=wrapper_ts, log_append_time=log_append
    )
    return data, wrapper_ts


# ============================================================================================ swap
def _swap_in(directory: Path, new_paths: list[Path], base: int, old: list[Segment]) -> None:
    """LocalLog.replaceSegments for one new segment, crash-safe at every step (loader rules L2–L6)."""
    swaps = []
    for p in new_paths:  # .log first, then indexes
        target = Path(str(p)[: -len(CLEANED_MARKER)] + SWAP_MARKER)
        os.replace(p, target)
        swaps.append(target)
    fsutil.fsync_dir(directory)
    deleted = []
    for seg in old:  # ascending base offsets
        for f in seg.files():
            target = Path(str(f) + DELETED_MARKER)
            os.replace(f, target)
            deleted.append(target)
        if seg.base_offset != base:
            snap = segment_file(directory, seg.base_offset, SNAPSHOT_SUFFIX)
            if snap.exists():
                target = Path(str(snap) + DELETED_MARKER)
                os.replace(snap, target)
                deleted.append(target)
    fsutil.fsync_dir(directory)
    for s in swaps:
        os.replace(s, Path(str(s)[: -len(SWAP_MARKER)]))
    fsutil.fsync_dir(directory)
    for d in deleted:  # nobody reads these offline: no file.delete.delay.ms wait
        try:
            d.unlink()
        except FileNotFoundError:
            pass
    fsutil.fsync_dir(directory)


# ============================================================================================ entry point
@dataclass(frozen=True)
class CleanResult:
    plan: CleanPlan
    cleaned: bool
    end_offset: int  # new cleaner checkpoint (first dirty offset of the next round)
    map_full: bool
    map_utilization: float
    stats: CleanStats
    groups: int
    duration_ms: int


def clean_log(
    log: PartitionLog, plan: CleanPlan, cfg: LogConfig, broker: BrokerConfig, now_ms: int,
    producers: ProducerTable | None = None, offset_map: OffsetMap | None = None,
) -> CleanResult:  # fmt: skip
    """Run one cleaning round (both passes and the swaps). Returns the new checkpoint offset; the
    caller writes ``cleaner-offset-checkpoint`` (it is shared by all partitions of the log dir)."""
    started = time.monotonic()
    if producers is None:
        producers = build_producer_table(log, now_ms, broker.producer_id_expiration_ms)
    if offset_map is None:
        offset_map = OffsetMap(_map_memory(broker), broker.log_cleaner_io_buffer_load_factor)
    first_dirty, upper = plan.first_dirty_offset, plan.first_uncleanable_offset
    memo = PassOneMemo()
    result = build_offset_map(log, first_dirty, upper, offset_map, memo)
    end_offset = max(result.end_offset, first_dirty)  # an empty dirty section leaves the checkpoint
    # legacyDeleteHorizonMs: mtime of the last clean segment minus delete.retention.ms
    clean_segments = [s for s in log.segments if s.base_offset < first_dirty]
    legacy_horizon = clean_segments[-1].mtime_ms - cfg.delete_retention_ms if clean_segments else 0
    to_clean = [s for s in log.segments if s.base_offset < end_offset]
    groups = group_segments(to_clean, cfg.segment_bytes, cfg.segment_index_bytes, upper)
    for group in groups:  # validate everything we are about to rewrite before writing anything
        for seg in group:
            if seg.base_offset in memo.verified:
                continue
            for batch in seg.batches():
                batch.verify()
            seg.drop_cache()
    rnd = _Round(
        offset_map,
        now_ms,
        cfg.delete_retention_ms,
        # Rule R2.2 (keep the round's last batch, as an empty batch if need be) exists only in some releases.
        upper if keeps_last_batch_of_round(broker.kafka_version) else -1,
        producers.active(now_ms, broker.producer_id_expiration_ms),
    )
    tracker = TransactionTracker()
    stats = CleanStats()
    for group in groups:
        out = _CleanedSegment(log.directory, group[0].base_offset, cfg)
        tracker.cleaned_index = out.txn_entries
        try:
            for i, seg in enumerate(group):
                seg_upper = group[i + 1].base_offset if i + 1 < len(group) else seg.read_next_offset
                tracker.add_aborted(log.collect_aborted_transactions(seg.base_offset, seg_upper))
                retain_legacy = seg.mtime_ms > legacy_horizon
                for batch in seg.batches():
                    kept = _clean_batch(batch, rnd, tracker, retain_legacy, stats, memo.take(seg, batch))
                    if kept is not None:
                        data, max_ts = kept
                        out.append(data, batch.last_offset, max_ts)
                        stats.bytes_written += len(data)
                seg.drop_cache()
            new_paths = out.finish(group[-1].mtime_ms, like=group[0])
        except BaseException:
            out.abort()
            raise
        _swap_in(log.directory, new_paths, group[0].base_offset, group)
    return CleanResult(
        plan, True, end_offset, result.full, offset_map.utilization, stats, len(groups),
        int((time.monotonic() - started) * 1000),
    )  # fmt: skip


def _map_memory(broker: BrokerConfig) -> int:
    return min(broker.log_cleaner_dedupe_buffer_size // max(broker.log_cleaner_threads, 1), MAX_INT)
