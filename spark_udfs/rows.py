"""Reading one split on an executor: the rows of each level, as tuples in the order of its schema.

``records`` are what a consumer fetching the split's offsets gets: data records only (transaction
markers are never delivered), every batch CRC-checked as a consumer does (``check.crcs``); with
``read_committed`` the records of aborted transactions are left out, as the consumer leaves them out:
a transactional batch is aborted when its producer has an aborted transaction (``.txnindex``) that
begins at or before the batch and whose ABORT marker comes after it.

``latest`` walks the partition from its end: the first time a key is met is its last record, kept
unless it is a tombstone (kept with ``includeTombstones``, for upserts); the keys seen are the only state held (values are never kept).

Nothing is skipped or duplicated silently (:func:`checked_batches`): every batch a read visits must be
whole (a batch cut short or a length past the end of its file), its CRC must match and its offsets must
lie above the previous batch's. Where one does not, the read fails with one line naming the file and the
position (``failOnDataLoss=true``, the default, as Spark's Kafka source fails a query on lost data), or
skips to the next valid batch with that line as a warning (``failOnDataLoss=false``).

The core's batch and record readers are called in three small functions: :func:`_batches`,
:func:`_check` and :func:`_records`.
"""

from __future__ import annotations

import os
from array import array
from bisect import bisect_right
from collections.abc import Iterator

from kafka_log_core import storage
from kafka_log_core.constants import MAX_LONG
from kafka_log_core.errors import CorruptDataError, CorruptRecordError, KafkaLogError
from kafka_log_core.format import compression, log_file
from kafka_log_core.format.log_file import FileBatch
from kafka_log_core.format.record_batch import BatchHeader
from kafka_log_core.log.partition_log import PartitionLog
from kafka_log_core.rules.valid_data import next_valid_batch
from spark_udfs.errors import LOG, DataLossError
from spark_udfs.options import ReadOptions
from spark_udfs.planning import Chunk, Split


# ------------------------------------------------------------------------------------------ the core's readers
def _batches(chunk: Chunk, mapped, start: int | None = None) -> Iterator[FileBatch]:
    """Batches starting in the chunk (from ``start``); a batch cut short by the chunk's end (a torn batch,
    a length past the end of the file) is corruption."""
    first = chunk.start if start is None else start
    return log_file.iter_batches(mapped, chunk.path, first, chunk.stop, strict=True)


def _check(batch: FileBatch) -> None:
    """The batch's CRC (v2: CRC32C, legacy: CRC32), checked as a consumer does."""
    batch.verify()


def _records(batch: FileBatch, options: ReadOptions) -> list:
    """The batch's records, decompressed (to at most ``maxDecompressedBatchBytes``) and decoded, with
    absolute offsets and timestamps."""
    return batch.records(options.max_batch_bytes)


def _open(chunk: Chunk):
    """The chunk's ``.log``, memory-mapped read-only; refused if it was replaced or shortened since the
    DataFrame was planned (a job rewrote it: load the DataFrame again)."""

    def unchanged(stat: os.stat_result) -> None:
        if stat.st_ino != chunk.inode or stat.st_size < chunk.size:
            raise KafkaLogError(
                f"{chunk.path}: changed since this DataFrame was planned ({chunk.size} bytes then, "
                f"{stat.st_size} now, {'same' if stat.st_ino == chunk.inode else 'another'} file): load it again"
            )

    return storage.map_regular(chunk.path, unchanged)


# ------------------------------------------------------------------------------------------ whole reads
def checked_batches(split: Split, options: ReadOptions) -> Iterator[tuple[Chunk, FileBatch]]:
    """Every batch a read of ``split`` visits, in file order, each whole, its CRC matching and its offsets
    above the previous batch's. What is not: DataLossError (``failOnDataLoss=true``), or a warning and
    the read goes on at the next valid batch (``false``)."""
    last: int | None = None
    for chunk in split.chunks:
        mapped = _open(chunk)
        position = chunk.start
        while position < chunk.stop:
            try:
                for batch in _batches(chunk, mapped, position):
                    position = batch.position
                    first = (
                        batch.header.base_offset
                        if isinstance(batch.header, BatchHeader)
                        else batch.last_offset
                    )
                    if last is not None and first <= last:
                        raise CorruptRecordError(
                            f"offsets go backwards: the batch at offset {first} follows one that ended at "
                            f"offset {last}",
                            chunk.path,
                            batch.position,
                        )
                    _check(batch)
                    yield chunk, batch
                    last = batch.last_offset
                    position = batch.position + batch.size_in_bytes
                break
            except CorruptDataError as err:
                position = _lost(split, chunk, mapped, err, options)


