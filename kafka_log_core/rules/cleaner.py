"""Log compaction of one partition, as Kafka's log cleaner does it (spec: cleaner-and-retention §2–§7).

Plan, then apply:

* :func:`plan_cleaning` — the LogToClean maths: first dirty offset from the cleaner checkpoint,
  first uncleanable offset (active segment, last stable offset, ``min.compaction.lag.ms``), clean and
  cleanable bytes, the dirty ratio, the ``max.compaction.lag.ms`` must-compact rule, eligibility.
* :func:`build_offset_map` — pass 1 over the dirty section: key digest -> latest offset, stopping the
  whole pass when the map is full (the checkpoint then advances only as far as the map covered).
* :func:`clean_log` — pass 2: every segment below the new dirty offset, in size-limited groups, is
  rewritten into ``<base>.*.cleaned`` with the broker's retention rules, then swapped in
  (``.cleaned -> .swap``, old files ``.deleted``, ``.swap -> final``, fsyncs) and the cleaner
  checkpoint is written last.

Both passes run compiled, one call per segment (``map_pass`` and ``clean_pass``, driven by ``cleaner_segments``);
this module holds the maths around them and the file swaps.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields

import numpy as np

from kafka_log_core import storage
from kafka_log_core.constants import MAX_INT, MAX_LONG
from kafka_log_core.errors import KafkaLogError
from kafka_log_core.format import compression, record_batch
from kafka_log_core.kernels import clean_pass, digest_store, map_pass, statuses
from kafka_log_core.kernels.offset_map import OffsetMap
from kafka_log_core.log.partition_log import PartitionLog
from kafka_log_core.log.segment import OffsetSpan, Segment
from kafka_log_core.log.segment_files import replace_segments
from kafka_log_core.rules import record_size_limit
from kafka_log_core.rules.cleaner_segments import (
    NO_AREAS,
    NO_STORE,
    Areas,
    CleanedSegment,
    clean_segment,
    decode_areas,
    map_segment,
    new_store,
    producer_array,
    verify_segment,
    walked_offsets,
)
from kafka_log_core.rules.producer_state import ProducerTable, build_producer_table
from kafka_log_core.rules.txn_tracker import TransactionTracker
from kafka_log_core.settings.config import BrokerConfig, LogConfig
from kafka_log_core.settings.kafka_version import kept_batch_end


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
    not_compacted = cfg.not_compacted_reason()
    if not_compacted is not None:
        eligible, reason = False, not_compacted
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


# ============================================================================================ pass 1
@dataclass
class MapResult:
    end_offset: int  # next dirty offset after this round
    full: bool
    records_scanned: int
    keys_put: int
    duplicates: int  # keyed dirty records superseded by a later one in the same section


def keyed_bound(log: PartitionLog, start: int, end: int) -> int:
    """An upper bound of the records in [start, end) that costs no read: offsets strictly increase, so
    at most ``end - start`` records; and none is smaller than ``record_batch.MIN_RECORD_BYTES``, so at most the bytes of
    the segments holding the range divided by that. The dirty section is dense (nothing cleaned it
    yet), so the first bound is usually the number of records itself."""
    size = sum(s.size for s in log.segments_in(start, end))
    return max(0, min(end - start, size // record_batch.MIN_RECORD_BYTES))


DIGEST_STORE_BYTES = 64 * 1024 * 1024  # key digests kept from pass 1 for pass 2 (32 bytes per record)
_STORE_ROW_BYTES = 8 * digest_store.STORE_WORDS
# a segment's store has a row per 24 bytes of it (keyed records are rarely smaller)
_SEGMENT_BYTES_PER_ROW = 24
# Records of compressed batches decoded once for both passes, held from pass 1 until pass 2 cleans their
# segment: at most this much per partition being cleaned; the batches past it are decoded in each pass.
DECODED_STORE_BYTES = 128 * 1024 * 1024
# Segments pass 2 rewrites stay mapped from the walk before it (pass 1, or the CRC check) while their
# sizes add up to at most this: pass 2 then walks pages already mapped instead of mapping and faulting
# them in again (the pages are the page cache's either way; this bounds what the process maps at once).
MAPPED_SEGMENT_BYTES = 64 * 1024 * 1024


class _Mappings:
    """Which segments stay mapped for pass 2 (within MAPPED_SEGMENT_BYTES); the others are unmapped as
    soon as a walk is done with them, so that what is mapped stays one segment, not the dirty section."""

    def __init__(self) -> None:
        self.room = MAPPED_SEGMENT_BYTES

    def done_with(self, segment: Segment) -> None:
        if segment.size <= self.room:
            self.room -= segment.size
        else:
            segment.drop_cache()


def build_offset_map(
    log: PartitionLog, start: int, end: int, offset_map: OffsetMap, verified: dict[int, OffsetSpan | None] | None = None,
    digests: dict[int, np.ndarray] | None = None, max_batch_bytes: int = compression.MAX_BATCH_BYTES,
    decoded: dict[int, Areas] | None = None, mappings: _Mappings | None = None,
) -> MapResult:  # fmt: skip
    """Pass 1 over the dirty section [start, end), one compiled call per segment. ``verified`` collects
    the segments (by base offset) whose every batch had its CRC and its offsets within the segment
    checked on the way, and what was seen of the offsets (None: a legacy entry left them unchecked);
    ``digests`` the
    key digests of whole dirty segments, for pass 2 (within DIGEST_STORE_BYTES and half the configured
    map: the store never outgrows the memory the map is allowed); ``decoded`` the records of the
    compressed batches of whole dirty segments, decoded once for both passes (within
    DECODED_STORE_BYTES); ``mappings``: which segments stay mapped for pass 2 (else none does)."""
    budget = 0
    if digests is not None:
        budget = min(DIGEST_STORE_BYTES, offset_map.slots * 24 // 2) // _STORE_ROW_BYTES
    decoded_budget = DECODED_STORE_BYTES if decoded is not None else 0
    dirty = log.segments_in(start, end)
    tracker = TransactionTracker()
    tracker.add_aborted(log.collect_aborted_transactions(start, end))
    st = statuses.new_state(
        map_pass.MAP_STATE, start_offset=start, latest_offset=offset_map.latest_offset, keys=offset_map.size,
        capacity=offset_map.capacity, max_batch_bytes=max_batch_bytes,
    )  # fmt: skip
    full = False
    for i, segment in enumerate(dirty):
        next_start = dirty[i + 1].base_offset if i + 1 < len(dirty) else end
        position = segment.offset_index.lookup(start).position
        store = NO_STORE
        rows = min(budget, segment.size // _SEGMENT_BYTES_PER_ROW + 16)
        if digests is not None and segment.base_offset >= start and position == 0 and rows > 16:
            store = new_store(rows, digest_store.STORE_FILL)
        areas = None
        if decoded is not None and segment.base_offset >= start and position == 0 and decoded_budget > 0:
            areas = decode_areas(segment, decoded_budget, max_batch_bytes)
        full = map_segment(segment, position, offset_map.table, tracker, st, store, areas or NO_AREAS)
        if mappings is None:
            segment.drop_cache()  # memory stays one segment, not the dirty section
        else:
            mappings.done_with(segment)  # pass 2 reads it again
        if decoded is not None and areas is not None:  # pass 2 cleans this segment, even when the map filled
            decoded[segment.base_offset] = areas
            decoded_budget -= areas[0].nbytes + areas[1].nbytes
        if full:
            break
        if verified is not None and position == 0:
            verified[segment.base_offset] = walked_offsets(st)
        if digests is not None and store[1]["valid"][0] and store[1]["mode"][0] == digest_store.STORE_FILL:
            used = int(store[1]["used"][0])
            digests[segment.base_offset] = store[0][:used]
            budget -= used
        st["latest_offset"] = next_start - 1
    offset_map.size = int(st["keys"][0])
    offset_map.update_latest_offset(int(st["latest_offset"][0]))
    puts = int(st["puts"][0])
    return MapResult(offset_map.latest_offset + 1, full, int(st["scanned"][0]), puts, puts - offset_map.size)


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
    return storage.stat(s.index_path).st_size if storage.exists(s.index_path) else 0


def _time_index_bytes(s: Segment) -> int:
    return storage.stat(s.time_index_path).st_size if storage.exists(s.time_index_path) else 0


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

    @classmethod
    def from_state(cls, st: np.ndarray) -> CleanStats:
        return cls(**{f.name: int(st[f.name][0]) for f in fields(cls)})


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
    max_batch_bytes: int = compression.MAX_BATCH_BYTES,
) -> CleanResult:  # fmt: skip
    """Run one cleaning round (both passes and the swaps). Returns the new checkpoint offset; the
    caller writes ``cleaner-offset-checkpoint`` (it is shared by all partitions of the log dir).
    Before anything is written, what the round reads is refused where a broker could not have written
    it: framing, CRCs, batch offsets (``PartitionLog.check_batch_offsets``: pass 1 and the CRC check
    carry it within each segment they walk, an offsets problem is named before any other error).
    ``max_batch_bytes``: the most one batch's records may decompress to."""
    started = time.monotonic()
    if producers is None:
        producers = build_producer_table(log, now_ms, broker.producer_id_expiration_ms)
    first_dirty, upper = plan.first_dirty_offset, plan.first_uncleanable_offset
    if offset_map is None:
        offset_map = OffsetMap(
            map_memory(broker),
            broker.log_cleaner_io_buffer_load_factor,
            keyed_bound(log, first_dirty, upper),
        )
    verified: dict[int, OffsetSpan | None] = {}
    digests: dict[int, np.ndarray] = {}
    decoded: dict[int, Areas] = {}
    mappings = _Mappings()
    try:
        result = build_offset_map(
            log, first_dirty, upper, offset_map, verified, digests, max_batch_bytes, decoded, mappings
        )
        end_offset = max(result.end_offset, first_dirty)  # an empty dirty section leaves the checkpoint
        to_clean = [s for s in log.segments if s.base_offset < end_offset]
        groups = group_segments(to_clean, cfg.segment_bytes, cfg.segment_index_bytes, upper)
        for group in groups:  # validate everything we are about to rewrite before writing anything
            for seg in group:
                if seg.base_offset not in verified:
                    verified[seg.base_offset] = verify_segment(seg)
                    mappings.done_with(seg)
    except KafkaLogError:
        log.check_batch_offsets(upper)  # offsets a broker never appends are named first, wherever they are
        raise
    # the boundaries between segments, and the segments none of these walks covered (past a full map)
    log.check_batch_offsets(upper, verified)
    # legacyDeleteHorizonMs: mtime of the last clean segment minus delete.retention.ms
    clean_segments = [s for s in log.segments if s.base_offset < first_dirty]
    legacy_horizon = clean_segments[-1].mtime_ms - cfg.delete_retention_ms if clean_segments else 0
    record_size_limit.check_round(log.segments_in(log.log_start_offset, upper), cfg, broker, max_batch_bytes)
    active = producer_array(producers.active(now_ms, broker.producer_id_expiration_ms))
    tracker = TransactionTracker(record_events=True)
    # Rule R2.2 (keep the batch ending there, as an empty batch if need be) differs between releases.
    upper_bound = kept_batch_end(broker.kafka_version, upper, log.high_watermark)
    st = statuses.new_state(
        clean_pass.CLEAN_STATE, now_ms=now_ms, delete_retention_ms=cfg.delete_retention_ms, upper_bound=upper_bound,
        latest_offset=offset_map.latest_offset, max_batch_bytes=max_batch_bytes,
    )  # fmt: skip
    for group in groups:
        out = CleanedSegment(log.directory, group[0].base_offset, cfg)
        out.start(st)
        try:
            for i, seg in enumerate(group):
                seg_upper = group[i + 1].base_offset if i + 1 < len(group) else seg.read_next_offset
                tracker.add_aborted(log.collect_aborted_transactions(seg.base_offset, seg_upper))
                stored = (
                    digests.pop(seg.base_offset, None) if seg_upper - 1 <= offset_map.latest_offset else None
                )
                clean_segment(
                    seg,
                    out,
                    offset_map.table,
                    active,
                    tracker,
                    st,
                    seg.mtime_ms > legacy_horizon,
                    stored,
                    decoded=decoded.pop(seg.base_offset, NO_AREAS),
                )
                seg.drop_cache()
            new_paths = out.finish(st, group[-1].mtime_ms, like=group[0])
        except BaseException:
            out.abort()
            raise
        replace_segments(log.directory, new_paths, group[0].base_offset, group, last=group is groups[-1])
    return CleanResult(
        plan, True, end_offset, result.full, offset_map.utilization, CleanStats.from_state(st), len(groups),
        int((time.monotonic() - started) * 1000),
    )  # fmt: skip


def map_memory(broker: BrokerConfig) -> int:
    return min(broker.log_cleaner_dedupe_buffer_size // max(broker.log_cleaner_threads, 1), MAX_INT)
