"""The transaction index (``<base>.txnindex``): the aborted transactions whose ABORT marker is in a segment.

A flat array of 34-byte big-endian entries, no header, not preallocated, created when the first entry is
written (after recovery or truncation it may remain as a 0-byte file)::

    0  version             int16   0; the broker looks only at byte 0 (signed) and rejects values > 0
    2  producer_id         int64
    10 first_offset        int64   first offset of the aborted transaction
    18 last_offset         int64   offset of its ABORT marker
    26 last_stable_offset  int64   the partition's LSO when the abort was written

Entries are ordered by strictly increasing ``last_offset``. Trailing bytes shorter than an entry are
ignored. An entry whose ``last_offset`` is below the segment's base offset makes the index corrupt (checked
when the broker loads the segment, which then rebuilds the index).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from kafka_log_core import fsutil, storage
from kafka_log_core.errors import CorruptIndexError
from kafka_log_core.format.filenames import parse_segment_file
from kafka_log_core.format.index_base import read_index_file

ENTRY = struct.Struct(
    ">b"  # version: byte 0 of the int16 version field, read as a signed byte like the broker does
    "x"  # byte 1 of the version field (ignored on read, 0 on write)
    "q"  # producer_id
    "q"  # first_offset
    "q"  # last_offset
    "q"  # last_stable_offset
)
ENTRY_SIZE = ENTRY.size  # 34
KIND = "transaction index"
CURRENT_VERSION = 0


@dataclass(frozen=True, slots=True)
class AbortedTxn:
    producer_id: int
    first_offset: int
    last_offset: int
    last_stable_offset: int
    version: int = CURRENT_VERSION


@dataclass(frozen=True, slots=True)
class TxnIndexSearchResult:
    aborted: tuple[AbortedTxn, ...]
    is_complete: bool  # True: an entry's LSO reached the upper bound, later segments need not be searched


def parse_txn_index(
    data: bytes | bytearray | memoryview,
    base_offset: int | None = None,
    path: str | os.PathLike[str] | None = None,
) -> list[AbortedTxn]:
    """Decode every whole entry; with ``base_offset`` also apply the broker's load-time sanity check."""
    entries: list[AbortedTxn] = []
    for n in range(len(data) // ENTRY_SIZE):
        position = n * ENTRY_SIZE
        version, producer_id, first, last, lso = ENTRY.unpack_from(data, position)
        if version > CURRENT_VERSION:
            raise CorruptIndexError(
                f"aborted transaction entry {n} has version {version}: expected {CURRENT_VERSION}",
                path,
                position,
            )
        entries.append(AbortedTxn(producer_id, first, last, lso, version))
    if base_offset is not None:
        sanity_check(entries, base_offset, path)
    return entries


def read_txn_index(
    path: str | os.PathLike[str], base_offset: int | None = None, log_size: int | None = None
) -> list[AbortedTxn]:
    """Read a ``.txnindex`` file; the sanity check uses ``base_offset`` or the offset in the file name. With
    ``log_size`` (its segment's), a file longer than the segment could need is refused unread: an entry
    per ABORT marker of the segment at most, a marker being a batch."""
    if base_offset is None:
        parsed = parse_segment_file(Path(path).name)
        base_offset = None if parsed is None else parsed.base_offset
    return parse_txn_index(read_index_file(path, KIND, ENTRY_SIZE, log_size), base_offset, path)


def sanity_check(
    entries: Sequence[AbortedTxn], base_offset: int, path: str | os.PathLike[str] | None = None
) -> None:
    """An entry whose ABORT marker lies below the segment's base offset is corrupt (TransactionIndex)."""
    for n, txn in enumerate(entries):
        if txn.last_offset < base_offset:
            raise CorruptIndexError(
                f"aborted transaction entry {n} (producer {txn.producer_id}) has last offset "
                f"{txn.last_offset}, below the segment base offset {base_offset}",
                path,
                n * ENTRY_SIZE + 18,
            )


def encode_txn_index(
    entries: Iterable[AbortedTxn],
    after_last_offset: int | None = None,
    path: str | os.PathLike[str] | None = None,
) -> bytes:
    """``34 * n`` bytes; refuses entries whose last offsets do not strictly increase (after ``after_last_offset``)."""
    out = bytearray()
    previous = after_last_offset
    for n, txn in enumerate(entries):
        if previous is not None and txn.last_offset <= previous:
            raise CorruptIndexError(
                f"aborted transaction entry {n}: last offset {txn.last_offset} is not above the previous "
                f"last offset {previous}",
                path,
                n * ENTRY_SIZE + 18,
            )
        try:
            out += ENTRY.pack(
                CURRENT_VERSION, txn.producer_id, txn.first_offset, txn.last_offset, txn.last_stable_offset
            )
        except struct.error as err:
            raise CorruptIndexError(
                f"aborted transaction entry {n}: {txn} does not fit the 34-byte layout ({err})",
                path,
                n * ENTRY_SIZE,
            ) from err
        previous = txn.last_offset
    return bytes(out)


def write_txn_index(
    path: str | os.PathLike[str], entries: Iterable[AbortedTxn], *, atomic: bool = True
) -> int:
    """Write a whole transaction index (``34 * n`` bytes) and fsync it; returns the byte count."""
    data = encode_txn_index(entries, path=path)
    (fsutil.atomic_write_bytes if atomic else fsutil.write_bytes_fsync)(path, data)
    return len(data)


def append_txn_index(path: str | os.PathLike[str], entries: Iterable[AbortedTxn]) -> int:
    """Append entries to an index (created if missing) and fsync it; returns the new file length.

    Refuses a file whose length is not a whole number of entries (the broker would append after the
    partial bytes and misalign everything behind them) and entries that do not continue its last offsets.
    """
    target = Path(path)
    existing = storage.read_regular(target) if storage.exists(target) else b""
    if len(existing) % ENTRY_SIZE:
        raise CorruptIndexError(
            f"cannot append: file is {len(existing)} bytes, expected a multiple of {ENTRY_SIZE}",
            path,
            len(existing) - len(existing) % ENTRY_SIZE,
        )
    current = parse_txn_index(existing, None, path)
    data = encode_txn_index(entries, current[-1].last_offset if current else None, path)
    with fsutil.naming(target, "appending"), open(target, "ab") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    return len(existing) + len(data)


def truncate_to(entries: Sequence[AbortedTxn], offset: int) -> list[AbortedTxn]:
    """Keep the entries before the first one whose last offset is >= ``offset``."""
    for n, txn in enumerate(entries):
        if txn.last_offset >= offset:
            return list(entries[:n])
    return list(entries)


def collect_aborted(entries: Iterable[AbortedTxn], from_offset: int, to_offset: int) -> TxnIndexSearchResult:
    """Aborted transactions overlapping ``[from_offset, to_offset)`` in one segment's index.

    Collects entries with ``last_offset >= from_offset`` and ``first_offset < to_offset`` and stops after
    the first entry whose ``last_stable_offset >= to_offset`` (then ``is_complete`` is True and later
    segments need not be searched); walk segments from the one containing ``from_offset``.
    """
    found: list[AbortedTxn] = []
    for txn in entries:
        if txn.last_offset >= from_offset and txn.first_offset < to_offset:
            found.append(txn)
        if txn.last_stable_offset >= to_offset:
            return TxnIndexSearchResult(tuple(found), True)
    return TxnIndexSearchResult(tuple(found), False)
