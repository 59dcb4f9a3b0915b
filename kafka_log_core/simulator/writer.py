"""Appending to a partition directory the way a Kafka 4.x broker's ``UnifiedLog`` does.

One :class:`PartitionWriter` per ``<log_dir>/<topic>-<partition>``. Each append call is one "append" in
the broker's sense (one produce request or one replica fetch), and follows ``UnifiedLog.append``::

    analyse   parse the batches, check CRC, max.message.bytes, offsets >= LEO and increasing
    epochs    each v2 batch: leader-epoch cache assign(epoch, base offset) -> leader-epoch-checkpoint
    roll?     LogSegment.shouldRoll, see below; new base = max(first offset of the append, LEO)
    write     bytes to the active .log; one index check per append (LogSegment.append)
    producers per producer id: epoch, last batch, open transaction -- the rules' machine
              (``rules.producer_state.append``, Kafka's ProducerAppendInfo.append: a marker takes its
              first record's timestamp; a control batch that is not a marker is refused, as the broker's
              EndTransactionMarker refuses it), staged per append and committed when the append is
              written (ProducerStateManager.update); an ABORT marker that ends a
              transaction appends (pid, first offset, marker offset, LSO) to the active .txnindex, the
              LSO being ProducerStateManager.lastStableOffset: the first offset of the oldest open
              transaction of another producer, else marker offset + 1

Producer snapshots list the producers in the iteration order of the broker's ``HashMap<Long, ...>``
(bucket of the spread ``Long.hashCode``, then insertion order), so they match the broker's bytes; the
test suite replays a real broker's batches through this writer and compares every file.

Roll rules (``LogSegment.shouldRoll`` with ``RollParams``), checked before every append of ``n`` bytes:

* size:   ``size(active) > segment.bytes - n``
* time:   ``size(active) > 0`` and ``waited > roll_ms - jitter`` where ``waited`` = the append's max
          timestamp minus the max timestamp of the segment's first batch, or ``now - created`` when that
          first batch has no timestamp (-1). ``roll_ms`` = segment.ms, for compacted topics
          ``min(segment.ms, max.compaction.lag.ms)``; ``jitter`` is drawn per segment when it is opened:
          ``abs(random int32) % min(segment.jitter.ms, segment.ms)`` (0 when segment.jitter.ms is 0).
* index:  the offset index holds ``floor(segment.index.bytes / 8)`` entries, or the time index holds
          ``floor(segment.index.bytes / 12) - 1`` (its last slot is kept for the final entry).
* offset: the append's last offset minus the active base does not fit an int32.

The new base is the first offset of the append (for legacy magic 0/1 data, whose first offset is unknown
without decompressing, the broker uses ``last offset - (2^31 - 1)``), but never below the LEO. On roll the
old segment gets its final time-index entry, both indexes are written trimmed (8n / 12n bytes) and the
``.log`` is fsynced; then a producer snapshot named after the new base is written.

Index upkeep (``LogSegment.append``, not the recovery rule of ``index_builder.IndexBuilder``): once per
append, if more than index.interval.bytes were appended since the last entry, add ``(last offset of the
append, position of the append)`` to the offset index and maybe-append the max timestamp so far to the
time index. For one batch per append both rules agree. They differ after a reopen: the broker starts a
loaded segment with "0 bytes since the last entry" and keeps the entries on disk, and so do we.

What is on disk while a writer is open: the ``.log`` is complete after every append; the active
segment's ``.index`` / ``.timeindex`` are empty until :meth:`PartitionWriter.close` (the broker keeps them
preallocated and memory-mapped instead). Close exactly like a clean broker shutdown: producer snapshot at
the LEO, final time-index entry, trimmed indexes, fsynced ``.log``.

Not emulated: duplicate detection of idempotent batches and sequence / epoch fencing (appends are
accepted like a follower accepts them; a non-transactional batch from a producer with an open
transaction is refused, as everywhere in the broker); timestamp bounds (message.timestamp.*.max.ms);
producer expiry; re-compression (compression.type); preallocation.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kafka_log_core import fsutil
from kafka_log_core.constants import MAX_INT
from kafka_log_core.errors import CorruptDataError, RefusedError, UsageError
from kafka_log_core.format import checkpoints, log_file, offset_index, record_batch, time_index, txn_index
from kafka_log_core.format.filenames import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    TopicPartition,
    list_segment_bases,
    parse_partition_dir,
    parse_segment_file,
    segment_file,
)
from kafka_log_core.format.log_file import FileBatch
from kafka_log_core.format.offset_index import OffsetPosition
from kafka_log_core.format.producer_snapshot import (
    ProducerSnapshotEntry,
    read_producer_snapshot,
    write_producer_snapshot,
)
from kafka_log_core.format.record_batch import BatchHeader, Record
from kafka_log_core.format.time_index import NO_TIMESTAMP, TimestampOffset
from kafka_log_core.format.txn_index import AbortedTxn
from kafka_log_core.javacompat import hashmap_capacity, long_hashmap_order
from kafka_log_core.log.index_builder import IndexBuilder
from kafka_log_core.log.log_dir import random_uuid
from kafka_log_core.rules import producer_state
from kafka_log_core.rules.producer_state import CompletedTxn, ProducerEntry
from kafka_log_core.settings.config import LogConfig

DEFAULTS = LogConfig()  # the topic-level defaults (segment.bytes, segment.ms, ...), Kafka's
NO_OFFSET = -1


# ---------------------------------------------------------------------------------------------- appends
@dataclass(frozen=True, slots=True)
class _AppendInfo:
    """What UnifiedLog.analyzeAndValidateRecords learns from the bytes of one append."""

    batches: tuple[FileBatch, ...]
    first_offset: int | None  # base offset of the first batch; None for legacy data (unknown)
    last_offset_of_first_batch: int
    last_offset: int
    max_timestamp: int
    shallow_offset_of_max_timestamp: int  # last offset of the first batch carrying max_timestamp
    size: int

    @property
    def first_or_last_offset_of_first_batch(self) -> int:
        return self.last_offset_of_first_batch if self.first_offset is None else self.first_offset


class _LiveIndexes:
    """Index state of the active segment, kept as LogSegment.append keeps it (one check per append)."""

    def __init__(
        self,
        base_offset: int,
        *,
        index_interval_bytes: int,
        segment_index_bytes: int,
        offsets: Sequence[OffsetPosition] = (),
        times: Sequence[TimestampOffset] = (),
    ) -> None:
        self.base_offset = base_offset
        self.index_interval_bytes = index_interval_bytes
        self.max_offset_entries = offset_index.max_entries(segment_index_bytes)
        self.max_time_entries = time_index.max_entries(segment_index_bytes)
        self.offsets = list(offsets)
        self.times = list(times)
        last = self.times[-1] if self.times else TimestampOffset(NO_TIMESTAMP, base_offset)
        self.max_timestamp, self.offset_of_max_timestamp = last.timestamp, last.offset
        self.bytes_since_last_entry = 0  # a loaded segment starts at 0 too

    @property
    def offset_index_full(self) -> bool:
        return len(self.offsets) >= self.max_offset_entries

    @property
    def time_index_full(self) -> bool:
        return len(self.times) >= self.max_time_entries - 1

    def append(self, position: int, size: int, info: _AppendInfo) -> None:
        if info.max_timestamp > self.max_timestamp:
            self.max_timestamp = info.max_timestamp
            self.offset_of_max_timestamp = info.shallow_offset_of_max_timestamp
        if self.bytes_since_last_entry > self.index_interval_bytes:
            self.offsets.append(OffsetPosition(info.last_offset, position))
            self._maybe_append_time()
            self.bytes_since_last_entry = 0
        self.bytes_since_last_entry += size

    def finish(self) -> None:
        """The final time-index entry written when the segment stops being active (roll or close)."""
        self._maybe_append_time()

    def _maybe_append_time(self) -> None:
        last = self.times[-1].timestamp if self.times else NO_TIMESTAMP
        if self.max_timestamp > last:
            self.times.append(TimestampOffset(self.max_timestamp, self.offset_of_max_timestamp))


# ---------------------------------------------------------------------------------------------- producers
@dataclass(frozen=True, slots=True)
class _ProducerUpdate:
    entries: dict[int, ProducerEntry]  # producer id -> updated copy, in first-seen order
    started: tuple[tuple[int, int], ...]  # (first offset, producer id) of transactions begun
    completed: tuple[CompletedTxn, ...]


class _ProducerStates:
    """ProducerStateManager of one partition: producer table, open transactions, snapshot offsets."""

    def __init__(self) -> None:
        self.entries: dict[int, ProducerEntry] = {}  # insertion order, as the broker's HashMap received them
        self.capacity = 16  # the HashMap's table size; grows, never shrinks
        self.ongoing: dict[int, int] = {}  # first offset of an open transaction -> producer id
        self.map_end_offset = 0
        self.last_snapshot_offset = 0

    def prepare(self, batches: Iterable[FileBatch], where: str) -> _ProducerUpdate:
        """ProducerAppendInfo for every producer in one append (the rules' machine,
        :func:`producer_state.append`); nothing changes until :meth:`commit`."""
        updated: dict[int, ProducerEntry] = {}
        started: list[tuple[int, int]] = []
        completed: list[CompletedTxn] = []
        for batch in batches:
            header = batch.header
            if not isinstance(header, BatchHeader) or header.producer_id < 0:
                continue
            pid = header.producer_id
            entry = updated.get(pid)
            if entry is None:  # as the broker, even an empty control batch gives its producer an entry
                current = self.entries.get(pid)
                entry = updated[pid] = dataclasses.replace(current) if current else ProducerEntry(pid)
            if not header.is_control and entry.current_txn_first_offset >= 0 and not header.is_transactional:
                raise RefusedError(
                    f"{where}: non-transactional batch at offset {header.base_offset} from producer {pid}, "
                    f"whose transaction started at offset {entry.current_txn_first_offset} is still open "
                    "(the broker refuses it with InvalidTxnStateException)"
                )
            open_before = entry.current_txn_first_offset
            done = producer_state.append(entry, batch, where)
            if done is not None:
                completed.append(done)
            if open_before < 0 <= entry.current_txn_first_offset:
                started.append((entry.current_txn_first_offset, pid))
        return _ProducerUpdate(updated, tuple(started), tuple(completed))

    def commit(self, update: _ProducerUpdate) -> None:
        """ProducerStateManager.update for each producer, in the order the broker's HashMap yields them."""
        order = long_hashmap_order(list(update.entries), hashmap_capacity(len(update.entries)))
        for pid in order:
            if pid not in self.entries:
                self.capacity = hashmap_capacity(len(self.entries) + 1, self.capacity)
            self.entries[pid] = update.entries[pid]
        for first_offset, pid in update.started:
            self.ongoing[first_offset] = pid

    def last_stable_offset(self, txn: CompletedTxn) -> int:
        """LSO stored with an aborted transaction: first offset of the oldest other open transaction."""
        for first_offset in sorted(self.ongoing):
            if self.ongoing[first_offset] != txn.producer_id:
                return first_offset
        return txn.last_offset + 1

    def complete(self, txn: CompletedTxn) -> None:
        self.ongoing.pop(txn.first_offset, None)

    def load(self, entries: Iterable[ProducerSnapshotEntry]) -> None:
        for s in entries:
            self.commit(_ProducerUpdate({s.producer_id: ProducerEntry.from_snapshot(s)}, (), ()))
            if s.current_txn_first_offset >= 0:
                self.ongoing[s.current_txn_first_offset] = s.producer_id

    def take_snapshot(self, directory: Path) -> Path | None:
        """Write ``<map end offset>.snapshot`` unless a snapshot at or beyond it was already taken."""
        if self.map_end_offset <= self.last_snapshot_offset:
            return None
        path = segment_file(directory, self.map_end_offset, SNAPSHOT_SUFFIX)
        order = long_hashmap_order(list(self.entries), self.capacity)
        write_producer_snapshot(path, [self.entries[pid].to_snapshot() for pid in order])
        self.last_snapshot_offset = self.map_end_offset
        return path


