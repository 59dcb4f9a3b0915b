"""Spark adapters over the core: the ``kafka-log`` data source (:mod:`spark_udfs.kafka_log_source`)."""

from __future__ import annotations

from spark_udfs.kafka_log_source import NAME, KafkaLogDataSource

PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark) -> None:
    """Make ``spark.read.format("kafka-log")`` available in this session.

    Also switches on Python data source filter pushdown for the session (off by default in Spark 4.x):
    the reader prunes partition directories and seeks the offset/time indexes with the pushed filters,
    and Spark refuses a reader that implements ``pushFilters`` while the setting is off.
    """
    spark.conf.set(PUSHDOWN_CONF, "true")
    spark.dataSource.register(KafkaLogDataSource)


__all__ = ["NAME", "KafkaLogDataSource", "register"]
