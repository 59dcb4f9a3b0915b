"""The schemas of the ``kafka-log`` levels.

``records`` and ``latest`` have the schema of Spark's Kafka source, field for field (names, types,
nullability, order)::

    key binary, value binary, topic string, partition int, offset long,
    timestamp timestamp, timestampType int          0 CreateTime, 1 LogAppendTime, -1 none (magic 0)
    headers array<struct<key string, value binary>> only with includeHeaders=true; null when none

then, with ``includeBatchColumns=true``, what only the log on disk knows, per record (``BATCH_COLUMNS``).
With ``schemas``, ``key`` and ``value`` have the types of the topic's schemas and five columns follow
(:mod:`spark_udfs.decoded`).
``batches`` and ``segments`` are ours: one row per batch header, one row per segment file.
"""

from __future__ import annotations

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
    TimestampType,
)

from kafka_log_core.registry.decoding import KEY, VALUE
from spark_udfs.decoded import EXTRA_COLUMNS, EXTRA_TYPES, TopicDecoders
from spark_udfs.options import ReadOptions

HEADERS_TYPE = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
KAFKA_FIELDS = [
    StructField("key", BinaryType()),
    StructField("value", BinaryType()),
    StructField("topic", StringType()),
    StructField("partition", IntegerType()),
    StructField("offset", LongType()),
    StructField("timestamp", TimestampType()),
    StructField("timestampType", IntegerType()),
]
HEADERS_FIELD = StructField("headers", HEADERS_TYPE)
BATCH_COLUMNS = [
    StructField("magic", ShortType()),
    StructField("compression", StringType()),
    StructField("is_transactional", BooleanType()),
    StructField("is_aborted", BooleanType()),  # in a transaction that was aborted (read_uncommitted only)
    StructField("producer_id", LongType()),
    StructField("producer_epoch", ShortType()),
    StructField("base_sequence", IntegerType()),
    StructField("partition_leader_epoch", IntegerType()),
    StructField("has_delete_horizon", BooleanType()),
    StructField("batch_base_offset", LongType()),
    StructField("batch_last_offset", LongType()),
    StructField("segment_base_offset", LongType()),
    StructField("batch_position", LongType()),  # byte position of the batch in the segment's .log
]


def _f(name: str, kind, nullable: bool = False) -> StructField:
    return StructField(name, kind, nullable)


_TP = [_f("topic", StringType()), _f("partition", IntegerType())]
_ATTRIBUTES = [
    _f("compression", StringType()), _f("is_transactional", BooleanType()), _f("is_control", BooleanType()),
    _f("has_delete_horizon", BooleanType()),
]  # fmt: skip
_PRODUCER = [
    _f("producer_id", LongType()),
    _f("producer_epoch", ShortType()),
    _f("base_sequence", IntegerType()),
]
BATCHES = StructType(
    _TP + [_f("segment_base_offset", LongType()), _f("position", LongType()),
           _f("base_offset", LongType(), True), _f("last_offset", LongType()),
           _f("records_count", IntegerType(), True), _f("size_bytes", IntegerType()), _f("magic", ShortType()),
           _f("timestamp_type", StringType()), _f("max_timestamp", LongType()),
           _f("delete_horizon_ms", LongType(), True)]
    + _ATTRIBUTES + _PRODUCER
    + [_f("partition_leader_epoch", IntegerType()), _f("crc", LongType()), _f("is_valid", BooleanType())]
)  # fmt: skip
SEGMENTS = StructType(
    _TP + [_f("base_offset", LongType()), _f("next_offset", LongType()), _f("size_bytes", LongType()),
           _f("mtime_ms", LongType()), _f("largest_timestamp", LongType()),
           _f("first_batch_timestamp", LongType(), True), _f("index_entries", IntegerType()),
           _f("time_index_entries", IntegerType()), _f("aborted_transactions", IntegerType()),
           _f("is_active", BooleanType()), _f("log_path", StringType())]
)  # fmt: skip


def records_schema(include_headers: bool = False, include_batch_columns: bool = False) -> StructType:
    fields = list(KAFKA_FIELDS)
    if include_headers:
        fields.append(HEADERS_FIELD)
    if include_batch_columns:
        fields += BATCH_COLUMNS
    return StructType(fields)


def schema_for(options: ReadOptions, decoders: TopicDecoders | None = None) -> StructType:
    if options.level == "batches":
        return BATCHES
    if options.level == "segments":
        return SEGMENTS
    plain = records_schema(options.include_headers, options.include_batch_columns)
    if decoders is None:
        return plain
    from pyspark.sql.pandas.types import from_arrow_type

    typed = [
        StructField("key", from_arrow_type(decoders.arrow_type(KEY))),
        StructField("value", from_arrow_type(decoders.arrow_type(VALUE))),
    ]
    extra = [
        StructField(name, from_arrow_type(kind))
        for name, kind in zip(EXTRA_COLUMNS, EXTRA_TYPES, strict=True)
    ]
    return StructType(typed + plain.fields[2:] + extra)
