"""Split cleaning: one cleaning round of one partition cut into tasks that can run in parallel.

Kafka's cleaner is one thread with one bounded offset map; when the keys outnumber the map it works in
rounds, each re-reading the log. Here one round covers every key, and the work is cut in pieces:

1. **Pre-pass** (:func:`plan_split`, sequential, headers and indexes only): Kafka's grouping of the
   segments to rewrite, the state of the transaction tracker where each pass-1 segment and each pass-2
   group starts (aborted and open transactions: ``TransactionTracker.snapshot``), the active producers
   (each producer's last batch), the delete horizons and the first uncleanable offset. A small
   picklable :class:`SplitPlan` -- what a Spark job broadcasts.
2. **Pass 1 per segment** (:func:`segment_pass1`): key digest -> last offset of the segment's dirty
   records, in digest buckets (``kernels.digest_rows``: what it holds grows with the segment's keys,
   whatever the configured dedupe buffer); for a segment that needs it, the digests of every key pass 2
   will look up there.
3. **Combine by digest** (:func:`combine_task`): per bucket, the rows of all segments merged (the latest
   offset of each key wins) and given back per group: keep lists (the offsets that are their key's
   latest) for the segments whose every keyed record went into pass 1, map entries of its own keys for
   the others.
4. **Pass 2 per group** (:func:`clean_group`): the group's ``.cleaned`` files, written by the same
   kernels as a single-task round, from the group's map entries and its tracker snapshot.
5. **Swap** (:func:`install`): group by group in ascending order, the broker's
   ``.cleaned -> .swap -> final`` steps (``segment_files.replace_segments``); the caller writes the checkpoint last.

The result is that of one round with a map large enough for every key: ``L`` = first uncleanable
offset - 1, every segment below the first uncleanable offset rewritten. :func:`run_local` runs the
pieces in this process (tests, small partitions); ``jobs/split.py`` runs them as Spark tasks.
"""

from __future__ import annotations

import copy
import math
import os
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numba import njit

from kafka_log_core import fsutil, storage
from kafka_log_core.errors import KafkaLogError
from kafka_log_core.format import compression, record_batch
from kafka_log_core.format.filenames import (
    CLEANED_MARKER,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SPLIT_SCRATCH_DIR,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_file,
)
from kafka_log_core.format.txn_index import AbortedTxn
from kafka_log_core.kernels import (
    clean_pass,
    digest_store,
    header_scan,
    map_pass,
    offset_map,
    statuses,
    txn_table,
)
from kafka_log_core.kernels.digest_rows import ROW_WORDS, ArrayPool, combine, latest_per_digest, table_rows
from kafka_log_core.kernels.offset_map import OffsetMap
from kafka_log_core.log.partition_log import PartitionLog
from kafka_log_core.log.segment import Segment
from kafka_log_core.log.segment_files import replace_segments
from kafka_log_core.rules import record_size_limit
from kafka_log_core.rules.cleaner import CleanPlan, CleanResult, CleanStats, group_segments
from kafka_log_core.rules.cleaner_segments import (
    CleanedSegment,
    clean_segment,
    map_segment,
    producer_array,
)
from kafka_log_core.rules.producer_state import ProducerTable
from kafka_log_core.rules.txn_tracker import TransactionTracker
from kafka_log_core.settings.config import BrokerConfig, LogConfig
from kafka_log_core.settings.kafka_version import kept_batch_end

BUCKET_BYTES = 256 * 1024 * 1024  # segment bytes per digest bucket (one combine task each), at most
MAX_FIRST_MAP_KEYS = 1 << 22  # a pass-1 map starts at the segment's offset span, at most this, and doubles
EMPTY_ENTRIES = np.zeros((0, ROW_WORDS), dtype=np.uint64)
# The row arrays of pass 1 and the combine, kept from one piece to the next in this process (a worker
# runs piece after piece); pass 2 needs none of them and lets them go.
POOL = ArrayPool()


class NotSplittable(KafkaLogError):
    """The round cannot be split (the caller cleans it in one task, as before)."""


