"""A partition directory brought to the state the broker's log loader leaves it in (``LogLoader.load``),
including the recovery after an unclean shutdown -- planned first, applied as a separate step.

When recovery happens (Kafka 3.6 to 4.4; spec cleaner-and-retention §9, corrected where Kafka differs):

* any shutdown: a segment whose ``.index`` is missing, or whose ``.txnindex`` has an entry below the
  segment's base offset, is recovered when the loader opens it (segments in order). Its truncation,
  if any, does not touch the later segments. A missing ``.timeindex`` next to an ``.index`` becomes an
  empty file, not a rebuilt one;
* any shutdown: the producer snapshots not at a segment base (but the newest one beyond the last base) and
  those at or below the log start offset are deleted (``removeStraySnapshots``, then ``truncateAndReload``):
  after a clean one that is all the loader changes;
* no ``.kafka_cleanshutdown`` in the log dir (an unclean shutdown): the segment holding the partition's
  recovery point (``recovery-point-offset-checkpoint``; no entry = 0, i.e. every segment) and every later
  segment are recovered in order; the first one that loses bytes ends the pass, and every segment after
  it is deleted.

Recovering a segment is :mod:`segment_recovery` (validate batch by batch, rebuild the offset, time and
transaction indexes, truncate the invalid tail), preceded by a throw-away producer-state rebuild up to
the segment's base and followed by a producer snapshot at its end (:mod:`producer_recovery`). Then, as
the loader: a log ending below the log-start checkpoint loses every segment and restarts empty at that
offset (as does a directory without segments); the leader-epoch cache drops entries starting at or past
the log end offset and is truncated at the log-start checkpoint; the log start offset is
``max(checkpoint, first base)``; producer snapshots not at a segment base are deleted (but the newest one
beyond the last base), then the real producer state is rebuilt.

Segments below the recovery point are never validated (a broker never looks at them either): corruption
there stays for the jobs to report. What the broker would refuse to load is refused here with one line.

What the job leaves (the shape a broker leaves after loading and a clean shutdown): index files trimmed to
their entries, ``.log`` files cut at the last valid batch; the recovery point of the partition at its log
end offset (everything is fsynced), the log-start checkpoint entry only when the log start offset is
above the first base; and, once every partition of the log dir is recovered, ``.kafka_cleanshutdown``
(:func:`write_clean_shutdown_marker`), so that a broker started on the result does no recovery of its own.

Crash safety: deleted segments are renamed ``.deleted`` before the segment that lost its tail is cut (a
rerun that finds the cut already done would not delete them), new files are written whole and renamed,
and the checkpoints come last. A rerun plans again from the same recovery point and ends where an
uninterrupted run ends; a second run after a complete one changes nothing.
"""

from __future__ import annotations

import dataclasses
import json
import mmap
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kafka_log_core import fsutil, storage
from kafka_log_core.errors import CorruptRecordError
from kafka_log_core.format import checkpoints, log_file
from kafka_log_core.format.checkpoints import EpochEntry
from kafka_log_core.format.filenames import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_FILE_SUFFIXES,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    DirFiles,
    TopicPartition,
    list_partition_dirs,
    list_segment_bases,
    parse_partition_dir,
    segment_file,
)
from kafka_log_core.format.offset_index import OffsetIndex
from kafka_log_core.format.producer_snapshot import ProducerSnapshotEntry
from kafka_log_core.format.txn_index import ENTRY as TXN_ENTRY
from kafka_log_core.format.txn_index import encode_txn_index
from kafka_log_core.log.log_dir import (
    CLEAN_SHUTDOWN_FILE,
    PartitionCheckpoints,
    update_checkpoints,
    write_clean_shutdown,
)
from kafka_log_core.log.partition_log import PartitionLog
from kafka_log_core.log.segment import Segment
from kafka_log_core.log.segment_files import (
    create_empty_segment,
    create_empty_time_index,
    delete_snapshots,
    mark_deleted,
    remove_deleted,
    rewrite_segment,
    write_leader_epochs,
    write_snapshot,
)
from kafka_log_core.rules.producer_recovery import (
    ProducerStateManagerModel,
    ProducerStateRefusedError,
    SegmentView,
    SnapshotFiles,
    rebuild_producer_state,
    stray_snapshots,
)
from kafka_log_core.rules.segment_recovery import (
    InvalidOffsetError,
    RecoveryRefusedError,
    RecoveryState,
    SegmentRecovery,
    count_records,
    empty_segment,
    recover_segment,
)
from kafka_log_core.rules.valid_data import NOTHING, ValidData, find_valid_data
from kafka_log_core.settings.cluster_metadata import ClusterView

UNCLEAN = "unclean shutdown"
RECOVER_TRUNCATING = "--recover-truncating"  # the option that applies the broker's rule as it is
MISSING_INDEX = "its .index is missing"
BAD_TXN_INDEX = "its .txnindex has an entry below the segment base"


