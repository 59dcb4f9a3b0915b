"""Offsets by time, answered from the indexes (UnifiedLog.fetchOffsetByTimestamp, spec cleaner §10 Q2).

``-1`` latest (the log end offset), ``-2`` earliest (the log start offset), ``-3`` the offset of the
record with the largest timestamp, any other value a timestamp in ms: the first record with a
timestamp at or after it. Only the segment that holds the answer is read, from the index floor
position: no whole-log scans. The records of the batch that holds the answer are read (decompressed to
at most ``max_batch_bytes``, ``--max-decompressed-batch-bytes``) for ``-3`` and for a timestamp.

The tiered-storage specs answer as the broker does for a log without remote storage (what a log dir
holds): ``-4`` earliest-local is the log start offset, ``-5`` latest-tiered and ``-6``
earliest-pending-upload (Kafka 4.4) have no offset. ``kafka-get-offsets`` also takes each spec by name
(``TIME_NAMES``, its ``parseOffsetSpec``).
"""

from __future__ import annotations

import re
from collections.abc import Callable

from kafka_log_core.constants import MAX_INT, MIN_INT
from kafka_log_core.errors import UsageError
from kafka_log_core.format.compression import MAX_BATCH_BYTES
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.javacompat import java_split, parse_java_integer
from kafka_log_core.log.partition_log import PartitionLog

# ListOffsetsRequest's special timestamps
LATEST, EARLIEST, MAX_TIMESTAMP = -1, -2, -3
EARLIEST_LOCAL, LATEST_TIERED, EARLIEST_PENDING_UPLOAD = -4, -5, -6
TIME_NAMES = {
    "latest": LATEST,
    "earliest": EARLIEST,
    "max-timestamp": MAX_TIMESTAMP,
    "earliest-local": EARLIEST_LOCAL,
    "latest-tiered": LATEST_TIERED,
    "earliest-pending-upload": EARLIEST_PENDING_UPLOAD,
}


def offset_for_time(log: PartitionLog, timestamp: int, max_batch_bytes: int = MAX_BATCH_BYTES) -> int | None:
    if timestamp == LATEST:
        return log.log_end_offset
    if timestamp in (EARLIEST, EARLIEST_LOCAL):
        return log.log_start_offset
    if timestamp in (LATEST_TIERED, EARLIEST_PENDING_UPLOAD):
        return None  # nothing of a log dir is in remote storage
    if timestamp == MAX_TIMESTAMP:
        return _max_timestamp_offset(log, max_batch_bytes)
    if timestamp < 0:
        raise ValueError(f"unsupported special timestamp {timestamp} (expected -1 to -6 or a time in ms)")
    return _offset_by_timestamp(log, timestamp, max_batch_bytes)


def _max_timestamp_offset(log: PartitionLog, max_batch_bytes: int) -> int | None:
    best = None
    for segment in log.segments:
        ts = segment.time_index.last_entry.timestamp if len(segment.time_index) else -1
        if best is None or ts > best[0]:
            best = (ts, segment)
    if best is None or best[0] < 0:
        return None
    ts, segment = best
    position = segment.offset_index.lookup(segment.time_index.last_entry.offset).position
    for batch in segment.header_scan(position):
        if batch.max_timestamp == ts:
            for record in batch.records(max_batch_bytes):
                if record.timestamp == ts:
                    return record.offset
            return None
    return None


def _offset_by_timestamp(log: PartitionLog, target: int, max_batch_bytes: int) -> int | None:
    start = log.log_start_offset
    for segment in log.segments:
        if segment.largest_timestamp < target:
            continue
        floor = segment.time_index.lookup(target)
        offset = max(floor.offset, start)
        position = segment.offset_index.lookup(offset).position
        for batch in segment.header_scan(position):
            if batch.max_timestamp < target:
                continue
            for record in batch.records(max_batch_bytes):
                if record.timestamp >= target and record.offset >= start:
                    return record.offset
        return None
    return None


# --- which partitions: kafka-get-offsets' --topic, --partitions, --topic-partitions, --exclude-internal-topics
# Topic.isInternal
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
# GetOffsetShell's TOPIC_PARTITION_PATTERN
_RULE = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")
Selection = Callable[[TopicPartition], bool]


def include_list(raw: str, flag: str) -> re.Pattern[str]:
    """A topic regex as kafka-get-offsets reads it (TopicFilter.IncludeList): trimmed, commas meaning "or",
    spaces and surrounding quotes dropped, matched against the whole name."""
    regex = re.sub(r"[\"']+$", "", re.sub(r"^[\"']+", "", raw.strip().replace(",", "|").replace(" ", "")))
    try:
        return re.compile(regex)
    except re.error as err:
        raise UsageError(f"{flag} {raw!r}: {regex} is an invalid regex ({err})") from None


def _int(text: str, flag: str, raw: str) -> int:
    """A partition number as GetOffsetShell reads it (``Integer.parseInt``)."""
    value = parse_java_integer(text, MIN_INT, MAX_INT)
    if value is None:
        raise UsageError(f"{flag} {raw!r}: {text!r} is not a partition number")
    return value


def partition_selection(
    topic: str | None, partitions: str | None, topic_partitions: str | None, exclude_internal: bool
) -> Selection:
    """The partitions kafka-get-offsets asks for (GetOffsetShell's filters)."""
    if topic_partitions is not None:
        if topic is not None or partitions is not None:
            raise UsageError("--topic-partitions cannot be used with --topic or --partitions")
        matches = _rule_selection(topic_partitions)
    else:
        matches = _topic_selection(topic, partitions)
    if not exclude_internal:
        return matches
    return lambda tp: tp.topic not in INTERNAL_TOPICS and matches(tp)


def _rule_selection(topic_partitions: str) -> Selection:
    """--topic-partitions: TOPIC_REGEX[:N|:N-M|:N-|:-M] rules, M exclusive."""
    rules = []
    for spec in java_split(topic_partitions, ","):
        m = _RULE.fullmatch(spec)
        if m is None:
            raise UsageError(f"--topic-partitions: invalid rule specification: {spec}")
        pattern = include_list(m[1] or ".*", "--topic-partitions")
        if m[2]:
            low, high = _int(m[2], "--topic-partitions", spec), None
        else:
            low = _int(m[3], "--topic-partitions", spec) if m[3] else 0
            high = _int(m[4], "--topic-partitions", spec) if m[4] else MAX_INT
        rules.append((pattern, low, high))
    return lambda tp: any(
        p.fullmatch(tp.topic) and (tp.partition == low if high is None else low <= tp.partition < high)
        for p, low, high in rules
    )


def _topic_selection(topic: str | None, partitions: str | None) -> Selection:
    """--topic (default every topic) and --partitions (default every partition)."""
    pattern = include_list(topic if topic is not None else ".*", "--topic")
    ids = {_int(x, "--partitions", partitions) for x in java_split(partitions, ",")} if partitions else set()
    return lambda tp: bool(pattern.fullmatch(tp.topic)) and (not ids or tp.partition in ids)
