"""Planning a ``kafka-log`` read on the driver: which partitions, which offsets, which byte ranges.

Every plan is computed from the :class:`~spark_udfs.options.ReadOptions` alone (they belong to the
DataFrame and never change), so nothing one query does can change what another reads.

* **Partitions**: every live partition directory of the given log dirs (several dirs = a JBOD broker;
  a partition directory alone is read as such), chosen by assign / subscribe / subscribePattern.
* **Offsets**, per partition, as a consumer would see them: ``earliest`` is the log start offset;
  ``latest`` the high watermark (``replication-offset-checkpoint``, the log end offset when the
  partition has no entry, or always with ``end=log_end``), and for ``read_committed`` the last stable
  offset: below the first offset of the oldest open transaction (the producer state, as the broker
  rebuilds it). A timestamp gives the first record at or after it that a consumer could fetch
  (ListOffsets, spec cleaner §10 Q2).
* **Splits**: the bytes to read, cut at offset-index entries so that one Spark task reads at most about
  ``maxBytesPerSplit`` bytes (a whole partition only when it is smaller). A cut at an index entry is a
  batch start, so every batch belongs to exactly one split. The ``latest`` view reads each partition in
  one split: it has to see every key.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from pyspark.sql.datasource import InputPartition

from kafka_log_core import storage
from kafka_log_core.errors import CorruptIndexError, KafkaLogError, UsageError
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.log import locks
from kafka_log_core.log.listing import PartitionTask, log_dir_partitions
from kafka_log_core.log.log_dir import LogDirState
from kafka_log_core.log.partition_log import PartitionLog
from kafka_log_core.log.segment import Segment
from kafka_log_core.rules.producer_state import build_producer_table
from kafka_log_core.tools.offsets import offset_for_time
from spark_udfs import loaded
from spark_udfs.errors import LOG, DataLossError, PartitionReadError
from spark_udfs.options import EARLIEST, LATEST, Bound, ReadOptions


@dataclass(frozen=True)
class Chunk:
    """Batches of one segment starting in ``[start, stop)`` (byte positions). ``size`` and ``inode``
    are the ``.log`` as planned: a file replaced or shortened since is refused when read."""

    path: str
    base_offset: int
    start: int
    stop: int
    size: int
    inode: int

    @property
    def length(self) -> int:
        return self.stop - self.start


@dataclass(frozen=True)
class Split(InputPartition):
    """One Spark partition: chunks of one partition, in offset order, and the offsets to return."""

    source: PartitionTask  # the partition directory, as the jobs list it
    chunks: tuple[Chunk, ...]
    start_offset: int  # records with start_offset <= offset < end_offset
    end_offset: int
    aborted: tuple[tuple[int, int, int], ...] = ()  # (producer id, first offset, ABORT marker offset)


# ------------------------------------------------------------------------------------------ partitions
def find_partitions(options: ReadOptions) -> list[PartitionTask]:
    """The selected partition directories of every given path, sorted by topic and partition; one
    partition in two log dirs is refused (a JBOD broker keeps each partition in one dir). A directory is
    read once whatever its names, as the jobs list it: one reached again (the same log dir under a second
    path, a symlink or bind mount in another log dir, a partition directory given beside its log dir) is
    the first name's, never read twice."""
    found: dict[TopicPartition, PartitionTask] = {}
    seen: set[tuple[int, int] | Path] = set()  # partition directories by (device, inode)
    for log_dir, listed in _log_dirs(options.paths):
        state = LogDirState.read(log_dir)
        for tp in listed:
            identity = _identity(log_dir / tp.dir_name)
            if identity in seen:
                continue
            seen.add(identity)
            if not options.selection.admits(tp):
                continue
            if tp in found:
                raise UsageError(f"kafka-log: {tp} is in two log dirs: {found[tp].log_dir} and {log_dir}")
            found[tp] = PartitionTask(os.fspath(log_dir), tp.topic, tp.partition, state.for_partition(tp))
    if options.selection.kind == "assign":
        missing = sorted(options.selection.partitions - set(found))
        if missing:
            raise UsageError(
                f"kafka-log: assign names {', '.join(map(str, missing))}, in none of the log dirs"
            )
    named = (options.starting.named() | options.ending.named()) - set(found)
    if named:
        raise UsageError(
            f"kafka-log: the offsets options name {', '.join(map(str, sorted(named)))}, which are not read"
        )
    return sorted(found.values(), key=lambda source: source.tp)


