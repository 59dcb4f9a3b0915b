"""What one cleaning round would remove, counted rather than sampled: the cleaner's pass 1 over the dirty
section. Shared by the report (``duplicate_share``, ``reclaimable_bytes``) and ``compact --dry-run``.
"""

from __future__ import annotations

import dataclasses

from kafka_log_core.format import compression
from kafka_log_core.format.record_batch import BatchHeader
from kafka_log_core.kernels.offset_map import OffsetMap
from kafka_log_core.log.partition_log import PartitionLog
from kafka_log_core.rules import cleaner
from kafka_log_core.settings.config import BrokerConfig


@dataclasses.dataclass(frozen=True, slots=True)
class CompactionEstimate:
    """What one cleaning round would remove, counted by the cleaner's pass 1 over the dirty section: the
    report's ``duplicate_share`` and the compaction part of ``reclaimable_bytes``, and the figures of a
    ``compact --dry-run`` row."""

    records: (
        int | None
    )  # records of the segments the round rewrites (log start .. first uncleanable), if counted
    keys: int  # keyed records of the dirty section put in the map
    duplicates: int  # of those, superseded by a later record with the same key
    cleanable_bytes: int

    @property
    def share(self) -> float | None:
        """Superseded keyed records / keyed records of the dirty section (None without keyed records)."""
        return self.duplicates / self.keys if self.keys else None

    @property
    def bytes(self) -> int:
        """Bytes that would go: ``cleanable_bytes × share`` (records assumed to be of equal size)."""
        return int(self.cleanable_bytes * (self.share or 0.0))

    def describe(self) -> str:
        return (
            f"estimate: {self.duplicates} of {self.records} records and {self.bytes} bytes would go "
            "(keys superseded within the dirty section)"
        )


def estimate_compaction(
    log: PartitionLog, plan: cleaner.CleanPlan, broker: BrokerConfig, notes: list[str], *, count_records=False,
    max_batch_bytes: int = compression.MAX_BATCH_BYTES,
) -> CompactionEstimate:  # fmt: skip
    """Pass 1 of the cleaner over the dirty section, with a map sized to hold all its keys up to the
    broker's ``log.cleaner.dedupe.buffer.size`` (a note says when one round would stop earlier), each
    batch decompressed to at most ``max_batch_bytes``; ``count_records`` also counts the records of the
    segments the round would rewrite (batch headers)."""
    start, end = plan.first_dirty_offset, plan.first_uncleanable_offset
    records = None
    if count_records:
        first = log.segments[0].base_offset if log.segments else end
        records = records_in(log, first, end) if first < end else 0
    if start >= end:
        return CompactionEstimate(records, 0, 0, plan.cleanable_bytes)
    # The broker's capacity (where its round would stop), slots allocated only for what the section holds.
    offset_map = OffsetMap(
        cleaner.map_memory(broker),
        broker.log_cleaner_io_buffer_load_factor,
        cleaner.keyed_bound(log, start, end),
    )
    result = cleaner.build_offset_map(log, start, end, offset_map, max_batch_bytes=max_batch_bytes)
    if result.full:
        notes.append(
            f"the cleaner's offset map ({offset_map.capacity} keys, log.cleaner.dedupe.buffer.size) would fill: "
            f"one round cleans up to offset {result.end_offset}, the duplicate share covers that part"
        )
    return CompactionEstimate(records, result.keys_put, result.duplicates, plan.cleanable_bytes)


def records_in(log: PartitionLog, start: int, end: int) -> int:
    """The records of the batches in [start, end), from batch headers only: a v2 batch's record count, a
    legacy entry's offset step (offsets strictly increase, so it holds at most that many)."""
    count = 0
    for segment in log.segments_in(start, end):
        previous_last = segment.base_offset - 1
        for batch in segment.header_scan(segment.offset_index.lookup(start).position):
            if isinstance(batch.header, BatchHeader):
                if batch.header.base_offset >= end:
                    break
                count += batch.header.records_count
            else:
                count += max(batch.last_offset - previous_last, 1)
            previous_last = batch.last_offset
            if batch.last_offset >= end:
                break
    return count
