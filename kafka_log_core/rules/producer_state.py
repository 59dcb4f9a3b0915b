"""Producer state of one partition, as the broker's ProducerStateManager would hold it offline.

Built like the broker does on load: the newest readable ``.snapshot`` in (log start offset, LEO]
(corrupt ones skipped, entries of producers already expired skipped) plus a replay of the batch
headers after it (one compiled header scan per segment, reduced with numpy: no Python step per batch); with no snapshot at all, a replay of the whole log — except after a clean
shutdown, where the broker starts with an empty table and so do we. What the cleaner needs from it:
each active producer's last data offset and epoch (batches that must survive as empty batches), and
the first offset of every open transaction (which bounds the last stable offset).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import cast

import numpy as np

from kafka_log_core import storage
from kafka_log_core.errors import CorruptDataError, CorruptRecordError
from kafka_log_core.format.filenames import SNAPSHOT_SUFFIX, parse_segment_file
from kafka_log_core.format.log_file import FileBatch
from kafka_log_core.format.producer_snapshot import ProducerSnapshotEntry, read_producer_snapshot
from kafka_log_core.format.record_batch import (
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_MASK,
    MAGIC,
    TRANSACTIONAL_MASK,
    BatchHeader,
    Record,
    decode_control_record,
    increment_sequence,
)
from kafka_log_core.kernels.header_scan import EMPTY_CONTROL, UNREADABLE_CONTROL

NO_OFFSET = -1


@dataclass(slots=True)
class ProducerEntry:
    """ProducerStateEntry as a snapshot records it (the last batch only)."""

    producer_id: int
    epoch: int = -1
    last_data_offset: int = NO_OFFSET  # last offset of the newest data batch in the current epoch
    last_timestamp: int = -1
    current_txn_first_offset: int = NO_OFFSET
    coordinator_epoch: int = -1
    last_sequence: int = -1
    offset_delta: int = 0  # last offset - first offset of that batch

    def update_epoch(self, epoch: int) -> None:
        """maybeUpdateProducerEpoch: a new epoch forgets the batch history."""
        if epoch != self.epoch:
            self.epoch, self.last_data_offset, self.last_sequence, self.offset_delta = epoch, NO_OFFSET, -1, 0

    def to_snapshot(self) -> ProducerSnapshotEntry:
        return ProducerSnapshotEntry(
            self.producer_id, self.epoch, self.last_sequence, self.last_data_offset, self.offset_delta,
            self.last_timestamp, self.coordinator_epoch, self.current_txn_first_offset,
        )  # fmt: skip

    @classmethod
    def from_snapshot(cls, s: ProducerSnapshotEntry) -> ProducerEntry:
        return cls(
            s.producer_id, s.epoch, s.last_offset, s.timestamp, s.current_txn_first_offset, s.coordinator_epoch,
            s.last_sequence, s.offset_delta,
        )  # fmt: skip


@dataclass(frozen=True, slots=True)
class LastRecord:
    """What the cleaner keeps per active producer (Kafka's lastRecordsOfActiveProducers)."""

    last_data_offset: int | None
    producer_epoch: int


@dataclass(frozen=True)
class ProducerTable:
    entries: dict[int, ProducerEntry]
    source: str  # how it was built, for reports

    def active(self, now_ms: int, expiration_ms: int) -> dict[int, LastRecord]:
        """Producers not expired at ``now_ms`` (an open transaction keeps a producer alive)."""
        out = {}
        for pid, e in self.entries.items():
            if e.current_txn_first_offset >= 0 or now_ms - e.last_timestamp < expiration_ms:
                last = e.last_data_offset if e.last_data_offset >= 0 else None
                out[pid] = LastRecord(last, e.epoch)
        return out

    def snapshot_entries(self) -> list[ProducerSnapshotEntry]:
        return [e.to_snapshot() for e in self.entries.values()]

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction, if any."""
        opens = [e.current_txn_first_offset for e in self.entries.values() if e.current_txn_first_offset >= 0]
        return min(opens) if opens else None


@dataclass(frozen=True, slots=True)
class CompletedTxn:
    """A transaction a COMMIT or ABORT marker ended (Kafka's CompletedTxn)."""

    producer_id: int
    first_offset: int
    last_offset: int  # offset of the marker
    is_aborted: bool


def append(entry: ProducerEntry, batch: FileBatch, where: str | None) -> CompletedTxn | None:
    """One v2 batch of ``entry``'s producer into its entry (Kafka's ProducerAppendInfo.append, as a
    follower or the log loader applies it: no epoch or sequence checks). Returns the transaction a marker
    completed, if it had begun in the log.

    As Kafka: a marker takes the *first record's* timestamp (not the batch's max timestamp), and a control
    batch holding anything but an ABORT or COMMIT record is an error (the broker's EndTransactionMarker
    refuses it, which fails the append, and the partition's load). An empty control batch (its transaction
    cleaned away) changes nothing."""
    header = cast(BatchHeader, batch.header)
    if header.is_control:
        records = batch.records()
        if not records:
            return None
        first = cast(Record, records[0])
        marker = decode_control_record(first)
        if marker.type not in (CONTROL_ABORT, CONTROL_COMMIT):
            raise CorruptRecordError(
                f"control batch at offset {header.base_offset} of producer {header.producer_id} holds a "
                f"{marker.type_name} record: expected an ABORT or COMMIT marker",
                where,
                batch.position,
            )
        entry.update_epoch(header.producer_epoch)
        completed = None
        if entry.current_txn_first_offset >= 0:
            completed = CompletedTxn(
                header.producer_id,
                entry.current_txn_first_offset,
                header.base_offset,
                marker.type == CONTROL_ABORT,
            )
        if marker.coordinator_epoch is not None:
            entry.coordinator_epoch = marker.coordinator_epoch
        entry.current_txn_first_offset = NO_OFFSET
        entry.last_timestamp = first.timestamp
        return completed
    entry.update_epoch(header.producer_epoch)
    entry.last_data_offset = header.last_offset
    entry.last_sequence = header.last_sequence
    entry.offset_delta = header.last_offset_delta
    entry.last_timestamp = header.max_timestamp
    if header.is_transactional and entry.current_txn_first_offset < 0:
        entry.current_txn_first_offset = header.base_offset
    return None


def apply_batch(entries: dict[int, ProducerEntry], batch: FileBatch, where: str | None = None) -> None:
    """Replay one batch into the table (:func:`append`, offline). Batches without a producer (legacy
    messages never carry one) and empty control batches add no entry."""
    pid = batch.producer_id
    header = batch.header
    if pid < 0 or not isinstance(header, BatchHeader):
        return
    if header.is_control and header.records_count == 0:
        return
    append(entries.setdefault(pid, ProducerEntry(pid)), batch, where)


def replay(entries: dict[int, ProducerEntry], batches: Iterable[FileBatch], where: str | None = None) -> None:
    for batch in batches:
        apply_batch(entries, batch, where)


def replay_headers(entries: dict[int, ProducerEntry], rows: np.ndarray, where: str | None = None) -> None:
    """:func:`apply_batch` over every batch header of ``rows`` (``header_scan.HEADER_ROW`` records in
    log order, markers already read by the scan), reduced with numpy: one Python step per producer,
    none per batch. Per producer, in order: the last event sets the epoch and the timestamp; the data
    fields come from the last data batch after the last epoch change; the open transaction starts at
    the first transactional data batch after the last marker. A marker's timestamp is taken from the
    header's max timestamp: the first record's, as :func:`append` takes it, for a marker batch as the
    broker writes one (one record, its timestamp the batch's)."""
    control = (rows["attributes"] & CONTROL_MASK) != 0
    ctype = rows["control_type"]
    marker = control & ((ctype == CONTROL_ABORT) | (ctype == CONTROL_COMMIT))
    odd = control & ~marker & (rows["producer_id"] >= 0) & (ctype != EMPTY_CONTROL) & (rows["magic"] == MAGIC)
    if odd.any():  # not a transaction marker: Kafka refuses it (see append)
        bad = rows[odd][0]
        raise CorruptRecordError(
            f"control batch at offset {int(bad['base_offset'])} of producer {int(bad['producer_id'])} holds a "
            f"control record of type {int(bad['control_type'])}: expected an ABORT or COMMIT marker",
            where,
            int(bad["position"]),
        )
    ev = rows[(rows["magic"] == MAGIC) & (rows["producer_id"] >= 0) & (~control | marker)]
    n = len(ev)
    if not n:
        return
    ev = ev[np.argsort(ev["producer_id"], kind="stable")]  # each producer's events, still in log order
    pid, epoch = ev["producer_id"], ev["producer_epoch"]
    data = (ev["attributes"] & CONTROL_MASK) == 0
    txn_data = data & ((ev["attributes"] & TRANSACTIONAL_MASK) != 0)
    idx = np.arange(n)
    first = np.flatnonzero(np.concatenate(([True], pid[1:] != pid[:-1])))
    last = np.concatenate((first[1:], [n])) - 1
    epoch_change = np.concatenate(([True], (pid[1:] != pid[:-1]) | (epoch[1:] != epoch[:-1])))
    run_start = np.maximum.accumulate(np.where(epoch_change, idx, 0))[last]
    last_data = np.maximum.accumulate(np.where(data, idx, -1))[last]
    last_marker = np.maximum.accumulate(np.where(~data, idx, -1))[last]
    next_txn_data = np.minimum.accumulate(np.where(txn_data, idx, n)[::-1])[::-1]
    next_txn_data = np.concatenate((next_txn_data, [n]))
    columns = {name: ev[name].tolist() for name in ("last_offset", "base_offset", "base_sequence",
                                                      "last_offset_delta", "max_timestamp", "coordinator_epoch")}  # fmt: skip
    for g, producer in enumerate(pid[first].tolist()):
        lo, hi, start = int(first[g]), int(last[g]), int(run_start[g])
        entry = entries.setdefault(producer, ProducerEntry(producer))
        new_epoch = int(epoch[hi])
        reset = start > lo or entry.epoch != new_epoch
        entry.epoch = new_epoch
        d = int(last_data[g])
        if d >= start:
            entry.last_data_offset = columns["last_offset"][d]
            entry.offset_delta = columns["last_offset_delta"][d]
            entry.last_sequence = increment_sequence(columns["base_sequence"][d], entry.offset_delta)
        elif reset:
            entry.last_data_offset, entry.last_sequence, entry.offset_delta = NO_OFFSET, -1, 0
        entry.last_timestamp = columns["max_timestamp"][hi]
        m = int(last_marker[g])
        if m >= lo:
            entry.coordinator_epoch = columns["coordinator_epoch"][m]
            entry.current_txn_first_offset = NO_OFFSET
        if entry.current_txn_first_offset < 0:
            q = int(next_txn_data[m + 1 if m >= lo else lo])
            if q <= hi:
                entry.current_txn_first_offset = columns["base_offset"][q]


def build_producer_table(log, now_ms: int, expiration_ms: int | None) -> ProducerTable:
    """``log`` is a PartitionLog; reads its snapshots and replays headers after the newest one.
    Snapshot entries of producers expired at ``now_ms`` are skipped, as the broker's load does
    (``expiration_ms=None`` keeps them all: the broker's in-memory table between expiry checks)."""
    leo = log.log_end_offset
    snapshots = sorted(
        (parsed.base_offset, log.directory / name)
        for name in storage.listdir(log.directory)
        if (parsed := parse_segment_file(name)) and parsed.suffix == SNAPSHOT_SUFFIX and parsed.marker is None
    )
    if not snapshots and log.clean_shutdown:
        return ProducerTable({}, "empty: clean shutdown without producer snapshots (as the broker)")
    entries: dict[int, ProducerEntry] = {}
    start = log.log_start_offset
    source = "replay of the whole log"
    for offset, path in reversed(snapshots):
        if not log.log_start_offset < offset <= leo:
            continue
        try:
            loaded = read_producer_snapshot(path)
        except CorruptDataError:
            continue  # the broker deletes a corrupt snapshot and tries the next older one
        for s in loaded:
            expired = expiration_ms is not None and now_ms - s.timestamp >= expiration_ms
            if s.current_txn_first_offset < 0 and expired:
                continue
            entries[s.producer_id] = ProducerEntry.from_snapshot(s)
        start = offset
        source = f"snapshot {path.name} + replay"
        break
    for segment in log.segments_from(start):
        position = segment.lookup_position(start) if segment.base_offset < start else 0
        rows = segment.headers(position)
        rows = rows[rows["last_offset"] >= start]
        where = str(segment.log_path)
        if (rows["control_type"] == UNREADABLE_CONTROL).any():  # an odd marker: the readable path decides
            replay(entries, (b for b in segment.header_scan(position) if b.last_offset >= start), where)
        else:
            replay_headers(entries, rows, where)
    return ProducerTable(entries, source)
