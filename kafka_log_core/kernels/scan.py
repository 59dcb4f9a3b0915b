"""Record tables: the compiled view of a batch's records that compaction works on.

For a v2 batch the record area (decompressed if needed) is walked into a record table
(``record_walk``) and keys are hashed to 128-bit digests (``key_digest.walk_and_hash``); the columns a
caller reads are taken from it: offsets, key lengths, value nulls, timestamps, digests. Nothing is materialised as Python objects. Legacy batches go through the readable
decoder and are hashed the same way.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from kafka_log_core.errors import CorruptRecordError
from kafka_log_core.format import compression, record_batch
from kafka_log_core.format.log_file import FileBatch
from kafka_log_core.format.record_batch import BatchHeader
from kafka_log_core.kernels import key_digest, record_walk


@dataclass(slots=True)
class RecordTable:
    """Columns over the records of one batch."""

    offsets: np.ndarray  # int64 absolute offsets
    key_len: np.ndarray  # int64, -1 = null key
    value_null: np.ndarray  # bool, tombstones
    hash_hi: np.ndarray  # uint64 key digest (0 for null keys)
    hash_lo: np.ndarray
    timestamps: np.ndarray  # int64 absolute timestamps
    legacy: tuple = ()  # LegacyRecord objects (legacy batches only)

    @property
    def has_key(self) -> np.ndarray:
        return self.key_len >= 0

    def __len__(self) -> int:
        return int(self.offsets.shape[0])


def _empty_table() -> RecordTable:
    z = np.zeros(0, dtype=np.int64)
    u = np.zeros(0, dtype=np.uint64)
    return RecordTable(z, z, np.zeros(0, dtype=bool), u, u, z)


def record_table(batch: FileBatch, max_batch_bytes: int = compression.MAX_BATCH_BYTES) -> RecordTable:
    """Walk and hash the records of ``batch`` (decompressed to at most ``max_batch_bytes``); corrupt
    records raise with the file and position."""
    header = batch.header
    if not isinstance(header, BatchHeader):
        return _legacy_table(batch, max_batch_bytes)
    compressed = header.compression != compression.NONE
    try:  # decompressed within the limit, the record count checked against the bytes that hold them
        raw = record_batch.records_area(header, batch.data, max_batch_bytes)
    except CorruptRecordError as err:
        raise err.at(batch.path, batch.position) from err
    if header.records_count == 0:
        return _empty_table()
    if compressed:
        area = np.frombuffer(raw, dtype=np.uint8)
        start = 0
    else:
        area = np.frombuffer(batch.data, dtype=np.uint8)
        start = record_batch.HEADER_SIZE
    code, err_pos, table, digests = key_digest.walk_and_hash(
        area, start, area.shape[0], header.records_count, header.base_offset
    )
    if code != record_walk.OK:
        where = f" (byte {err_pos} of the decompressed record area)" if compressed else ""
        raise CorruptRecordError(
            f"{record_walk.ERROR_TEXT[code]} in batch at offset {header.base_offset}{where}",
            batch.path,
            batch.position + (record_batch.HEADER_SIZE if compressed else err_pos),
        )
    offsets = table[:, record_walk.R_OFFSET].copy()
    if header.timestamp_type == record_batch.LOG_APPEND_TIME:
        timestamps = np.full(offsets.shape[0], header.max_timestamp, dtype=np.int64)
    else:
        timestamps = header.base_timestamp + table[:, record_walk.R_TS_DELTA]
    return RecordTable(
        offsets=offsets,
        key_len=table[:, record_walk.R_KEY_LEN].copy(),
        value_null=table[:, record_walk.R_VALUE_LEN] < 0,
        hash_hi=digests[:, key_digest.DIGEST_HI].copy(),
        hash_lo=digests[:, key_digest.DIGEST_LO].copy(),
        timestamps=timestamps,
    )


def _legacy_table(batch: FileBatch, max_batch_bytes: int) -> RecordTable:
    records = batch.records(max_batch_bytes)
    n = len(records)
    key_len = np.array([-1 if r.key is None else len(r.key) for r in records], dtype=np.int64)
    keys = b"".join(r.key or b"" for r in records)
    key_pos = np.zeros(n, dtype=np.int64)
    if n:
        key_pos[1:] = np.cumsum(np.maximum(key_len, 0))[:-1]
    hi, lo = key_digest.hash_keys(np.frombuffer(keys, dtype=np.uint8), key_pos, key_len)
    return RecordTable(
        offsets=np.array([r.offset for r in records], dtype=np.int64),
        key_len=key_len,
        value_null=np.array([r.value is None for r in records], dtype=bool),
        hash_hi=hi,
        hash_lo=lo,
        timestamps=np.array([r.timestamp for r in records], dtype=np.int64),
        legacy=tuple(records),
    )
