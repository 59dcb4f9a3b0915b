"""Split cleaning: one cleaning round of one partition cut into tasks that can run in parallel.

Kafka's cleaner is one thread with one bounded offset map; when the keys outnumber the map it works in
rounds, each re-reading the log. Here one round covers every key, and the work is cut in pieces:

1. **Pre-pass** (:func:`plan_split`, sequential, headers and indexes only): Kafka's grouping of the
   segments to rewrite, the state of the transaction tracker where each pass-1 segment and each pass-2
   group starts (aborted and open transactions: ``TransactionTracker.snapshot``), the active producers
   (each producer's last batch), the delete horizons and the first uncleanable offset. A small
   picklable :class:`SplitPlan` -- what a Spark job broadcasts.
2. **Pass 1 per segment** (:func:`segment_pieces`): key digest -> last offset of the segment's dirty
   records (the kernels' pass 1 into a map that grows instead of filling), cut into digest buckets; for
   a segment that needs it, the digests of every key pass 2 will look up there.
3. **Combine by digest** (:func:`combine_bucket`): per bucket, the pieces of all segments merged (the
   latest offset of each key wins) and given back per group: each group receives only the map entries
   of its own keys. A bucket is a range of digests, as the map's home slots are, so the rows stay
   nearly in slot order from pass 1 to the combine and into pass 2's map.
4. **Pass 2 per group** (:func:`clean_group`): the group's ``.cleaned`` files, written by the same
   kernels as a single-task round, from the group's map entries and its tracker snapshot.
5. **Swap** (:func:`install`): group by group in ascending order, the broker's
   ``.cleaned -> .swap -> final`` steps (``cleaner.swap_in``); the caller writes the checkpoint last.

The result is that of one round with a map large enough for every key: ``L`` = first uncleanable
offset - 1, every segment below the first uncleanable offset rewritten. :func:`run_local` runs the
pieces in this process (tests, small partitions); ``jobs/split.py`` runs them as Spark tasks.
"""

from __future__ import annotations

import copy
import math
import shutil
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from numba import njit

from kafka_log_core.errors import KafkaLogError
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
from kafka_log_core.kernels import primitives as kernels
from kafka_log_core.kernels import segment_kernels as sk
from kafka_log_core.kernels.offset_map import OffsetMap
from kafka_log_core.log.partition_log import PartitionLog
from kafka_log_core.log.segment import Segment
from kafka_log_core.rules.cleaner import CleanPlan, CleanResult, CleanStats, group_segments, swap_in
from kafka_log_core.rules.cleaner_segments import (
    CleanedSegment,
    clean_segment,
    map_segment,
    new_store,
    producer_array,
)
from kafka_log_core.rules.producer_state import ProducerTable
from kafka_log_core.rules.txn_tracker import TransactionTracker
from kafka_log_core.settings.config import BrokerConfig, LogConfig
from kafka_log_core.settings.kafka_version import keeps_last_batch_of_round

BUCKET_BYTES = 256 * 1024 * 1024  # segment bytes per shuffle bucket (one combine task each)
MAX_FIRST_MAP_KEYS = 1 << 22  # a pass-1 map starts at the segment's offset span, at most this, and doubles
ENTRY = 3  # columns of a map entry row: digest hi, digest lo, offset (uint64)
EMPTY_ENTRIES = np.zeros((0, ENTRY), dtype=np.uint64)


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


@dataclass(frozen=True)
class GroupJob:
    """Pass 2 of one group of segments into one ``.cleaned`` segment."""

    index: int
    bases: tuple[int, ...]
    aborted: tuple[tuple[AbortedTxn, ...], ...]  # per segment: the aborted transactions pass 2 adds there
    tracker: TransactionTracker  # the pass-2 tracker where the group starts


@dataclass(frozen=True)
class SplitPlan:
    directory: str
    plan: CleanPlan
    cfg: LogConfig
    now_ms: int
    end_offset: int  # the new cleaner checkpoint: the first uncleanable offset
    upper_bound: int  # rule R2.2's bound (-1 where the release lacks it)
    legacy_horizon: int
    producers: np.ndarray  # segment_kernels.PRODUCER rows
    segments: tuple[SegmentJob, ...]
    groups: tuple[GroupJob, ...]
    buckets: int

    @property
    def latest_offset(self) -> int:
        return self.end_offset - 1


