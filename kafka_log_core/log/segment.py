"""One log segment: ``<base>.log`` with its ``.index``, ``.timeindex`` and optional ``.txnindex``.

Reads are lazy: sizes and mtimes come from ``stat``; the max timestamp from the last time-index
entry (the broker's ``largestTimestamp``); batch headers only when a rule needs them. The whole
``.log`` is read into memory only by compaction and deep reads.
"""

from __future__ import annotations

import errno
import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import numpy as np

from kafka_log_core import storage
from kafka_log_core.constants import MAX_LONG, MIN_LONG
from kafka_log_core.errors import CorruptDataError, CorruptIndexError, CorruptRecordError
from kafka_log_core.format import log_file
from kafka_log_core.format.filenames import (
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_FILE_SUFFIXES,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    DirFiles,
    filename_prefix,
    segment_file,
)
from kafka_log_core.format.index_base import read_index_file
from kafka_log_core.format.log_file import FileBatch
from kafka_log_core.format.offset_index import OffsetIndex, parse_offset_index
from kafka_log_core.format.record_batch import HEADER_SIZE_UP_TO_MAGIC, LOG_OVERHEAD, OFFSET_AND_SIZE
from kafka_log_core.format.time_index import TimeIndex, parse_time_index
from kafka_log_core.format.txn_index import AbortedTxn, read_txn_index
from kafka_log_core.kernels import fields, header_scan, offset_order, statuses