# ---------------------------------------------------------------------------------------------- segments
@dataclass(slots=True)
class _ActiveSegment:
    directory: Path
    base_offset: int
    indexes: _LiveIndexes
    jitter_ms: int  # LogSegment.rollJitterMs, drawn when the segment is opened
    handle: object  # the .log opened for appending (unbuffered)
    size: int = 0
    created_ms: int | None = None  # LogSegment.created: the clock of the first append that meets the segment
    first_batch_timestamp: int | None = None  # rollingBasedTimestamp: max timestamp of the first append

    def path(self, suffix: str) -> Path:
        return segment_file(self.directory, self.base_offset, suffix)

    def time_waited_for_roll(self, now_ms: int, max_timestamp: int) -> int:
        first = NO_TIMESTAMP if self.first_batch_timestamp is None else self.first_batch_timestamp
        if first >= 0:
            return max_timestamp - first
        return now_ms - (now_ms if self.created_ms is None else self.created_ms)


@dataclass(frozen=True, slots=True)
class RolledSegment:
    """Why a segment was rolled: the old and new base offsets and the rule that fired."""

    old_base_offset: int
    new_base_offset: int
    reason: str  # "size", "time", "offset index full", "time index full", "offset overflow", "requested"


class PartitionWriter:
    """Appends to one partition directory with the broker's offsets, roll rules, indexes and metadata.

    Opening an existing directory continues after its last segment: LEO, size and first-batch timestamp
    come from the active ``.log``, the index entries from its ``.index`` / ``.timeindex`` (rebuilt by
    the recovery rule when either is missing), the producer table from the newest ``.snapshot`` at or
    below the LEO plus a replay of the batches after it, the epochs from ``leader-epoch-checkpoint``.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        segment_bytes: int = DEFAULTS.segment_bytes,
        segment_ms: int = DEFAULTS.segment_ms,
        segment_jitter_ms: int = DEFAULTS.segment_jitter_ms,
        segment_index_bytes: int = DEFAULTS.segment_index_bytes,
        index_interval_bytes: int = DEFAULTS.index_interval_bytes,
        max_message_bytes: int = DEFAULTS.max_message_bytes,
        max_compaction_lag_ms: int | None = DEFAULTS.max_compaction_lag_ms,
        topic_id: str | None = None,
        random_seed: int | None = None,
    ) -> None:
        self.directory = Path(directory)
        tp = parse_partition_dir(self.directory.name)
        if tp is None:
            raise UsageError(f"{self.directory}: expected a partition directory named <topic>-<partition>")
        self.topic_partition: TopicPartition = tp
        for name, value, low in (
            ("segment.bytes", segment_bytes, 1),
            ("segment.ms", segment_ms, 1),
            ("segment.jitter.ms", segment_jitter_ms, 0),
            ("index.interval.bytes", index_interval_bytes, 0),
            ("max.message.bytes", max_message_bytes, 0),
        ):
            if value < low:
                raise UsageError(f"{name}={value}: expected a value >= {low}")
        offset_index.max_entries(segment_index_bytes)  # ConfigError when not even one entry fits
        time_index.max_entries(segment_index_bytes)
        self.segment_bytes = segment_bytes
        self.segment_ms = segment_ms
        self.segment_jitter_ms = segment_jitter_ms
        self.segment_index_bytes = segment_index_bytes
        self.index_interval_bytes = index_interval_bytes
        self.max_message_bytes = max_message_bytes
        # LogConfig.maxSegmentMs: a compacted topic also rolls when max.compaction.lag.ms has passed.
        lag = max_compaction_lag_ms
        self.roll_ms = min(segment_ms, lag) if lag is not None and lag > 0 else segment_ms
        self.rolls: list[RolledSegment] = []
        self._rng = random.Random(random_seed)
        self._mtimes: dict[int, int] = {}
        self._closed = False
        self._producers = _ProducerStates()

        self.directory.mkdir(parents=True, exist_ok=True)
        self._refuse_leftovers()
        self.topic_id = self._ensure_partition_metadata(topic_id)
        epoch_path = self.directory / checkpoints.LEADER_EPOCH_CHECKPOINT
        epoch_path.touch(exist_ok=True)  # the broker creates it empty with the log
        self._epochs = checkpoints.read_leader_epoch_checkpoint(epoch_path)
        self._bases = list_segment_bases(self.directory)
        if self._bases:
            self._load()
        else:
            self._bases = [0]
            self._active = self._open_segment(0, None)
            self._leo = 0

    # ------------------------------------------------------------------ state
    @property
    def log_end_offset(self) -> int:
        return self._leo

    @property
    def active_base_offset(self) -> int:
        return self._active.base_offset

    @property
    def active_segment_size(self) -> int:
        return self._active.size

    @property
    def active_segment_jitter_ms(self) -> int:
        return self._active.jitter_ms

    @property
    def segment_bases(self) -> list[int]:
        return list(self._bases)

    @property
    def leader_epochs(self) -> list[checkpoints.EpochEntry]:
        return list(self._epochs)

    @property
    def open_transactions(self) -> dict[int, int]:
        """Producer id -> first offset of its open transaction."""
        return {pid: first for first, pid in sorted(self._producers.ongoing.items())}

    # ------------------------------------------------------------------ appends
    def append_records(
        self,
        records: Sequence[Record],
        *,
        now_ms: int,
        codec: int = 0,
        timestamp_type: int = record_batch.CREATE_TIME,
        producer_id: int = -1,
        producer_epoch: int = -1,
        base_sequence: int = -1,
        partition_leader_epoch: int = 0,
        is_transactional: bool = False,
    ) -> tuple[int, int]:
        """Append ``records`` as one v2 batch at the LEO (their ``offset`` fields are ignored), like a leader.

        With LogAppendTime the batch's max timestamp is ``now_ms``. Returns (first offset, last offset).
        """
        if not records:
            raise UsageError(f"{self.directory}: append_records needs at least one record")
        if timestamp_type not in (record_batch.CREATE_TIME, record_batch.LOG_APPEND_TIME):
            raise UsageError(f"timestamp_type={timestamp_type}: expected 0 (CreateTime) or 1 (LogAppendTime)")
        base = self._leo
        rebased = [
            Record(base + i, r.timestamp, r.key, r.value, tuple(r.headers)) for i, r in enumerate(records)
        ]
        data = record_batch.build_batch(
            base,
            rebased,
            codec=codec,
            timestamp_type=timestamp_type,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=base_sequence,
            partition_leader_epoch=partition_leader_epoch,
            is_transactional=is_transactional,
            max_timestamp=now_ms if timestamp_type == record_batch.LOG_APPEND_TIME else None,
        )
        info = self._append(data, now_ms, follower=False)
        return base, info.last_offset

    def append_control(
        self,
        ctype: int,
        *,
        producer_id: int,
        producer_epoch: int,
        coordinator_epoch: int,
        now_ms: int,
        partition_leader_epoch: int = 0,
    ) -> int:
        """Append a COMMIT or ABORT marker at the LEO; returns its offset.

        An ABORT that ends an open transaction of ``producer_id`` adds an entry to the ``.txnindex`` of the
        segment that receives the marker, with the LSO the broker computes at that moment.
        """
        if ctype not in (record_batch.CONTROL_ABORT, record_batch.CONTROL_COMMIT):
            raise UsageError(
                f"ctype={ctype}: expected {record_batch.CONTROL_ABORT} (ABORT) or {record_batch.CONTROL_COMMIT} (COMMIT)"
            )
        if producer_id < 0:
            raise UsageError(f"producer_id={producer_id}: a transaction marker needs a producer id >= 0")
        offset = self._leo
        data = record_batch.build_control_batch(
            offset,
            ctype,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            coordinator_epoch=coordinator_epoch,
            timestamp=now_ms,
            partition_leader_epoch=partition_leader_epoch,
        )
        self._append(data, now_ms, follower=False)
        return offset

    def append_batch(self, batch_bytes: bytes | bytearray | memoryview, *, now_ms: int) -> tuple[int, int]:
        """Append pre-built batches (v2, or a legacy magic 0/1 message set) keeping their offsets, like a
        follower. The first batch's base offset (legacy: the first entry's offset, which for a compressed
        wrapper is its last inner offset) must be >= LEO, and last offsets must increase from batch to
        batch. Their partition leader epochs go to the epoch cache as they are (-1 is skipped).
        Returns (first offset, last offset)."""
        info = self._append(bytes(batch_bytes), now_ms, follower=True)
        first = info.first_offset if info.first_offset is not None else info.batches[0].base_offset
        return first, info.last_offset

    def roll(self, *, now_ms: int) -> int:
        """Start a new empty active segment at the LEO (UnifiedLog.roll); returns its base offset."""
        self._check_open()
        if self._active.created_ms is None:
            self._active.created_ms = now_ms
        self._roll_to(self._leo, now_ms, "requested")
        return self._active.base_offset

    def set_mtime_ms(self, segment_base: int, ms: int) -> None:
        """Set the modification time of a segment's .log, .index and .timeindex (LogSegment.setLastModified);
        kept when the writer later rewrites that segment's indexes."""
        if segment_base not in self._bases:
            raise UsageError(
                f"{self.directory}: no segment with base offset {segment_base} (have {self._bases})"
            )
        self._mtimes[segment_base] = ms
        self._apply_mtime(segment_base)

    def close(self) -> None:
        """Finish like a clean broker shutdown: snapshot at the LEO, final time-index entry, trimmed indexes."""
        if self._closed:
            return
        self._producers.map_end_offset = self._leo
        self._producers.take_snapshot(self.directory)
        self._finish_segment(self._active)
        fsutil.fsync_dir(self.directory)
        self._closed = True

    def __enter__(self) -> PartitionWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ the append path
    def _append(self, data: bytes, now_ms: int, *, follower: bool) -> _AppendInfo:
        self._check_open()
        info = self._analyze(data, follower=follower)
        update = self._producers.prepare(info.batches, os.fspath(self.directory))
        if info.size > self.segment_bytes:
            raise RefusedError(
                f"{self.directory}: append of {info.size} bytes at offset {info.last_offset_of_first_batch} "
                f"exceeds segment.bytes={self.segment_bytes} (RecordBatchTooLargeException)"
            )
        self._assign_epochs(info)
        segment = self._maybe_roll(info, now_ms)
        position = segment.size
        _write_all(segment.handle, data)
        segment.size += info.size
        if position == 0:
            segment.first_batch_timestamp = info.max_timestamp
        segment.indexes.append(position, info.size, info)
        self._leo = info.last_offset + 1
        self._producers.commit(update)
        for txn in update.completed:
            if txn.is_aborted:
                lso = self._producers.last_stable_offset(txn)
                entry = AbortedTxn(txn.producer_id, txn.first_offset, txn.last_offset, lso)
                txn_index.append_txn_index(segment.path(TXN_INDEX_SUFFIX), [entry])
            self._producers.complete(txn)
        self._producers.map_end_offset = self._leo
        return info

    def _analyze(self, data: bytes, *, follower: bool) -> _AppendInfo:
        batches = tuple(log_file.iter_batches(data, strict=True))
        if not batches:
            raise UsageError(f"{self.directory}: nothing to append (no complete batch in {len(data)} bytes)")
        first_offset = None
        last_offset = -1
        max_timestamp, shallow = NO_TIMESTAMP, -1
        for n, batch in enumerate(batches):
            batch.verify()
            if batch.size_in_bytes > self.max_message_bytes:
                raise RefusedError(
                    f"{self.directory}: batch at offset {batch.last_offset} is {batch.size_in_bytes} bytes, "
                    f"above max.message.bytes={self.max_message_bytes} (RecordTooLargeException)"
                )
            if follower and last_offset >= batch.last_offset:
                raise RefusedError(
                    f"{self.directory}: offsets out of order in the append: batch {n} ends at "
                    f"{batch.last_offset}, after a batch ending at {last_offset}"
                )
            if n == 0 and isinstance(batch.header, BatchHeader):
                first_offset = batch.header.base_offset
            last_offset = batch.last_offset
            if batch.max_timestamp > max_timestamp:
                max_timestamp, shallow = batch.max_timestamp, last_offset
        info = _AppendInfo(
            batches, first_offset, batches[0].last_offset, last_offset, max_timestamp, shallow, len(data)
        )
        if follower and info.first_or_last_offset_of_first_batch < self._leo:
            what = "first offset" if first_offset is not None else "last offset of the first (legacy) batch"
            raise RefusedError(
                f"{self.directory}: {what} {info.first_or_last_offset_of_first_batch} of the append is below "
                f"the log end offset {self._leo} (UnexpectedAppendOffsetException)"
            )
        return info

    def _assign_epochs(self, info: _AppendInfo) -> None:
        """LeaderEpochFileCache.assign per v2 batch; legacy batches clear the cache, as in the broker.
        A v2 batch without a leader epoch (-1) is skipped (a leader would have stamped one)."""
        cache = self._epochs
        for batch in info.batches:
            header = batch.header
            if isinstance(header, BatchHeader):
                if header.partition_leader_epoch >= 0:
                    entry = checkpoints.EpochEntry(header.partition_leader_epoch, header.base_offset)
                    cache = checkpoints.assign(cache, entry)
            elif cache:
                cache = []
        if cache != self._epochs:
            checkpoints.write_leader_epoch_checkpoint(
                self.directory / checkpoints.LEADER_EPOCH_CHECKPOINT, cache
            )
            self._epochs = cache

    def _maybe_roll(self, info: _AppendInfo, now_ms: int) -> _ActiveSegment:
        segment = self._active
        if segment.created_ms is None:
            segment.created_ms = now_ms
        reason = self._roll_reason(segment, info, now_ms)
        if reason is not None:
            if info.first_offset is not None:
                roll_offset = info.first_offset
            else:  # legacy data: the first offset is unknown without decompressing
                roll_offset = info.last_offset - MAX_INT
            self._roll_to(max(roll_offset, self._leo), now_ms, reason)
        return self._active

    def _roll_reason(self, segment: _ActiveSegment, info: _AppendInfo, now_ms: int) -> str | None:
        """LogSegment.shouldRoll, naming the first rule that fires."""
        if segment.size > self.segment_bytes - info.size:
            return "size"
        waited = segment.time_waited_for_roll(now_ms, info.max_timestamp)
        if segment.size > 0 and waited > self.roll_ms - segment.jitter_ms:
            return "time"
        if segment.indexes.offset_index_full:
            return "offset index full"
        if segment.indexes.time_index_full:
            return "time index full"
        if not 0 <= info.last_offset - segment.base_offset <= MAX_INT:
            return "offset overflow"
        return None

    def _roll_to(self, new_base: int, now_ms: int, reason: str) -> None:
        old = self._active
        if new_base == old.base_offset and old.size == 0:
            # LocalLog.roll: an empty active segment at the same offset is replaced (KAFKA-6388).
            _close_handle(old.handle)
            for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                old.path(suffix).unlink(missing_ok=True)
            self._active = self._open_segment(new_base, now_ms)
        elif new_base <= old.base_offset:
            raise RefusedError(
                f"{self.directory}: cannot roll to offset {new_base}: the active segment starts at "
                f"{old.base_offset} and holds {old.size} bytes"
            )
        else:
            self._finish_segment(old)
            self._active = self._open_segment(new_base, now_ms)
            self._bases.append(new_base)
        self.rolls.append(RolledSegment(old.base_offset, new_base, reason))
        # The snapshot is named after the new base even when the LEO is below it (a gap).
        self._producers.map_end_offset = new_base
        self._producers.take_snapshot(self.directory)

    # ------------------------------------------------------------------ segment files
    def _open_segment(self, base_offset: int, now_ms: int | None) -> _ActiveSegment:
        # Files left under the new segment's name are stale: the broker deletes them first.
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            segment_file(self.directory, base_offset, suffix).unlink(missing_ok=True)
        handle = open(segment_file(self.directory, base_offset, LOG_SUFFIX), "ab", buffering=0)
        for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            segment_file(self.directory, base_offset, suffix).touch()
        indexes = _LiveIndexes(
            base_offset,
            index_interval_bytes=self.index_interval_bytes,
            segment_index_bytes=self.segment_index_bytes,
        )
        return _ActiveSegment(
            self.directory, base_offset, indexes, self._draw_jitter(), handle, created_ms=now_ms
        )

    def _finish_segment(self, segment: _ActiveSegment) -> None:
        """LogSegment.onBecomeInactiveSegment / close: final time-index entry, trimmed indexes, fsynced .log."""
        segment.indexes.finish()
        offset_index.write_offset_index(
            segment.path(INDEX_SUFFIX), segment.base_offset, segment.indexes.offsets
        )
        time_index.write_time_index(
            segment.path(TIME_INDEX_SUFFIX), segment.base_offset, segment.indexes.times
        )
        os.fsync(segment.handle.fileno())  # type: ignore[attr-defined]
        _close_handle(segment.handle)
        self._apply_mtime(segment.base_offset)

    def _apply_mtime(self, base_offset: int) -> None:
        ms = self._mtimes.get(base_offset)
        if ms is None:
            return
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX):
            path = segment_file(self.directory, base_offset, suffix)
            if path.exists():
                os.utime(path, ns=(ms * 1_000_000, ms * 1_000_000))

    def _draw_jitter(self) -> int:
        """LogConfig.randomSegmentJitter: Utils.abs(random int) % min(segment.jitter.ms, segment.ms)."""
        if self.segment_jitter_ms == 0:
            return 0
        value = self._rng.getrandbits(32)
        signed = value - (1 << 32) if value >= 1 << 31 else value
        magnitude = 0 if signed == -(1 << 31) else abs(signed)
        return magnitude % min(self.segment_jitter_ms, self.segment_ms)

    def _check_open(self) -> None:
        if self._closed:
            raise UsageError(f"{self.directory}: the writer is closed")

    # ------------------------------------------------------------------ opening an existing directory
    def _refuse_leftovers(self) -> None:
        for entry in sorted(os.listdir(self.directory)):
            parsed = parse_segment_file(entry)
            if parsed is not None and parsed.marker is not None:
                raise RefusedError(
                    f"{self.directory / entry}: left over from an unfinished delete, clean or swap; "
                    "let the broker (or the loader) resolve it before appending"
                )

    def _ensure_partition_metadata(self, topic_id: str | None) -> str:
        path = self.directory / checkpoints.PARTITION_METADATA
        if path.exists():
            existing = checkpoints.read_partition_metadata(path).topic_id
            same = topic_id is None or checkpoints.decode_uuid(topic_id) == checkpoints.decode_uuid(existing)
            if not same:
                raise RefusedError(f"{path}: holds topic id {existing}, not the requested {topic_id}")
            return existing
        chosen = topic_id if topic_id is not None else random_uuid(self._rng)
        checkpoints.write_partition_metadata(path, chosen)
        return checkpoints.read_partition_metadata(path).topic_id

    def _load(self) -> None:
        base = self._bases[-1]
        log_path = segment_file(self.directory, base, LOG_SUFFIX)
        data = log_path.read_bytes()
        batches = list(log_file.iter_batches(data, log_path, strict=True))
        self._leo = batches[-1].next_offset if batches else base
        index_path = segment_file(self.directory, base, INDEX_SUFFIX)
        time_path = segment_file(self.directory, base, TIME_INDEX_SUFFIX)
        if index_path.exists() and time_path.exists():
            offsets = list(offset_index.read_offset_index(index_path, base))
            times = list(time_index.read_time_index(time_path, base))
        else:  # the broker recovers a segment whose .index is missing: rebuild by the recovery rule
            builder = IndexBuilder(
                base,
                index_interval_bytes=self.index_interval_bytes,
                segment_index_bytes=self.segment_index_bytes,
                path=index_path,
            )
            for batch in batches:
                builder.append(batch.position, batch.last_offset, batch.max_timestamp)
            built_offsets, built_times = builder.finish()
            offsets, times = list(built_offsets), list(built_times)
        indexes = _LiveIndexes(
            base,
            index_interval_bytes=self.index_interval_bytes,
            segment_index_bytes=self.segment_index_bytes,
            offsets=offsets,
            times=times,
        )
        handle = open(log_path, "ab", buffering=0)
        self._active = _ActiveSegment(
            self.directory, base, indexes, self._draw_jitter(), handle, size=len(data)
        )
        if batches:
            self._active.first_batch_timestamp = batches[0].max_timestamp
        self._load_producer_state(batches)
        truncated = checkpoints.truncate_from_end(self._epochs, self._leo)
        if truncated != self._epochs:
            checkpoints.write_leader_epoch_checkpoint(
                self.directory / checkpoints.LEADER_EPOCH_CHECKPOINT, truncated
            )
            self._epochs = truncated

    def _load_producer_state(self, active_batches: list[FileBatch]) -> None:
        """Newest readable snapshot at or below the LEO, then a replay of later batches, segment by segment."""
        snapshots = sorted(
            parsed.base_offset
            for name in os.listdir(self.directory)
            if (parsed := parse_segment_file(name)) is not None
            and parsed.suffix == SNAPSHOT_SUFFIX
            and parsed.marker is None
            and parsed.base_offset <= self._leo
        )
        start = self._bases[0]
        for offset in reversed(snapshots):
            try:
                entries = read_producer_snapshot(segment_file(self.directory, offset, SNAPSHOT_SUFFIX))
            except CorruptDataError:
                continue  # the broker deletes a corrupt snapshot and tries the next older one
            self._producers.load(entries)
            self._producers.last_snapshot_offset = start = offset
            break
        for n, base in enumerate(self._bases):
            upper = self._bases[n + 1] if n + 1 < len(self._bases) else self._leo + 1
            if upper <= start:
                continue
            if base == self._active.base_offset:
                batches: Iterable[FileBatch] = active_batches
            else:
                batches = log_file.iter_file_batches(segment_file(self.directory, base, LOG_SUFFIX))
            update = self._producers.prepare(
                [b for b in batches if b.last_offset >= start], os.fspath(self.directory)
            )
            self._producers.commit(update)
            for txn in update.completed:
                self._producers.complete(txn)
        self._producers.map_end_offset = self._leo
        self._producers.take_snapshot(self.directory)


def _write_all(handle: object, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = handle.write(view)  # type: ignore[attr-defined]
        view = view[written:]


def _close_handle(handle: object) -> None:
    handle.close()  # type: ignore[attr-defined]
