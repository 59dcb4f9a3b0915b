"""Kafka log directories as Spark DataFrames: the ``kafka-log`` Python data source.

    import spark_udfs
    spark_udfs.register(spark)
    records = spark.read.format("kafka-log").load("/data/kafka-logs")            # Spark's Kafka schema
    records = spark.read.format("kafka-log").option("subscribe", "orders") \\
        .option("kafka.isolation.level", "read_committed").load(["/d1", "/d2"])  # a JBOD broker
    table = spark.read.format("kafka-log").option("level", "latest").load(...)  # one row per key
    batches = spark.read.format("kafka-log").option("level", "batches").load(...)
    segments = spark.read.format("kafka-log").option("level", "segments").load(...)

The options are Spark's Kafka source options plus ours (:mod:`spark_udfs.options`), the schemas Spark's
Kafka source schema plus ours (:mod:`spark_udfs.schemas`), the plan made from the options alone
(:mod:`spark_udfs.planning`) and the rows read by :mod:`spark_udfs.rows`.

Filters are not pushed down: Spark evaluates ``where`` itself, after the read. Spark (seen on 4.2) keeps the read
plan that a Python data source builds from pushed filters on the DataFrame's relation and reuses it for
every later query of that DataFrame, so a plan pruned for one query would drop rows from the next (a
filter on a derived DataFrame leaked back into its base this way). What to read is said with options,
as with Spark's Kafka source, which pushes no filters either; the options belong to the DataFrame.
A DataFrame is planned once, at its first query (offsets resolved, files listed): load it again to see
what changed on disk since; a segment file replaced since (a compaction) is refused, not misread.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import StructType

from kafka_log_core.errors import KafkaLogError, UsageError
from spark_udfs import decoded, planning, registry_topic, rows
from spark_udfs.decoded import TopicDecoders
from spark_udfs.errors import PartitionReadError
from spark_udfs.options import ReadOptions
from spark_udfs.schemas import schema_for

NAME = "kafka-log"
ROWS_PER_ARROW_BATCH = 4096


class KafkaLogDataSource(DataSource):
    """``spark.read.format("kafka-log")``."""

    @classmethod
    def name(cls) -> str:
        return NAME

    def schema(self) -> StructType:
        options = ReadOptions.parse(self.options)
        return schema_for(options, self._decoders(options))

    def reader(self, schema: StructType) -> KafkaLogReader:
        options = ReadOptions.parse(self.options)
        decoders = self._decoders(options)
        expected = schema_for(options, decoders)
        if schema != expected:
            raise UsageError(
                f"kafka-log has a fixed schema for level {options.level}: {expected.simpleString()}, "
                f"not {schema.simpleString()}"
            )
        return KafkaLogReader(options, expected, decoders)

    def _decoders(self, options: ReadOptions) -> TopicDecoders | None:
        """The key and value decoders of the topic read (``schemas``), made once per DataFrame."""
        if options.schemas == registry_topic.NONE or options.level not in ("records", "latest"):
            return None
        cached = getattr(self, "_made_decoders", None)
        if cached is None:
            topic = options.decoded_topic()
            store = registry_topic.load(options.schemas, options.schemas_topic, options.paths)
            cached = (TopicDecoders.of(store, topic),) if store is not None else (None,)
            self._made_decoders = cached
        return cached[0]


class KafkaLogReader(DataSourceReader):
    """Holds the parsed options and the schema, nothing else: each call plans or reads from them."""

    def __init__(
        self, options: ReadOptions, schema: StructType, decoders: TopicDecoders | None = None
    ) -> None:
        self.options = options
        self.schema = schema
        self.decoders = decoders

    def partitions(self) -> list[InputPartition]:
        return list(planning.plan(self.options))

    def read(self, partition: InputPartition):
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        if not isinstance(partition, planning.Split):
            return  # nothing selected: Spark still runs one empty task
        arrow_schema = to_arrow_schema(self.schema)  # timestamps in UTC
        found = _guarded(partition, rows.rows(partition, self.options))
        if self.decoders is not None:
            yield from decoded.batches(found, self.decoders, arrow_schema, ROWS_PER_ARROW_BATCH)
            return
        while batch := list(itertools.islice(found, ROWS_PER_ARROW_BATCH)):
            columns = zip(*batch, strict=True)  # rows to columns, in C
            yield pa.RecordBatch.from_arrays(
                [
                    pa.array(column, type=field.type)
                    for column, field in zip(columns, arrow_schema, strict=True)
                ],
                schema=arrow_schema,
            )


def _guarded(split: planning.Split, found: Iterator[tuple]) -> Iterator[tuple]:
    """The rows; a failure names the partition (a job leaves that partition out and goes on)."""
    source = split.source
    try:
        yield from found
    except (KafkaLogError, OSError) as err:
        raise PartitionReadError.wrap(source.topic, source.partition, source.log_dir, err) from err
