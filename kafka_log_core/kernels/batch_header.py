"""The v2 batch header and the legacy entry's header as the kernels read them: field positions,
attribute masks, the framing checks of the readable reader, and the header fields a pass decides on.

v2 batch header (``record_batch.HEADER``), big-endian, byte offsets from the batch start::

    0  base_offset int64     8  batch_length int32    12 partition_leader_epoch int32   16 magic int8
    17 crc uint32 (CRC32C of [21, end))                21 attributes int16 (bits in the low byte, 22)
    23 last_offset_delta int32   27 base_timestamp int64   35 max_timestamp int64
    43 producer_id int64     51 producer_epoch int16  53 base_sequence int32           57 records_count int32
    61 records

Legacy entry (magic 0/1)::

    0 offset int64 | 8 message_size int32 | 12 crc uint32 | 16 magic int8 | 17 attributes int8 |
    18 timestamp int64 (v1 only) | key_length int32, key | value_length int32, value
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from kafka_log_core.format.legacy_records import MIN_MESSAGE_SIZE
from kafka_log_core.format.log_file import HEADER_SIZE_UP_TO_MAGIC, MIN_ENTRY_SIZE
from kafka_log_core.format.record_batch import ATTRIBUTES_OFFSET, HEADER_SIZE, LOG_OVERHEAD
from kafka_log_core.kernels.fields import read_i16, read_i32, read_i64
from kafka_log_core.kernels.statuses import CONTINUE, DONE, ERR_BATCH

# ---------------------------------------------------------------------------------------------- layout
# Field positions the format layer (``record_batch.HEADER``) does not name; the sizes, masks and the CRC
# and attributes positions are imported from it.
BASE_OFFSET_AT = 0
BATCH_LENGTH_AT = 8
MAGIC_AT = 16
LAST_OFFSET_DELTA_AT = 23
BASE_TIMESTAMP_AT = 27
MAX_TIMESTAMP_AT = 35
PRODUCER_ID_AT = 43
PRODUCER_EPOCH_AT = 51
BASE_SEQUENCE_AT = 53
RECORDS_COUNT_AT = 57
LEGACY_ATTRIBUTES_AT = 17
LEGACY_TIMESTAMP_AT = 18
LEGACY_MIN_MESSAGE_SIZE_V0, LEGACY_MIN_MESSAGE_SIZE_V1 = MIN_MESSAGE_SIZE[0], MIN_MESSAGE_SIZE[1]


BatchHead = namedtuple(
    "BatchHead",
    [
        "base_offset", "size", "attributes", "last_offset", "base_timestamp", "max_timestamp", "producer_id",
        "producer_epoch", "count",
    ],
)  # fmt: skip


@njit(cache=True, inline="always")
def batch_head(buf, pos):
    """The v2 header fields the passes decide on (framing checked by the caller)."""
    base = read_i64(buf, pos + BASE_OFFSET_AT)
    return BatchHead(
        base,
        LOG_OVERHEAD + read_i32(buf, pos + BATCH_LENGTH_AT),
        read_i16(buf, pos + ATTRIBUTES_OFFSET),
        base + read_i32(buf, pos + LAST_OFFSET_DELTA_AT),
        read_i64(buf, pos + BASE_TIMESTAMP_AT),
        read_i64(buf, pos + MAX_TIMESTAMP_AT),
        read_i64(buf, pos + PRODUCER_ID_AT),
        read_i16(buf, pos + PRODUCER_EPOCH_AT),
        read_i32(buf, pos + RECORDS_COUNT_AT),
    )


@njit(cache=True, inline="always")
def framing(buf, pos, end):
    """Checks of ``log_file.iter_batches(strict=True)`` and ``record_batch.decode_header``. Returns
    (status, size, magic): status DONE (nothing left), CONTINUE (a batch at ``pos``), ERR_BATCH."""
    if end - pos <= HEADER_SIZE_UP_TO_MAGIC:
        return (DONE if pos >= end else ERR_BATCH), np.int64(0), np.int64(0)
    size = read_i32(buf, pos + BATCH_LENGTH_AT)
    if size < MIN_ENTRY_SIZE or pos + LOG_OVERHEAD + size > end:
        return ERR_BATCH, np.int64(0), np.int64(0)
    magic = np.int64(buf[pos + MAGIC_AT])
    total = LOG_OVERHEAD + size
    if magic == 2 and (total < HEADER_SIZE or read_i32(buf, pos + RECORDS_COUNT_AT) < 0):
        return ERR_BATCH, total, magic
    if magic > 2:
        return ERR_BATCH, total, magic
    return CONTINUE, total, magic
