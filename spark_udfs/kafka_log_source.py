"""Kafka log directories as Spark DataFrames: the ``kafka-log`` Python data source.

    import spark_udfs
    spark_udfs.register(spark)
    records = spark.read.format("kafka-log").load("/data/kafka-logs")        # or one partition directory
    batches = spark.read.format("kafka-log").option("level", "batches").load(...)
    segments = spark.read.format("kafka-log").option("level", "segments").load(...)

``records`` (the default level) are what a ``read_uncommitted`` consumer fetching from the log start
offset would get: every record of every batch — compressed and legacy (v0/v1) included, aborted
transactional data included, control records included and flagged ``is_control`` — with offset
``>= log start offset`` and ``< high watermark`` (``replication-offset-checkpoint``; the log end
offset when the partition has no entry). ``.option("end", "log_end")`` reads up to the log end offset.
``batches`` and ``segments`` describe every batch and segment file on disk, below the log start
offset too. Files of an unfinished operation (``.cleaned``, ``.swap``, ``.deleted``) are not read.

One Spark partition per partition directory. Pushed-down filters (``spark.sql.python.filterPushdown
.enabled``, which :func:`spark_udfs.register` switches on) are applied here, exactly, and not again by
Spark: ``topic`` and ``partition`` (``=``, ``IN``; ``partition`` also ranges) prune directories at
planning time; on the records level ``offset`` ranges start each segment at its offset-index floor
and stop after the upper bound, and a lower ``timestamp`` bound starts each segment at the position of
its time-index floor entry — the first batch to reach that timestamp, so every batch before it holds
only older records — and skips v2 batches whose max timestamp is below the bound. Everything else is
left to Spark. Bad data raises the core's error, naming the file and byte position.

This module adapts the core's readers (``PartitionLog``, ``Segment``, ``log_file``) to Spark; it holds
no Kafka logic of its own.
"""

from __future__ import annotations

import mmap
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    IsNotNull,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

from kafka_log_core import compression, log_file
from kafka_log_core.errors import KafkaLogError, UsageError
from kafka_log_core.filenames import TopicPartition, list_partition_dirs, parse_partition_dir
from kafka_log_core.log_file import FileBatch
from kafka_log_core.partition_log import LogDirState, PartitionCheckpoints, PartitionLog
from kafka_log_core.record_batch import BatchHeader
from kafka_log_core.segment import MAX_LONG, Segment

NAME = "kafka-log"
LEVELS = ("records", "batches", "segments")
ENDS = ("high_watermark", "log_end")
ROWS_PER_ARROW_BATCH = 4096
TIMESTAMP_TYPES = {-1: "NoTimestampType", 0: "CreateTime", 1: "LogAppendTime"}


def _f(name: str, kind, nullable: bool = False) -> StructField:
    return StructField(name, kind, nullable)


_TP = [_f("topic", StringType()), _f("partition", IntegerType())]
_PRODUCER = [
    _f("producer_id", LongType()),
    _f("producer_epoch", ShortType()),
    _f("base_sequence", IntegerType()),
]
_ATTRIBUTES = [
    _f("compression", StringType()), _f("is_transactional", BooleanType()), _f("is_control", BooleanType()),
    _f("has_delete_horizon", BooleanType()),
]  # fmt: skip
HEADER_TYPE = StructType([_f("key", StringType()), _f("value", BinaryType(), True)])
SCHEMAS = {
    "records": StructType(
        _TP + [_f("offset", LongType()), _f("timestamp", LongType()), _f("timestamp_type", StringType()),
               _f("key", BinaryType(), True), _f("value", BinaryType(), True),
               _f("headers", ArrayType(HEADER_TYPE, False))]
        + _ATTRIBUTES + _PRODUCER + [_f("partition_leader_epoch", IntegerType()), _f("magic", ShortType())]
    ),
    "batches": StructType(
        _TP + [_f("segment_base_offset", LongType()), _f("position", LongType()),
               _f("base_offset", LongType(), True), _f("last_offset", LongType()),
               _f("records_count", IntegerType(), True), _f("size_bytes", IntegerType()), _f("magic", ShortType()),
               _f("timestamp_type", StringType()), _f("max_timestamp", LongType()),
               _f("delete_horizon_ms", LongType(), True)]
        + _ATTRIBUTES + _PRODUCER
        + [_f("partition_leader_epoch", IntegerType()), _f("crc", LongType()), _f("is_valid", BooleanType())]
    ),
    "segments": StructType(
        _TP + [_f("base_offset", LongType()), _f("next_offset", LongType()), _f("size_bytes", LongType()),
               _f("mtime_ms", LongType()), _f("largest_timestamp", LongType()),
               _f("first_batch_timestamp", LongType(), True), _f("index_entries", IntegerType()),
               _f("time_index_entries", IntegerType()), _f("aborted_transactions", IntegerType()),
               _f("is_active", BooleanType()), _f("log_path", StringType())]
    ),
}  # fmt: skip


