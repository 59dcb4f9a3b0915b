"""Split cleaning: one cleaning round of one partition cut into tasks that can run in parallel.

Kafka's cleaner is one thread with one bounded offset map; when the keys outnumber the map it works in
rounds, each re-reading the log. Here one round covers every key, and the work is cut in pieces:

1. **Pre-pass** (:func:`plan_split`, sequential, headers and indexes only): Kafka's grouping of the
   segments to rewrite, the state of the transaction tracker where each pass-1 segment and each pass-2
   group starts (aborted and open transactions: ``TransactionTracker.snapshot``), the active producers
   (each producer's last batch), the delete horizons and the first uncleanable offset. A small
   picklable :class:`SplitPlan` -- what a Spark job broadcasts.
2. **Pass 1 per segment** (:func:`segment_digests`): key digest -> last offset of the segment's dirty
   records (the kernels' pass 1 into a map that grows instead of filling), and the digests of every
   key pass 2 will look up in it.
3. **Combine by digest** (:func:`bucket_rows`, :func:`combine_bucket`): the entries of all segments,
   cut into buckets by digest, merged per bucket (the latest offset of each key wins), then joined
   with the digests each group looks up: each group receives only the map entries of its own keys.
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
from kafka_log_core.rules.cleaner_segments import CleanedSegment, clean_segment, map_segment, producer_array
from kafka_log_core.rules.producer_state import ProducerTable
from kafka_log_core.rules.txn_tracker import TransactionTracker
from kafka_log_core.settings.config import BrokerConfig, LogConfig
from kafka_log_core.settings.kafka_version import keeps_last_batch_of_round

BUCKET_BYTES = 256 * 1024 * 1024  # segment bytes per shuffle bucket (one combine task each)
MAX_FIRST_MAP_KEYS = 1 << 22  # a pass-1 map starts at the segment's offset span, at most this, and doubles
ENTRY = 3  # columns of a map entry row: digest hi, digest lo, offset (uint64)
EMPTY_ENTRIES = np.zeros((0, ENTRY), dtype=np.uint64)
EMPTY_DIGESTS = np.zeros((0, 2), dtype=np.uint64)


class NotSplittable(KafkaLogError):
    """The round cannot be split (the caller cleans it in one task, as before)."""


@dataclass(frozen=True)
class SegmentJob:
    """Pass 1 of one segment."""

    base: int
    group: int  # the pass-2 group it belongs to
    position: int  # where its dirty part starts (the offset-index floor of the first dirty offset)
    tracker: TransactionTracker | None  # the pass-1 tracker at ``position``; None: no dirty records
    full_scan: bool  # its lookups need a scan of every keyed record (records below the first dirty offset)


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
        transactional = _track(s, position, map_tracker)
        # Pass 2 looks up the keys of every batch its own tracker keeps. Where pass 1's tracker may judge
        # a transactional batch otherwise (it starts at the first dirty offset, pass 2 at the log start:
        # Kafka's too), the lookups come from every keyed record, not from the map entries.
        full = s.base_offset < first_dirty or transactional
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
    transactional data batch was among them."""
    rows = segment.headers(position).view(np.int64).reshape(-1, sk.HEADER_FIELDS)
    transactional = bool(
        np.any(
            (rows[:, sk.H_ATTRIBUTES] & (sk.TRANSACTIONAL_MASK | sk.CONTROL_MASK)) == sk.TRANSACTIONAL_MASK
        )
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
def segment_digests(sp: SplitPlan, job: SegmentJob) -> tuple[np.ndarray, np.ndarray]:
    """Pass 1 of one segment: (map entries: rows of digest hi, lo and the key's last dirty offset in this
    segment; lookups: rows of digest hi, lo of the keys pass 2 may look up here). The map grows as
    keys come: its size is the segment's distinct keys, whatever the configured dedupe buffer."""
    segment = Segment.open(sp.directory, job.base)
    try:
        entries = EMPTY_ENTRIES
        if job.tracker is not None:
            entries = _scan(segment, job.position, sp.plan.first_dirty_offset, copy.deepcopy(job.tracker))
        if job.full_scan:  # every keyed record (no aborted list: a superset of what pass 2 looks up)
            lookups = np.ascontiguousarray(_scan(segment, 0, -1, TransactionTracker())[:, :2])
        else:
            lookups = np.ascontiguousarray(entries[:, :2])
        return entries, lookups
    finally:
        segment.drop_cache()


def _scan(segment: Segment, position: int, start_offset: int, tracker: TransactionTracker) -> np.ndarray:
    keys = max(16, min(segment.read_next_offset - segment.base_offset, MAX_FIRST_MAP_KEYS))  # >= its records
    table = _table(keys)
    st = sk.new_state(sk.MAP_STATE, start_offset=start_offset, latest_offset=-1, keys=0, capacity=keys)
    while map_segment(segment, position, table, tracker, st):  # full: twice as large, and go on
        keys *= 2
        entries = _entries(table)
        table = _table(keys)
        kernels.map_put_many(table, np.ascontiguousarray(entries[:, 0]), np.ascontiguousarray(entries[:, 1]),
                             entries[:, 2].astype(np.int64), 0, keys, np.ones(len(entries), dtype=np.bool_))  # fmt: skip
        st["capacity"] = keys
        position = int(st["position"][0])  # the batch where it filled: its puts are repeated, harmless
    return _entries(table)


def _table(keys: int) -> np.ndarray:
    return np.zeros((math.ceil(keys / 0.75) + 1, kernels.SLOT_WORDS), dtype=np.uint64)


def _entries(table: np.ndarray) -> np.ndarray:
    rows = table[table[:, kernels.SLOT_OFFSET] != 0]
    rows[:, kernels.SLOT_OFFSET] -= np.uint64(1)  # stored + 1
    return np.ascontiguousarray(rows)


# ============================================================================================ combine
def bucket_rows(rows: np.ndarray, buckets: int) -> list[tuple[int, np.ndarray]]:
    """Rows (digest first) cut by digest into ``buckets`` buckets: (bucket, rows) for the non-empty ones."""
    if not len(rows):
        return []
    which = ((rows[:, 0] >> np.uint64(32)) % np.uint64(buckets)).astype(np.int64)
    out = []
    for b in range(buckets):
        part = rows[which == b]
        if len(part):
            out.append((b, part))
    return out


def combine_bucket(
    entries: list[tuple[int, np.ndarray]], lookups: list[tuple[int, np.ndarray]]
) -> list[tuple[int, np.ndarray]]:
    """One bucket: the latest offset of each key over every segment's entries ((segment base, rows): put
    into a compiled hash map segment after segment, a later one overwriting), joined with what each
    group looks up ((group, digests)). Returns (group, entries of the keys it looks up)."""
    if not entries or not lookups:
        return []
    entries = sorted(entries, key=lambda e: e[0])
    table = _table(sum(len(rows) for _, rows in entries))
    used = 0
    for _, rows in entries:  # a key appears once per segment: only the order of the segments matters
        _, used, _ = kernels.map_put_many(
            table, np.ascontiguousarray(rows[:, 0]), np.ascontiguousarray(rows[:, 1]), rows[:, 2].astype(np.int64),
            used, table.shape[0], np.ones(len(rows), dtype=np.bool_),
        )  # fmt: skip
    wanted: dict[int, list[np.ndarray]] = defaultdict(list)
    for group, rows in lookups:
        wanted[group].append(rows)
    out = []
    for group, parts in sorted(wanted.items()):
        need = np.concatenate(parts)
        found = kernels.map_get_many(
            table,
            np.ascontiguousarray(need[:, 0]),
            np.ascontiguousarray(need[:, 1]),
            np.ones(len(need), dtype=np.bool_),
        )
        hit = found >= 0
        if hit.any():
            rows = np.empty((int(hit.sum()), ENTRY), dtype=np.uint64)
            rows[:, :2] = need[hit]
            rows[:, 2] = found[hit].astype(np.uint64)
            out.append((group, rows))
    return out


# ============================================================================================ pass 2
def clean_group(sp: SplitPlan, job: GroupJob, entries: np.ndarray) -> GroupOutput:
    """Pass 2 of one group into its ``.cleaned`` files, from the map entries of its keys."""
    directory = Path(sp.directory)
    group = [Segment.open(directory, b) for b in job.bases]
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
                seg, out, offset_map.table, sp.producers, tracker, st, seg.mtime_ms > sp.legacy_horizon
            )
            seg.drop_cache()
        paths = out.finish(st, group[-1].mtime_ms, like=group[0])
    except BaseException:
        out.abort()
        raise
    return GroupOutput(job.index, tuple(str(p) for p in paths), CleanStats.from_state(st))