def _lost(split: Split, chunk: Chunk, mapped, err: CorruptDataError, options: ReadOptions) -> int:
    """Data that cannot be read whole at ``err.position``: raise (failOnDataLoss) or say what is skipped
    and return where the read goes on (the next valid batch of the chunk, else its end)."""
    source = split.source
    where = err.position if err.position is not None else chunk.start
    if options.fail_on_data_loss:
        raise DataLossError(
            f"{err}: the partition cannot be read whole (failOnDataLoss=false skips what cannot be read)"
        ) from err
    found = next_valid_batch(mapped, where + 1, chunk.base_offset, chunk.stop)
    resume = chunk.stop if found is None else found
    LOG.warning(
        "kafka-log: %s-%d: %s; failOnDataLoss=false: skipped bytes %d to %d of %s",
        source.topic, source.partition, err, where, resume, chunk.path,
    )  # fmt: skip
    return resume


# ------------------------------------------------------------------------------------------ transactions
class AbortedTransactions:
    """The aborted transactions of a read, by producer: ``(first offset, ABORT marker offset)``."""

    def __init__(self, entries: tuple[tuple[int, int, int], ...]) -> None:
        by_producer: dict[int, list[tuple[int, int]]] = {}
        for pid, first, last in entries:
            by_producer.setdefault(pid, []).append((first, last))
        self._firsts = {pid: [f for f, _ in sorted(spans)] for pid, spans in by_producer.items()}
        self._lasts = {pid: [la for _, la in sorted(spans)] for pid, spans in by_producer.items()}

    def aborted(self, batch: FileBatch) -> bool:
        if not batch.is_transactional:
            return False
        firsts = self._firsts.get(batch.producer_id)
        if not firsts:
            return False
        last = batch.last_offset
        i = bisect_right(firsts, last) - 1
        return i >= 0 and last < self._lasts[batch.producer_id][i]


# ------------------------------------------------------------------------------------------ records
class _RowMaker:
    """One record as a row of the records schema."""

    def __init__(self, split: Split, options: ReadOptions) -> None:
        self.tp = (split.source.topic, split.source.partition)
        self.headers = options.include_headers
        self.extras = options.include_batch_columns

    def row(self, chunk: Chunk, batch: FileBatch, record, aborted: bool, base_offset: int) -> tuple:
        h = batch.header
        if isinstance(h, BatchHeader):
            ts_type, magic, sequence, horizon = (
                int(h.timestamp_type),  # a plain int: Spark's row check wants exactly int
                h.magic,
                h.base_sequence,
                h.has_delete_horizon,
            )
        else:  # legacy: the record's own magic and timestamp type (a wrapper may differ, KAFKA-4298)
            ts_type, magic, sequence, horizon = int(record.timestamp_type), record.magic, -1, False
        row: tuple = (record.key, record.value, *self.tp, record.offset, record.timestamp * 1000, ts_type)
        if self.headers:
            row += ([{"key": x.key, "value": x.value} for x in record.headers] or None,)
        if self.extras:
            row += (
                magic, compression.codec_name(h.compression), batch.is_transactional, aborted,
                batch.producer_id, batch.producer_epoch, sequence, batch.partition_leader_epoch, horizon,
                base_offset, batch.last_offset, chunk.base_offset, batch.position,
            )  # fmt: skip
        return row


def _batches_in_range(split: Split, options: ReadOptions) -> Iterator[tuple[Chunk, FileBatch]]:
    """The checked batches holding offsets of ``[start, end)``: the read stops at the first one past it."""
    start, end = split.start_offset, split.end_offset
    for chunk, batch in checked_batches(split, options):
        h = batch.header
        if batch.last_offset < start:
            continue
        if isinstance(h, BatchHeader) and h.base_offset >= end:
            return
        yield chunk, batch
        if batch.last_offset >= end - 1:
            return


def check_split(split: Split, options: ReadOptions) -> str | None:
    """What makes the read of ``split`` fail, as its one line; None when it reads whole. Visits what the
    read visits, without decoding records (a job checks every partition before it writes any)."""
    visited = (
        _batches_in_range(split, options) if options.level == "records" else checked_batches(split, options)
    )
    try:
        for _ in visited:
            pass
    except (KafkaLogError, OSError) as err:
        return str(err)
    return None