# ------------------------------------------------------------------------------------------ pushdown
@dataclass
class Bounds:
    """What the pushed filters on one column admit: ``lo <= v <= hi`` and ``v in values``."""

    lo: int | None = None
    hi: int | None = None
    values: frozenset | None = None

    def take(self, f: Filter, kind: type) -> bool:
        """Narrow by ``f`` if it is a comparison with a literal of ``kind``; False when not handled."""
        if isinstance(f, IsNotNull):
            return True  # the columns we push on are never null
        value = getattr(f, "value", None)
        literals = value if isinstance(f, In) else (value,)
        if not literals or not all(type(v) is kind for v in literals):
            return False
        if isinstance(f, EqualTo | In):
            self.values = frozenset(literals) if self.values is None else self.values & frozenset(literals)
            return True
        if kind is not int:
            return False
        if isinstance(f, GreaterThan | GreaterThanOrEqual):
            lo = value + 1 if isinstance(f, GreaterThan) else value
            self.lo = lo if self.lo is None else max(self.lo, lo)
            return True
        if isinstance(f, LessThan | LessThanOrEqual):
            hi = value - 1 if isinstance(f, LessThan) else value
            self.hi = hi if self.hi is None else min(self.hi, hi)
            return True
        return False

    @property
    def low(self) -> int | None:
        """The smallest admitted value, or None when unbounded below."""
        candidates = [v for v in (self.lo, min(self.values) if self.values else None) if v is not None]
        return max(candidates) if candidates else None

    @property
    def high(self) -> int | None:
        candidates = [v for v in (self.hi, max(self.values) if self.values else None) if v is not None]
        return min(candidates) if candidates else None

    def admits(self, v) -> bool:
        return (
            (self.values is None or v in self.values)
            and (self.lo is None or v >= self.lo)
            and (self.hi is None or v <= self.hi)
        )


PUSHABLE = {  # level -> column -> literal type
    "records": {"topic": str, "partition": int, "offset": int, "timestamp": int},
    "batches": {"topic": str, "partition": int},
    "segments": {"topic": str, "partition": int},
}


@dataclass(frozen=True)
class PartitionDir(InputPartition):
    """One Spark partition: one partition directory, with its entries of the log-dir checkpoints."""

    log_dir: str
    topic: str
    partition: int
    checkpoints: PartitionCheckpoints


