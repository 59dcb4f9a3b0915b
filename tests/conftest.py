"""Shared fixtures: one local Spark session for the whole run, and the real-broker harness."""

from __future__ import annotations

import os
import sys

import pytest

# The real Kafka broker fixtures live in tests/kafka_harness.py (rootdir is on sys.path for conftest).
pytest_plugins = ["kafka_harness"]


@pytest.fixture(scope="session")
def spark():
    """One local[2] SparkSession for the whole test run, UI off."""
    from pyspark.sql import SparkSession

    # Executors run this interpreter (the virtualenv's), as the jobs' own session builder arranges.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    session = (
        SparkSession.builder.master("local[2]")
        .appName("kafka-log-jobs-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "4")
        .config("spark.driver.memory", "2g")
        .config("spark.python.worker.reuse", "true")
        .getOrCreate()
    )
    yield session
    session.stop()