@dataclass(frozen=True)
class GroupOutput:
    index: int
    paths: tuple[str, ...]
    stats: CleanStats = field(default_factory=CleanStats)


# ============================================================================================ pre-pass
def plan_split(
    log: PartitionLog, plan: CleanPlan, cfg: LogConfig, broker: BrokerConfig, now_ms: int, producers: ProducerTable,
    buckets: int | None = None,
) -> SplitPlan:  # fmt: skip
    """The sequential facts of the round, from batch headers and the indexes (no record is read)."""
    first_dirty, upper = plan.first_dirty_offset, plan.first_uncleanable_offset
    if first_dirty >= upper:
        raise NotSplittable(f"{log.directory}: no dirty section to clean")
    to_clean = [s for s in log.segments if s.base_offset < upper]
    groups = group_segments(to_clean, cfg.segment_bytes, cfg.segment_index_bytes, upper)
    group_of = {s.base_offset: g for g, group in enumerate(groups) for s in group}
    dirty = {s.base_offset for s in log.segments_in(first_dirty, upper)}

    # the pass-1 tracker, as build_map runs it over the dirty section
    map_tracker = TransactionTracker()
    map_tracker.add_aborted(log.collect_aborted_transactions(first_dirty, upper))
    seg_jobs: list[SegmentJob] = []
    for s in to_clean:
        if s.base_offset not in dirty:
            seg_jobs.append(SegmentJob(s.base_offset, group_of[s.base_offset], 0, None, True))
            continue
        position = s.offset_index.lookup(first_dirty).position
        snapshot = map_tracker.snapshot(s.base_offset)
        unsure = _track(s, position, map_tracker)
        # Pass 2 looks up the keys of every batch its own tracker keeps. Where pass 1's tracker may judge
        # a transactional batch otherwise (it starts at the first dirty offset, pass 2 at the log start:
        # Kafka's too), the lookups come from every keyed record, not from the map entries; legacy entries
        # too (their pass 2 looks keys up in the map). Elsewhere every keyed record pass 2 meets was put
        # in pass 1, and pass 2 needs no digest: it keeps the records whose offset is their key's latest.
        full = s.base_offset < first_dirty or unsure
        seg_jobs.append(SegmentJob(s.base_offset, group_of[s.base_offset], position, snapshot, full))

    # the pass-2 tracker, as clean_log runs it over every group in order
    clean_tracker = TransactionTracker(record_events=True)
    group_jobs: list[GroupJob] = []
    for g, group in enumerate(groups):
        snapshot = clean_tracker.snapshot(group[0].base_offset)
        aborted = []
        for i, s in enumerate(group):
            seg_upper = group[i + 1].base_offset if i + 1 < len(group) else s.read_next_offset
            aborted.append(tuple(log.collect_aborted_transactions(s.base_offset, seg_upper)))
            clean_tracker.add_aborted(list(aborted[-1]))
            _track(s, 0, clean_tracker)
            clean_tracker.take_events()
        group_jobs.append(GroupJob(g, tuple(s.base_offset for s in group), tuple(aborted), snapshot))

    clean_segments = [s for s in log.segments if s.base_offset < first_dirty]
    legacy_horizon = clean_segments[-1].mtime_ms - cfg.delete_retention_ms if clean_segments else 0
    if buckets is None:
        buckets = max(2, math.ceil(sum(s.size for s in to_clean) / BUCKET_BYTES))
    return SplitPlan(
        str(log.directory), plan, cfg, now_ms, upper,
        upper if keeps_last_batch_of_round(broker.kafka_version) else -1,
        legacy_horizon, producer_array(producers.active(now_ms, broker.producer_id_expiration_ms)),
        tuple(seg_jobs), tuple(group_jobs), buckets,
    )  # fmt: skip


def _track(segment: Segment, position: int, tracker: TransactionTracker) -> bool:
    """The tracker through every batch header of ``segment`` from ``position`` (compiled). True when a
    transactional data batch or a legacy (magic 0/1) entry was among them."""
    rows = segment.headers(position).view(np.int64).reshape(-1, sk.HEADER_FIELDS)
    transactional = bool(
        np.any(
            (rows[:, sk.H_ATTRIBUTES] & (sk.TRANSACTIONAL_MASK | sk.CONTROL_MASK)) == sk.TRANSACTIONAL_MASK
        )
        or np.any(rows[:, sk.H_MAGIC] < 2)
    )
    i = 0
    while True:
        status, i = track_headers(rows, i, tracker.table, tracker.state, tracker.events)
        if status == sk.DONE:
            return transactional
        if status == sk.STOP_TXN:
            tracker.consume_up_to(int(rows[i, sk.H_LAST_OFFSET]))
        elif status == sk.STOP_TXN_TABLE:
            tracker.grow()
        else:
            raise NotSplittable(
                f"{segment.log_path}: the control batch at position {int(rows[i, sk.H_POSITION])} is not a "
                "plain marker: cleaned in one task"
            )
        tracker.take_events()


