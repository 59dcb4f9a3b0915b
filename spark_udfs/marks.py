"""What the logs hold now, for an incremental export's plan (:mod:`kafka_log_core.work.table_state`):
per partition, the offsets a read with the export's options covers, the log start and end, the topic
id (``partition.metadata``), the cleaner's checkpoint and the batch holding a given offset. Read on the
driver from the files (indexes, one batch header), never the records."""

from __future__ import annotations

from dataclasses import replace

from kafka_log_core.format.checkpoints import PARTITION_METADATA, read_partition_metadata
from kafka_log_core.format.record_batch import BatchHeader
from kafka_log_core.log.listing import PartitionTask
from kafka_log_core.log.partition_log import PartitionLog
from kafka_log_core.work.table_state import PartitionNow
from spark_udfs import loaded
from spark_udfs.options import EARLIEST, LATEST, Bound, ReadOptions
from spark_udfs.planning import offset_range


def batch_holding(log: PartitionLog, offset: int) -> tuple[int, int] | None:
    """(base offset, CRC) of the first batch ending at or after ``offset`` (a legacy entry: its last
    offset), if any."""
    if offset < 0 or not log.segments or offset >= log.log_end_offset:
        return None
    for segment in log.segments[max(0, log.floor_segment_index(offset)) :]:
        for batch in segment.header_scan(segment.lookup_position(offset)):
            if batch.last_offset >= offset:
                h = batch.header
                return (h.base_offset if isinstance(h, BatchHeader) else batch.last_offset, h.crc)
    return None


def partition_now(
    options: ReadOptions, source: PartitionTask, mark_end: int | None, clusters: loaded.Clusters
) -> tuple[PartitionNow, tuple[int, int] | None]:
    """The partition as it is now -- as the broker's loader would leave it, like the source's read of it
    (a crashed dir's stale high watermark raised to its recovered end) -- and the batch holding the end - 1
    of a read now (the next mark's)."""
    whole = replace(options, starting=Bound(EARLIEST), ending=Bound(LATEST))
    log = loaded.open_as_loaded(source, options.fail_on_data_loss, clusters).log
    start, end = offset_range(whole, log)
    metadata = log.directory / PARTITION_METADATA
    topic_id = read_partition_metadata(metadata).topic_id if metadata.is_file() else None
    now = PartitionNow(
        log_start=start, end=end, log_end=log.log_end_offset, topic_id=topic_id,
        cleaner_offset=source.checkpoints.cleaner_offset,
        batch_at_mark=None if mark_end is None else batch_holding(log, mark_end - 1),
    )  # fmt: skip
    return now, (batch_holding(log, end - 1) if end > start else None)