@dataclass(frozen=True)
class SegmentJob:
    """Pass 1 of one segment."""

    base: int
    group: int  # the pass-2 group it belongs to
    position: int  # where its dirty part starts (the offset-index floor of the first dirty offset)
    tracker: TransactionTracker | None  # the pass-1 tracker at ``position``; None: no dirty records
    # Its lookups need a scan of every keyed record (records below the first dirty offset, transactions,
    # legacy entries), and pass 2 looks its keys up in a map. Otherwise pass 2 takes a keep list.
    full_scan: bool
    size: int  # bytes pass 1 reads (what orders the tasks: the largest first)
    # records of the segment by its batch headers: what bounds pass 1's rows (not the offset span: a
    # segment copied from a compacted log may span billions of offsets with a few records)
    records: int


@dataclass(frozen=True)
class GroupJob:
    """Pass 2 of one group of segments into one ``.cleaned`` segment."""

    index: int
    bases: tuple[int, ...]
    aborted: tuple[tuple[AbortedTxn, ...], ...]  # per segment: the aborted transactions pass 2 adds there
    tracker: TransactionTracker  # the pass-2 tracker where the group starts
    size: int  # bytes of its segments


@dataclass(frozen=True)
class SplitPlan:
    directory: str
    plan: CleanPlan
    cfg: LogConfig
    now_ms: int
    end_offset: int  # the new cleaner checkpoint: the first uncleanable offset
    upper_bound: int  # rule R2.2's bound (kafka_version.kept_batch_end; -1 where the release lacks it)
    legacy_horizon: int
    producers: np.ndarray  # clean_pass.PRODUCER rows
    segments: tuple[SegmentJob, ...]
    groups: tuple[GroupJob, ...]
    bucket_bits: int  # the digest buckets: ranges of the top bits of digest hi (``kernels.digest_rows``)
    max_batch_bytes: int  # the most one batch's records may decompress to

    @property
    def latest_offset(self) -> int:
        return self.end_offset - 1

    @property
    def buckets(self) -> int:
        return 1 << self.bucket_bits


@dataclass(frozen=True)
class GroupOutput:
    index: int
    paths: tuple[str, ...]
    stats: CleanStats = field(default_factory=CleanStats)


# ============================================================================================ pre-pass
def plan_split(
    log: PartitionLog, plan: CleanPlan, cfg: LogConfig, broker: BrokerConfig, now_ms: int, producers: ProducerTable,
    bucket_bits: int | None = None, max_batch_bytes: int = compression.MAX_BATCH_BYTES,
) -> SplitPlan:  # fmt: skip
    """The sequential facts of the round, from batch headers and the indexes (no record is read, unless a
    lowered max.decompressed.message.bytes needs checking: ``record_size_limit``)."""
    first_dirty, upper = plan.first_dirty_offset, plan.first_uncleanable_offset
    if first_dirty >= upper:
        raise NotSplittable(f"{log.directory}: no dirty section to clean")
    to_clean = [s for s in log.segments if s.base_offset < upper]
    record_size_limit.check_round(to_clean, cfg, broker, max_batch_bytes)
    groups = group_segments(to_clean, cfg.segment_bytes, cfg.segment_index_bytes, upper)
    dirty = {s.base_offset for s in log.segments_in(first_dirty, upper)}

    # One walk over the headers of every segment to rewrite, two trackers: pass 1's as build_map runs it
    # over the dirty section, pass 2's as clean_log runs it over every group in order.
    map_tracker = TransactionTracker()
    map_tracker.add_aborted(log.collect_aborted_transactions(first_dirty, upper))
    clean_tracker = TransactionTracker(record_events=True)
    seg_jobs: list[SegmentJob] = []
    group_jobs: list[GroupJob] = []
    for g, group in enumerate(groups):
        group_snapshot = clean_tracker.snapshot(group[0].base_offset)
        aborted = []
        for i, seg in enumerate(group):
            rows = seg.headers().view(np.int64).reshape(-1, header_scan.HEADER_FIELDS)
            records = int(np.maximum(rows[:, header_scan.H_RECORDS_COUNT], 0).sum())  # legacy entries: -1
            seg_upper = group[i + 1].base_offset if i + 1 < len(group) else seg.read_next_offset
            aborted.append(tuple(log.collect_aborted_transactions(seg.base_offset, seg_upper)))
            if seg.base_offset in dirty:
                position = seg.offset_index.lookup(first_dirty).position
                snapshot = map_tracker.snapshot(seg.base_offset)
                from_position = rows[np.searchsorted(rows[:, header_scan.H_POSITION], position) :]
                unsure = _track(seg, from_position, map_tracker)
                # Pass 2 looks up the keys of every batch its own tracker keeps. Where pass 1's tracker may
                # judge a transactional batch otherwise (it starts at the first dirty offset, pass 2 at the
                # log start: Kafka's too), the lookups come from every keyed record, not from the map
                # entries; legacy entries too (their pass 2 looks keys up in the map). Elsewhere every keyed
                # record pass 2 meets was put in pass 1, and pass 2 needs no digest: it keeps the records
                # whose offset is their key's latest.
                full = seg.base_offset < first_dirty or unsure
                size = seg.size - position + (seg.size if full else 0)
                seg_jobs.append(SegmentJob(seg.base_offset, g, position, snapshot, full, size, records))
            else:
                seg_jobs.append(SegmentJob(seg.base_offset, g, 0, None, True, seg.size, records))
            clean_tracker.add_aborted(list(aborted[-1]))
            _track(seg, rows, clean_tracker)
            clean_tracker.take_events()
        bases = tuple(seg.base_offset for seg in group)
        group_jobs.append(GroupJob(g, bases, tuple(aborted), group_snapshot, sum(seg.size for seg in group)))

    clean_segments = [s for s in log.segments if s.base_offset < first_dirty]
    legacy_horizon = clean_segments[-1].mtime_ms - cfg.delete_retention_ms if clean_segments else 0
    if bucket_bits is None:  # at most BUCKET_BYTES of segments a bucket, two buckets at least
        bucket_bits = max(1, math.ceil(math.log2(max(1, sum(s.size for s in to_clean)) / BUCKET_BYTES)))
    return SplitPlan(
        str(log.directory), plan, cfg, now_ms, upper,
        kept_batch_end(broker.kafka_version, upper, log.high_watermark),
        legacy_horizon, producer_array(producers.active(now_ms, broker.producer_id_expiration_ms)),
        tuple(seg_jobs), tuple(group_jobs), bucket_bits, max_batch_bytes,
    )  # fmt: skip