@njit(cache=True)
def track_headers(rows, i, table, tstate, events):
    """The tracker calls pass 2 makes (spec §6), over scan_headers rows from row ``i``: returns
    (status, row): DONE, or STOP_TXN / STOP_TXN_TABLE / ERR_CONTROL at the row where Python acts."""
    while i < rows.shape[0]:
        last = rows[i, sk.H_LAST_OFFSET]
        if last >= tstate[0].next_aborted_first:
            return sk.STOP_TXN, i
        if rows[i, sk.H_MAGIC] == 2:
            pid = rows[i, sk.H_PRODUCER_ID]
            attributes = rows[i, sk.H_ATTRIBUTES]
            if attributes & sk.CONTROL_MASK:
                count = rows[i, sk.H_RECORDS_COUNT]
                ctype = rows[i, sk.H_CONTROL_TYPE]
                if count > 0 and ctype == sk.UNREADABLE_CONTROL:
                    return sk.ERR_CONTROL, i
                if tstate[0].events >= events.shape[0]:
                    tstate[0].events = 0  # the pre-pass does not need them
                sk.track_control(table, tstate, events, pid, count, ctype)
            else:
                grow, _ = sk.track_data(table, tstate, pid, (attributes & sk.TRANSACTIONAL_MASK) != 0, last)
                if grow:
                    return sk.STOP_TXN_TABLE, i
        i += 1
    return sk.DONE, i


# ============================================================================================ pass 1
MAP, LOOKUP = 0, 1  # kinds of the pieces pass 1 gives the combine
Piece = tuple  # (MAP | LOOKUP, segment base, group, rows)


@dataclass(frozen=True)
class Pass1Output:
    """Pass 1 of one segment: rows of digest hi, lo and the key's last dirty offset in the segment (MAP),
    and where the segment needs a full scan the digests of every keyed record (LOOKUP), each in bucket
    order: bucket ``b`` at rows ``bounds[b]:bounds[b + 1]``."""

    maps: np.ndarray
    map_bounds: np.ndarray
    lookups: np.ndarray | None = None
    lookup_bounds: np.ndarray | None = None


def segment_pass1(sp: SplitPlan, job: SegmentJob) -> Pass1Output:
    """Pass 1 of one segment. The MAP rows' keys are also those pass 2 looks up in this segment, unless
    the segment needs a full scan (records below the first dirty offset, transactions, legacy entries).
    The map grows as keys come: its size is the segment's distinct keys, whatever the configured dedupe
    buffer."""
    segment = Segment.open(sp.directory, job.base)
    try:
        maps, map_bounds = EMPTY_ENTRIES, np.zeros(sp.buckets + 1, dtype=np.int64)
        if not job.full_scan and job.tracker is not None:
            maps, map_bounds = last_by_key(_all_keyed(segment, job, sp.plan.first_dirty_offset), sp.buckets)
            return Pass1Output(maps, map_bounds)
        if job.tracker is not None:
            table = _scan(segment, job.position, sp.plan.first_dirty_offset, copy.deepcopy(job.tracker))
            maps, map_bounds = rows_by_bucket(table, sp.buckets, ENTRY)
        if not job.full_scan:
            return Pass1Output(maps, map_bounds)
        # every keyed record (no aborted list: a superset of what pass 2 looks up)
        lookups, lookup_bounds = rows_by_bucket(_scan(segment, 0, -1, TransactionTracker()), sp.buckets, 2)
        return Pass1Output(maps, map_bounds, lookups, lookup_bounds)
    finally:
        segment.drop_cache()