@dataclass(frozen=True, eq=False)
class Segment:
    directory: Path
    base_offset: int
    size: int  # bytes of the .log
    mtime_ms: int  # .log modification time, the broker's lastModified
    _cache: dict = field(default_factory=dict, repr=False)

    @classmethod
    def open(
        cls, directory: str | os.PathLike[str], base_offset: int, files: DirFiles | None = None
    ) -> Segment:
        """The segment of ``base_offset`` in ``directory`` (``files``: the directory's listing, which holds
        its ``.log``, when the caller has one: its ``stat`` is the listing's)."""
        if files is None:
            path: str | Path = segment_file(directory, base_offset, LOG_SUFFIX)
            st = storage.stat(path)
        else:
            entry = files.segment_entry(base_offset, LOG_SUFFIX)
            if entry is None:
                missing = os.path.join(files.path, filename_prefix(base_offset) + LOG_SUFFIX)
                raise FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), missing)
            path, st = entry.path, entry.stat()
        storage.check_regular(path, st)
        directory = directory if isinstance(directory, Path) else Path(directory)
        return cls(directory, base_offset, st.st_size, st.st_mtime_ns // 1_000_000)

    @classmethod
    def planned(
        cls, directory: str | os.PathLike[str], base_offset: int, size: int, mtime_ms: int, data,
        offset_index: OffsetIndex | None = None, time_index: TimeIndex | None = None,
        aborted_txns: tuple[AbortedTxn, ...] = (), next_offset: int | None = None,
    ) -> Segment:  # fmt: skip
        """A segment as a plan would leave it, nothing written (a dry run's view of a recovery): its
        ``.log`` bytes, indexes (empty when not given) and next offset are given, not read from files."""
        segment = cls(Path(directory), base_offset, size, mtime_ms, {"data": data})
        known = segment.__dict__  # where the cached properties keep their values
        known["offset_index"] = (
            offset_index if offset_index is not None else OffsetIndex.parse(b"", base_offset)
        )
        known["time_index"] = time_index if time_index is not None else TimeIndex.parse(b"", base_offset)
        known["aborted_txns"] = aborted_txns
        known["read_next_offset"] = base_offset if next_offset is None else next_offset
        return segment

    # ------------------------------------------------------------------ files
    @cached_property
    def log_path(self) -> Path:
        return segment_file(self.directory, self.base_offset, LOG_SUFFIX)

    @cached_property
    def index_path(self) -> Path:
        return segment_file(self.directory, self.base_offset, INDEX_SUFFIX)

    @cached_property
    def time_index_path(self) -> Path:
        return segment_file(self.directory, self.base_offset, TIME_INDEX_SUFFIX)

    @cached_property
    def txn_index_path(self) -> Path:
        return segment_file(self.directory, self.base_offset, TXN_INDEX_SUFFIX)

    def files(self) -> list[Path]:
        """The segment's files that exist (``.log`` first)."""
        paths = [segment_file(self.directory, self.base_offset, suffix) for suffix in SEGMENT_FILE_SUFFIXES]
        return [p for p in paths if storage.exists(p)]

    # ------------------------------------------------------------------ contents
    def read(self) -> bytes | mmap.mmap:
        """The whole ``.log`` (cached: compaction reads a segment twice, once per pass)."""
        data = self._cache.get("data")
        if data is None:
            data = log_file.read_log(self.log_path)
            self._cache["data"] = data
        return data

    def buffer(self) -> np.ndarray:
        """The whole ``.log`` as a read-only uint8 array over its memory map (cached with ``read``): what
        the compiled passes walk."""
        array = self._cache.get("array")
        if array is None:
            array = fields.as_bytes(self.read())
            self._cache["array"] = array
        return array

    def drop_cache(self) -> None:
        self._cache.clear()

    def headers(self, start_position: int = 0) -> np.ndarray:
        """Every batch header from ``start_position`` as rows of ``header_scan.HEADER_ROW``, from one
        compiled scan (not strict: a partial batch at the end is left out, as readers do)."""
        cached = "array" in self._cache
        array = self.buffer()
        try:
            status, position, rows = header_scan.scan_headers(array, start_position, array.shape[0])
            if status != statuses.DONE:  # the readable reader raises with the detail
                for _ in log_file.iter_batches(self.read(), self.log_path, position):
                    break
                raise CorruptDataError("malformed batch", self.log_path, position)
            return header_scan.header_rows(rows)
        finally:
            if not cached:
                self.drop_cache()

    def batches(self, start_position: int = 0, *, strict: bool = True) -> Iterator[FileBatch]:
        """Batches from ``start_position``. ``strict``: a partial trailing batch is corruption (the
        broker's recovery would truncate it; we refuse to guess)."""
        return log_file.iter_batches(self.read(), self.log_path, start_position, strict=strict)

    @cached_property
    def offset_index(self) -> OffsetIndex:
        path = self.index_path
        data = (
            read_index_file(path, OffsetIndex.KIND, OffsetIndex.ENTRY_SIZE, self.size)
            if storage.exists(path)
            else b""
        )
        return parse_offset_index(data, self.base_offset, path)

    @cached_property
    def time_index(self) -> TimeIndex:
        path = self.time_index_path
        data = (
            read_index_file(path, TimeIndex.KIND, TimeIndex.ENTRY_SIZE, self.size)
            if storage.exists(path)
            else b""
        )
        return parse_time_index(data, self.base_offset, path)

    def read_indexes(self, files: DirFiles) -> None:
        """Read the offset and time indexes now, as :attr:`offset_index` and :attr:`time_index` read them,
        with the directory's listing ``files`` (taken since the directory last changed): an index file the
        listing does not hold is an empty index, and a plain file it shows empty is not opened."""
        known = self.__dict__  # where the cached properties keep their values
        for name, suffix, kind, parse in (
            ("offset_index", INDEX_SUFFIX, OffsetIndex, parse_offset_index),
            ("time_index", TIME_INDEX_SUFFIX, TimeIndex, parse_time_index),
        ):
            entry = files.segment_entry(self.base_offset, suffix)
            if entry is not None and not entry.is_file(follow_symlinks=False):
                getattr(self, name)  # not a plain file: read by its path
                continue
            path = os.path.join(os.fspath(self.directory), filename_prefix(self.base_offset) + suffix)
            data = b""
            if entry is not None and entry.stat(follow_symlinks=False).st_size:
                data = read_index_file(path, kind.KIND, kind.ENTRY_SIZE, self.size)
            known[name] = parse(data, self.base_offset, path)

    @cached_property
    def aborted_txns(self) -> tuple[AbortedTxn, ...]:
        path = self.txn_index_path
        if not storage.exists(path):
            return ()
        return tuple(read_txn_index(path, self.base_offset, self.size))

    # ------------------------------------------------------------------ broker's derived values
    @cached_property
    def largest_timestamp(self) -> int:
        """Last time-index timestamp if >= 0, else the .log mtime (LogSegment.largestTimestamp)."""
        ts = self.time_index.last_entry.timestamp if len(self.time_index) else -1
        return ts if ts >= 0 else self.mtime_ms

    @cached_property
    def first_batch_timestamp(self) -> int:
        """maxTimestamp of the first batch if >= 0, else Long.MAX (LogSegment.getFirstBatchTimestamp)."""
        if self.size == 0:
            return MAX_LONG
        head = _read_head(self.log_path, 61)
        for batch in log_file.iter_batches(head, self.log_path):
            ts = batch.max_timestamp
            return ts if ts >= 0 else MAX_LONG
        # The first batch is larger than the head we read: fall back to the full file.
        for batch in self.batches(strict=False):
            ts = batch.max_timestamp
            return ts if ts >= 0 else MAX_LONG
        return MAX_LONG

    @cached_property
    def read_next_offset(self) -> int:
        """Last batch's last offset + 1, or the base offset when empty (scan from the last index entry:
        one compiled scan of the headers; from an entry it does not take on, :meth:`header_scan` decides,
        which stops at a partial or undersized entry and refuses a malformed one)."""
        start = self.offset_index.last_entry.position if len(self.offset_index) else 0
        if start > self.size:
            raise CorruptIndexError(
                f"offset index points at position {start} past the end of the log ({self.size} bytes)",
                self.index_path,
            )
        if start + HEADER_SIZE_UP_TO_MAGIC >= self.size:  # no batch fits: nothing to open
            return self.base_offset
        cached = "array" in self._cache
        array = self.buffer()
        try:
            status, position, rows = header_scan.scan_headers(array, start, array.shape[0])
        finally:
            if not cached:
                self.drop_cache()
        last = int(rows[-1, header_scan.H_LAST_OFFSET]) if rows.shape[0] else None
        if status != statuses.DONE:
            for batch in self.header_scan(position):
                last = batch.last_offset
        return self.base_offset if last is None else last + 1

    def header_scan(self, start_position: int = 0) -> Iterator[FileBatch]:
        """Batch headers without reading the whole file when it is not cached (seek + 17-byte reads)."""
        if "data" in self._cache:
            yield from log_file.iter_batches(self._cache["data"], self.log_path, start_position, strict=False)
            return
        if start_position + HEADER_SIZE_UP_TO_MAGIC >= self.size:  # no batch fits: nothing to open
            return
        with storage.open_regular_file(self.log_path) as f:
            pos = start_position
            while pos + HEADER_SIZE_UP_TO_MAGIC < self.size:
                f.seek(pos)
                head = f.read(12)
                _, size = OFFSET_AND_SIZE.unpack(head)
                if size < log_file.MIN_ENTRY_SIZE or pos + LOG_OVERHEAD + size > self.size:
                    break
                f.seek(pos)
                chunk = f.read(min(12 + size, 12 + 61 + 64))
                if size + 12 <= len(chunk):
                    batch = next(log_file.iter_batches(chunk, self.log_path))
                else:
                    batch = next(log_file.iter_batches(_read_at(f, pos, 12 + size), self.log_path))
                yield FileBatch(pos, batch.header, batch.data, batch.path)
                pos += 12 + size

    def lookup_position(self, offset: int) -> int:
        """Byte position of the first batch with last offset >= ``offset`` (floor index entry, then scan),
        or the size of the log when there is none."""
        start = self.offset_index.lookup(offset).position
        for batch in self.header_scan(start):
            if batch.last_offset >= offset:
                return batch.position
        return self.size


def _read_head(path: Path, n: int) -> bytes:
    with storage.open_regular_file(path) as f:
        head = f.read(12)
        if len(head) < 12:
            return head
        _, size = OFFSET_AND_SIZE.unpack(head)
        return head + f.read(max(min(size, 1 << 24), n - 12))


def _read_at(f, pos: int, n: int) -> bytes:
    f.seek(pos)
    data = f.read(n)
    if len(data) != n:
        raise CorruptDataError(f"expected {n} bytes, read {len(data)}", f.name, pos)
    return data


def check_indexes(segment: Segment) -> None:
    """Refuse indexes that cannot describe this segment's log: Kafka's sanity checks, plus entries in
    order and pointing inside the ``.log`` (a preallocated, zero-padded index fails here too). The broker
    trusts indexes after a clean shutdown; we read through them, so we check before using them."""
    offsets = segment.offset_index
    offsets.sanity_check()
    if len(offsets):
        rel = offsets.entries["relative_offset"].astype("int64")
        pos = offsets.entries["position"].astype("int64")
        bad = (rel[1:] <= rel[:-1]) | (pos[1:] <= pos[:-1])
        if bad.any():
            n = int(bad.argmax()) + 1
            raise CorruptIndexError(
                f"entry {n} (offset {segment.base_offset + int(rel[n])}, position {int(pos[n])}) does not come "
                f"after entry {n - 1} (offset {segment.base_offset + int(rel[n - 1])}, position {int(pos[n - 1])})",
                segment.index_path,
                n * 8,
            )
        if int(pos.max()) >= max(segment.size, 1) or int(pos.min()) < 0:
            n = int((pos >= segment.size).argmax())
            raise CorruptIndexError(
                f"entry {n} points at position {int(pos[n])}, past the end of the log ({segment.size} bytes)",
                segment.index_path,
                n * 8,
            )
    times = segment.time_index
    times.sanity_check()
    if len(times):
        ts = times.timestamps
        rel = times.entries["relative_offset"].astype("int64")
        bad = (ts[1:] <= ts[:-1]) | (rel[1:] < rel[:-1])
        if bad.any():
            n = int(bad.argmax()) + 1
            raise CorruptIndexError(
                f"entry {n} (timestamp {int(ts[n])}, offset {segment.base_offset + int(rel[n])}) is out of order",
                segment.time_index_path,
                n * 12,
            )


_OFFSET_PROBLEMS = {
    offset_order.BELOW_SEGMENT_BASE: "starts below the segment's base offset {other}",
    offset_order.NEGATIVE_LAST_OFFSET_DELTA: "has a negative lastOffsetDelta {other}",
    offset_order.MORE_RECORDS_THAN_OFFSETS: "holds {other} records, more than its offsets {first}..{last} can number",
    offset_order.NOT_AFTER_PREVIOUS: "does not come after the previous batch, which ends at offset {other} (offsets going "
    "backwards or overlapping: the broker never appends such a batch)",
}


@dataclass(frozen=True, slots=True)
class OffsetSpan:
    """What a walk over a whole segment that checked its batches' offsets within it (pass 1, the CRC
    check) saw: how many batches, the first offset of the first and the last offset of the last. The
    boundary with the segment before is :meth:`PartitionLog.check_batch_offsets`'s."""

    batches: int
    first: int
    last: int


def check_batch_offsets(segment: Segment, previous_last: int | None = None) -> int | None:
    """Refuse a segment whose batches' offsets a broker could never have appended; returns the last offset
    of its last batch (``previous_last`` when it has none) for the next segment's check.

    The broker refuses an append whose offsets do not increase (``UnifiedLog.append``: offsets out of
    order, or a first offset below the log end offset), writes a batch's ``lastOffsetDelta`` as its last
    record's offset delta (or keeps the original one when the cleaner drops that record), and names a
    segment after the first offset it holds. So, batch by batch in file order: the base offset is at or
    above the segment's base offset and above the previous batch's last offset (also across segments),
    ``lastOffsetDelta`` is not negative, and a v2 batch holds no more records than its offsets can number
    (``records_count <= lastOffsetDelta + 1``). A legacy compressed wrapper (no base offset in its
    header) is checked by its last offset. One compiled walk over the headers (:mod:`offset_order`)."""
    cached = "array" in segment._cache
    try:
        finding, position, first, last, other = offset_order.check_offsets(
            segment.buffer(), segment.base_offset, MIN_LONG if previous_last is None else previous_last,
            previous_last is not None,
        )  # fmt: skip
    finally:
        if not cached:
            segment.drop_cache()
    if finding == offset_order.OFFSETS_OK:
        return int(last) if other else previous_last
    detail = _OFFSET_PROBLEMS[finding].format(first=int(first), last=int(last), other=int(other))
    raise CorruptRecordError(
        f"the batch of offsets {int(first)}..{int(last)} {detail}", segment.log_path, int(position)
    )
