"""Batches of a ``.log`` file (FileRecords / FileLogInputStream): a plain concatenation, no header.

Every batch, whatever its magic, starts with ``offset:int64, size:int32`` and has its magic byte at
byte 16, so iteration reads 17 bytes, dispatches on the magic and jumps ``12 + size``. A partial
batch at the end of the file is invisible to readers (the broker's recovery truncates it); a size
below 14 is corruption. Headers are unpacked without touching the records: retention and the
dirty-ratio maths never decompress anything.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass

from kafka_log_core import storage
from kafka_log_core.errors import CorruptDataError, CorruptRecordError
from kafka_log_core.format import compression, legacy_records, record_batch
from kafka_log_core.format.compression import MAX_BATCH_BYTES
from kafka_log_core.format.legacy_records import MIN_ENTRY_SIZE, LegacyRecord
from kafka_log_core.format.record_batch import (
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    OFFSET_AND_SIZE,
    BatchHeader,
    Record,
)


@dataclass(frozen=True, slots=True)
class FileBatch:
    """One batch (v2) or shallow legacy entry of a log file, with its byte position."""

    position: int
    header: BatchHeader | LegacyRecord
    data: memoryview  # the batch's bytes, starting at its base offset field
    path: str | None = None

    @property
    def magic(self) -> int:
        return self.header.magic

    @property
    def size_in_bytes(self) -> int:
        return len(self.data)

    @property
    def last_offset(self) -> int:
        h = self.header
        return h.last_offset if isinstance(h, BatchHeader) else h.offset

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def base_offset(self) -> int:
        h = self.header
        if isinstance(h, BatchHeader):
            return h.base_offset
        if h.compression == compression.NONE:
            return h.offset
        inner = self.records()
        return inner[0].offset if inner else h.offset

    @property
    def max_timestamp(self) -> int:
        h = self.header
        return h.max_timestamp if isinstance(h, BatchHeader) else h.timestamp

    @property
    def is_control(self) -> bool:
        h = self.header
        return isinstance(h, BatchHeader) and h.is_control

    @property
    def is_transactional(self) -> bool:
        h = self.header
        return isinstance(h, BatchHeader) and h.is_transactional

    @property
    def producer_id(self) -> int:
        h = self.header
        return h.producer_id if isinstance(h, BatchHeader) else -1

    @property
    def producer_epoch(self) -> int:
        h = self.header
        return h.producer_epoch if isinstance(h, BatchHeader) else -1

    @property
    def compression(self) -> int:
        return self.header.compression

    @property
    def partition_leader_epoch(self) -> int:
        h = self.header
        return h.partition_leader_epoch if isinstance(h, BatchHeader) else -1

    def verify(self) -> None:
        """Kafka's ``ensureValid``: size and CRC (CRC32C for v2, CRC32 for legacy)."""
        try:
            if isinstance(self.header, BatchHeader):
                record_batch.verify_crc(self.header, self.data)
            else:
                legacy_records.decode_message(self.data, 0, check_crc=True)
        except CorruptRecordError as err:
            raise err.at(self.path, self.position) from err

    def records(self, max_batch_bytes: int = MAX_BATCH_BYTES) -> list[Record] | list[LegacyRecord]:
        """Decode the records (decompressing if needed, to at most ``max_batch_bytes``). Offsets and
        timestamps are absolute."""
        try:
            if isinstance(self.header, BatchHeader):
                return record_batch.decode_records(self.header, self.data, max_batch_bytes)
            return legacy_records.inner_records(self.header, max_batch_bytes)
        except CorruptRecordError as err:
            raise err.at(self.path, self.position) from err


def read_log(path: str | os.PathLike[str]) -> bytes | mmap.mmap:
    """The bytes of a ``.log``, memory-mapped read-only: pages come from the page cache on demand and are
    never copied into the process, so a 1 GiB segment costs address space, not a 1 GiB buffer."""
    return storage.map_regular(path)


def iter_batches(
    buf: bytes | memoryview | mmap.mmap,
    path: str | os.PathLike[str] | None = None,
    start: int = 0,
    end: int | None = None,
    *,
    strict: bool = False,
) -> Iterator[FileBatch]:
    """Iterate batches from byte ``start``; a trailing partial batch ends the iteration silently,
    unless ``strict`` (then it is reported as corruption, with its position)."""
    view = memoryview(buf)
    end = len(view) if end is None else end
    name = None if path is None else os.fspath(path)
    pos = start
    while pos + HEADER_SIZE_UP_TO_MAGIC < end:
        offset, size = OFFSET_AND_SIZE.unpack_from(view, pos)
        if size < MIN_ENTRY_SIZE:
            raise CorruptRecordError(
                f"record size {size} is smaller than the minimum record overhead ({MIN_ENTRY_SIZE})",
                name,
                pos,
            )
        batch_end = pos + LOG_OVERHEAD + size
        if batch_end > end:
            if strict:
                raise CorruptRecordError(
                    f"batch at offset {offset} declares {size} bytes but only {end - pos - LOG_OVERHEAD} remain "
                    "(truncated segment)",
                    name,
                    pos,
                )
            return
        magic = view[pos + 16]
        data = view[pos:batch_end]
        try:
            if magic == record_batch.MAGIC:
                header: BatchHeader | LegacyRecord = record_batch.decode_header(data)
            elif magic in (0, 1):
                header, _ = legacy_records.decode_message(data, 0, check_crc=False)
            else:
                raise CorruptRecordError(f"unknown magic {magic} (expected 0, 1 or 2)", None, 0)
        except CorruptDataError as err:
            raise err.at(name, pos) from err
        yield FileBatch(pos, header, data, name)
        pos = batch_end
    if strict and pos < end:
        raise CorruptRecordError(
            f"{end - pos} trailing bytes do not form a batch (truncated segment)", name, pos
        )


def iter_file_batches(path: str | os.PathLike[str], *, strict: bool = False) -> Iterator[FileBatch]:
    yield from iter_batches(read_log(path), path, strict=strict)


def log_size(path: str | os.PathLike[str]) -> int:
    return storage.stat(path).st_size