def _all_keyed(segment: Segment, job: SegmentJob, start_offset: int) -> np.ndarray:
    """Rows (digest hi, lo, offset) of every keyed record of a segment without transactions or legacy
    entries, in offset order: pass 1 with no map (a map's random writes cost more than deduplicating
    afterwards, range by range in cache: :func:`last_by_key`)."""
    store = new_store(max(1, segment.read_next_offset - segment.base_offset), sk.STORE_FILL)  # >= its records
    st = sk.new_state(sk.MAP_STATE, start_offset=start_offset, latest_offset=-1, rows_only=1)
    assert job.tracker is not None
    map_segment(segment, job.position, _NO_TABLE, copy.deepcopy(job.tracker), st, store)
    used = int(store[1]["used"][0])
    if used != int(st["puts"][0]) or not bool(store[1]["valid"][0]):
        raise KafkaLogError(f"{segment.log_path}: {int(st['puts'][0])} keyed records, {used} stored")
    return store[0][:used]


_NO_TABLE = np.zeros((1, kernels.SLOT_WORDS), dtype=np.uint64)


def _scan(segment: Segment, position: int, start_offset: int, tracker: TransactionTracker) -> np.ndarray:
    """The segment's map (a compiled hash table) from ``position``."""
    keys = max(16, min(segment.read_next_offset - segment.base_offset, MAX_FIRST_MAP_KEYS))  # >= its records
    table = _table(keys)
    st = sk.new_state(sk.MAP_STATE, start_offset=start_offset, latest_offset=-1, keys=0, capacity=keys)
    while map_segment(segment, position, table, tracker, st):  # full: twice as large, and go on
        keys *= 2
        rows, _ = rows_by_bucket(table, 1, ENTRY)
        table = _table(keys)
        kernels.map_put_many(table, np.ascontiguousarray(rows[:, 0]), np.ascontiguousarray(rows[:, 1]),
                             rows[:, 2].astype(np.int64), 0, keys, np.ones(len(rows), dtype=np.bool_))  # fmt: skip
        st["capacity"] = keys
        position = int(st["position"][0])  # the batch where it filled: its puts are repeated, harmless
    return table


def _table(keys: int) -> np.ndarray:
    return np.zeros((math.ceil(keys / 0.75) + 1, kernels.SLOT_WORDS), dtype=np.uint64)


@njit(cache=True, inline="always")
def bucket_of(hi, buckets):
    """A digest's bucket: its first word's top 32 bits scaled to [0, buckets), as the map's home slot
    (``primitives.map_slot``) -- so a map's slots in order are its keys nearly in bucket order, and a
    bucket's rows enter the combine's map nearly in slot order (memory read and written as a stream)."""
    return np.int64(((hi >> np.uint64(32)) * np.uint64(buckets)) >> np.uint64(32))


@njit(cache=True)
def rows_by_bucket(table, buckets, columns):
    """The occupied slots of a map as rows (digest hi, lo[, offset]) grouped by :func:`bucket_of`, each
    bucket's rows in slot order: (rows, bounds), bucket ``b`` at ``rows[bounds[b]:bounds[b + 1]]``."""
    counts = np.zeros(buckets + 1, dtype=np.int64)
    for s in range(table.shape[0]):
        if table[s, kernels.SLOT_OFFSET] != 0:
            counts[bucket_of(table[s, kernels.SLOT_HI], buckets) + 1] += 1
    bounds = np.cumsum(counts)
    fill = bounds[:-1].copy()
    rows = np.empty((bounds[-1], columns), dtype=np.uint64)
    for s in range(table.shape[0]):
        stored = table[s, kernels.SLOT_OFFSET]
        if stored != 0:
            b = bucket_of(table[s, kernels.SLOT_HI], buckets)
            i = fill[b]
            fill[b] += 1
            rows[i, 0] = table[s, kernels.SLOT_HI]
            rows[i, 1] = table[s, kernels.SLOT_LO]
            if columns > 2:
                rows[i, 2] = stored - np.uint64(1)  # stored + 1
    return rows, bounds


