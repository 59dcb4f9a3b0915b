"""Spark adapters over the core, not UDFs (the package keeps the design card's name): the ``kafka-log``
data source (:mod:`spark_udfs.kafka_log_source`) with its options, planning, rows and schemas, and the
Maven packages Spark features need (:mod:`spark_udfs.packages`). Nothing here holds Kafka rules of its
own; it may import the core, and the jobs import it."""

from __future__ import annotations

from spark_udfs.kafka_log_source import NAME, KafkaLogDataSource


def register(spark) -> None:
    """Make ``spark.read.format("kafka-log")`` available in this session."""
    spark.dataSource.register(KafkaLogDataSource)


__all__ = ["NAME", "KafkaLogDataSource", "register"]