def _track(segment: Segment, rows: np.ndarray, tracker: TransactionTracker) -> bool:
    """The tracker through header ``rows`` of ``segment`` (compiled). True when a transactional data
    batch or a legacy (magic 0/1) entry was among them."""
    transactional = bool(
        np.any(
            (
                rows[:, header_scan.H_ATTRIBUTES]
                & (record_batch.TRANSACTIONAL_MASK | record_batch.CONTROL_MASK)
            )
            == record_batch.TRANSACTIONAL_MASK
        )
        or np.any(rows[:, header_scan.H_MAGIC] < 2)
    )
    i = 0
    while True:
        status, i = track_headers(rows, i, tracker.table, tracker.state, tracker.events)
        if status == statuses.DONE:
            return transactional
        if status == statuses.STOP_TXN:
            tracker.consume_up_to(int(rows[i, header_scan.H_LAST_OFFSET]))
        elif status == statuses.STOP_TXN_TABLE:
            tracker.grow()
        else:
            raise NotSplittable(
                f"{segment.log_path}: the control batch at position {int(rows[i, header_scan.H_POSITION])} is not a "
                "plain marker: cleaned in one task"
            )
        tracker.take_events()


@njit(cache=True)
def track_headers(rows, i, table, tstate, events):
    """The tracker calls pass 2 makes (spec §6), over scan_headers rows from row ``i``: returns
    (status, row): DONE, or STOP_TXN / STOP_TXN_TABLE / ERR_CONTROL at the row where Python acts."""
    while i < rows.shape[0]:
        last = rows[i, header_scan.H_LAST_OFFSET]
        if last >= tstate[0].next_aborted_first:
            return statuses.STOP_TXN, i
        if rows[i, header_scan.H_MAGIC] == 2:
            pid = rows[i, header_scan.H_PRODUCER_ID]
            attributes = rows[i, header_scan.H_ATTRIBUTES]
            if attributes & record_batch.CONTROL_MASK:
                count = rows[i, header_scan.H_RECORDS_COUNT]
                ctype = rows[i, header_scan.H_CONTROL_TYPE]
                if count > 0 and ctype == header_scan.UNREADABLE_CONTROL:
                    return statuses.ERR_CONTROL, i
                if tstate[0].events >= events.shape[0]:
                    tstate[0].events = 0  # the pre-pass does not need them
                txn_table.track_control(table, tstate, events, pid, count, ctype)
            else:
                grow, _ = txn_table.track_data(
                    table, tstate, pid, (attributes & record_batch.TRANSACTIONAL_MASK) != 0, last
                )
                if grow:
                    return statuses.STOP_TXN_TABLE, i
        i += 1
    return statuses.DONE, i


