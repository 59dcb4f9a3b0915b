"""Producer state snapshots (``<20-digit offset>.snapshot``), the broker's idempotence/transaction table.

Big-endian, version 1::

    0  version      int16    1
    2  crc          uint32   CRC32C of bytes [6, end of file)
    6  entry_count  int32
    10 entries      46 bytes each:
       0  producer_id               int64
       8  epoch                     int16
       10 last_sequence             int32
       14 last_offset               int64   last offset of the producer's last data batch, -1 if none
       22 offset_delta              int32   last_offset - first offset of that batch
       26 timestamp                 int64   max timestamp of the producer's last append
       34 coordinator_epoch         int32
       38 current_txn_first_offset  int64   first offset of its open transaction, -1 if none

The file-name offset is the exclusive end of the log range the snapshot reflects. The broker parses the
header and all entries first (too few bytes or a negative count -> corrupt), then checks the version,
then the CRC; bytes after the last entry are covered by the CRC and otherwise ignored. A corrupt snapshot
is deleted on load and the next older one is tried.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable
from dataclasses import astuple, dataclass

import crc32c

from kafka_log_core import fsutil, storage
from kafka_log_core.errors import CorruptCheckpointError

VERSION = 1
HEADER = struct.Struct(
    ">h"  # version
    "I"  # crc: CRC32C of bytes [CRC_START, end of file)
    "i"  # entry_count
)
ENTRY = struct.Struct(
    ">q"  # producer_id
    "h"  # epoch
    "i"  # last_sequence
    "q"  # last_offset
    "i"  # offset_delta
    "q"  # timestamp
    "i"  # coordinator_epoch
    "q"  # current_txn_first_offset
)
HEADER_SIZE = HEADER.size  # 10
ENTRY_SIZE = ENTRY.size  # 46
CRC_OFFSET = 2
CRC_START = 6  # the CRC covers the entry count and the entries
NO_OFFSET = -1


@dataclass(frozen=True, slots=True)
class ProducerSnapshotEntry:
    producer_id: int
    epoch: int
    last_sequence: int
    last_offset: int
    offset_delta: int
    timestamp: int
    coordinator_epoch: int
    current_txn_first_offset: int = NO_OFFSET


def parse_producer_snapshot(
    data: bytes | bytearray | memoryview, path: str | os.PathLike[str] | None = None
) -> list[ProducerSnapshotEntry]:
    """Decode a snapshot, refusing what the broker refuses (truncated, negative count, version, CRC)."""
    if len(data) < HEADER_SIZE:
        raise CorruptCheckpointError(
            f"producer snapshot is {len(data)} bytes: expected at least the {HEADER_SIZE}-byte header",
            path,
            len(data),
        )
    version, stored_crc, count = HEADER.unpack_from(data, 0)
    if count < 0:
        raise CorruptCheckpointError(f"entry count is {count}: expected a count >= 0", path, CRC_START)
    needed = HEADER_SIZE + count * ENTRY_SIZE
    if len(data) < needed:
        raise CorruptCheckpointError(
            f"{count} entries need {needed} bytes, found {len(data)} (truncated snapshot)", path, len(data)
        )
    if version != VERSION:
        raise CorruptCheckpointError(f"expected snapshot version {VERSION}, found {version}", path, 0)
    computed_crc = crc32c.crc32c(bytes(data[CRC_START:]))
    if computed_crc != stored_crc:
        raise CorruptCheckpointError(
            f"CRC32C of bytes [{CRC_START}, {len(data)}) is {computed_crc:#010x}, stored {stored_crc:#010x}",
            path,
            CRC_OFFSET,
        )
    return [
        ProducerSnapshotEntry(*ENTRY.unpack_from(data, HEADER_SIZE + n * ENTRY_SIZE)) for n in range(count)
    ]


def read_producer_snapshot(path: str | os.PathLike[str]) -> list[ProducerSnapshotEntry]:
    return parse_producer_snapshot(storage.read_regular(path), path)


def encode_producer_snapshot(entries: Iterable[ProducerSnapshotEntry]) -> bytes:
    body = bytearray(HEADER_SIZE)
    count = 0
    for count, entry in enumerate(entries, 1):
        try:
            body += ENTRY.pack(*astuple(entry))
        except struct.error as err:
            raise CorruptCheckpointError(
                f"entry {count - 1}: {entry} does not fit the {ENTRY_SIZE}-byte layout ({err})",
                None,
                HEADER_SIZE + (count - 1) * ENTRY_SIZE,
            ) from err
    struct.pack_into(">i", body, CRC_START, count)
    HEADER.pack_into(body, 0, VERSION, crc32c.crc32c(bytes(body[CRC_START:])), count)
    return bytes(body)


def write_producer_snapshot(path: str | os.PathLike[str], entries: Iterable[ProducerSnapshotEntry]) -> int:
    """Write a snapshot atomically (``<path>.tmp``, fsync, rename, directory fsync); returns its size."""
    data = encode_producer_snapshot(entries)
    fsutil.atomic_write_bytes(path, data)
    return len(data)