@dataclass(frozen=True)
class RecoveredSegment:
    """A segment the loader recovers, and what it ends up as."""

    base_offset: int
    reason: str
    result: SegmentRecovery
    had_txn_index: bool
    path: str = ""
    valid_after_cut: ValidData = NOTHING  # valid batches in the bytes the cut removes from this segment

    @property
    def index_bytes(self) -> bytes:
        return self.result.offset_index.encode()

    @property
    def time_index_bytes(self) -> bytes:
        return self.result.time_index.encode()

    @property
    def txn_index_bytes(self) -> bytes | None:
        """The ``.txnindex`` after recovery: None when it stays absent."""
        if not self.result.aborted and not self.had_txn_index:
            return None
        return encode_txn_index(self.result.aborted)


@dataclass(frozen=True, slots=True)
class DroppedSegment:
    base_offset: int
    size: int
    records: int
    valid: ValidData = NOTHING  # its valid batches (counted for segments dropped after a truncation)


@dataclass(frozen=True, slots=True)
class ValidDataLoss:
    """Valid data the broker's rule deletes past an invalid position: a cut that is not a crash tail."""

    path: str
    position: int
    stop: str  # what recovery found there
    in_segment: ValidData  # after the position, in the same segment
    in_later: ValidData  # in the later segments the rule deletes with it
    later_segments: int

    @property
    def total(self) -> ValidData:
        return self.in_segment + self.in_later

    def describe(self) -> str:
        where = []
        if self.in_segment.any:
            where.append(f"{self.in_segment.describe()} in the rest of the segment")
        if self.in_later.any:
            later = f"{self.later_segments} later segment{'' if self.later_segments == 1 else 's'}"
            where.append(f"{self.in_later.describe()} in {later}")
        return f"{self.path} at position {self.position}: {self.stop}, and valid data after it: {', '.join(where)}"