# ============================================================================================ pass 1
@dataclass(frozen=True)
class Pass1Output:
    """Pass 1 of one segment: rows of digest hi, lo and offset of its dirty keyed records, reduced to
    the key's last where that pays (the map rows), and where the segment needs a full scan the digests
    of every key it holds (lookups, two words a row), each in bucket order: bucket ``b`` at rows
    ``bounds[b]:bounds[b + 1]``."""

    maps: np.ndarray
    map_bounds: np.ndarray
    lookups: np.ndarray | None = None
    lookup_bounds: np.ndarray | None = None


def segment_pass1(sp: SplitPlan, job: SegmentJob) -> Pass1Output:
    """Pass 1 of one segment. The map rows' keys are also those pass 2 looks up in this segment, unless
    the segment needs a full scan (records below the first dirty offset, transactions, legacy entries).
    What it holds grows with the segment's keys, whatever the configured dedupe buffer."""
    segment = Segment.open(sp.directory, job.base)
    bits = sp.bucket_bits
    try:
        maps, map_bounds = EMPTY_ENTRIES, np.zeros(sp.buckets + 1, dtype=np.int64)
        if not job.full_scan and job.tracker is not None:
            keyed = _all_keyed(segment, job, sp.plan.first_dirty_offset, sp.max_batch_bytes)
            maps, map_bounds = latest_per_digest(
                keyed, bits, always=False, into=POOL.take("pass1-maps", keyed.shape)
            )
            return Pass1Output(maps, map_bounds)
        if job.tracker is not None:
            table = _scan(
                segment,
                job.position,
                sp.plan.first_dirty_offset,
                copy.deepcopy(job.tracker),
                sp.max_batch_bytes,
            )
            maps, map_bounds = latest_per_digest(table_rows(table), bits, always=False)
        if not job.full_scan:
            return Pass1Output(maps, map_bounds)
        # every keyed record (no aborted list: a superset of what pass 2 looks up)
        every = table_rows(_scan(segment, 0, -1, TransactionTracker(), sp.max_batch_bytes))
        lookups, lookup_bounds = latest_per_digest(
            every, bits, always=False, into=POOL.take("pass1-lookups", every.shape)
        )
        return Pass1Output(maps, map_bounds, np.ascontiguousarray(lookups[:, :2]), lookup_bounds)
    finally:
        segment.drop_cache()


def _all_keyed(segment: Segment, job: SegmentJob, start_offset: int, max_batch_bytes: int) -> np.ndarray:
    """Rows (digest hi, lo, offset) of every keyed record of a segment without transactions or legacy
    entries: pass 1 with no map (a map over the whole segment misses the cache on nearly every record;
    :func:`latest_per_digest` then works range by range of digests, in cache)."""
    rows = max(1, min(job.records, segment.read_next_offset - segment.base_offset))  # >= its records
    store = (
        POOL.take("pass1-store", (rows, ROW_WORDS)),
        statuses.new_state(digest_store.STORE_STATE, mode=digest_store.STORE_FILL, valid=True),
    )
    st = statuses.new_state(
        map_pass.MAP_STATE,
        start_offset=start_offset,
        latest_offset=-1,
        rows_only=1,
        max_batch_bytes=max_batch_bytes,
    )
    assert job.tracker is not None
    map_segment(segment, job.position, _NO_TABLE, copy.deepcopy(job.tracker), st, store)
    used = int(store[1]["used"][0])
    if used != int(st["puts"][0]) or not bool(store[1]["valid"][0]):
        raise KafkaLogError(f"{segment.log_path}: {int(st['puts'][0])} keyed records, {used} stored")
    return store[0][:used]


_NO_TABLE = np.zeros((1, offset_map.SLOT_WORDS), dtype=np.uint64)


