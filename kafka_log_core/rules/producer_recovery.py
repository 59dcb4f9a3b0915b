"""The producer-state side of log loading: snapshot files as the broker's ProducerStateManager handles
them while it loads a partition, simulated offline.

The broker builds producer state several times while it loads a log after an unclean shutdown: a
throw-away manager for every segment it recovers (``LogLoader.recoverSegment``), then the partition's
real manager (``UnifiedLog.rebuildProducerState``). Each one lists the ``.snapshot`` files, deletes
some, loads the newest readable one, replays batch headers and writes new snapshots. The files those
steps leave are what a broker restarted afterwards reads, so this module follows the same steps on a
model of the directory (:class:`SnapshotFiles`) and only the caller writes the result.

The manager's rules (:class:`ProducerStateManagerModel`), as in Kafka 3.6 to 4.4:

* it knows the snapshot files listed when it was created (plus the ones it writes);
* ``truncate_and_reload(log_start, end)`` deletes the snapshots above ``end`` or at/below
  ``log_start``; then, unless its map already ends at ``end``, forgets its producers and loads the
  newest readable snapshot (a corrupt one is deleted and the next older tried), skipping producers
  without an open transaction whose last timestamp is ``producer.id.expiration.ms`` or more before now;
* ``take_snapshot()`` writes one at its map end offset when that is above the last one written;
* ``remove_stray_snapshots(bases)`` re-lists the files and deletes every snapshot that is not at a
  segment base, except the newest such one when it lies beyond the last segment base.

:func:`rebuild_producer_state` is ``UnifiedLog.rebuildProducerState``: a clean shutdown with no snapshot
at all writes empty snapshots at the bases of the last two segments and at the end; otherwise truncate
and reload, replay the batches from the snapshot to ``last_offset`` (taking a snapshot at the start of
either of the last two segments on the way), and take a snapshot at ``last_offset``.

Snapshot entries are written in the order of Java's ``HashMap`` over producer ids (buckets of the
spread hash, insertion order within a bucket), which is the order the broker writes them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from kafka_log_core import storage
from kafka_log_core.errors import CorruptCheckpointError, CorruptDataError
from kafka_log_core.format.filenames import SNAPSHOT_SUFFIX, parse_segment_file, segment_file
from kafka_log_core.format.log_file import FileBatch
from kafka_log_core.format.producer_snapshot import (
    ProducerSnapshotEntry,
    encode_producer_snapshot,
    read_producer_snapshot,
)
from kafka_log_core.javacompat import hashmap_capacity, long_hashmap_order
from kafka_log_core.rules.producer_state import ProducerEntry, apply_batch


class ProducerStateRefusedError(CorruptDataError):
    """The broker's producer-state rebuild would fail on this log (it refuses to load the partition)."""


@dataclass
class SnapshotFiles:
    """The ``.snapshot`` files of one partition directory while the loader runs: the ones on disk and the
    ones written since (offset -> entries)."""

    directory: Path
    on_disk: dict[int, Path]  # existing files not (yet) deleted
    written: dict[int, tuple[ProducerSnapshotEntry, ...]] = field(default_factory=dict)
    initial: frozenset[int] = frozenset()

    @classmethod
    def scan(cls, directory: Path) -> SnapshotFiles:
        found = {}
        for name in storage.listdir(directory):
            parsed = parse_segment_file(name)
            if parsed and parsed.suffix == SNAPSHOT_SUFFIX and parsed.marker is None:
                found[parsed.base_offset] = directory / name
        return cls(directory, found, {}, frozenset(found))

    def offsets(self) -> list[int]:
        return sorted(set(self.on_disk) | set(self.written))

    def exists(self, offset: int) -> bool:
        return offset in self.on_disk or offset in self.written

    def delete(self, offset: int) -> None:
        self.on_disk.pop(offset, None)
        self.written.pop(offset, None)

    def write(self, offset: int, entries: tuple[ProducerSnapshotEntry, ...]) -> None:
        self.on_disk.pop(offset, None)
        self.written[offset] = entries

    def read(self, offset: int) -> list[ProducerSnapshotEntry]:
        if offset in self.written:
            return list(self.written[offset])
        return read_producer_snapshot(self.on_disk[offset])

    # the outcome, for the caller to apply: files rewritten with the bytes they hold already do not count
    def _unchanged(self) -> set[int]:
        same = set()
        for offset, entries in self.written.items():
            if offset in self.initial:
                path = self.path(offset)
                with contextlib.suppress(OSError):
                    if storage.read_regular(path) == encode_producer_snapshot(entries):
                        same.add(offset)
        return same

    def to_delete(self) -> list[int]:
        """Existing files that end up gone or replaced."""
        same = self._unchanged()
        return sorted(o for o in self.initial if o not in self.on_disk and o not in same)

    def to_write(self) -> dict[int, tuple[ProducerSnapshotEntry, ...]]:
        same = self._unchanged()
        return {o: e for o, e in sorted(self.written.items()) if o not in same}

    def path(self, offset: int) -> Path:
        return segment_file(self.directory, offset, SNAPSHOT_SUFFIX)


