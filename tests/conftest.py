"""Shared fixtures: one local Spark session for the whole run, and the real-broker harness."""

from __future__ import annotations

import fcntl
import os
import sys
from pathlib import Path

import pytest

# The real Kafka broker fixtures live in tests/kafka_harness.py, the Iceberg REST catalog's in
# tests/iceberg_rest_harness.py.
pytest_plugins = ["tests.kafka_harness", "tests.iceberg_rest_harness"]


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the whole test run, UI off.

    It loads Spark's Kafka connector (the data source is compared with Spark's own Kafka source), Delta
    Lake and Iceberg with the SQLite JDBC driver (the export job writes Delta and Iceberg tables); Spark's
    Ivy resolves them from Maven Central when the session starts, cached in ~/.ivy2 (spark_udfs.packages).
    """
    from pyspark.sql import SparkSession

    from spark_udfs import packages

    # Executors run this interpreter (the virtualenv's), as the jobs' own session builder arranges.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    builder = (
        SparkSession.builder.master("local[2]")
        .appName("kafka-log-jobs-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "2g")
        .config("spark.python.worker.reuse", "true")
        # Delta reads its log with 50 tasks by default; the tests' tables are small.
        .config("spark.databricks.delta.snapshotPartitions", "2")
    )
    wanted = [packages.kafka_connector_package(), packages.delta_package(), *packages.iceberg_packages()]
    conf = {**packages.packages_conf(wanted), **packages.extensions_conf(delta=True, iceberg=True)}
    for key, value in conf.items():
        builder = builder.config(key, value)
    # `make test` runs two pytest processes: one resolves the packages into ~/.ivy2 at a time (on a fresh
    # machine both would download and copy the same jars at once).
    with open(Path.home() / ".ivy2" / "kafka-log-jobs-session.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        session = builder.getOrCreate()
    yield session
    session.stop()