@dataclass(frozen=True)
class RecoveryPlan:
    """What loading one partition directory changes. Picklable; planning changed nothing."""

    directory: Path
    tp: TopicPartition
    clean_shutdown: bool
    recovery_point: int  # the checkpoint's (0 without an entry)
    log_start_checkpoint: int
    recovered: tuple[RecoveredSegment, ...]  # every recovery, in the loader's order
    dropped: tuple[DroppedSegment, ...]  # deleted by the loader
    new_segment: int | None  # an empty segment created at this base offset
    empty_time_indexes: tuple[int, ...]  # missing .timeindex created empty
    segment_bases: tuple[int, ...]  # the segments after loading
    log_end_offset: int
    log_start_offset: int
    new_recovery_point: int  # after loading (the job then checkpoints the log end offset)
    epochs_before: tuple[EpochEntry, ...] | None  # None: no leader-epoch-checkpoint
    epochs_after: tuple[EpochEntry, ...]
    epoch_file: bytes | None  # the leader-epoch-checkpoint to write (None: left as it is)
    snapshots_written: dict[int, tuple[ProducerSnapshotEntry, ...]] = field(default_factory=dict)
    snapshots_deleted: tuple[int, ...] = ()
    segments_changed: tuple[int, ...] = ()  # bases whose .log or index files change
    losses: tuple[ValidDataLoss, ...] = ()  # valid data the broker's rule deletes (not a crash tail)

    @property
    def destroys_valid_data(self) -> bool:
        """Whether applying the plan deletes valid batches, not only what a crash leaves (a torn or
        zero-filled tail after which the partition holds no valid batch)."""
        return bool(self.losses)

    @property
    def valid_data_lost(self) -> ValidData:
        total = NOTHING
        for loss in self.losses:
            total += loss.total
        return total

    def refusal(self) -> str:
        """The one line of a partition whose recovery would destroy valid data, by default."""
        more = f" (and {len(self.losses) - 1} more such places)" if len(self.losses) > 1 else ""
        drops = " and deletes the later segments" if any(loss.later_segments for loss in self.losses) else ""
        return (
            f"{self.losses[0].describe()}{more}; the broker's recovery would delete "
            f"{self.valid_data_lost.describe()}: it truncates at the first invalid batch{drops} (a follower "
            "fetches them again from the leader; offline nothing restores them); not a crash tail: partition "
            f"not touched; {RECOVER_TRUNCATING} applies the broker's rule"
        )

    def checkpoints_after(
        self, ckpt: PartitionCheckpoints, high_watermark: int | None
    ) -> PartitionCheckpoints:
        """The partition's checkpoint entries once loaded: the recovery point at the log end offset (after
        an unclean shutdown), the log start offset only above the first base, the high watermark given."""
        return dataclasses.replace(
            ckpt,
            recovery_point=self.log_end_offset if not self.clean_shutdown else ckpt.recovery_point,
            log_start_offset=self.log_start_offset if self.log_start_offset > self.segment_bases[0] else None,
            high_watermark=high_watermark if high_watermark is not None else ckpt.high_watermark,
        )

    @property
    def ran(self) -> bool:
        """Whether the loader recovered anything (an unclean shutdown always does)."""
        return not self.clean_shutdown or bool(self.recovered)

    @property
    def final(self) -> dict[int, RecoveredSegment]:
        """The last recovery of each segment that is still there."""
        kept = set(self.segment_bases)
        return {r.base_offset: r for r in self.recovered if r.base_offset in kept}

    @property
    def segments_checked(self) -> int:
        return len({r.base_offset for r in self.recovered})

    @property
    def bytes_checked(self) -> int:
        sizes: dict[int, int] = {}
        for r in self.recovered:
            sizes.setdefault(r.base_offset, r.result.size)
        return sum(sizes.values())

    @property
    def bytes_truncated(self) -> int:
        return sum(r.result.truncated_bytes for r in self.recovered) + sum(d.size for d in self.dropped)

    @property
    def records_truncated(self) -> int:
        return sum(r.result.truncated_records for r in self.recovered) + sum(d.records for d in self.dropped)

    @property
    def changes_segment_files(self) -> bool:
        return bool(
            self.segments_changed or self.dropped or self.new_segment is not None or self.empty_time_indexes
        )

    @property
    def changes_anything(self) -> bool:
        return (
            self.changes_segment_files
            or bool(self.snapshots_written or self.snapshots_deleted)
            or self.epoch_file is not None
        )

    def describe(self) -> str:
        """One sentence for the result row."""
        parts = []
        if not self.clean_shutdown:
            parts.append(
                f"no {CLEAN_SHUTDOWN_FILE} (unclean shutdown): recovered from the recovery point "
                f"{self.recovery_point}"
            )
        for reason in sorted({r.reason for r in self.recovered if r.reason != UNCLEAN}):
            bases = sorted({r.base_offset for r in self.recovered if r.reason == reason})
            parts.append(f"recovered segment {', '.join(map(str, bases))} ({reason})")
        parts.append(f"{_count(self.segments_checked, 'segment')}, {self.bytes_checked} bytes checked")
        for r in self.recovered:
            res = r.result
            if res.emptied:
                parts.append(f"segment {r.base_offset} emptied ({res.emptied}): {res.truncated_bytes} bytes")
            elif res.truncated_bytes:
                parts.append(
                    f"{res.truncated_bytes} bytes ({_count(res.truncated_records, 'record')}) truncated from "
                    f"segment {r.base_offset} at position {res.valid_bytes}: {res.stop}"
                )
        if self.dropped:
            records = _count(sum(d.records for d in self.dropped), "record")
            parts.append(
                f"{_count(len(self.dropped), 'later segment')} deleted ({sum(d.size for d in self.dropped)} bytes, "
                f"{records})"
            )
        if self.losses:
            parts.append(f"{self.valid_data_lost.describe()} deleted among them ({RECOVER_TRUNCATING})")
        if not self.bytes_truncated:
            parts.append("nothing truncated")
        if self.new_segment is not None:
            parts.append(f"empty segment created at the log start offset {self.new_segment}")
        rebuilt = [b for b in self.segments_changed if b not in self.empty_time_indexes]
        if rebuilt:
            parts.append(f"files of segment {', '.join(map(str, rebuilt))} rewritten")
        if self.empty_time_indexes:
            parts.append(f"empty .timeindex for segment {', '.join(map(str, self.empty_time_indexes))}")
        if self.snapshots_written or self.snapshots_deleted:
            parts.append(
                f"producer snapshots: {len(self.snapshots_written)} written, {len(self.snapshots_deleted)} deleted"
            )
        if self.epoch_file is not None:
            verb = "created" if self.epochs_before is None else "rewritten"
            parts.append(f"leader-epoch-checkpoint {verb}")
        parts.append(f"log end offset {self.log_end_offset}")
        return "; ".join(parts)


def _count(n: int, what: str) -> str:
    return f"{n} {what}{'' if n == 1 else 's'}"


class ValidDataRefusedError(RecoveryRefusedError):
    """Recovery would delete valid batches (bit rot, a damaged copy), and --recover-truncating was not given."""