def expand_paths(paths: tuple[str, ...]) -> list[Path]:
    """``load(["/d1", "/d2"])`` or ``load("/d1,/d2")``; a path that exists is never split at commas."""
    out = []
    for path in paths:
        parts = [path] if storage.is_dir(path) or "," not in path else [p.strip() for p in path.split(",")]
        out += [Path(p) for p in parts if p]
    return out


def _identity(directory: Path) -> tuple[int, int] | Path:
    """A directory as (device, inode); its path when it cannot be looked at (gone since it was listed:
    reading it then fails, naming it)."""
    try:
        st = storage.stat(directory)
    except OSError:
        return directory
    return st.st_dev, st.st_ino


def _log_dirs(paths: tuple[str, ...]) -> Iterator[tuple[Path, list[TopicPartition]]]:
    """Each path as (log dir, partitions): a log dir, or a single partition directory inside one."""
    for path in expand_paths(paths):
        if not storage.is_dir(path):
            raise UsageError(f"kafka-log: {path} is not a directory")
        yield log_dir_partitions(path, alone=True)


# ------------------------------------------------------------------------------------------ the plan
def plan(options: ReadOptions) -> list[Split]:
    """Every split of the read; the first partition that cannot be planned fails it (PartitionReadError)."""
    planned = plan_partitions(options)
    for _, outcome in planned:
        if isinstance(outcome, PartitionReadError):
            raise outcome
    return splits_of(planned, options)


def plan_partitions(
    options: ReadOptions, clusters: loaded.Clusters | None = None
) -> list[tuple[PartitionTask, _Planned | PartitionReadError]]:
    """Each selected partition's plan, or why it cannot be planned (a job fails that partition alone);
    ``clusters``: the job's, whose partitions are opened as loaded already."""
    out: list[tuple[PartitionTask, _Planned | PartitionReadError]] = []
    clusters = loaded.Clusters(expand_paths(options.paths)) if clusters is None else clusters
    for source in find_partitions(options):
        try:
            out.append((source, _plan_partition(options, source, clusters)))
        except (KafkaLogError, OSError) as err:
            if isinstance(err, UsageError):
                raise
            failed = PartitionReadError.wrap(source.topic, source.partition, source.log_dir, err)
            failed.__cause__ = err
            out.append((source, failed))
    return out


