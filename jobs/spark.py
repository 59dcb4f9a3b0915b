"""The job's Spark (a SparkSession, or only Spark's core): which Python the executors run, and what Spark
itself prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")  # Spark's log: errors only (see the file)


@dataclass(frozen=True)
class SparkCore:
    """Spark without a SQL session: all that compact, retain and report use (RDD jobs, broadcasts and
    accumulators). Its one attribute has SparkSession's name, so the jobs take either; a SparkSession's
    own start-up (the SQL engine and its catalog) costs seconds more."""

    sparkContext: Any


def start_spark(master: str | None, app: str, *, verbose: bool = False) -> Callable[[], SparkCore]:
    """:func:`spark_session` without SQL, started in the background while the command lists partitions
    and reads its settings (the JVM takes seconds to start); the function returned waits for it. A usage
    error found meanwhile still ends the command at once: the JVM exits when this process does (Spark's
    gateway ends when its standard input closes)."""
    result: list = []

    def start() -> None:
        try:
            result.append(spark_session(master, app, verbose=verbose, sql=False))
        except BaseException as err:  # raised again by the caller, in its own thread
            result.append(err)

    thread = threading.Thread(target=start, name="spark start-up", daemon=True)
    thread.start()

    def wait() -> SparkCore:
        thread.join()
        if isinstance(result[0], BaseException):
            raise result[0]
        return result[0]

    return wait


def spark_session(
    master: str | None, app: str, conf: dict[str, str] | None = None, *, verbose: bool = False, sql: bool = True
):  # fmt: skip
    """The job's SparkSession (``conf``: settings only a new session can take, e.g. packages to load), or
    with ``sql=False`` only Spark's core (:class:`SparkCore`). Which Python the executors run:

    * under spark-submit, whatever the submitter configured (``spark.pyspark.python``, which Spark passes
      on as ``PYSPARK_PYTHON``, the ``PYSPARK_PYTHON`` variable, an ``--archives`` environment), else
      Spark's default ``python3`` on each executor's ``PATH``: the driver's own interpreter is never
      assumed to exist on another machine;
    * embedded (this process starts Spark: ``kafka-log-jobs …``, a test, a notebook) with a local
      master, this very interpreter, unless ``PYSPARK_PYTHON`` says otherwise: the executors are
      processes of this machine.

    What Spark itself prints: errors only, unless ``verbose`` (then Spark's defaults, warnings included).
    Embedded, the JVM starts with :data:`LOG4J_CONFIG` and its standard error passes through
    :func:`_forward_jvm_stderr`, which drops the JVM's own start-up warning; under spark-submit the JVM
    was started before us (docs/cluster.md says how to give it the same file), and the level is set once we run.
    Spark's console progress bar is off: the job shows its own (:mod:`jobs.progress`).
    """
    submitted = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit (or the pyspark shell) started us
    embedded_local = not submitted and (master is None or is_local_master(master))
    if embedded_local:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # embedded: stay on loopback
    from pyspark import SparkConf, SparkContext
    from pyspark.sql import SparkSession

    options = {"spark.app.name": app, "spark.ui.enabled": "false", "spark.ui.showConsoleProgress": "false"}
    if master or not submitted:
        options["spark.master"] = master or "local[*]"
    options.update(conf or {})
    # SparkContext._gateway: no JVM yet in this process (a test session or a notebook may have one).
    if not submitted and not verbose and SparkContext._gateway is None:
        from pyspark.java_gateway import launch_gateway

        spark_conf = SparkConf().setAll(list(options.items()))
        spark_conf.set("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile={LOG4J_CONFIG.as_uri()}")
        gateway = launch_gateway(spark_conf, popen_kwargs={"stderr": subprocess.PIPE})
        threading.Thread(
            target=_forward_jvm_stderr, args=(gateway.proc.stderr,), name="spark stderr", daemon=True
        ).start()
        sc = SparkContext(conf=spark_conf, gateway=gateway)
        session = SparkSession.builder.getOrCreate() if sql else SparkCore(sc)
    elif sql:
        builder = SparkSession.builder
        for key, value in options.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
    else:
        session = SparkCore(SparkContext.getOrCreate(SparkConf().setAll(list(options.items()))))
    session.sparkContext.setLogLevel("WARN" if verbose else "ERROR")
    if not is_local_master(session.sparkContext.master or "") and "PYSPARK_PYTHON" not in os.environ:
        click.echo(
            "note: nothing sets the executors' Python (spark.pyspark.python): they run python3 from their "
            "PATH. Ship the environment `make dist` builds: --archives "
            "dist/kafka-log-jobs-env.tar.gz#environment --conf spark.pyspark.python=./environment/bin/python",
            err=True,
        )
    return session


_JVM_START_UP = re.compile(rb"WARNING: Using incubator modules: ")  # Spark's --add-modules, said by every JVM


def _forward_jvm_stderr(pipe) -> None:
    """Copy the embedded JVM's standard error (Spark's log, the Python workers' errors) to ours, without
    the JVM's start-up warning about the incubator module Spark loads."""
    for line in iter(pipe.readline, b""):
        if not _JVM_START_UP.match(line):
            os.write(2, line)


def is_local_master(master: str) -> bool:
    """``local``, ``local[N]``, ``local[*]``, ``local[N,F]``: executors in the driver's own JVM, on this
    machine (``local-cluster[…]`` is a cluster: separate executor processes, as on real nodes)."""
    return master == "local" or master.startswith("local[")
