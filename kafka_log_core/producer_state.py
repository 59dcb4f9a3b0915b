"""Producer state of one partition, as the broker's ProducerStateManager would hold it offline.

Built like the broker does on load: the newest readable ``.snapshot`` in (log start offset, LEO]
(corrupt ones skipped, entries of producers already expired skipped) plus a replay of the batch
headers after it; with no snapshot at all, a replay of the whole log — except after a clean
shutdown, where the broker starts with an empty table and so do we. What the cleaner needs from it:
each active producer's last data offset and epoch (batches that must survive as empty batches), and
the first offset of every open transaction (which bounds the last stable offset).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .errors import CorruptDataError
from .filenames import SNAPSHOT_SUFFIX, parse_segment_file
from .log_file import FileBatch
from .producer_snapshot import read_producer_snapshot
from .record_batch import BatchHeader

NO_OFFSET = -1


@dataclass(slots=True)
class ProducerEntry:
    producer_id: int
    epoch: int = -1
    last_data_offset: int = NO_OFFSET  # last offset of the newest data batch in the current epoch
    last_timestamp: int = -1
    current_txn_first_offset: int = NO_OFFSET
    coordinator_epoch: int = -1


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

    def first_unstable_offset(self) -> int | None:
        """First offset of the oldest open transaction, if any."""
        opens = [e.current_txn_first_offset for e in self.entries.values() if e.current_txn_first_offset >= 0]
        return min(opens) if opens else None


def apply_batch(entries: dict[int, ProducerEntry], batch: FileBatch) -> None:
    """Replay one batch header into the table (ProducerAppendInfo, offline)."""
    pid = batch.producer_id
    if pid < 0:
        return
    header = batch.header
    if not isinstance(header, BatchHeader):
        return  # legacy messages carry no producer
    epoch = batch.producer_epoch
    entry = entries.get(pid)
    if batch.is_control:
        if header.records_count == 0:
            return  # an empty control batch: its transaction was already cleaned away
        if entry is None:
            entry = entries[pid] = ProducerEntry(pid)
        if epoch > entry.epoch:
            entry.last_data_offset = NO_OFFSET
        entry.epoch = max(entry.epoch, epoch)
        entry.current_txn_first_offset = NO_OFFSET
        entry.last_timestamp = batch.max_timestamp
        return
    if entry is None:
        entry = entries[pid] = ProducerEntry(pid)
    if epoch != entry.epoch:
        entry.last_data_offset = NO_OFFSET
        entry.epoch = epoch
    entry.last_data_offset = batch.last_offset
    entry.last_timestamp = batch.max_timestamp
    if batch.is_transactional and entry.current_txn_first_offset < 0:
        entry.current_txn_first_offset = header.base_offset


def replay(entries: dict[int, ProducerEntry], batches: Iterable[FileBatch]) -> None:
    for batch in batches:
        apply_batch(entries, batch)


def build_producer_table(log, now_ms: int, expiration_ms: int) -> ProducerTable:
    """``log`` is a PartitionLog; reads its snapshots and replays headers after the newest one."""
    leo = log.log_end_offset
    snapshots = sorted(
        (parsed.base_offset, path)
        for path in log.directory.iterdir()
        if (parsed := parse_segment_file(path.name))
        and parsed.suffix == SNAPSHOT_SUFFIX
        and parsed.marker is None
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
            if s.current_txn_first_offset < 0 and now_ms - s.timestamp >= expiration_ms:
                continue
            entries[s.producer_id] = ProducerEntry(
                s.producer_id,
                s.epoch,
                s.last_offset,
                s.timestamp,
                s.current_txn_first_offset,
                s.coordinator_epoch,
            )
        start = offset
        source = f"snapshot {path.name} + replay"
        break
    for segment in log.segments_from(start):
        position = segment.lookup_position(start) if segment.base_offset < start else 0
        replay(entries, (b for b in segment.header_scan(position) if b.last_offset >= start))
    return ProducerTable(entries, source)
