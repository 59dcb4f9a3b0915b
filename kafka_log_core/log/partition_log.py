"""One partition directory as the broker's log loader sees it: segments by base offset, log start
offset, high watermark, recovery point and cleaner checkpoint, and the lookups the rules need.

The log-dir level checkpoint files are read once per log dir (:class:`LogDirState`) and passed in.
Loading never changes anything; leftovers of an unfinished operation (``.cleaned``, ``.swap``,
``.deleted``) are resolved by :mod:`kafka_log_core.rules.leftovers` before a writing job opens the log.
"""

from __future__ import annotations

import os
from bisect import bisect_right
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from kafka_log_core.errors import CorruptDataError
from kafka_log_core.format.filenames import DirFiles, TopicPartition
from kafka_log_core.format.txn_index import AbortedTxn, collect_aborted
from kafka_log_core.log.log_dir import CLEANER_OFFSET_CHECKPOINT, LogDirState, PartitionCheckpoints
from kafka_log_core.log.segment import OffsetSpan, Segment, check_batch_offsets

# Re-exported: callers import the log-dir state from here as well as from ``log_dir``.
__all__ = ["LogDirState", "PartitionCheckpoints", "PartitionLog", "CLEANER_OFFSET_CHECKPOINT"]


@dataclass(frozen=True, eq=False)
class PartitionLog:
    log_dir: Path
    directory: Path
    tp: TopicPartition
    segments: tuple[Segment, ...]
    checkpoints: PartitionCheckpoints

    @classmethod
    def open(
        cls, log_dir: str | os.PathLike[str], tp: TopicPartition, ckpt: PartitionCheckpoints,
        files: DirFiles | None = None,
    ) -> PartitionLog:  # fmt: skip
        """The partition as on disk now; ``files``: the partition directory's listing, when the caller has
        one taken since the directory last changed."""
        directory = Path(log_dir, tp.dir_name)
        log_dir = directory.parent
        if files is None:
            files = DirFiles.scan(directory)
        segments = tuple(Segment.open(directory, base, files) for base in files.segment_bases())
        return cls(log_dir, directory, tp, segments, ckpt)

    # ------------------------------------------------------------------ offsets
    @property
    def clean_shutdown(self) -> bool:
        return self.checkpoints.clean_shutdown

    @property
    def active_segment(self) -> Segment | None:
        return self.segments[-1] if self.segments else None

    @cached_property
    def log_end_offset(self) -> int:
        if not self.segments:
            return self.checkpoints.log_start_offset or 0
        return self.segments[-1].read_next_offset

    @cached_property
    def log_start_offset(self) -> int:
        """max(checkpoint, first segment base), as LogLoader sets it."""
        first = self.segments[0].base_offset if self.segments else 0
        return max(self.checkpoints.log_start_offset or 0, first)

    @property
    def high_watermark_from_checkpoint(self) -> bool:
        return self.checkpoints.high_watermark is not None

    @cached_property
    def high_watermark(self) -> int:
        """replication-offset-checkpoint clamped to [log start, LEO]; the LEO when there is no entry."""
        hw = self.checkpoints.high_watermark
        if hw is None:
            return self.log_end_offset
        return min(max(hw, self.log_start_offset), self.log_end_offset)

    @property
    def size_in_bytes(self) -> int:
        return sum(s.size for s in self.segments)

    # ------------------------------------------------------------------ segment ranges
    def floor_segment_index(self, offset: int) -> int:
        """Index of the segment with the greatest base <= offset (-1 if none)."""
        return bisect_right([s.base_offset for s in self.segments], offset) - 1

    def segments_in(self, start: int, end: int) -> list[Segment]:
        """Kafka's logSegments(from, to): the segment containing ``start`` (or the first one) and every
        later segment whose base is below ``end``; empty when start == end."""
        if start == end or not self.segments:
            return []
        i = max(self.floor_segment_index(start), 0)
        return [s for s in self.segments[i:] if s.base_offset < end]

    def segments_from(self, offset: int) -> Iterator[Segment]:
        i = max(self.floor_segment_index(offset), 0)
        yield from self.segments[i:]

    def next_segment(self, segment: Segment) -> Segment | None:
        i = self.segments.index(segment)
        return self.segments[i + 1] if i + 1 < len(self.segments) else None

    def collect_aborted_transactions(self, start: int, upper: int) -> list[AbortedTxn]:
        """UnifiedLog.collectAbortedTransactions(start, upper): from the segment containing ``start``,
        entries with last offset >= log start offset and first offset < ``upper``; stop at the
        first entry whose LSO >= ``upper``."""
        found: list[AbortedTxn] = []
        for segment in self.segments_from(start):
            result = collect_aborted(segment.aborted_txns, self.log_start_offset, upper)
            found.extend(result.aborted)
            if result.is_complete:
                break
        return found

    def check_batch_offsets(
        self, end_offset: int, checked: Mapping[int, OffsetSpan | None] | None = None
    ) -> None:
        """Refuse offsets a broker could never have appended (:func:`check_batch_offsets`) in the segments
        that hold offsets below ``end_offset`` (what a cleaning round reads and rewrites), and at the
        boundary with the segment after them. ``checked``: what the walks a round makes anyway saw of the
        segments (by base offset) whose offsets they checked within the segment (None: they did not):
        only their boundaries are left."""
        previous_last = None
        for segment in self.segments:
            span = checked.get(segment.base_offset) if checked else None
            if span is None:
                previous_last = check_batch_offsets(segment, previous_last)
            elif span.batches:
                if previous_last is not None and span.first <= previous_last:
                    check_batch_offsets(segment, previous_last)  # refuses its first batch, by position
                previous_last = span.last
            if segment.base_offset >= end_offset:
                break

    def validate_offsets(self) -> None:
        """Refuse a directory whose segments overlap (a gap is legal; an overlap is not)."""
        for prev, cur in zip(self.segments, self.segments[1:], strict=False):
            if prev.read_next_offset > cur.base_offset:
                raise CorruptDataError(
                    f"segment {prev.base_offset} ends at offset {prev.read_next_offset - 1}, "
                    f"past the next segment's base offset {cur.base_offset}",
                    prev.log_path,
                )