# ============================================================================================ planning
class _Seg:
    """A segment while the loader runs: its bytes (cut after a recovery) and indexes."""

    def __init__(self, directory: Path, base: int) -> None:
        self.directory = directory
        self.base = base
        self.path = segment_file(directory, base, LOG_SUFFIX)
        self._data: bytes | memoryview | None = None
        self.size = storage.stat(self.path).st_size
        self.recovered: SegmentRecovery | None = None
        self._segment: Segment | None = None

    @property
    def data(self) -> bytes | memoryview:
        if self._data is None:
            raw = log_file.read_log(self.path)
            self._data = memoryview(raw) if isinstance(raw, mmap.mmap) else raw
        return self._data

    def segment(self) -> Segment:
        if self._segment is None:
            self._segment = Segment.open(self.directory, self.base)
        return self._segment

    def cut(self, result: SegmentRecovery) -> None:
        self.recovered = result
        self._data = memoryview(self.data)[: result.valid_bytes]
        self.size = result.valid_bytes

    @property
    def offset_index(self) -> OffsetIndex:
        return self.recovered.offset_index if self.recovered is not None else self.segment().offset_index

    def next_offset(self) -> int:
        if self.recovered is not None:
            return self.recovered.next_offset
        return self.segment().read_next_offset

    def batches_from(self, start_offset: int, end_position: int) -> Iterator[log_file.FileBatch]:
        position = self.position_of(start_offset)
        if position is not None:
            yield from self._batches(position, min(end_position, self.size))

    def position_of(self, offset: int) -> int | None:
        start = min(self.offset_index.lookup(offset).position, self.size)
        for batch in self._batches(start, self.size):
            if batch.last_offset >= offset:
                return batch.position
        return None

    def _batches(self, start: int, end: int) -> Iterator[log_file.FileBatch]:
        """Batches as the producer-state rebuild reads them (framing only, no CRC); what it cannot frame
        makes the broker fail to load the partition."""
        try:
            yield from log_file.iter_batches(self.data, self.path, start, end)
        except CorruptRecordError as err:
            raise ProducerStateRefusedError(
                f"{err.detail} (the broker reads this batch to rebuild producer state and fails to load the log)",
                err.path,
                err.position,
            ) from err

    def view(self) -> SegmentView:
        return SegmentView(self.base, self.size, self.batches_from, self.position_of)