def _scan(
    segment: Segment, position: int, start_offset: int, tracker: TransactionTracker, max_batch_bytes: int
) -> np.ndarray:
    """The segment's map (a compiled hash table) from ``position``."""
    keys = max(16, min(segment.read_next_offset - segment.base_offset, MAX_FIRST_MAP_KEYS))  # >= its records
    table = _table(keys)
    st = statuses.new_state(
        map_pass.MAP_STATE,
        start_offset=start_offset,
        latest_offset=-1,
        keys=0,
        capacity=keys,
        max_batch_bytes=max_batch_bytes,
    )
    while map_segment(segment, position, table, tracker, st):  # full: twice as large, and go on
        keys *= 2
        rows = table_rows(table)
        table = _table(keys)
        offset_map.map_put_many(table, np.ascontiguousarray(rows[:, 0]), np.ascontiguousarray(rows[:, 1]),
                             rows[:, 2].astype(np.int64), 0, keys, np.ones(len(rows), dtype=np.bool_))  # fmt: skip
        st["capacity"] = keys
        position = int(st["position"][0])  # the batch where it filled: its puts are repeated, harmless
    return table


def _table(keys: int) -> np.ndarray:
    return np.zeros((math.ceil(keys / 0.75) + 1, offset_map.SLOT_WORDS), dtype=np.uint64)


# ============================================================================================ pass 2
def clean_group(sp: SplitPlan, job: GroupJob, parts: list[np.ndarray]) -> GroupOutput:
    """Pass 2 of one group into its ``.cleaned`` files, from what the combine gave it: map entries of
    its keys (rows) and keep lists (offsets)."""
    directory = Path(sp.directory)
    group = [Segment.open(directory, b) for b in job.bases]
    entries = group_entries([p for p in parts if p.ndim == 2])
    keep = np.sort(np.concatenate([p for p in parts if p.ndim == 1] or [np.zeros(0, dtype=np.int64)]))
    by_map = {s.base for s in sp.segments if s.full_scan}
    offset_map = OffsetMap((2 * len(entries) + 64) * 24, 0.9, len(entries))
    offset_map.put_many(np.ascontiguousarray(entries[:, 0]), np.ascontiguousarray(entries[:, 1]),
                        entries[:, 2].astype(np.int64), np.ones(len(entries), dtype=np.bool_))  # fmt: skip
    tracker = copy.deepcopy(job.tracker)  # a broadcast value: a retried task starts from it again
    st = statuses.new_state(
        clean_pass.CLEAN_STATE, now_ms=sp.now_ms, delete_retention_ms=sp.cfg.delete_retention_ms,
        upper_bound=sp.upper_bound, latest_offset=sp.latest_offset, max_batch_bytes=sp.max_batch_bytes,
    )  # fmt: skip
    out = CleanedSegment(directory, group[0].base_offset, sp.cfg)
    out.start(st)
    try:
        for seg, aborted in zip(group, job.aborted, strict=True):
            tracker.add_aborted(list(aborted))
            clean_segment(
                seg, out, offset_map.table, sp.producers, tracker, st, seg.mtime_ms > sp.legacy_horizon,
                keep=None if seg.base_offset in by_map else keep,
            )  # fmt: skip
            seg.drop_cache()
            fsutil.drop_cached_pages(seg.log_path)  # read for the last time: swapped out later
        paths = out.finish(st, group[-1].mtime_ms, like=group[0])
    except BaseException:
        out.abort()
        raise
    return GroupOutput(job.index, tuple(str(p) for p in paths), CleanStats.from_state(st))


# ============================================================================================ swap
def remove_scratch(directory: str | os.PathLike[str]) -> bool:
    """Remove the split scratch directory of a partition directory (one an interrupted run left, or
    this run's own). True when there was one."""
    scratch = os.path.join(directory, SPLIT_SCRATCH_DIR)
    if not storage.exists(scratch):
        return False
    shutil.rmtree(scratch)
    return True


def remove_outputs(sp: SplitPlan) -> None:
    """Drop every ``.cleaned`` file of the round (a task failed: nothing is swapped in)."""
    for job in sp.groups:
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            segment_file(sp.directory, job.bases[0], suffix, CLEANED_MARKER).unlink(missing_ok=True)