def stray_snapshots(snapshots: Iterable[int], segment_bases: Sequence[int]) -> list[int]:
    """The snapshots ``removeStraySnapshots`` deletes: those not at a segment base, except the newest of them
    when it lies beyond the last base (the log end's)."""
    bases = set(segment_bases)
    strays = [o for o in sorted(snapshots) if o not in bases]
    if strays and not (bases and strays[-1] < max(bases)):
        strays.pop()
    return strays


class ProducerStateManagerModel:
    """The parts of Kafka's ProducerStateManager that decide which snapshot files exist and what they hold."""

    def __init__(self, files: SnapshotFiles, now_ms: int, expiration_ms: int) -> None:
        self.files = files
        self.known: set[int] = set(files.offsets())  # its own map, listed at construction
        self.producers: dict[int, ProducerEntry] = {}
        self.last_snap_offset = 0
        self.last_map_offset = 0
        self.now_ms = now_ms
        self.expiration_ms = expiration_ms
        self.max_size = 0  # Java HashMap capacity only grows

    def is_empty(self) -> bool:
        return not self.producers

    def latest_snapshot_offset(self) -> int | None:
        return max(self.known) if self.known else None

    def remove_and_delete(self, offset: int) -> None:
        if offset in self.known:
            self.known.discard(offset)
            self.files.delete(offset)

    def truncate_and_reload(self, log_start: int, end: int) -> None:
        for offset in sorted(self.known):
            if offset > end or offset <= log_start:
                self.remove_and_delete(offset)
        if end != self.last_map_offset:
            self.producers.clear()
            self._load_from_snapshot(log_start)
        else:
            self.last_map_offset = max(self.last_map_offset, log_start)
            latest = self.latest_snapshot_offset()
            self.last_snap_offset = latest if latest is not None else log_start

    def _load_from_snapshot(self, log_start: int) -> None:
        while True:
            latest = self.latest_snapshot_offset()
            if latest is None:
                self.last_snap_offset = self.last_map_offset = log_start
                return
            try:
                loaded = self.files.read(latest)
            except (CorruptCheckpointError, FileNotFoundError):
                self.remove_and_delete(latest)  # the broker deletes it and tries the next older one
                continue
            for s in loaded:
                expired = s.current_txn_first_offset < 0 and self.now_ms - s.timestamp >= self.expiration_ms
                if not expired:
                    self.producers[s.producer_id] = ProducerEntry.from_snapshot(s)
            self._grew()
            self.last_snap_offset = self.last_map_offset = latest
            return

    def take_snapshot(self) -> None:
        if self.last_map_offset > self.last_snap_offset:
            self._grew()
            entries = tuple(
                self.producers[pid].to_snapshot() for pid in hashmap_order(self.producers, self.max_size)
            )
            self.files.write(self.last_map_offset, entries)
            self.known.add(self.last_map_offset)
            self.last_snap_offset = self.last_map_offset

    def remove_stray_snapshots(self, segment_bases: Sequence[int]) -> None:
        self.known = set(self.files.offsets())
        for offset in stray_snapshots(self.known, segment_bases):
            self.remove_and_delete(offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self.producers.clear()
        for snapshot in sorted(self.known):
            self.remove_and_delete(snapshot)
        self.last_snap_offset = 0
        self.last_map_offset = offset

    def mark_deleted(self, offset: int) -> None:
        """removeAndMarkSnapshotForDeletion: a deleted segment's snapshot goes (if this manager knows it)."""
        self.remove_and_delete(offset)

    def apply(self, batch: FileBatch) -> None:
        _check_transactional(self.producers, batch)
        apply_batch(self.producers, batch)
        self._grew()

    def _grew(self) -> None:
        self.max_size = max(self.max_size, len(self.producers))


def _check_transactional(producers: dict[int, ProducerEntry], batch: FileBatch) -> None:
    pid = batch.producer_id
    entry = producers.get(pid) if pid >= 0 else None
    if (
        entry is not None
        and entry.current_txn_first_offset >= 0
        and not batch.is_control
        and not batch.is_transactional
    ):
        raise ProducerStateRefusedError(
            f"a non-transactional batch from producer {pid}, which has an open transaction: the broker fails to "
            "load this log (InvalidTxnStateException)",
            batch.path,
            batch.position,
        )


@dataclass(frozen=True)
class SegmentView:
    """What the producer-state rebuild reads of one segment: its base, size and batches from an offset."""

    base_offset: int
    size: int
    batches_from: Callable[[int, int], Iterator[FileBatch]]  # (start offset, end position) -> batches
    position_of: Callable[[int], int | None]  # first batch with last offset >= offset


def rebuild_producer_state(
    psm: ProducerStateManagerModel,
    segments: Sequence[SegmentView],
    log_start: int,
    last_offset: int,
    reload_from_clean_shutdown: bool,
) -> None:
    """UnifiedLog.rebuildProducerState over ``segments`` (the ones loaded so far, in order)."""
    offsets_to_snapshot: list[int] = []
    if segments:
        if len(segments) >= 2:
            offsets_to_snapshot.append(segments[-2].base_offset)
        offsets_to_snapshot.append(segments[-1].base_offset)
    offsets_to_snapshot.append(last_offset)
    if psm.latest_snapshot_offset() is None and reload_from_clean_shutdown:
        for offset in offsets_to_snapshot:
            psm.last_map_offset = offset
            psm.take_snapshot()
        return
    empty_before = psm.is_empty() and psm.last_map_offset >= last_offset
    psm.truncate_and_reload(log_start, last_offset)
    if last_offset > psm.last_map_offset and not empty_before:
        floor = _floor(segments, last_offset)
        for segment in _segments_in(segments, psm.last_map_offset, last_offset):
            start = max(segment.base_offset, psm.last_map_offset, log_start)
            psm.last_map_offset = start
            if segment.base_offset in offsets_to_snapshot:
                psm.take_snapshot()
            end = segment.size
            if floor is segment:
                found = segment.position_of(last_offset)
                end = segment.size if found is None else found
            for batch in segment.batches_from(start, end):
                if batch.producer_id >= 0:
                    psm.apply(batch)
    psm.last_map_offset = last_offset
    psm.take_snapshot()


def _floor(segments: Sequence[SegmentView], offset: int) -> SegmentView | None:
    found = None
    for segment in segments:
        if segment.base_offset <= offset:
            found = segment
    return found


def _segments_in(segments: Sequence[SegmentView], start: int, end: int) -> list[SegmentView]:
    """LogSegments.values(start, end): from the segment holding ``start`` (or the first) while base < end."""
    if start == end or not segments:
        return []
    floor = _floor(segments, start)
    first = segments.index(floor) if floor is not None else 0
    return [s for s in segments[first:] if s.base_offset < end]


def hashmap_order(producers: dict[int, ProducerEntry], max_size: int) -> list[int]:
    """Producer ids in the order a ``HashMap<Long, ...>`` filled in ``producers``' order iterates them."""
    return long_hashmap_order(producers, hashmap_capacity(max(max_size, len(producers))))