class _Loader:
    def __init__(self, directory: Path, tp: TopicPartition, ckpt: PartitionCheckpoints, cfg, now_ms: int,
                 expiration_ms: int) -> None:  # fmt: skip
        self.directory = directory
        self.tp = tp
        self.clean = ckpt.clean_shutdown
        self.recovery_point = ckpt.recovery_point or 0
        self.log_start_ckpt = ckpt.log_start_offset or 0
        self.cfg = cfg
        self.now_ms = now_ms
        self.expiration_ms = expiration_ms
        self.files = SnapshotFiles.scan(directory)
        self.real_psm = ProducerStateManagerModel(self.files, now_ms, expiration_ms)
        self.recovered: list[RecoveredSegment] = []
        self.dropped: list[DroppedSegment] = []
        self.losses: list[ValidDataLoss] = []
        self.empty_time_indexes: list[int] = []
        self._epochs: list[EpochEntry] | None = None
        self.epochs_before: tuple[EpochEntry, ...] | None = None
        self.epochs_changed = False

    @property
    def epochs(self) -> list[EpochEntry]:
        if self._epochs is None:
            path = self.directory / checkpoints.LEADER_EPOCH_CHECKPOINT
            if storage.exists(path):
                self.epochs_before = tuple(checkpoints.read_leader_epoch_checkpoint(path))
            self._epochs = list(self.epochs_before or ())
        return self._epochs

    def recover(self, seg: _Seg, loaded: list[_Seg], reason: str) -> SegmentRecovery:
        """LogLoader.recoverSegment: throw-away producer state up to the base, the walk, a snapshot at the end."""
        psm = ProducerStateManagerModel(self.files, self.now_ms, self.expiration_ms)
        rebuild_producer_state(psm, [s.view() for s in loaded], self.log_start_ckpt, seg.base, False)
        state = RecoveryState(psm.producers, self.epochs, psm.last_map_offset)
        had_txn = storage.exists(segment_file(self.directory, seg.base, TXN_INDEX_SUFFIX))
        try:
            result = recover_segment(
                seg.data, seg.base, str(seg.path), state,
                index_interval_bytes=self.cfg.index_interval_bytes, segment_index_bytes=self.cfg.segment_index_bytes,
            )  # fmt: skip
        finally:
            self.epochs_changed |= state.epochs_changed
        psm.max_size = max(psm.max_size, len(psm.producers))
        psm.last_map_offset = state.map_end_offset
        psm.take_snapshot()
        self._cut(seg, result, reason, had_txn)
        return result

    def empty(self, seg: _Seg, why: str) -> SegmentRecovery:
        had_txn = storage.exists(segment_file(self.directory, seg.base, TXN_INDEX_SUFFIX))
        result = empty_segment(seg.data, seg.base, str(seg.path), why)
        self._cut(seg, result, UNCLEAN, had_txn)
        return result

    def _cut(self, seg: _Seg, result: SegmentRecovery, reason: str, had_txn: bool) -> None:
        """The segment as recovery leaves it; the valid batches in what it loses are counted first."""
        after = find_valid_data(seg.data, result.valid_bytes, seg.base) if result.truncated_bytes else NOTHING
        seg.cut(result)
        self.recovered.append(RecoveredSegment(seg.base, reason, result, had_txn, str(seg.path), after))

    def drop(self, segments: list[_Seg], *, count_valid: bool = False) -> list[DroppedSegment]:
        dropped = []
        for seg in segments:
            valid = find_valid_data(seg.data, 0, seg.base) if count_valid else NOTHING
            dropped.append(DroppedSegment(seg.base, seg.size, count_records(seg.data, 0), valid))
            self.real_psm.mark_deleted(seg.base)
        self.dropped += dropped
        return dropped

    def note_loss(self, dropped: list[DroppedSegment]) -> None:
        """After the last recovery truncated: the valid data its cut and the segments dropped with it
        delete, when there is any (a crash tail has none)."""
        r = self.recovered[-1]
        in_later = NOTHING
        for d in dropped:
            in_later += d.valid
        if r.valid_after_cut.any or in_later.any:
            res = r.result
            stop = res.stop or f"offsets that do not increase ({res.emptied}): the broker empties the segment"
            self.losses.append(
                ValidDataLoss(r.path, res.valid_bytes, stop, r.valid_after_cut, in_later, len(dropped))
            )

    def load_segment_files(self) -> list[_Seg]:
        """LogLoader.loadSegmentFiles: open every segment; recover those with a missing .index or a bad .txnindex."""
        loaded: list[_Seg] = []
        for base in list_segment_bases(self.directory):
            seg = _Seg(self.directory, base)
            if not storage.exists(segment_file(self.directory, base, INDEX_SUFFIX)):
                reason: str | None = MISSING_INDEX
            else:
                reason = None
                if not storage.exists(segment_file(self.directory, base, TIME_INDEX_SUFFIX)):
                    self.empty_time_indexes.append(base)
                if _txn_index_below_base(segment_file(self.directory, base, TXN_INDEX_SUFFIX), base):
                    reason = BAD_TXN_INDEX
            if reason is not None:
                try:
                    truncated = self.recover(seg, loaded, reason).truncated_bytes
                except InvalidOffsetError as err:  # not caught by the broker here: loading fails
                    raise RecoveryRefusedError(
                        f"{seg.path}: {err}; the broker fails to load this log (non-increasing offsets)"
                    ) from err
                if truncated:  # later segments stay
                    self.note_loss([])
            loaded.append(seg)
        return loaded

    def plan(self) -> RecoveryPlan:
        segments = self.load_segment_files()
        if self.clean and not self.recovered:
            return self._nothing(segments)
        if not self.clean:
            start = 0
            for i, seg in enumerate(segments):
                if seg.base <= self.recovery_point:
                    start = i
            i = start
            while i < len(segments):
                seg = segments[i]
                try:
                    truncated = self.recover(seg, segments, UNCLEAN).truncated_bytes
                except InvalidOffsetError as err:
                    truncated = self.empty(seg, str(err)).truncated_bytes
                if truncated > 0:
                    self.note_loss(self.drop(segments[i + 1 :], count_valid=True))
                    del segments[i + 1 :]
                    break
                i += 1
        new_segment = None
        leo: int | None = None
        if segments:
            leo = segments[-1].next_offset()
            if leo < self.log_start_ckpt:
                self.drop(segments)
                segments = []
                self.epochs[:] = []
                self.epochs_changed = True
                self.real_psm.truncate_fully_and_start_at(self.log_start_ckpt)
                leo = None
        if not segments:
            new_segment = self.log_start_ckpt
        log_end = leo if leo is not None else self.log_start_ckpt
        recovery_point = log_end if self.clean and leo is not None else min(self.recovery_point, log_end)
        epochs = checkpoints.truncate_from_end(self.epochs, log_end)
        epochs = checkpoints.truncate_from_start(epochs, self.log_start_ckpt)
        self.epochs_changed |= epochs != self.epochs
        bases = [s.base for s in segments] + ([new_segment] if new_segment is not None else [])
        log_start = max(self.log_start_ckpt, bases[0])
        self.real_psm.remove_stray_snapshots(bases)
        views = [s.view() for s in segments]
        if new_segment is not None:
            views.append(SegmentView(new_segment, 0, lambda _s, _e: iter(()), lambda _o: None))
        rebuild_producer_state(self.real_psm, views, log_start, log_end, self.clean)
        return self._plan(segments, bases, new_segment, log_end, log_start, recovery_point, tuple(epochs))

    def _nothing(self, segments: list[_Seg]) -> RecoveryPlan:
        """A clean load that recovers nothing: only the loader's producer-snapshot rule may delete files."""
        bases = tuple(s.base for s in segments)
        if bases:
            self.real_psm.remove_stray_snapshots(bases)
            for offset in snapshots_below_start(self.real_psm.known, self.log_start_ckpt, bases[0]):
                self.real_psm.remove_and_delete(offset)
        return RecoveryPlan(
            self.directory, self.tp, True, self.recovery_point, self.log_start_ckpt, (), (), None,
            tuple(self.empty_time_indexes), bases, -1, -1, self.recovery_point, None, (), None, {},
            tuple(self.files.to_delete()), tuple(self.empty_time_indexes),
        )  # fmt: skip

    def _plan(self, segments, bases, new_segment, log_end, log_start, recovery_point, epochs) -> RecoveryPlan:
        kept = {s.base for s in segments}
        final = {r.base_offset: r for r in self.recovered if r.base_offset in kept}
        changed = [base for base, r in final.items() if _differs(self.directory, r)]
        changed += [b for b in self.empty_time_indexes if b in kept and b not in changed]
        before = tuple(self.epochs_before) if self.epochs_before is not None else None
        if before is None:  # the broker creates the file when it builds the cache
            epoch_file: bytes | None = (
                checkpoints.format_leader_epoch_checkpoint(epochs) if self.epochs_changed or epochs else b""
            )
        elif epochs != before:
            epoch_file = checkpoints.format_leader_epoch_checkpoint(epochs)
        else:
            epoch_file = None
        return RecoveryPlan(
            self.directory, self.tp, self.clean, self.recovery_point, self.log_start_ckpt, tuple(self.recovered),
            tuple(self.dropped), new_segment, tuple(b for b in self.empty_time_indexes if b in kept), tuple(bases),
            log_end, log_start, recovery_point, before, epochs, epoch_file, self.files.to_write(),
            tuple(self.files.to_delete()), tuple(sorted(changed)), tuple(self.losses),
        )  # fmt: skip