def install(sp: SplitPlan, outputs: list[GroupOutput]) -> CleanStats:
    """Swap the groups in, lowest first, as the broker replaces them one after the other."""
    directory = Path(sp.directory)
    by_index = {o.index: o for o in outputs}
    missing = [job.index for job in sp.groups if job.index not in by_index]
    if missing:
        raise KafkaLogError(f"{directory}: groups {missing} were not cleaned; nothing swapped in")
    total = CleanStats()
    for job in sp.groups:
        out = by_index[job.index]
        old = [Segment.open(directory, b) for b in job.bases]
        replace_segments(directory, [Path(p) for p in out.paths], job.bases[0], old)
        for name in total.__dataclass_fields__:
            setattr(total, name, getattr(total, name) + getattr(out.stats, name))
    return total


# ============================================================================================ exchange
# The pieces pass between tasks as files in the partition directory's scratch directory (the shared
# filesystem every task reads the segments from and writes its .cleaned files to): raw rows, and the
# bounds of each bucket or group in them, which go through the driver (a few numbers per task).
@dataclass(frozen=True)
class SegmentFiles:
    """What pass 1 of one segment left in the scratch directory."""

    index: int
    map_bounds: np.ndarray  # int64, one more than the buckets
    lookup_bounds: np.ndarray | None


@dataclass(frozen=True)
class BucketFiles:
    """What the combine of one bucket left in the scratch directory: per group, its keep-list offsets
    and its map entries."""

    bucket: int
    keep_bounds: np.ndarray  # int64, one more than the groups
    entry_bounds: np.ndarray


def scratch_dir(sp: SplitPlan) -> Path:
    return Path(sp.directory) / SPLIT_SCRATCH_DIR


def pass1_task(sp: SplitPlan, index: int) -> SegmentFiles:
    job = sp.segments[index]
    out = segment_pass1(sp, job)
    d = scratch_dir(sp)
    out.maps.tofile(d / f"{job.base}.map")
    if out.lookups is not None:
        out.lookups.tofile(d / f"{job.base}.lookup")
    return SegmentFiles(
        index, _bounds(out.map_bounds), None if out.lookup_bounds is None else _bounds(out.lookup_bounds)
    )


def combine_task(sp: SplitPlan, bucket: int, segments: list[SegmentFiles]) -> BucketFiles:
    """One bucket: the latest offset of each key over every segment's map rows, given back per group as
    keep lists (the offsets that are their key's latest, for the segments pass 2 keeps by offset) and
    map entries (for the digests the other segments' pass 2 looks up)."""
    d = scratch_dir(sp)
    maps = [
        _read_rows(d / f"{sp.segments[f.index].base}.map", f.map_bounds, bucket, ROW_WORDS) for f in segments
    ]
    wanted = [  # (the group that looks the digests up, the digests)
        (
            sp.segments[f.index].group,
            _read_rows(d / f"{sp.segments[f.index].base}.lookup", f.lookup_bounds, bucket, 2),
        )
        for f in segments
        if f.lookup_bounds is not None
    ]
    lookups = POOL.take("combine-lookups", (sum(len(rows) for _, rows in wanted), ROW_WORDS))
    at = 0
    for group, rows in wanted:
        lookups[at : at + len(rows), :2] = rows
        lookups[at : at + len(rows), 2] = group
        at += len(rows)
    keep, keep_bounds, entries, entry_bounds = combine(
        maps, lookups, sp.bucket_bits, np.array([j.base for j in sp.segments], dtype=np.int64),
        np.array([j.group for j in sp.segments], dtype=np.int64),
        np.array([not j.full_scan for j in sp.segments], dtype=np.bool_), len(sp.groups), POOL,
    )  # fmt: skip
    keep.tofile(d / f"bucket-{bucket}.keep")
    entries.tofile(d / f"bucket-{bucket}.entries")
    return BucketFiles(bucket, _bounds(keep_bounds), _bounds(entry_bounds))


def _bounds(bounds: np.ndarray) -> np.ndarray:
    """Bounds as they travel to the driver and on to the next tasks: a compact int64 array of its own."""
    return np.array(bounds, dtype=np.int64)