@njit(cache=True)
def last_by_key(rows, buckets):
    """A segment's keyed records (digest hi, lo, offset, in offset order) down to the last of each key,
    grouped by :func:`bucket_of`: (rows, bounds) as :func:`rows_by_bucket`. Done by sub-ranges of
    digests, each in a small map that stays in cache."""
    n = rows.shape[0]
    per_bucket = max(1, n // (buckets * SUB_RANGE_ROWS))
    parts = buckets * per_bucket  # sub-range p lies in bucket p // per_bucket
    order, starts = _by_sub_range(rows, 1, parts)
    most = 1
    for p in range(parts):
        most = max(most, starts[p + 1] - starts[p])
    table = np.zeros((2 * most + 1, kernels.SLOT_WORDS), dtype=np.uint64)
    out = np.empty((n, ENTRY), dtype=np.uint64)
    bounds = np.zeros(buckets + 1, dtype=np.int64)
    w = 0
    for p in range(parts):
        slots = 2 * (starts[p + 1] - starts[p]) + 1
        table[:slots, kernels.SLOT_OFFSET] = 0
        for j in range(starts[p], starts[p + 1]):  # offset order: a later record of a key overwrites
            i = order[j]
            _sub_put(table, slots, 1, parts, rows[i, 0], rows[i, 1], rows[i, 2])
        for j in range(starts[p], starts[p + 1]):
            i = order[j]
            if _sub_find(table, slots, 1, parts, rows[i, 0], rows[i, 1]) == np.int64(rows[i, 2]):
                out[w, 0] = rows[i, 0]
                out[w, 1] = rows[i, 1]
                out[w, 2] = rows[i, 2]
                w += 1
        bounds[p // per_bucket + 1] = w
    return out[:w].copy(), bounds


# ============================================================================================ combine
def combine_bucket(sp: SplitPlan, pieces: list[Piece]) -> list[tuple[int, np.ndarray]]:
    """One bucket: the latest offset of each key over every segment's MAP rows (a later segment's row of
    a key overwriting an earlier one's), given to the groups that look the key up (the segment's own
    group for MAP rows; LOOKUP rows, where a segment has them). Returns (group, rows of digest hi, lo and
    latest offset) for the segments pass 2 looks keys up in, (group, keep list: offsets that are their
    key's latest, int64) for the others."""
    maps = sorted((p for p in pieces if p[0] == MAP), key=lambda p: p[1])
    if not maps:
        return []
    lookup_pieces = [p for p in pieces if p[0] == LOOKUP]
    full = {job.base for job in sp.segments if job.full_scan}  # their MAP rows are not their lookups
    rows = np.concatenate([p[3] for p in maps])
    lookups = np.concatenate([p[3] for p in lookup_pieces]) if lookup_pieces else np.zeros((0, 2), np.uint64)
    latest, found = latest_by_key(rows, lookups, sp.buckets)
    out: list[tuple[int, np.ndarray]] = []
    at = 0
    for _, base, group, part in maps:
        if base not in full:  # the keep list: the offsets that are their key's latest
            end = at + len(part)
            out.append((group, rows[at:end, 2][latest[at:end]].astype(np.int64)))
        at += len(part)
    at = 0
    for _, _, group, part in lookup_pieces:
        hit = found[at : at + len(part)]
        at += len(part)
        if (hit >= 0).any():
            found_rows = np.empty((int((hit >= 0).sum()), ENTRY), dtype=np.uint64)
            found_rows[:, :2] = part[hit >= 0]
            found_rows[:, 2] = hit[hit >= 0].astype(np.uint64)
            out.append((group, found_rows))
    return out


SUB_RANGE_ROWS = 16384  # rows per sub-range of a bucket: its map (2x the slots) stays in the L2 cache


@njit(cache=True, inline="always")
def _within(hi, buckets, parts):
    """Where a digest lies in its bucket (:func:`bucket_of` leaves a uniform fraction), scaled to
    ``parts`` sub-ranges: the integer part is its sub-range, the low 32 bits where in it."""
    return (((hi >> np.uint64(32)) * np.uint64(buckets)) & np.uint64(0xFFFFFFFF)) * np.uint64(parts)


@njit(cache=True)
def _by_sub_range(keys, buckets, parts):
    """A stable counting sort of row numbers by sub-range: (order, starts)."""
    starts = np.zeros(parts + 1, dtype=np.int64)
    for i in range(keys.shape[0]):
        starts[np.int64(_within(keys[i, 0], buckets, parts) >> np.uint64(32)) + 1] += 1
    starts = np.cumsum(starts)
    fill = starts[:-1].copy()
    order = np.empty(keys.shape[0], dtype=np.int64)
    for i in range(keys.shape[0]):
        p = np.int64(_within(keys[i, 0], buckets, parts) >> np.uint64(32))
        order[fill[p]] = i
        fill[p] += 1
    return order, starts


@njit(cache=True, inline="always")
def _sub_slot(hi, buckets, parts, slots):
    return np.int64(
        ((_within(hi, buckets, parts) & np.uint64(0xFFFFFFFF)) * np.uint64(slots)) >> np.uint64(32)
    )


@njit(cache=True)
def latest_by_key(rows, lookups, buckets):
    """One bucket's combine: ``rows`` (digest hi, lo, offset) in segment order, ``lookups`` (digest hi,
    lo). Returns (for each row: is its offset its key's latest; for each lookup: its key's latest offset,
    or -1). The bucket is cut in sub-ranges of digests, each done in a small map of its own: the work of
    every key in cache, the rows read as a few streams (each segment's rows are nearly in digest order)."""
    parts = max(1, rows.shape[0] // SUB_RANGE_ROWS)
    order, starts = _by_sub_range(rows, buckets, parts)
    lorder, lstarts = _by_sub_range(lookups, buckets, parts)
    most = 1
    for p in range(parts):
        most = max(most, starts[p + 1] - starts[p])
    table = np.zeros((2 * most + 1, kernels.SLOT_WORDS), dtype=np.uint64)
    latest = np.zeros(rows.shape[0], dtype=np.bool_)
    found = np.full(lookups.shape[0], -1, dtype=np.int64)
    for p in range(parts):
        slots = 2 * (starts[p + 1] - starts[p]) + 1
        table[:slots, kernels.SLOT_OFFSET] = 0
        for j in range(starts[p], starts[p + 1]):  # segment order: a later row of a key overwrites
            i = order[j]
            _sub_put(table, slots, buckets, parts, rows[i, 0], rows[i, 1], rows[i, 2])
        for j in range(starts[p], starts[p + 1]):
            i = order[j]
            latest[i] = _sub_find(table, slots, buckets, parts, rows[i, 0], rows[i, 1]) == np.int64(
                rows[i, 2]
            )
        for j in range(lstarts[p], lstarts[p + 1]):
            i = lorder[j]
            found[i] = _sub_find(table, slots, buckets, parts, lookups[i, 0], lookups[i, 1])
    return latest, found


@njit(cache=True, inline="always")
def _sub_put(table, slots, buckets, parts, hi, lo, offset):
    """Store ``offset`` for the digest in a sub-range's map (overwriting the key's earlier one)."""
    s = _sub_slot(hi, buckets, parts, slots)
    while True:
        stored = table[s, kernels.SLOT_OFFSET]
        if stored == 0 or (table[s, kernels.SLOT_HI] == hi and table[s, kernels.SLOT_LO] == lo):
            table[s, kernels.SLOT_HI] = hi
            table[s, kernels.SLOT_LO] = lo
            table[s, kernels.SLOT_OFFSET] = offset + np.uint64(1)
            return
        s = s + 1 if s + 1 < slots else 0


@njit(cache=True, inline="always")
def _sub_find(table, slots, buckets, parts, hi, lo):
    s = _sub_slot(hi, buckets, parts, slots)
    while True:
        stored = table[s, kernels.SLOT_OFFSET]
        if stored == 0:
            return np.int64(-1)
        if table[s, kernels.SLOT_HI] == hi and table[s, kernels.SLOT_LO] == lo:
            return np.int64(stored) - 1
        s = s + 1 if s + 1 < slots else 0


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
    st = sk.new_state(
        sk.CLEAN_STATE, now_ms=sp.now_ms, delete_retention_ms=sp.cfg.delete_retention_ms,
        upper_bound=sp.upper_bound, latest_offset=sp.latest_offset,
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
        paths = out.finish(st, group[-1].mtime_ms, like=group[0])
    except BaseException:
        out.abort()
        raise
    return GroupOutput(job.index, tuple(str(p) for p in paths), CleanStats.from_state(st))


# ============================================================================================ swap
def remove_scratch(directory: str | Path) -> bool:
    """Remove the split scratch directory of a partition directory (one an interrupted run left, or
    this run's own). True when there was one."""
    scratch = Path(directory) / SPLIT_SCRATCH_DIR
    if not scratch.exists():
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
        swap_in(directory, [Path(p) for p in out.paths], job.bases[0], old)
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
    map_bounds: tuple[int, ...]
    lookup_bounds: tuple[int, ...] | None


@dataclass(frozen=True)
class BucketFiles:
    """What the combine of one bucket left in the scratch directory: per group, its keep-list offsets
    and its map entries."""

    bucket: int
    keep_bounds: tuple[int, ...]
    entry_bounds: tuple[int, ...]


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
        index, tuple(int(x) for x in out.map_bounds),
        None if out.lookup_bounds is None else tuple(int(x) for x in out.lookup_bounds),
    )  # fmt: skip


def combine_task(sp: SplitPlan, bucket: int, segments: list[SegmentFiles]) -> BucketFiles:
    d = scratch_dir(sp)
    pieces: list[Piece] = []
    for seg in segments:
        job = sp.segments[seg.index]
        maps = _read_rows(d / f"{job.base}.map", seg.map_bounds, bucket, ENTRY)
        if len(maps):
            pieces.append((MAP, job.base, job.group, maps))
        if seg.lookup_bounds is not None:
            lookups = _read_rows(d / f"{job.base}.lookup", seg.lookup_bounds, bucket, 2)
            if len(lookups):
                pieces.append((LOOKUP, job.base, job.group, lookups))
    per_group: dict[int, list[np.ndarray]] = defaultdict(list)
    for group, rows in combine_bucket(sp, pieces):
        per_group[group].append(rows)
    keep_bounds, entry_bounds = [0], [0]
    with (
        open(d / f"bucket-{bucket}.keep", "wb") as keep,
        open(d / f"bucket-{bucket}.entries", "wb") as entries,
    ):
        for gjob in sp.groups:
            parts = per_group.get(gjob.index, [])
            for rows in parts:
                (keep if rows.ndim == 1 else entries).write(np.ascontiguousarray(rows).data)
            keep_bounds.append(keep_bounds[-1] + sum(len(r) for r in parts if r.ndim == 1))
            entry_bounds.append(entry_bounds[-1] + sum(len(r) for r in parts if r.ndim == 2))
    return BucketFiles(bucket, tuple(keep_bounds), tuple(entry_bounds))


def pass2_task(sp: SplitPlan, group: int, buckets: list[BucketFiles]) -> GroupOutput:
    d = scratch_dir(sp)
    parts: list[np.ndarray] = []
    for b in buckets:
        keep = _read_rows(d / f"bucket-{b.bucket}.keep", b.keep_bounds, group, 1).view(np.int64).reshape(-1)
        entries = _read_rows(d / f"bucket-{b.bucket}.entries", b.entry_bounds, group, ENTRY)
        parts += [p for p in (keep, entries) if len(p)]
    return clean_group(sp, sp.groups[group], parts)


def drop_pass1_files(sp: SplitPlan) -> None:
    """Once the combine is done: pass 1's files, before their pages need writing out."""
    d = scratch_dir(sp)
    for job in sp.segments:
        for suffix in (".map", ".lookup"):
            (d / f"{job.base}{suffix}").unlink(missing_ok=True)


def _read_rows(path: Path, bounds: tuple[int, ...], i: int, columns: int) -> np.ndarray:
    n = bounds[i + 1] - bounds[i]
    if n == 0:
        return np.zeros((0, columns), dtype=np.uint64)
    rows = np.fromfile(path, dtype=np.uint64, count=n * columns, offset=bounds[i] * columns * 8)
    if len(rows) != n * columns:
        raise KafkaLogError(
            f"{path}: {len(rows) // columns} rows where {n} were written (scratch file cut short)"
        )
    return rows.reshape(n, columns)


# ============================================================================================ drivers
Runner = Callable[[SplitPlan], list[GroupOutput]]


def run_local(sp: SplitPlan) -> list[GroupOutput]:
    """Every piece in this process, in order, through the scratch files (what a Spark job does across
    tasks: ``jobs/split.py``)."""
    segments = [pass1_task(sp, i) for i in range(len(sp.segments))]
    buckets = [combine_task(sp, b, segments) for b in range(sp.buckets)]
    drop_pass1_files(sp)
    return [pass2_task(sp, job.index, buckets) for job in sp.groups]


def group_entries(parts: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(parts) if parts else EMPTY_ENTRIES


def clean_log_split(
    log: PartitionLog, plan: CleanPlan, cfg: LogConfig, broker: BrokerConfig, now_ms: int, producers: ProducerTable,
    runner: Runner = run_local,
) -> CleanResult:  # fmt: skip
    """One round over every key, cut in pieces run by ``runner``; same result as ``cleaner.clean_log``
    with a map large enough for every key. The caller writes the cleaner checkpoint."""
    started = time.monotonic()
    sp = plan_split(log, plan, cfg, broker, now_ms, producers)
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