def record_rows(split: Split, options: ReadOptions) -> Iterator[tuple]:
    start, end = split.start_offset, split.end_offset
    transactions = AbortedTransactions(split.aborted)
    make = _RowMaker(split, options)
    for chunk, batch in _batches_in_range(split, options):
        h = batch.header
        aborted = transactions.aborted(batch)
        if not batch.is_control and not (aborted and options.read_committed):
            records = _records(batch, options)
            base = h.base_offset if isinstance(h, BatchHeader) else (records[0].offset if records else -1)
            for r in records:
                if start <= r.offset < end:
                    yield make.row(chunk, batch, r, aborted, base)


def latest_rows(split: Split, options: ReadOptions) -> Iterator[tuple]:
    """The last record of every key of the partition, tombstoned keys left out, from the end backwards."""
    start, end = split.start_offset, split.end_offset
    transactions = AbortedTransactions(split.aborted)
    make = _RowMaker(split, options)
    seen: set[bytes] = set()
    positions: dict[Chunk, array] = {chunk: array("q") for chunk in split.chunks}
    for chunk, batch in checked_batches(split, options):  # forward: the whole partition checked first
        positions[chunk].append(batch.position)
    for chunk in reversed(split.chunks):
        mapped = _open(chunk)
        for position in reversed(positions[chunk]):
            batch = next(_batches(chunk, mapped, position))
            if batch.last_offset < start or batch.is_control:
                continue
            h = batch.header
            if isinstance(h, BatchHeader) and h.base_offset >= end:
                continue
            aborted = transactions.aborted(batch)
            if aborted and options.read_committed:
                continue
            records = _records(batch, options)
            if not records:
                continue
            base = h.base_offset if isinstance(h, BatchHeader) else records[0].offset
            for r in reversed(records):
                if r.key is None or r.key in seen or not start <= r.offset < end:
                    continue
                seen.add(r.key)
                if r.value is not None or options.include_tombstones:
                    yield make.row(chunk, batch, r, aborted, base)


# ------------------------------------------------------------------------------------------ batches, segments
def batch_rows(split: Split, options: ReadOptions) -> Iterator[tuple]:
    """Every batch header on disk, below the log start offset and past the high watermark too (a legacy
    wrapper's records are read for its base offset and count: ``valid`` false when they cannot be)."""
    tp = (split.source.topic, split.source.partition)
    for chunk in split.chunks:
        for batch in _batches(chunk, _open(chunk)):
            h = batch.header
            try:
                _check(batch)
                records = [] if isinstance(h, BatchHeader) else _records(batch, options)
                valid = True
            except KafkaLogError:
                records, valid = [], False
            base: int | None
            count: int | None
            if isinstance(h, BatchHeader):
                base, count = h.base_offset, h.records_count
                horizon, sequence = (h.delete_horizon_ms if h.has_delete_horizon else None), h.base_sequence
            else:  # a legacy entry: its records say where it starts
                base, count = (records[0].offset if records else None), (len(records) if valid else None)
                horizon, sequence = None, -1
            yield (
                *tp, chunk.base_offset, batch.position, base, batch.last_offset, count, batch.size_in_bytes,
                h.magic, h.timestamp_type.label, batch.max_timestamp, horizon,
                compression.codec_name(h.compression), batch.is_transactional, batch.is_control,
                horizon is not None, batch.producer_id, batch.producer_epoch, sequence,
                batch.partition_leader_epoch, h.crc, valid,
            )  # fmt: skip


def segment_rows(split: Split) -> Iterator[tuple]:
    source = split.source
    log = PartitionLog.open(source.log_dir, source.tp, source.checkpoints)
    for segment in log.segments:
        first = segment.first_batch_timestamp
        yield (
            source.topic, source.partition, segment.base_offset, segment.read_next_offset, segment.size,
            segment.mtime_ms, segment.largest_timestamp, None if first == MAX_LONG else first,
            len(segment.offset_index), len(segment.time_index), len(segment.aborted_txns),
            segment is log.active_segment, os.fspath(segment.log_path),
        )  # fmt: skip


def rows(split: Split, options: ReadOptions) -> Iterator[tuple]:
    if options.level == "batches":
        return batch_rows(split, options)
    if options.level == "segments":
        return segment_rows(split)
    if options.level == "latest":
        return latest_rows(split, options)
    return record_rows(split, options)
