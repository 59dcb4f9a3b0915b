"""The Python side of the cleaner's compiled passes (``kernels.map_pass`` and ``kernels.clean_pass``).

One kernel call covers a whole segment; this module does what the kernels hand back, and only that:

* a run of compressed batches the kernels leave to the readable reader (data their codec library refuses,
  or no such library): decompressed here with the codec library (:class:`Run`); a batch of theirs that
  loses records is compressed here again (:class:`CleanedSegment` fills its hole);
* a legacy (magic 0/1) entry: the readable path below;
* an aborted transaction reaching its first offset, a full tracker table: :mod:`txn_tracker`;
* a full output buffer: :class:`CleanedSegment` writes it out;
* corrupt data: the batch is re-read with the readable code (``log_file``, ``record_batch``, ``scan``),
  which raises the error with the file, the position and the detail.

:class:`CleanedSegment` is the ``.cleaned`` output of one group: the kernels fill its buffer and its
table of written batches; it streams the buffer to the file and builds the indexes from the table.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import cast

import numpy as np

from kafka_log_core import fsutil
from kafka_log_core.constants import MAX_LONG
from kafka_log_core.errors import CorruptRecordError, KafkaLogError
from kafka_log_core.format import compression, log_file, record_batch
from kafka_log_core.format.filenames import (
    CLEANED_MARKER,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_file,
)
from kafka_log_core.format.legacy_records import LegacyRecord, encode_wrapper
from kafka_log_core.format.log_file import FileBatch
from kafka_log_core.format.record_batch import BatchRetention, TimestampType
from kafka_log_core.format.txn_index import AbortedTxn, encode_txn_index
from kafka_log_core.kernels import (
    batch_header,
    chunk_walk,
    clean_pass,
    codec_kernels,
    decoded_areas,
    digest_store,
    fields,
    header_scan,
    map_pass,
    native_codecs,
    offset_map,
    scan,
    statuses,
)
from kafka_log_core.log.index_builder import IndexBuilder
from kafka_log_core.log.segment import OffsetSpan, Segment, check_batch_offsets
from kafka_log_core.rules.producer_state import LastRecord
from kafka_log_core.rules.txn_tracker import TransactionTracker
from kafka_log_core.settings.config import LogConfig

OUTPUT_BYTES = 4 * 1024 * 1024  # output buffer of pass 2, written out whenever it fills
_NO_SCRATCH = np.empty(0, dtype=np.uint8)
_NO_KEEP = np.empty(0, dtype=np.int64)
SCRATCH_BYTES = 4 * 1024 * 1024  # rebuilt records of compressed batches, until the output is written
INDEX_FILE_MODE = 0o644  # the .cleaned indexes' permissions until they take the old segment's


# ============================================================================================ output
class CleanedSegment:
    """The ``.cleaned`` output of one group, written as it goes (log streamed, indexes at the end)."""

    def __init__(self, directory: Path, base: int, cfg: LogConfig) -> None:
        self.directory, self.base = directory, base
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            stale = segment_file(directory, base, suffix, CLEANED_MARKER)
            if stale.exists():
                stale.unlink()
        self.log_path = segment_file(directory, base, LOG_SUFFIX, CLEANED_MARKER)
        self._f = fsutil.WriteFile(self.log_path)  # a full disk names the file
        self.position = 0  # bytes written to the file
        self.builder = IndexBuilder(
            base,
            index_interval_bytes=cfg.index_interval_bytes,
            segment_index_bytes=cfg.segment_index_bytes,
            path=self.log_path,
        )
        self.txn_entries: list[AbortedTxn] = []
        self._size(OUTPUT_BYTES)

    def _size(self, n: int) -> None:
        self.buffer = np.empty(n, dtype=np.uint8)
        # every batch is >= 61 bytes; not zeroed (a few MiB a group): pass 2 writes every field a row is
        # read by (position, offsets, time and hole_length of every row; the rest of a hole's row with it)
        self.batches = np.empty(n // record_batch.HEADER_SIZE + 1, dtype=clean_pass.OUT_BATCH)

    def start(self, st: np.ndarray) -> None:
        """Point the pass state at this (empty) output."""
        for name in ("out_used", "out_batches", "holes", "scratch_used"):
            st[name] = 0
        st["out_file_position"] = self.position

    def flush(
        self, st: np.ndarray, source: np.ndarray | None = None, scratch: np.ndarray | None = None
    ) -> None:
        """Write the buffered batches -- the holes filled: their rebuilt records in ``scratch`` compressed,
        framed with the header fields of their batch in ``source`` -- and index them."""
        used, n = int(st["out_used"][0]), int(st["out_batches"][0])
        rows = self.batches[:n]
        positions = rows["position"]
        if int(st["holes"][0]):
            if source is None or scratch is None:
                raise RuntimeError("holes are filled from the segment they come from")
            holes = np.flatnonzero(rows["hole_length"] >= 0)
            framed = _frame_holes(rows[holes], source, scratch)
            pieces: list[bytes | memoryview] = []
            cursor, extra = 0, np.zeros(n, dtype=np.int64)
            starts = rows["position"][holes] - int(st["out_file_position"][0])
            for at, data in zip(starts.tolist(), framed, strict=True):
                pieces.append(self.buffer.data[cursor:at])
                pieces.append(data)
                cursor = at
            extra[holes] = [len(data) for data in framed]
            pieces.append(self.buffer.data[cursor:used])
            self._f.writelines(pieces)
            positions = positions + (np.cumsum(extra) - extra)  # each batch moves by the holes before it
            written = int(extra.sum())
            st["bytes_written"] += written
            self.position += written
        elif used:
            self._f.write(self.buffer.data[:used])
        self._f.start_writeback()  # on its way to disk while pass 2 goes on: finish's fsync waits less
        self.position += used
        if n:
            self.builder.append_many(positions, rows["last_offset"], rows["max_timestamp"])
        self.start(st)

    def make_room(
        self, st: np.ndarray, needed: int, source: np.ndarray | None = None, scratch: np.ndarray | None = None
    ) -> None:
        if int(st["out_used"][0]) or int(st["out_batches"][0]):
            self.flush(st, source, scratch)
        if needed > self.buffer.shape[0]:  # one batch larger than the buffer
            self._size(needed)

    def append(self, st: np.ndarray, data: bytes, last_offset: int, max_timestamp: int) -> None:
        """A batch framed in Python (recompressed, legacy)."""
        if self.buffer.shape[0] - int(st["out_used"][0]) < len(data) or int(st["out_batches"][0]) >= len(
            self.batches
        ):
            self.make_room(st, len(data))
        clean_pass.append_output(
            self.buffer, self.batches, st, fields.as_bytes(data), last_offset, max_timestamp
        )

    def finish(self, st: np.ndarray, mtime_ms: int, like: Segment | None = None) -> list[Path]:
        """The log's last piece written, then its indexes, all on their way to disk before the first of
        their fsyncs: that one then commits the creation of every file at once, and the others wait
        for their data only (one journal commit for the group's files instead of one per file)."""
        self.flush(st)
        offsets, times = self.builder.finish()
        pieces = [(INDEX_SUFFIX, offsets.encode()), (TIME_INDEX_SUFFIX, times.encode())]
        if self.txn_entries:
            pieces.append((TXN_INDEX_SUFFIX, encode_txn_index(self.txn_entries)))
        paths, files = [self.log_path], [self._f]
        try:
            for suffix, data in pieces:
                path = segment_file(self.directory, self.base, suffix, CLEANED_MARKER)
                index = fsutil.WriteFile(path, INDEX_FILE_MODE)
                files.append(index)
                paths.append(path)
                index.write(data)
                index.start_writeback()
            for p in paths[:3]:
                os.utime(p, ns=(mtime_ms * 1_000_000, mtime_ms * 1_000_000))
            for f in files:
                f.fsync()
        finally:
            for f in files[1:]:
                if not f.closed:
                    f.close()
        self._f.close()
        if like is not None:
            _copy_ownership(like, paths)
        return paths

    def abort(self) -> None:
        if not self._f.closed:
            self._f.close()
        for suffix in (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
            p = segment_file(self.directory, self.base, suffix, CLEANED_MARKER)
            if p.exists():
                p.unlink()


def _frame_holes(holes: np.ndarray, source: np.ndarray, scratch: np.ndarray) -> list[bytes]:
    """The compressed batches of one flush that lost records (``holes``: their rows of the output table):
    each one's kept records (rebuilt by the kernel in ``scratch``) compressed with its codec at the
    default level, under its header with the new count, timestamps and attributes. The columns are read
    once and each source header with one unpack: this runs once per such batch (most batches of a
    compressed partition with small batches), so its cost per batch is what counts."""
    view, records = source.data, scratch.data
    framed = []
    for position, start, length, attributes, base_timestamp, max_timestamp, count in zip(
        holes["source_position"].tolist(), holes["hole_start"].tolist(), holes["hole_length"].tolist(),
        holes["attributes"].tolist(), holes["base_timestamp"].tolist(), holes["max_timestamp"].tolist(),
        holes["count"].tolist(), strict=True,
    ):  # fmt: skip
        (base_offset, _, leader_epoch, _, _, source_attributes, last_offset_delta, _, _, producer_id,
         producer_epoch, base_sequence, _) = record_batch.HEADER.unpack_from(view, position)  # fmt: skip
        codec = source_attributes & record_batch.CODEC_MASK
        body = compression.compress(codec, records[start : start + length], record_batch.MAGIC)
        framed.append(
            record_batch.assemble_batch(
                base_offset,
                leader_epoch,
                attributes,
                last_offset_delta,
                base_timestamp,
                max_timestamp,
                producer_id,
                producer_epoch,
                base_sequence,
                count,
                body,
            )  # fmt: skip
        )
    return framed


def _copy_ownership(source: Segment, paths: list[Path]) -> None:
    """Rewritten files keep the permissions (and, where we may, the owner) of the files they replace."""
    st = source.log_path.stat()
    for p in paths:
        os.chmod(p, st.st_mode & 0o7777)
        if hasattr(os, "chown") and (p.stat().st_uid, p.stat().st_gid) != (st.st_uid, st.st_gid):
            try:
                os.chown(p, st.st_uid, st.st_gid)
            except PermissionError:
                pass  # not root: the files stay ours, as any copy by this user would


# ============================================================================================ helpers
def producer_array(active: dict[int, LastRecord]) -> np.ndarray:
    """Active producers for the kernels' "last batch of its producer" rule, sorted by producer id."""
    rows = np.zeros(len(active), dtype=clean_pass.PRODUCER)
    for i, pid in enumerate(sorted(active)):
        last = active[pid]
        rows[i] = (pid, -1 if last.last_data_offset is None else last.last_data_offset, last.producer_epoch)
    return rows


def _i32_at(buf: np.ndarray, position: int) -> int:
    return int.from_bytes(buf[position : position + 4].tobytes(), "big", signed=True)


def _entry(segment: Segment, position: int) -> FileBatch:
    """The batch at ``position``, through the readable reader (strict: a truncated batch raises)."""
    for batch in log_file.iter_batches(segment.read(), segment.log_path, position, strict=True):
        return batch
    raise CorruptRecordError("no batch where one was expected", segment.log_path, position)


def raise_corrupt(
    segment: Segment, position: int, status: int, max_batch_bytes: int = compression.MAX_BATCH_BYTES
) -> None:
    """A kernel found corrupt data at ``position``: the readable code raises the precise error."""
    batch = _entry(segment, position)
    batch.verify()
    if status == statuses.ERR_CONTROL or (status == statuses.ERR_RECORD and batch.is_control):
        try:
            record_batch.decode_control_record(cast(record_batch.Record, batch.records(max_batch_bytes)[0]))
        except CorruptRecordError as err:
            if err.path is None:
                raise CorruptRecordError(err.detail, segment.log_path, position) from err
            raise
    if status == statuses.ERR_RECORD:
        scan.record_table(batch, max_batch_bytes)
    raise CorruptRecordError(
        f"{statuses.STATUS_NAMES.get(status, status)} in batch at offset {batch.last_offset}",
        segment.log_path,
        position,
    )


class Run:
    """The records of a run of consecutive compressed batches, decompressed with the codec libraries:
    one buffer, and per batch its (start, end) in it, (-1, -1) where decompression failed (the kernel
    asks for that error only if it needs the records: an aborted batch is dropped unread). Each batch
    decompresses to at most its ``area_limit``; the run ends after the batch that takes it past
    RUN_BYTES, so what it holds is bounded by RUN_BYTES plus one batch."""

    LIMIT = 1024  # batches per run
    RUN_BYTES = 32 * 1024 * 1024

    def __init__(self, buf: np.ndarray, position: int, max_batch_bytes: int) -> None:
        _, positions, sizes, codecs = chunk_walk.compressed_run(buf, position, buf.shape[0], self.LIMIT)
        view = buf.data
        header = record_batch.HEADER_SIZE
        parts, starts, ends = [], [], []
        at = 0
        for p, size, codec in zip(positions.tolist(), sizes.tolist(), codecs.tolist(), strict=True):
            limit = record_batch.area_limit(_i32_at(buf, p + batch_header.RECORDS_COUNT_AT), max_batch_bytes)
            try:  # an empty record area holds no record, whatever its codec
                raw = (
                    b""
                    if size == header
                    else compression.decompress(codec, view[p + header : p + size], record_batch.MAGIC, limit)
                )
            except KafkaLogError:
                starts.append(-1)
                ends.append(-1)
                continue
            parts.append(raw)
            starts.append(at)
            at += len(raw)
            ends.append(at)
            if at >= self.RUN_BYTES:
                break
        self.areas = fields.as_bytes(b"".join(parts))
        self.bounds = np.ascontiguousarray(np.array([starts, ends], dtype=np.int64).reshape(2, -1).T)


def new_karea(size: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The buffer the kernels decompress compressed batches into: writable, and the same memory
    read-only (the type every record source has in the kernels), with the codec entry points they call
    (``native_codecs.codecs``). One chunk's worth; made larger on STOP_AREA_ROOM."""
    writable = np.empty(max(size, KAREA_BYTES), dtype=np.uint8)
    return writable, fields.as_bytes(writable.view()), native_codecs.codecs()


KAREA_BYTES = 8 * 1024 * 1024


def larger_karea(
    karea: tuple[np.ndarray, np.ndarray, np.ndarray], max_batch_bytes: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Room for one more lz4 batch: twice as much, never more than one batch may take (its limit and a
    block)."""
    return new_karea(min(2 * karea[0].shape[0], max_batch_bytes) + codec_kernels.LZ4_MAX_BLOCK)


class Chunk:
    """The chunk the pass kernels walk records into, kept between their calls (``chunk_walk``)."""

    def __init__(self, records: int = chunk_walk.CHUNK_RECORDS) -> None:
        self.rec, self.dig, self.bat = chunk_walk.new_chunk(records, chunk_walk.CHUNK_BATCHES)
        self.state = np.zeros(1, dtype=chunk_walk.CHUNK_STATE)

    @property
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        return self.rec, self.dig, self.bat, self.state

    def grow(self) -> None:
        """Room for the batch that did not fit (the chunk starts again there)."""
        self.rec, self.dig, self.bat = chunk_walk.new_chunk(
            int(self.state["records_needed"][0]), chunk_walk.CHUNK_BATCHES
        )
        self.state[:] = 0


NO_RUN_AREAS = fields.EMPTY_BYTES
NO_RUN_BOUNDS = np.zeros((0, 2), dtype=np.int64)
Areas = tuple[np.ndarray, np.ndarray]  # decoded records of a segment's compressed batches and their bounds
NO_AREAS: Areas = (NO_RUN_AREAS, NO_RUN_BOUNDS)


def decode_areas(segment: Segment, budget: int, max_batch_bytes: int) -> Areas | None:
    """The compressed batches of ``segment`` decoded once, for both passes (``kernels.decoded_areas``),
    in at most ``budget`` bytes (records and bounds). It stops at the first batch that does not fit or
    that the kernels do not decode: the passes take the batches decoded here and decode the others as
    they go, as they would all of them. None when no batch was decoded."""
    buf = segment.buffer()
    end = buf.shape[0]
    bounds = np.empty((min(end // record_batch.HEADER_SIZE + 1, 1 << 16), 2), dtype=np.int64)
    dst = np.empty(max(min(budget - bounds.nbytes, 2 * end + KAREA_BYTES), 0), dtype=np.uint8)
    codecs = native_codecs.codecs()
    pos = n = op = 0
    while True:
        status, pos, n, op = decoded_areas.decode_segment(
            buf, end, pos, n, op, dst, bounds, codecs, max_batch_bytes
        )
        if status != decoded_areas.AREAS_ROOM:
            break
        room = budget - dst.nbytes - bounds.nbytes
        if n == bounds.shape[0] and room >= bounds.nbytes:
            bounds = np.concatenate((bounds, np.empty_like(bounds)))
        elif n < bounds.shape[0] and room > 0:
            larger = np.empty(dst.shape[0] + min(dst.shape[0] + KAREA_BYTES, room), dtype=np.uint8)
            larger[:op] = dst[:op]
            dst = larger
        else:
            break
    return (fields.as_bytes(dst), bounds[:n].copy()) if n else None


def verify_segment(segment: Segment) -> OffsetSpan | None:
    """Framing, CRC and offsets within the segment of every batch (CRC32C and offsets in one compiled
    pass; legacy CRC32 entry by entry). Returns what it saw of the offsets; None when a legacy entry
    leaves them to ``check_batch_offsets``."""
    buf = segment.buffer()
    position = 0
    legacy = False
    while True:
        status, position, batches, first, last = header_scan.verify_batches(
            buf, position, buf.shape[0], segment.base_offset
        )
        if status == statuses.DONE:
            return None if legacy else OffsetSpan(int(batches), int(first), int(last))
        if status == statuses.ERR_OFFSETS:
            raise_offsets(segment, position)
        if status != statuses.STOP_LEGACY:
            raise_corrupt(segment, position, status)
        legacy = True
        batch = _entry(segment, position)
        batch.verify()
        position += batch.size_in_bytes


def raise_offsets(segment: Segment, position: int) -> None:
    """A walk found a batch whose offsets a broker never appends at ``position``: the check of its own
    (``check_batch_offsets``, from the segment's start) names it and the problem."""
    check_batch_offsets(segment)
    raise CorruptRecordError("batch offsets a broker never appends", segment.log_path, position)


# ============================================================================================ pass 1
def new_store(rows: int, mode: int) -> tuple[np.ndarray, np.ndarray]:
    """A digest store of ``rows`` rows and its state (``digest_store.STORE_*``)."""
    return np.empty((rows, digest_store.STORE_WORDS), dtype=np.uint64), statuses.new_state(
        digest_store.STORE_STATE, mode=mode, valid=True
    )


NO_STORE = (digest_store.NO_STORE, statuses.new_state(digest_store.STORE_STATE, mode=digest_store.STORE_NONE))


def map_segment(
    segment: Segment, position: int, slots: np.ndarray, tracker: TransactionTracker, st: np.ndarray,
    store: tuple[np.ndarray, np.ndarray] = NO_STORE, decoded: Areas = NO_AREAS,
) -> bool:  # fmt: skip
    """Pass 1 over one segment from ``position``. True when the map filled (the round ends there).
    ``store``: where the key digests go for pass 2 (``new_store(rows, STORE_FILL)``); ``decoded``: the
    segment's compressed batches decoded (:func:`decode_areas`; ``position`` 0)."""
    buf = segment.buffer()
    st["position"] = position
    st["area_next"] = 0
    st["segment_base"] = segment.base_offset
    st["offsets_from"] = position
    st["offsets_batches"] = 0
    areas, bounds = decoded
    karea = new_karea()
    chunk = Chunk()
    while True:
        status = map_pass.build_map(
            buf, buf.shape[0], areas, bounds, slots, tracker.table, tracker.state, tracker.events, *store, *karea,
            *chunk.arrays, st,
        )  # fmt: skip
        position = int(st["position"][0])
        if status == statuses.DONE:
            return False
        if status == statuses.STOP_MAP_FULL:
            return True
        if status == statuses.STOP_TXN:
            tracker.consume_up_to(int(st["last_offset"][0]))
        elif status == statuses.STOP_TXN_TABLE:
            tracker.grow()
        elif status == statuses.STOP_AREA_ROOM:
            karea = larger_karea(karea, int(st["max_batch_bytes"][0]))
        elif status == statuses.STOP_CHUNK_ROOM:
            chunk.grow()
        elif status == statuses.STOP_COMPRESSED:
            run = Run(buf, position, int(st["max_batch_bytes"][0]))
            areas, bounds = run.areas, run.bounds
            st["area_next"] = 0
        elif status == statuses.ERR_OFFSETS:
            raise_offsets(segment, position)
        elif status == statuses.STOP_LEGACY:
            if int(st["rows_only"][0]):
                raise KafkaLogError(
                    f"{segment.log_path}: a legacy entry at position {position} in a rows-only pass"
                )
            st["offsets_from"] = MAX_LONG  # the segment's offsets are left to check_batch_offsets
            full, size = _map_legacy(segment, position, slots, tracker, st)
            if full:
                return True
            st["position"] = position + size
        else:
            raise_corrupt(segment, position, status, int(st["max_batch_bytes"][0]))


def walked_offsets(st: np.ndarray) -> OffsetSpan | None:
    """What pass 1 saw of the offsets of the segment it walked (from its start, to its end: the caller
    knows); None when a legacy entry left them to ``check_batch_offsets``."""
    row = st[0]
    if int(row["offsets_from"]) == MAX_LONG:
        return None
    return OffsetSpan(int(row["offsets_batches"]), int(row["offsets_first"]), int(row["offsets_last"]))


def _map_legacy(
    segment: Segment, position: int, slots: np.ndarray, tracker: TransactionTracker, st: np.ndarray
) -> tuple[bool, int]:
    batch = _entry(segment, position)
    batch.verify()
    tracker.consume_up_to(batch.last_offset)  # legacy entries are never transactional
    table = scan.record_table(batch, int(st["max_batch_bytes"][0]))
    row = st[0]
    start = int(row["start_offset"])
    mask = table.has_key & (table.offsets >= start)
    consumed, keys, last = offset_map.map_put_many(
        slots, table.hash_hi, table.hash_lo, table.offsets, int(row["keys"]), int(row["capacity"]), mask
    )
    row["keys"] = keys
    row["puts"] += int(mask[:consumed].sum())
    row["scanned"] += len(table)
    if last >= 0:
        row["latest_offset"] = last
    if consumed < len(table):
        return True, batch.size_in_bytes
    if batch.last_offset >= start:
        row["latest_offset"] = batch.last_offset
    return False, batch.size_in_bytes


# ============================================================================================ pass 2
def clean_segment(
    segment: Segment, out: CleanedSegment, slots: np.ndarray, producers: np.ndarray, tracker: TransactionTracker,
    st: np.ndarray, retain_legacy_deletes: bool, digests: np.ndarray | None = None, keep: np.ndarray | None = None,
    decoded: Areas = NO_AREAS,
) -> None:  # fmt: skip
    """Pass 2 over one whole segment into ``out``; ``digests``: what pass 1 stored for this segment;
    ``decoded``: its compressed batches as pass 1 decoded them (:func:`decode_areas`).
    ``keep`` (split cleaning, a segment of v2 batches whose keyed records were all in pass 1): the
    ascending offsets of the records that are their key's latest; the keyed records are kept by it,
    ``slots`` is not read and no key is hashed."""
    store = (
        NO_STORE
        if digests is None
        else (digests, statuses.new_state(digest_store.STORE_STATE, mode=digest_store.STORE_USE))
    )
    st["keep_list"] = keep is not None
    keep = _NO_KEEP if keep is None else keep
    st["keep_next"] = np.searchsorted(keep, segment.base_offset)
    buf = segment.buffer()
    st["position"] = 0
    st["area_next"] = 0
    (areas, bounds), scratch = decoded, _NO_SCRATCH
    karea = new_karea()
    chunk = Chunk()
    while True:
        status = clean_pass.clean(  # type: ignore[call-arg]  # numba stubs: a fixed arity
            buf, buf.shape[0], areas, bounds, slots, keep, producers, tracker.table, tracker.state, tracker.events,
            out.buffer, out.batches, scratch, *store, *karea, *chunk.arrays, st,
        )  # fmt: skip
        out.txn_entries += tracker.take_events()
        position = int(st["position"][0])
        if status == statuses.DONE:
            if int(st["holes"][0]):  # the holes are filled from this segment's bytes
                out.flush(st, buf, scratch)
            return
        if status == statuses.STOP_OUTPUT:
            out.make_room(st, int(st["out_needed"][0]), buf, scratch)
        elif status == statuses.STOP_TXN:
            tracker.consume_up_to(int(st["last_offset"][0]))
        elif status == statuses.STOP_TXN_TABLE:
            tracker.grow()
        elif status == statuses.STOP_AREA_ROOM:
            karea = larger_karea(karea, int(st["max_batch_bytes"][0]))
        elif status == statuses.STOP_CHUNK_ROOM:
            chunk.grow()
        elif status == statuses.STOP_SCRATCH:
            out.flush(st, buf, scratch)  # the holes' records are in the old one
            scratch = np.empty(max(2 * int(st["scratch_needed"][0]), SCRATCH_BYTES), dtype=np.uint8)
        elif status == statuses.STOP_COMPRESSED:
            run = Run(buf, position, int(st["max_batch_bytes"][0]))
            areas, bounds = run.areas, run.bounds
            st["area_next"] = 0
        elif status == statuses.STOP_LEGACY:
            if int(st["keep_list"][0]):
                raise KafkaLogError(
                    f"{segment.log_path}: a legacy batch at position {position} in a keep-list pass"
                )
            if int(st["holes"][0]):
                out.flush(st, buf, scratch)
            size = _clean_legacy(segment, position, out, slots, tracker, st, retain_legacy_deletes)
            st["position"] = position + size
        else:
            raise_corrupt(segment, position, status, int(st["max_batch_bytes"][0]))


def _clean_legacy(
    segment: Segment, position: int, out: CleanedSegment, slots: np.ndarray, tracker: TransactionTracker,
    st: np.ndarray, retain_legacy_deletes: bool,
) -> int:  # fmt: skip
    """One legacy entry (never transactional, never a producer's, no horizon): the spec's rules R2-R5
    for magic 0/1. Returns its size."""
    batch = _entry(segment, position)
    tracker.consume_up_to(batch.last_offset)
    row = st[0]
    # no producer: only the batch ending at rule R2.2's bound is kept empty
    last_of_round = batch.next_offset == int(row["upper_bound"])
    retention = BatchRetention.RETAIN_EMPTY if last_of_round else BatchRetention.DELETE_EMPTY
    table = scan.record_table(batch, int(row["max_batch_bytes"]))
    keep, kept, tombs, kept_tombs = clean_pass.decide_keep(
        table.offsets, table.key_len, table.value_null, table.hash_hi, table.hash_lo, slots,
        int(row["latest_offset"]), retain_legacy_deletes, clean_pass.KEEP_BY_RULES,
    )  # fmt: skip
    n = len(table)
    row["records_read"] += n
    row["bytes_read"] += batch.size_in_bytes
    row["tombstones_read"] += tombs
    row["records_retained"] += kept
    row["tombstones_retained"] += kept_tombs
    header = cast(LegacyRecord, batch.header)
    if kept:
        magic_mismatch = any(r.magic != header.magic for r in table.legacy)
        if kept == n and not magic_mismatch:
            out.append(st, bytes(batch.data), batch.last_offset, batch.max_timestamp)
        else:
            data, max_ts = _rebuild_legacy(batch, header, table, keep)
            out.append(st, data, batch.last_offset, max_ts)
    elif retention == BatchRetention.RETAIN_EMPTY:
        row["batches_emptied"] += 1
        out.append(st, bytes(batch.data), batch.last_offset, batch.max_timestamp)  # the broker throws here
    return batch.size_in_bytes


def _rebuild_legacy(
    batch: FileBatch, header: LegacyRecord, table: scan.RecordTable, keep: np.ndarray
) -> tuple[bytes, int]:
    kept = [r for r, k in zip(table.legacy, keep.tolist(), strict=True) if k]
    log_append = header.magic == 1 and header.timestamp_type == TimestampType.LOG_APPEND_TIME
    if header.compression == compression.NONE:
        return bytes(batch.data), batch.max_timestamp  # one record per entry: kept whole or dropped whole
    # The builder writes every inner message with the wrapper's magic; under LogAppendTime each carries
    # the append time and the timestamp-type bit.
    inner_attributes = 0x08 if log_append else 0
    inner = [
        LegacyRecord(r.offset, header.magic, inner_attributes, header.timestamp if log_append else r.timestamp, 0,
                     r.key, r.value)
        for r in kept
    ]  # fmt: skip
    wrapper_ts = (
        header.timestamp if log_append else (max(r.timestamp for r in kept) if header.magic == 1 else -1)
    )
    data = encode_wrapper(
        inner, header.magic, header.compression, wrapper_timestamp=wrapper_ts, log_append_time=log_append
    )
    return data, wrapper_ts
