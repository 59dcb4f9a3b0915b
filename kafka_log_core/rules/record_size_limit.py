"""Kafka 4.4's ``max.decompressed.message.bytes``: the largest record the cleaner reads from a compressed batch.

From 4.4 the cleaner reads each record of a compressed batch with a bound on its size: a v2 record's body
(after its length varint, ``DefaultRecord.readFrom``), a legacy inner message's size field
(``AbstractLegacyRecordBatch.DataLogInputStream``). A larger record throws ``InvalidRecordException``
and the cleaner thread marks the partition uncleanable. Records of uncompressed batches are not checked,
and the default (2147483639) admits any record a segment can hold: the check runs only where a topic
(or the broker) lowers the setting.

Offline the round is refused before anything is written; the broker may already have swapped in the
groups cleaned before that record, which holds the same records. Kafka reads the segments of a round
below its first uncleanable offset (pass 1 from the first dirty offset, pass 2 from the log start); it
does not read the rest of pass 1 once its offset map is full, nor the batches of an aborted transaction
it drops. Those are checked all the same: where we cannot tell whether Kafka would have read the record,
we refuse rather than clean.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from kafka_log_core.errors import CorruptRecordError, RecordTooLargeError
from kafka_log_core.format import compression, record_batch
from kafka_log_core.format.legacy_records import LOG_OVERHEAD
from kafka_log_core.format.log_file import FileBatch
from kafka_log_core.format.record_batch import BatchHeader
from kafka_log_core.kernels import record_walk
from kafka_log_core.log.segment import Segment
from kafka_log_core.settings import kafka_version as kv
from kafka_log_core.settings.config import TOPIC_KEYS, BrokerConfig, LogConfig

SETTING = "max.decompressed.message.bytes"
NO_LIMIT = TOPIC_KEYS[SETTING].default


def check_round(
    segments: Iterable[Segment], cfg: LogConfig, broker: BrokerConfig,
    max_batch_bytes: int = compression.MAX_BATCH_BYTES,
) -> None:  # fmt: skip
    """Refuse the cleaning round over ``segments`` if Kafka ``broker.kafka_version``'s cleaner would fail
    on one of their records (nothing to do before 4.4, or with the setting at its default). Each batch
    decompresses to at most ``max_batch_bytes`` (``--max-decompressed-batch-bytes``), as in the passes."""
    limit = cfg.max_decompressed_message_bytes
    if limit >= NO_LIMIT or not kv.limits_decompressed_record_size(broker.kafka_version):
        return
    for segment in segments:
        for batch in segment.batches():
            if batch.compression != compression.NONE:
                _check_batch(batch, limit, max_batch_bytes)
        segment.drop_cache()


def _check_batch(batch: FileBatch, limit: int, max_batch_bytes: int) -> None:
    for offset, size in _record_sizes(batch, max_batch_bytes):
        if size > limit:
            raise RecordTooLargeError(
                f"{batch.path} at position {batch.position}: the record at offset {offset} is {size} bytes "
                f"decompressed, more than {SETTING}={limit}; Kafka's cleaner fails on it and leaves the "
                f"partition uncleanable (raise {SETTING} for this topic to compact it)"
            )


def _record_sizes(batch: FileBatch, max_batch_bytes: int) -> list[tuple[int, int]]:
    """(offset, size Kafka checks) of each record of a compressed batch."""
    header = batch.header
    if not isinstance(header, BatchHeader):
        return [(r.offset, r.size_in_bytes - LOG_OVERHEAD) for r in batch.records(max_batch_bytes)]
    try:
        area = np.frombuffer(record_batch.records_area(header, batch.data, max_batch_bytes), dtype=np.uint8)
    except CorruptRecordError as err:  # decompression and record count: at the batch's position
        raise err.at(batch.path, batch.position) from err
    code, err_pos, table = record_walk.walk_records(
        area, 0, area.shape[0], header.records_count, header.base_offset
    )
    if code != record_walk.OK:
        raise CorruptRecordError(
            f"{record_walk.ERROR_TEXT[code]} in batch at offset {header.base_offset} (byte {err_pos} of the "
            "decompressed record area)",
            batch.path,
            batch.position + record_batch.HEADER_SIZE,
        )
    bodies = table[:, record_walk.R_REC_END] - table[:, record_walk.R_BODY]
    return list(zip(table[:, record_walk.R_OFFSET].tolist(), bodies.tolist(), strict=True))