def splits_of(
    planned: list[tuple[PartitionTask, _Planned | PartitionReadError]], options: ReadOptions
) -> list[Split]:
    """The splits of the partitions that could be planned."""
    ready = [p for _, p in planned if isinstance(p, _Planned)]
    max_bytes = options.max_bytes_per_split
    if options.min_partitions:  # Spark's minPartitions: smaller splits, about that many in all
        total = sum(high - low for p in ready for _, low, high in p.pieces)
        max_bytes = max(1, min(max_bytes, -(-total // options.min_partitions)))
    return [split for p in ready for split in p.splits(max_bytes)]


@dataclass(frozen=True)
class _Planned:
    """One partition's read before it is cut into splits: byte ranges of segments, in offset order."""

    source: PartitionTask
    pieces: list[tuple[Segment, int, int]]
    start: int
    end: int
    aborted: tuple[tuple[int, int, int], ...] = ()
    whole: bool = False  # one split, however large (the latest view; the segments level)
    describe_files: bool = False  # the segments level: a split even without bytes to read
    note: str | None = None  # why the read ends where it does, when the loader's recovery decided it

    def splits(self, max_bytes: int) -> list[Split]:
        if self.whole:
            chunks = tuple(_chunk(*piece) for piece in self.pieces)
            keep = chunks or self.describe_files
            return [Split(self.source, chunks, self.start, self.end, self.aborted)] if keep else []
        return _pack(self.source, self.pieces, max_bytes, self.start, self.end, self.aborted)


def _plan_partition(options: ReadOptions, source: PartitionTask, clusters: loaded.Clusters) -> _Planned:
    if options.level in ("segments", "batches"):  # what is on disk, as it is
        log = PartitionLog.open(source.log_dir, source.tp, source.checkpoints)
        if options.level == "segments":
            return _Planned(
                source, [], log.log_start_offset, log.log_end_offset, whole=True, describe_files=True
            )
        return _Planned(source, [(s, 0, s.size) for s in log.segments if s.size], 0, log.log_end_offset)
    as_loaded = loaded.open_as_loaded(source, options.fail_on_data_loss, clusters)
    log = as_loaded.log
    log.validate_offsets()
    _check_active_tail(log, options)
    start, end = offset_range(options, log)
    pieces = []
    for i, segment in enumerate(log.segments_in(start, end)):
        low = _floor_position(segment, start) if i == 0 else 0
        high = _position_after(segment, end)
        if high > low:
            pieces.append((segment, low, high))
    aborted: tuple[tuple[int, int, int], ...] = ()
    if pieces and (options.read_committed or options.include_batch_columns):
        aborted = tuple(
            (t.producer_id, t.first_offset, t.last_offset)
            for t in log.collect_aborted_transactions(start, end)
        )
    # The latest view reads a partition in one split: it has to see every key.
    return _Planned(source, pieces, start, end, aborted, whole=options.level == "latest", note=as_loaded.note)


def _check_active_tail(log: PartitionLog, options: ReadOptions) -> None:
    """Bytes after the last whole batch of the active segment: a read ends before them, so what they hold
    would be skipped silently. A zero-filled (preallocated) tail holds nothing; anything else is data
    loss (a torn batch, a length past the end with batches after it). Not checked while a broker holds
    the log dir: it may be writing that batch now."""
    segment = log.active_segment
    if segment is None or locks.broker_holds(log.log_dir):
        return
    start = segment.offset_index.last_entry.position if len(segment.offset_index) else 0
    framed = start
    for batch in segment.header_scan(start):
        framed = batch.position + batch.size_in_bytes
    if framed >= segment.size or not any(_tail(segment.log_path, framed)):
        return
    problem = (
        f"{segment.log_path} at position {framed}: {segment.size - framed} bytes after the last whole batch of "
        "the active segment do not form a batch (a torn batch, or a length past the end of the file)"
    )
    if options.fail_on_data_loss:
        raise DataLossError(
            f"{problem}: the partition cannot be read whole (failOnDataLoss=false reads it to there)"
        )
    LOG.warning("kafka-log: %s: %s; failOnDataLoss=false: read up to there", log.tp, problem)


def _tail(path: Path, start: int) -> Iterator[bytes]:
    with storage.open_regular_file(path) as f:
        f.seek(start)
        while block := f.read(1 << 20):
            yield block.strip(b"\0")


def offset_range(options: ReadOptions, log: PartitionLog) -> tuple[int, int]:
    """[start, end) of one partition, as Spark's Kafka source would resolve its options on a broker."""
    tp = log.tp
    latest = log.high_watermark if options.end == "high_watermark" else log.log_end_offset
    if options.read_committed:
        first_unstable = build_producer_table(log, 0, None).first_unstable_offset()
        if first_unstable is not None:
            latest = max(min(latest, first_unstable), log.log_start_offset)
    start = _resolve(options.starting, tp, log, latest, options, is_start=True)
    end = _resolve(options.ending, tp, log, latest, options, is_start=False)
    if start > latest:
        raise UsageError(
            f"kafka-log: {tp} would start at offset {start}, after its latest offset {latest}"
            + (" (the last stable offset)" if options.read_committed else "")
        )
    if start > end:
        raise UsageError(f"kafka-log: {tp} would start at offset {start}, after its ending offset {end}")
    return start, end


def _resolve(bound: Bound, tp: TopicPartition, log: PartitionLog, latest: int, options, *, is_start) -> int:
    kind, value = bound.for_partition(tp)
    if kind == "timestamp":
        found = _offset_for_timestamp(log, value, latest, options.max_batch_bytes)
        if found is not None:
            return found
        if is_start and not options.latest_when_no_match:
            raise UsageError(
                f"kafka-log: no offset of {tp} matches the timestamp {value} (no record at or after it "
                "below the latest offset); startingOffsetsByTimestampStrategy=latest starts there instead"
            )
        return latest
    if value == EARLIEST:
        return log.log_start_offset
    if value == LATEST:
        return latest
    if value < log.log_start_offset:
        if not is_start:
            raise UsageError(
                f"kafka-log: endingOffsets for {tp} is {value}, below its log start offset {log.log_start_offset}"
            )
        if options.fail_on_data_loss:
            raise UsageError(
                f"kafka-log: startingOffsets for {tp} is {value}, below its log start offset "
                f"{log.log_start_offset}: those records are gone (failOnDataLoss=false starts at the log start)"
            )
        return log.log_start_offset
    return value if is_start else min(value, latest)


def _offset_for_timestamp(log: PartitionLog, timestamp: int, latest: int, max_batch_bytes: int) -> int | None:
    """ListOffsets for a timestamp, as the broker answers a consumer: the special values -2 and -1 (and
    -3, the largest timestamp), or the first record at or after ``timestamp`` (its batch decompressed to
    at most ``max_batch_bytes``); an answer at or past the last fetchable offset (``latest``) is no answer."""
    if timestamp == EARLIEST:
        return log.log_start_offset
    if timestamp == LATEST:
        return latest
    found = offset_for_time(log, timestamp, max_batch_bytes) if timestamp >= -3 else None
    return found if found is not None and found < latest else None


# ------------------------------------------------------------------------------------------ splits
def _floor_position(segment: Segment, offset: int) -> int:
    """Where a read of ``offset`` starts in ``segment``: its offset-index floor (every batch before it
    ends below ``offset``)."""
    position = segment.offset_index.lookup(offset).position
    if position > segment.size:
        raise CorruptIndexError(
            f"entry for offset {offset} points at position {position}, past the end of the log "
            f"({segment.size} bytes)",
            segment.index_path,
        )
    return position


def _position_after(segment: Segment, end: int) -> int:
    """A position from which every batch holds offsets >= ``end`` only: the index entry after the first
    one that reaches ``end - 1`` (whatever follows an entry was written after it), else the file end."""
    offsets = segment.offset_index.offsets
    k = int(np.searchsorted(offsets, np.int64(end - 1), side="left"))
    if k + 1 >= len(offsets):
        return segment.size
    return min(int(segment.offset_index.positions[k + 1]), segment.size)


def _cuts(segment: Segment, low: int, high: int, max_bytes: int) -> list[tuple[int, int]]:
    """[low, high) cut at offset-index positions into pieces of at most ``max_bytes`` where the index
    allows (a piece is never smaller than the gap between two entries)."""
    if high - low <= max_bytes:
        return [(low, high)]
    positions = segment.offset_index.positions
    out, current = [], low
    while high - current > max_bytes:
        i = int(np.searchsorted(positions, current + max_bytes, side="right")) - 1
        if i < 0 or positions[i] <= current:  # no entry within reach: the next one
            i = int(np.searchsorted(positions, current, side="right"))
        if i >= len(positions) or positions[i] >= high:
            break
        out.append((current, int(positions[i])))
        current = int(positions[i])
    out.append((current, high))
    return out


def _chunk(segment: Segment, low: int, high: int) -> Chunk:
    stat = storage.stat(segment.log_path)
    return Chunk(os.fspath(segment.log_path), segment.base_offset, low, high, segment.size, stat.st_ino)


def _pack(source, pieces, max_bytes: int, start: int, end: int, aborted) -> list[Split]:
    """Consecutive pieces of one partition into splits of at most ``max_bytes`` (or one piece)."""
    splits: list[Split] = []
    current: list[Chunk] = []
    size = 0
    for segment, low, high in pieces:
        for a, b in _cuts(segment, low, high, max_bytes):
            chunk = _chunk(segment, a, b)
            if current and size + chunk.length > max_bytes:
                splits.append(Split(source, tuple(current), start, end, aborted))
                current, size = [], 0
            current.append(chunk)
            size += chunk.length
    if current:
        splits.append(Split(source, tuple(current), start, end, aborted))
    return splits
