"""The export job: topics as Parquet or Delta tables, partitioned by topic, read back through Spark SQL
and compared with what the tests wrote (the real-broker comparison is in test_spark_kafka_parity.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from chispa import assert_df_equality
from click.testing import CliRunner

from jobs import export
from jobs.cli import main
from tests.clirun import invoke
from tests.spark_udfs.test_data_source import (
    ORDER,
    _data,
    _frame,
    _payments_dir,
    _rebuilt_state,
    _transactions_dir,
)

pytestmark = pytest.mark.spark


def _dirs(tmp_path):
    """Two log dirs (a JBOD broker): payments and refunds in one, the transactions topic in the other."""
    written = _payments_dir(tmp_path / "d1") + _transactions_dir(tmp_path / "d2")
    return [str(tmp_path / "d1"), str(tmp_path / "d2")], written


def test_latest_view_as_parquet_partitioned_by_topic(spark, tmp_path):
    log_dirs, written = _dirs(tmp_path)
    out = tmp_path / "table"
    result = invoke(
        main, "export", *[a for d in log_dirs for a in ("--log-dir", d)], "--out", out, "--output", "json"
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    state = _rebuilt_state(written, committed=True, ends={"t": 11})  # 11: t-0's open transaction
    assert {(r["topic"], r["partition"]) for r in rows} == {
        ("payments", 0),
        ("payments", 1),
        ("refunds", 0),
        ("t", 0),
    }
    assert {r["status"] for r in rows} == {"exported"}
    assert sum(r["rows"] for r in rows) == len(state)
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == [
        "topic=payments",
        "topic=refunds",
        "topic=t",
    ]
    table = spark.sql(
        f"SELECT key, value, topic, partition, offset, timestamp, timestampType FROM parquet.`{out}`"
    )
    assert_df_equality(table.orderBy(ORDER), _frame(spark, list(state.values())).orderBy(ORDER))
    # Run again: the table is replaced, not appended to (a rerun after a crash ends the same way).
    assert invoke(main, "export", "--log-dir", log_dirs[0], "--out", out, "--output", "json").exit_code == 0
    assert spark.sql(f"SELECT count(*) AS n FROM parquet.`{out}`").first().n == sum(
        1 for k in state if k[0] != "t"
    )


def test_records_as_a_delta_table(spark, tmp_path):
    log_dirs, written = _dirs(tmp_path)
    out = tmp_path / "delta"
    settings = export.ExportSettings(str(out), "records", "delta", "read_uncommitted", include_headers=True)
    rows = export.run(spark, log_dirs, "t|refunds", settings)
    assert [(r["topic"], r["status"], r["first_offset"], r["last_offset"]) for r in rows] == [
        ("refunds", "exported", 0, 59), ("t", "exported", 0, 12),
    ]  # fmt: skip
    expected = [r for r in _data(written) if r.topic in ("t", "refunds")]
    table = spark.sql(f"SELECT * FROM delta.`{out}`")
    assert_df_equality(
        table.select(*_frame(spark, expected, headers=True).columns).orderBy(ORDER),
        _frame(spark, expected, headers=True).orderBy(ORDER),
    )
    assert (out / "_delta_log").is_dir()
    assert spark.sql(f"DESCRIBE DETAIL delta.`{out}`").first().partitionColumns == ["topic"]


def test_a_partition_that_cannot_be_read_is_reported_and_the_others_are_exported(spark, tmp_path):
    log_dirs, written = _dirs(tmp_path)
    spoiled = Path(log_dirs[0]) / "refunds-0" / f"{30:020d}.log"
    data = bytearray(spoiled.read_bytes())
    data[100] ^= 0xFF  # inside the first batch's records: its CRC no longer matches
    spoiled.write_bytes(bytes(data))
    out = tmp_path / "table"
    result = invoke(
        main, "export", *[a for d in log_dirs for a in ("--log-dir", d)], "--out", out, "--output", "json"
    )
    assert result.exit_code == 1, result.output
    rows = {(r["topic"], r["partition"]): r for r in json.loads(result.stdout)}
    failed = rows[("refunds", 0)]
    assert failed["status"] == "failed" and failed["rows"] is None
    assert f"{spoiled} at position 0: CRC32C mismatch in batch at offset 30" in failed["reason"]
    assert {r["status"] for k, r in rows.items() if k != ("refunds", 0)} == {"exported"}
    topics = {r.topic for r in spark.sql(f"SELECT DISTINCT topic FROM parquet.`{out}`").collect()}
    assert topics == {"payments", "t"}


def test_bad_options_are_refused_before_anything_runs(spark, tmp_path):
    log_dirs, _ = _dirs(tmp_path)
    for args, message in (
        (["--option", "startingOffsets=latest"], "a batch read cannot start at latest"),
        (["--option", "subscribe=t"], "only one of the options assign, subscribe, subscribePattern"),
        (["--option", "nonsense"], "expected KEY=VALUE"),
    ):
        extra = ["--topic", "t"] if "subscribe=t" in args else []
        result = CliRunner().invoke(main, ["export", "--log-dir", log_dirs[0], "--out", str(tmp_path / "x"),
                                           *extra, *args])  # fmt: skip
        assert result.exit_code == 2 and message in result.output, result.output
        assert "Traceback" not in result.output
    assert not (tmp_path / "x").exists()


def test_spark_submit_and_the_cli_agree(spark, tmp_path):
    """`spark-submit jobs/export.py …` and `kafka-log-jobs export …` are the same job. (With
    ``--format delta``, spark-submit also takes ``--packages`` and the two ``--conf`` the job names.)"""
    log_dirs, _ = _dirs(tmp_path)
    args = ["--log-dir", log_dirs[1], "--view", "records", "--output", "json"]
    bin_dir = Path(sys.executable).parent
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", PYSPARK_PYTHON=sys.executable)
    # spark-submit's JVM starts while the CLI runs in this process (each only reads the log dir).
    with subprocess.Popen(
        [str(bin_dir / "spark-submit"), "--master", "local[1]", str(Path(export.__file__)), *args,
         "--out", str(tmp_path / "submit")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
    ) as submitting:  # fmt: skip
        try:
            via_cli = json.loads(invoke(main, "export", *args, "--out", str(tmp_path / "cli")).stdout)
            stdout, stderr = submitting.communicate(timeout=600)
        finally:
            submitting.kill()
    assert submitting.returncode == 0, stderr[-3000:]
    via_submit = json.loads(stdout)
    assert [{k: v for k, v in r.items() if k != "duration_ms"} for r in via_submit] == [
        {k: v for k, v in r.items() if k != "duration_ms"} for r in via_cli
    ]
    cli, submitted = (spark.read.parquet(str(tmp_path / side)) for side in ("cli", "submit"))
    assert_df_equality(submitted.orderBy(ORDER), cli.orderBy(ORDER))


def test_a_malformed_checkpoint_is_one_line_and_nothing_is_written(spark, tmp_path):
    log_dirs, _ = _dirs(tmp_path)
    (Path(log_dirs[0]) / "replication-offset-checkpoint").write_text("0\n2\npayments 0 7\n")
    result = CliRunner().invoke(main, ["export", "--log-dir", log_dirs[0], "--out", str(tmp_path / "x")])
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert "replication-offset-checkpoint" in result.output and len(result.output.strip().splitlines()) == 1
    assert not (tmp_path / "x").exists()
