"""Shared fixtures: one local Spark session for the whole run, and the real-broker harness."""

from __future__ import annotations

import fcntl
import os
import sys
import tempfile
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


# --------------------------------------------------------------------------------------------------
# `make test`: two pytest-xdist workers, each test file in one of them (--dist loadfile)
# --------------------------------------------------------------------------------------------------

#: Files with a test of these kinds start a JVM (a broker, Spark, a cluster) or run long.
_LONG_KINDS = ("broker", "spark", "cluster", "slow")


def pytest_configure(config) -> None:
    """xdist hands files out by their number of tests, most first: the files with a few long tests (the
    broker's, the cluster's) came last, where one of them can keep a worker busy while the other is done.
    The order of the items decides instead (:func:`pytest_collection_modifyitems` below)."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


@pytest.hookimpl(trylast=True)  # after the harness has marked the broker tests
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files that start a JVM or run long first, the others after them, each group in the order
    collected: the short files are what the two workers share out at the end."""
    long_files = {item.path for item in items if any(item.get_closest_marker(k) for k in _LONG_KINDS)}
    items.sort(key=lambda item: item.path not in long_files)


def pytest_sessionstart(session) -> None:
    """In a pytest-xdist worker: numba's cache of the kernels filled once, not by both workers at once.

    On a fresh checkout the first clean in each worker compiled the same kernels side by side (minutes of
    CPU each). One worker compiles them here (the jobs run once on the sample log dir, as `make dist` does
    for the archive); the other waits for it and loads them from the cache. Two files that each began
    with a clean on a fresh clone, alone on two workers: 388 s -> 147 s (measured in quiet-wait)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None or session.config.option.collectonly:
        return
    from kafka_log_core import numba_cache

    lock_path = Path(numba_cache.PACKAGE) / "kernels" / "__pycache__" / "tests-warm-up.lock"
    lock_path.parent.mkdir(exist_ok=True)
    with open(lock_path, "w") as lock, tempfile.TemporaryDirectory(prefix="kernels-warm-up-") as work:
        fcntl.flock(lock, fcntl.LOCK_EX)
        from jobs.package import warm_up

        try:
            warm_up(work)
        except Exception as err:  # only a head start: the tests themselves report what fails here
            print(f"kernels' warm-up failed, the tests compile what they call: {err}", file=sys.stderr)