# ------------------------------------------------------------------------------------------ the source
class KafkaLogDataSource(DataSource):
    """``spark.read.format("kafka-log")``; options ``level`` (records|batches|segments) and ``end``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        return SCHEMAS[_choice(self.options, "level", LEVELS)]

    def reader(self, schema: StructType) -> KafkaLogReader:
        return KafkaLogReader(dict(self.options), schema)


def _choice(options, key: str, allowed: tuple[str, ...]) -> str:
    value = (options.get(key) or allowed[0]).lower()
    if value not in allowed:
        raise UsageError(f"kafka-log option {key}={value!r}: expected one of {', '.join(allowed)}")
    return value


class KafkaLogReader(DataSourceReader):
    def __init__(self, options: dict, schema: StructType) -> None:
        path = options.get("path")
        if not path:
            raise UsageError("kafka-log: give a log dir or a partition directory: .load(path)")
        self.path = os.fspath(path)
        self.level = _choice(options, "level", LEVELS)
        self.end = _choice(options, "end", ENDS)
        self.schema = schema
        self.bounds = {column: Bounds() for column in PUSHABLE[self.level]}

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for f in filters:
            column = f.attribute[0] if len(getattr(f, "attribute", ())) == 1 else None
            kind = PUSHABLE[self.level].get(column)
            if kind is None or not self.bounds[column].take(f, kind):
                yield f

    def partitions(self) -> list[PartitionDir]:
        found = []
        for log_dir, listed in _log_dirs(Path(self.path)):
            state = LogDirState.read(log_dir)
            for tp in listed:
                if self.bounds["topic"].admits(tp.topic) and self.bounds["partition"].admits(tp.partition):
                    found.append(
                        PartitionDir(os.fspath(log_dir), tp.topic, tp.partition, state.for_partition(tp))
                    )
        return found

    def read(self, partition: PartitionDir):
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        if not isinstance(partition, PartitionDir):
            return  # no partition directory selected: Spark still runs one empty task
        arrow_schema = to_arrow_schema(self.schema)
        rows = {"records": self._records, "batches": _batch_rows, "segments": _segment_rows}[self.level]
        columns: dict[str, list] = {name: [] for name in arrow_schema.names}
        count = 0
        log = PartitionLog.open(
            partition.log_dir, TopicPartition(partition.topic, partition.partition), partition.checkpoints
        )
        for row in rows(log):
            for name, value in zip(arrow_schema.names, row, strict=True):
                columns[name].append(value)
            count += 1
            if count == ROWS_PER_ARROW_BATCH:
                yield pa.RecordBatch.from_pydict(columns, schema=arrow_schema)
                columns = {name: [] for name in arrow_schema.names}
                count = 0
        if count:
            yield pa.RecordBatch.from_pydict(columns, schema=arrow_schema)

    # ------------------------------------------------------------------ records
    def _records(self, log: PartitionLog) -> Iterator[tuple]:
        offsets, times = self.bounds["offset"], self.bounds["timestamp"]
        end = log.high_watermark if self.end == "high_watermark" else log.log_end_offset
        start = max(log.log_start_offset, offsets.low if offsets.low is not None else 0)
        last = end - 1 if offsets.high is None else min(end - 1, offsets.high)
        ts_low = times.low
        tp = (log.tp.topic, log.tp.partition)
        for segment in log.segments_in(start, last + 1):
            position = segment.offset_index.lookup(start).position
            if ts_low is not None:
                floor = segment.time_index.lookup(ts_low)
                if floor.timestamp >= 0:
                    position = max(position, segment.offset_index.lookup(floor.offset).position)
            for batch in _batches(segment, position):
                header = batch.header
                v2 = isinstance(header, BatchHeader)
                if batch.last_offset < start or (v2 and ts_low is not None and header.max_timestamp < ts_low):
                    continue
                if v2 and header.base_offset > last:
                    return
                batch.verify()
                attrs = _attributes(batch)
                for r in batch.records():
                    if start <= r.offset <= last and offsets.admits(r.offset) and times.admits(r.timestamp):
                        ts_type = header.timestamp_type if v2 else r.timestamp_type
                        yield (
                            *tp, r.offset, r.timestamp, TIMESTAMP_TYPES[ts_type], r.key, r.value,
                            [{"key": h.key, "value": h.value} for h in r.headers],
                            *attrs, header.magic if v2 else r.magic,
                        )  # fmt: skip
                if batch.last_offset >= last:
                    return


def _attributes(batch: FileBatch) -> tuple:
    """compression .. partition_leader_epoch of the records schema, for every record of ``batch``."""
    h = batch.header
    v2 = isinstance(h, BatchHeader)
    return (
        compression.codec_name(h.compression), batch.is_transactional, batch.is_control,
        v2 and h.has_delete_horizon, batch.producer_id, batch.producer_epoch,
        h.base_sequence if v2 else -1, batch.partition_leader_epoch,
    )  # fmt: skip


def _batches(segment: Segment, position: int) -> Iterator[FileBatch]:
    """Batches of one segment from ``position``, over a read-only memory map (nothing copied up front).
    A partial batch at the end is not served (the broker's recovery would truncate it)."""
    if segment.size <= position:
        return
    with open(segment.log_path, "rb") as f:
        mapped = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    yield from log_file.iter_batches(mapped, segment.log_path, position, min(segment.size, len(mapped)))


def _batch_rows(log: PartitionLog) -> Iterator[tuple]:
    tp = (log.tp.topic, log.tp.partition)
    for segment in log.segments:
        for batch in _batches(segment, 0):
            h = batch.header
            v2 = isinstance(h, BatchHeader)
            base, count = (h.base_offset, h.records_count) if v2 else (None, None)
            try:
                batch.verify()
                if not v2:
                    base, count = _legacy_span(batch)
                valid = True
            except KafkaLogError:
                valid = False
            yield (
                *tp, segment.base_offset, batch.position, base, batch.last_offset, count, batch.size_in_bytes,
                h.magic, TIMESTAMP_TYPES[h.timestamp_type], batch.max_timestamp,
                h.delete_horizon_ms if v2 and h.has_delete_horizon else None, *_attributes(batch), h.crc, valid,
            )  # fmt: skip


def _legacy_span(batch: FileBatch) -> tuple[int | None, int]:
    records = batch.records()
    return (records[0].offset if records else None), len(records)


def _segment_rows(log: PartitionLog) -> Iterator[tuple]:
    tp = (log.tp.topic, log.tp.partition)
    for segment in log.segments:
        first = segment.first_batch_timestamp
        yield (
            *tp, segment.base_offset, segment.read_next_offset, segment.size, segment.mtime_ms,
            segment.largest_timestamp, None if first == MAX_LONG else first, len(segment.offset_index),
            len(segment.time_index), len(segment.aborted_txns), segment is log.active_segment,
            os.fspath(segment.log_path),
        )  # fmt: skip


def _log_dirs(path: Path) -> list[tuple[Path, list[TopicPartition]]]:
    """``path`` as (log dir, partitions): a log dir, or a single partition directory inside one."""
    if not path.is_dir():
        raise UsageError(f"kafka-log: {path} is not a directory")
    listed = [tp for tp, _ in list_partition_dirs(path)]
    single = parse_partition_dir(path.name)
    if not listed and single is not None:
        return [(path.parent, [single])]
    return [(path, listed)]