# ============================================================================================ swap
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


# ============================================================================================ drivers
Runner = Callable[[SplitPlan], list[GroupOutput]]


def run_local(sp: SplitPlan) -> list[GroupOutput]:
    """Every piece in this process, in order (what a Spark job does across tasks)."""
    in_bucket: dict[int, tuple[list[tuple[int, np.ndarray]], list[tuple[int, np.ndarray]]]] = defaultdict(
        lambda: ([], [])
    )
    for job in sp.segments:
        entries, lookups = segment_digests(sp, job)
        for b, rows in bucket_rows(entries, sp.buckets):
            in_bucket[b][0].append((job.base, rows))
        for b, rows in bucket_rows(lookups, sp.buckets):
            in_bucket[b][1].append((job.group, rows))
    per_group: dict[int, list[np.ndarray]] = defaultdict(list)
    for parts, wanted in in_bucket.values():
        for g, rows in combine_bucket(parts, wanted):
            per_group[g].append(rows)
    return [clean_group(sp, job, group_entries(per_group.get(job.index, []))) for job in sp.groups]


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
    try:
        outputs = runner(sp)
    except BaseException:
        remove_outputs(sp)
        raise
    stats = install(sp, outputs)
    return CleanResult(
        plan, True, sp.end_offset, False, 0.0, stats, len(sp.groups), int((time.monotonic() - started) * 1000)
    )