def pass2_task(sp: SplitPlan, group: int, buckets: list[BucketFiles]) -> GroupOutput:
    POOL.clear()
    d = scratch_dir(sp)
    parts: list[np.ndarray] = []
    for b in buckets:
        keep = _read_rows(d / f"bucket-{b.bucket}.keep", b.keep_bounds, group, 1).view(np.int64).reshape(-1)
        entries = _read_rows(d / f"bucket-{b.bucket}.entries", b.entry_bounds, group, ROW_WORDS)
        parts += [p for p in (keep, entries) if len(p)]
    return clean_group(sp, sp.groups[group], parts)


def drop_pass1_files(sp: SplitPlan) -> None:
    """Once the combine is done: pass 1's files, before their pages need writing out."""
    d = scratch_dir(sp)
    for job in sp.segments:
        for suffix in (".map", ".lookup"):
            (d / f"{job.base}{suffix}").unlink(missing_ok=True)


def _read_rows(path: Path, bounds: np.ndarray, i: int, columns: int) -> np.ndarray:
    """Rows ``bounds[i]:bounds[i + 1]`` of a scratch file of ``columns`` words a row, read where they lie
    (a read-only array over a memory map of the file: no copy)."""
    start, end = int(bounds[i]), int(bounds[i + 1])
    n = end - start
    if n == 0:
        return np.zeros((0, columns), dtype=np.uint64)

    def complete(st: os.stat_result) -> None:
        if st.st_size < end * columns * 8:
            raise KafkaLogError(
                f"{path}: {st.st_size} bytes, rows up to {end} of {columns * 8} bytes were written (scratch "
                "file cut short)"
            )

    view = storage.map_regular(path, complete)
    return np.frombuffer(view, dtype=np.uint64, count=n * columns, offset=start * columns * 8).reshape(
        n, columns
    )


# ============================================================================================ drivers
Runner = Callable[[SplitPlan], list[GroupOutput]]


def balanced_bins(sizes: list[int], bins: int) -> list[list[int]]:
    """The indexes of ``sizes`` in at most ``bins`` bins of nearly equal total, the largest bin first
    (longest processing time first: each index, largest first, into the bin with the least so far). A
    Spark task runs a bin's pieces one after the other: fewer tasks than pieces, so fewer task start-ups,
    and workers that end close together."""
    bins = max(1, min(len(sizes), bins))
    totals = [0] * bins
    out: list[list[int]] = [[] for _ in range(bins)]
    for i in sorted(range(len(sizes)), key=lambda i: (-sizes[i], i)):
        b = min(range(bins), key=lambda b: (totals[b], b))
        out[b].append(i)
        totals[b] += sizes[i]
    return [out[b] for b in sorted(range(bins), key=lambda b: -totals[b]) if out[b]]


def run_local(sp: SplitPlan) -> list[GroupOutput]:
    """Every piece in this process, in order, through the scratch files (what a Spark job does across
    tasks: ``jobs/split.py``)."""
    segments = [pass1_task(sp, i) for i in range(len(sp.segments))]
    buckets = [combine_task(sp, b, segments) for b in range(sp.buckets)]
    drop_pass1_files(sp)
    try:
        return [pass2_task(sp, job.index, buckets) for job in sp.groups]
    finally:
        POOL.clear()


def group_entries(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else EMPTY_ENTRIES


def clean_log_split(
    log: PartitionLog, plan: CleanPlan, cfg: LogConfig, broker: BrokerConfig, now_ms: int, producers: ProducerTable,
    runner: Runner = run_local, max_batch_bytes: int = compression.MAX_BATCH_BYTES,
) -> CleanResult:  # fmt: skip
    """One round over every key, cut in pieces run by ``runner``; same result as ``cleaner.clean_log``
    with a map large enough for every key. The caller writes the cleaner checkpoint."""
    started = time.monotonic()
    sp = plan_split(log, plan, cfg, broker, now_ms, producers, max_batch_bytes=max_batch_bytes)
    scratch = scratch_dir(sp)
    remove_scratch(log.directory)
    scratch.mkdir()
    try:
        outputs = runner(sp)
    except BaseException:
        remove_outputs(sp)
        raise
    finally:
        remove_scratch(log.directory)
    stats = install(sp, outputs)
    return CleanResult(
        plan, True, sp.end_offset, False, 0.0, stats, len(sp.groups), int((time.monotonic() - started) * 1000)
    )