def _txn_index_below_base(path: Path, base: int) -> bool:
    """TransactionIndex.sanityCheck, entry by entry: True at an entry whose last offset is below the base
    (the loader recovers the segment); an entry of a later version makes the broker fail to start."""
    if not storage.exists(path):
        return False
    data = storage.read_regular(path)
    for n in range(len(data) // TXN_ENTRY.size):
        version, _, _, last_offset, _ = TXN_ENTRY.unpack_from(data, n * TXN_ENTRY.size)
        if version > 0:
            raise RecoveryRefusedError(
                f"{path} at position {n * TXN_ENTRY.size}: aborted transaction entry {n} has version {version}; "
                "the broker fails to load this log"
            )
        if last_offset < base:
            return True
    return False


def _differs(directory: Path, r: RecoveredSegment) -> bool:
    """Whether the files of a recovered segment change (cut .log, other index bytes)."""
    if r.result.truncated_bytes:
        return True
    for suffix, wanted in (
        (INDEX_SUFFIX, r.index_bytes),
        (TIME_INDEX_SUFFIX, r.time_index_bytes),
        (TXN_INDEX_SUFFIX, r.txn_index_bytes),
    ):
        path = segment_file(directory, r.base_offset, suffix)
        if wanted is None:
            if storage.exists(path):
                return True
            continue
        if (
            not storage.exists(path)
            or storage.stat(path).st_size != len(wanted)
            or storage.read_regular(path) != wanted
        ):
            return True
    return False


def snapshots_below_start(snapshots: Iterable[int], log_start_checkpoint: int, first_base: int) -> list[int]:
    """The producer snapshots ``ProducerStateManager.truncateAndReload`` deletes at every load, clean
    shutdown or not, because of the log start offset: those at or below it (the checkpoint's, or the first
    segment's base when higher). (It also deletes those above the log end offset, which no clean shutdown
    leaves: the recovery of an unclean one deals with them.)"""
    start = max(log_start_checkpoint, first_base)
    return sorted(o for o in snapshots if o <= start)


def _loader_deletes_snapshots(snapshots: list[int], bases: list[int], log_start_checkpoint: int) -> bool:
    """From a listing: whether a clean load deletes one of ``snapshots``: a stray one (not at a segment
    base; the newest stray is kept when it lies beyond the last base: the log end's) or one at or below the
    log start offset."""
    if not snapshots or not bases:
        return False
    return bool(
        stray_snapshots(snapshots, bases) or snapshots_below_start(snapshots, log_start_checkpoint, bases[0])
    )


def nothing_to_load(
    directory: str | os.PathLike[str], ckpt: PartitionCheckpoints, files: DirFiles | None = None
) -> bool:
    """Whether :func:`plan_recovery` would find nothing to recover or change, from one directory listing
    (``files``, when the caller has it): after a clean shutdown, a directory whose every live ``.log`` has
    its ``.index`` and ``.timeindex`` and no ``.txnindex`` (the loader checks its entries), all of them
    plain files, and no producer snapshot the loader deletes (:func:`snapshots_below_start`, strays), is
    loaded as it is (the first return of ``_Loader.plan``). False says nothing: plan it."""
    if not ckpt.clean_shutdown:
        return False
    if files is None:
        files = DirFiles.scan(directory)
    logs: list[str] = []
    present: set[str] = set()
    snapshots: list[int] = []
    bases: list[int] = []
    for name, parsed in files.segment_files.items():
        if parsed.marker is not None:
            continue
        if parsed.suffix == SNAPSHOT_SUFFIX:
            snapshots.append(parsed.base_offset)
            continue
        if parsed.suffix == TXN_INDEX_SUFFIX or not files.entries[name].is_file(follow_symlinks=False):
            return False
        present.add(name)
        if parsed.suffix == LOG_SUFFIX:
            logs.append(name[: -len(LOG_SUFFIX)])
            bases.append(parsed.base_offset)
    if not all(
        f"{stem}{INDEX_SUFFIX}" in present and f"{stem}{TIME_INDEX_SUFFIX}" in present for stem in logs
    ):
        return False
    return not _loader_deletes_snapshots(snapshots, sorted(bases), ckpt.log_start_offset or 0)


def plan_recovery(
    directory: str | os.PathLike[str],
    tp: TopicPartition,
    ckpt: PartitionCheckpoints,
    cfg,
    *,
    now_ms: int,
    producer_id_expiration_ms: int,
) -> RecoveryPlan:
    """What the broker's loader would change in ``directory`` (leftovers of an unfinished operation resolved
    first); RecoveryRefusedError or a CorruptDataError where the broker would fail to load the partition.
    ``cfg`` is the topic's LogConfig (index.interval.bytes, segment.index.bytes)."""
    return _Loader(Path(directory), tp, ckpt, cfg, now_ms, producer_id_expiration_ms).plan()


def high_watermark_after(
    plan: RecoveryPlan, tp: TopicPartition, checkpoint: int | None, cluster: ClusterView | None
) -> tuple[int | None, str]:
    """After an unclean shutdown the replication-offset-checkpoint is stale. A partition whose only replica
    is this broker (``cluster``: the metadata, with the node id of meta.properties) gets its recovered log
    end offset (what it has once the broker leads it again); elsewhere the checkpoint is kept. Returns
    (new high watermark or None, a note)."""
    kept = "none" if checkpoint is None else str(checkpoint)
    if plan.clean_shutdown:
        return None, f"high watermark {kept} from replication-offset-checkpoint"
    if cluster is None:
        return (
            None,
            f"high watermark {kept} from replication-offset-checkpoint kept (no cluster metadata: replicas unknown)",
        )
    replicas = cluster.replicas(tp.topic, tp.partition)
    if cluster.node_id is not None and replicas == (cluster.node_id,):
        return plan.log_end_offset, (
            f"high watermark {kept} -> {plan.log_end_offset}, the recovered log end offset (broker "
            f"{cluster.node_id} is the only replica: leading the partition again, it sets the HW there)"
        )
    return None, (
        f"high watermark {kept} from replication-offset-checkpoint kept (replicas {list(replicas or ())}: "
        "the leader's high watermark is not known offline)"
    )


# ============================================================================================ applying
def apply_recovery(plan: RecoveryPlan) -> None:
    """Carry out ``plan``, in an order a crash at any point and a rerun turn into the uninterrupted result."""
    d = plan.directory
    marked: list[Path] = []
    for dropped in sorted(plan.dropped, key=lambda s: -s.base_offset):  # before any cut: see the module doc
        marked += mark_deleted(d, dropped.base_offset, (*SEGMENT_FILE_SUFFIXES, SNAPSHOT_SUFFIX))
    if marked:
        fsutil.fsync_dir(d)
    if plan.new_segment is not None:
        create_empty_segment(d, plan.new_segment)
    final = plan.final
    for base in plan.segments_changed:
        r = final.get(base)
        if r is not None:  # rebuilt indexes, then the .log cut at its last valid batch
            rewrite_segment(
                d, base, r.index_bytes, r.time_index_bytes, r.txn_index_bytes, r.result.valid_bytes
            )
    for base in plan.empty_time_indexes:
        create_empty_time_index(d, base)
    for offset, entries in plan.snapshots_written.items():
        write_snapshot(d, offset, entries)
    if plan.snapshots_deleted:
        delete_snapshots(d, [o for o in plan.snapshots_deleted if o not in plan.snapshots_written])
    if plan.epoch_file is not None:
        write_leader_epochs(d, plan.epoch_file)
    remove_deleted(d, marked)


def update_log_dir_checkpoints(
    log_dir: str | os.PathLike[str], tp: TopicPartition, plan: RecoveryPlan, high_watermark: int | None
) -> tuple[str, ...]:
    """This partition's entries of the shared checkpoints after a recovery (under the checkpoint lock):
    the recovery point at the log end offset, the log start offset only when above the first segment
    base, and -- when given -- the high watermark. Returns the names of the files rewritten."""
    first_base = plan.segment_bases[0]
    wanted: dict[str, int | None] = {
        checkpoints.RECOVERY_POINT_CHECKPOINT: plan.log_end_offset,
        checkpoints.LOG_START_OFFSET_CHECKPOINT: plan.log_start_offset
        if plan.log_start_offset > first_base
        else None,
    }
    if high_watermark is not None:
        wanted[checkpoints.REPLICATION_CHECKPOINT] = high_watermark
    return update_checkpoints(log_dir, tp, wanted, create_missing=True)


# ============================================================================================ the log dir
def clean_shutdown_marker(kafka_version) -> bytes:
    """``.kafka_cleanshutdown`` as the release writes it: empty up to 3.6, JSON since 3.7. The broker epoch
    is -1: this tool cannot vouch for it, so the controller still treats the restart as unclean (which
    only matters to eligible leader replicas); the log load itself skips recovery."""
    if kafka_version is not None and not kafka_version.at_least(3, 7):
        return b""
    return json.dumps({"version": 0, "brokerEpoch": -1}, separators=(",", ":")).encode()


def directories_to_recover(log_dir: str | os.PathLike[str]) -> tuple[list[TopicPartition], list[str]]:
    """The partitions a broker would load (and recover) from ``log_dir``, and the other directories it would
    also recover but this tool does not (``-future`` and ``-stray`` logs)."""
    partitions = [tp for tp, _ in list_partition_dirs(log_dir)]
    others = []
    with storage.scandir(log_dir) as entries:
        for entry in entries:
            if entry.is_dir() and parse_partition_dir(entry.name) is None:
                if entry.name.endswith(("-future", "-stray")):
                    others.append(entry.name)
    return partitions, sorted(others)


@dataclass(frozen=True, slots=True)
class RecoveredPartition:
    """A partition this run recovered after an unclean shutdown, as its task tells the driver."""

    log_dir: str
    tp: TopicPartition
    marker: bytes  # .kafka_cleanshutdown as the log dir's release writes it (clean_shutdown_marker)


def write_clean_shutdown_marker(
    log_dir: str | os.PathLike[str], recovered: set[TopicPartition], marker: bytes
) -> str:
    """After a writing job: mark ``log_dir`` as cleanly shut down when every partition the broker would
    recover was recovered by this run. Returns a one-line note ("" when the marker was there already)."""
    d = Path(log_dir)
    path = d / CLEAN_SHUTDOWN_FILE
    if storage.exists(path):
        return ""
    partitions, others = directories_to_recover(d)
    missing = [tp for tp in partitions if tp not in recovered]
    if missing or others:
        left = [str(tp) for tp in missing[:5]] + others[:5]
        more = len(missing) + len(others) - len(left)
        return (
            f"{d}: {CLEAN_SHUTDOWN_FILE} not written: {len(missing) + len(others)} partition directories were not "
            f"recovered by this run ({', '.join(left)}{f' and {more} more' if more > 0 else ''}); a broker started "
            "on this log dir recovers them (and re-checks the last segment of the others)"
        )
    write_clean_shutdown(d, marker)
    return (
        f"{d}: every partition recovered: wrote {CLEAN_SHUTDOWN_FILE} (a broker started on it skips recovery)"
    )


def finish_log_dirs(recovered: Iterable[RecoveredPartition | None]) -> list[str]:
    """The driver's last step of a writing job: ``.kafka_cleanshutdown`` for each log dir this run recovered
    completely (``recovered``: what each task recovered, None where it recovered nothing). Returns notes
    for the user."""
    by_dir: dict[str, set[TopicPartition]] = {}
    markers: dict[str, bytes] = {}
    for done in recovered:
        if done is None:
            continue
        by_dir.setdefault(done.log_dir, set()).add(done.tp)
        markers[done.log_dir] = done.marker
    notes = []
    for log_dir, partitions in sorted(by_dir.items()):
        note = write_clean_shutdown_marker(log_dir, partitions, markers[log_dir])
        if note:
            notes.append(note)
    return notes


# ============================================================================================ dry runs
def recovered_view(log: PartitionLog, plan: RecoveryPlan, ckpt: PartitionCheckpoints) -> PartitionLog:
    """The partition as it would be after ``plan``, without writing anything (dry runs): recovered segments
    are cut and carry their rebuilt indexes, dropped ones are gone, a new empty segment is there."""
    by_base = {s.base_offset: s for s in log.segments}
    final = plan.final
    segments = []
    for base in plan.segment_bases:
        original = by_base.get(base)
        r = final.get(base)
        if original is None:  # the empty segment the loader creates
            segments.append(Segment.planned(log.directory, base, 0, 0, b""))
        elif r is None:
            segments.append(original)
        else:
            data = log_file.read_log(original.log_path)
            view = memoryview(data)[: r.result.valid_bytes] if len(data) else b""
            segments.append(
                Segment.planned(
                    log.directory,
                    base,
                    r.result.valid_bytes,
                    original.mtime_ms,
                    view,
                    r.result.offset_index,
                    r.result.time_index,
                    r.result.aborted,
                    r.result.next_offset,
                )  # fmt: skip
            )
    return PartitionLog(log.log_dir, log.directory, log.tp, tuple(segments), ckpt)
