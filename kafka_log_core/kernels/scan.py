"""Record tables: the compiled view of a batch's records that compaction works on.

For a v2 batch the record area (decompressed if needed) is walked by ``record_walk.walk_records`` into
arrays — offsets, key positions and lengths, value nulls, record byte ranges — and keys are hashed to
128-bit digests. Nothing is materialised as Python objects. Legacy batches go through the readable
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
    """Columns over the records of one batch (v2: over ``area``, the uncompressed record area)."""

    offsets: np.ndarray  # int64 absolute offsets
    key_len: np.ndarray  # int64, -1 = null key
    value_null: np.ndarray  # bool, tombstones
    hash_hi: np.ndarray  # uint64 key digest (0 for null keys)
    hash_lo: np.ndarray
    timestamps: np.ndarray  # int64 absolute timestamps
    area: np.ndarray | None = None  # uint8, v2 only
    rec_start: np.ndarray | None = None  # int64 byte ranges of each record in ``area`` (v2 only)
    rec_end: np.ndarray | None = None
    body_start: np.ndarray | None = None  # position of the record's attributes byte (after length)
    raw_ts_delta: np.ndarray | None = None  # timestamp deltas as encoded (v2 only)
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


def record_table(batch: FileBatch, hashes: tuple[np.ndarray, np.ndarray] | None = None) -> RecordTable:
    """Walk and hash the records of ``batch``; corrupt records raise with the file and position.
    ``hashes``: the key digests of this very batch, computed before (then only the walk runs)."""
    header = batch.header
    if not isinstance(header, BatchHeader):
        return _legacy_table(batch)  # legacy digests are cheap to recompute: not cached
    if header.records_count == 0:
        return _empty_table()
    compressed = header.compression != compression.NONE
    if compressed:
        try:
            raw = record_batch.records_area(header, batch.data)
        except CorruptRecordError as err:
            raise err.at(batch.path, batch.position + record_batch.HEADER_SIZE) from err
        area = np.frombuffer(raw, dtype=np.uint8)
        start = 0
    else:
        area = np.frombuffer(batch.data, dtype=np.uint8)
        start = record_batch.HEADER_SIZE
    if hashes is None:
        code, err_pos, table, hi, lo = key_digest.walk_and_hash(
            area, start, area.shape[0], header.records_count, header.base_offset
        )
    else:
        code, err_pos, table = record_walk.walk_records(
            area, start, area.shape[0], header.records_count, header.base_offset
        )
        hi, lo = hashes
    if code != record_walk.OK:
        where = f" (byte {err_pos} of the decompressed record area)" if compressed else ""
        raise CorruptRecordError(
            f"{record_walk.ERROR_TEXT[code]} in batch at offset {header.base_offset}{where}",
            batch.path,
            batch.position + (record_batch.HEADER_SIZE if compressed else err_pos),
        )
    if header.timestamp_type == record_batch.LOG_APPEND_TIME:
        timestamps = np.full(table.shape[1], header.max_timestamp, dtype=np.int64)
    else:
        timestamps = header.base_timestamp + table[record_walk.W_TS_DELTA]
    return RecordTable(
        offsets=table[record_walk.W_OFFSET],
        key_len=table[record_walk.W_KEY_LEN],
        value_null=table[record_walk.W_VALUE_LEN] < 0,
        hash_hi=hi,
        hash_lo=lo,
        timestamps=timestamps,
        area=area,
        rec_start=table[record_walk.W_REC_START],
        rec_end=table[record_walk.W_REC_END],
        body_start=table[record_walk.W_BODY_START],
        raw_ts_delta=table[record_walk.W_TS_DELTA],
    )


def _legacy_table(batch: FileBatch, hashes=None) -> RecordTable:
    records = batch.records()
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
