"""The compact and retain jobs end to end on real directories and the shared local Spark session:
options, result rows, JSON output, failures reported per partition, refusals."""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import sys
import textwrap

import pytest
from click.testing import CliRunner

from jobs import compact, retain
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.log.partition_log import LogDirState, PartitionLog
from kafka_log_core.rules import cleaner
from kafka_log_core.settings.config import load_config
from kafka_log_core.work.tasks import JobOptions
from tests.clirun import invoke
from tests.logbuild import TS, batch, make_log, read_records

pytestmark = pytest.mark.spark
NOW = TS + 3_600_000


def _compacted_log(log_dir, partitions=2, clean_shutdown=False):
    for p in range(partitions):
        make_log(
            log_dir,
            "orders",
            p,
            {
                0: [batch(0, [("a", "1"), ("b", "1")]), batch(2, [("a", "2"), (None, "x")])],
                4: [batch(4, [("b", None), ("c", "1")])],
                6: [batch(6, [("a", "3")])],
            },
            clean_shutdown=clean_shutdown,
        )


def _json_args(log_dir):
    """compact over every partition of ``log_dir`` as compacted topics, the result as JSON on stdout."""
    return [
        "--log-dir",
        str(log_dir),
        "--set",
        "cleanup.policy=compact",
        "--now-ms",
        str(NOW),
        "--output",
        "json",
    ]


def test_compact_job_prints_only_a_json_array_and_cleans_every_partition(spark, tmp_path):
    _compacted_log(tmp_path)
    result = invoke(
        compact.command,
        *_json_args(tmp_path),
    )
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["topic"], r["partition"], r["status"]) for r in rows] == [
        ("orders", 0, "cleaned"),
        ("orders", 1, "cleaned"),
    ]
    assert set(rows[0]) == set(compact.COLUMNS)
    for p in range(2):
        assert read_records(tmp_path / f"orders-{p}") == [
            (2, b"a", b"2"),
            (4, b"b", None),
            (5, b"c", b"1"),
            (6, b"a", b"3"),
        ]
    ckpt = (tmp_path / "cleaner-offset-checkpoint").read_text().split("\n")
    assert ckpt[:4] == ["0", "2", "orders 0 6", "orders 1 6"]


def test_dirty_ratio_in_the_result_is_the_cleaners_own(spark, tmp_path):
    _compacted_log(tmp_path, partitions=1)
    configs = load_config(None, [], [], ["cleanup.policy=compact"])
    tp = TopicPartition("orders", 0)
    log = PartitionLog.open(tmp_path, tp, LogDirState.read(tmp_path).for_partition(tp))
    plan = cleaner.plan_cleaning(log, configs.for_topic("orders"), configs.broker, NOW)
    # by hand: segments 0 (2 batches) and 4 are cleanable, nothing clean yet -> ratio 1
    assert plan.dirty_ratio == 1.0
    rows = compact.run(spark, [str(tmp_path)], None, configs, JobOptions(now_ms=NOW, dry_run=True))
    assert rows[0]["dirty_ratio"] == plan.dirty_ratio
    assert rows[0]["status"] == "would clean"
    assert read_records(tmp_path / "orders-0")[0] == (0, b"a", b"1")  # dry run changed nothing


def test_a_corrupt_partition_fails_alone_and_the_exit_status_says_so(spark, tmp_path):
    _compacted_log(tmp_path, clean_shutdown=True)
    seg = tmp_path / "orders-1" / "00000000000000000000.log"
    data = bytearray(seg.read_bytes())
    data[40] ^= 0xFF
    seg.write_bytes(bytes(data))
    before = seg.read_bytes()
    result = invoke(
        compact.command,
        *_json_args(tmp_path),
    )
    assert result.exit_code == 1
    rows = {r["partition"]: r for r in json.loads(result.stdout)}
    assert rows[0]["status"] == "cleaned"
    assert rows[1]["status"] == "failed"
    assert "orders-1/00000000000000000000.log at position 0: CRC32C mismatch" in rows[1]["reason"]
    assert seg.read_bytes() == before


def _tree(log_dir) -> dict[str, bytes]:
    return {str(p.relative_to(log_dir)): p.read_bytes() for p in sorted(log_dir.rglob("*")) if p.is_file()}


def test_bit_rot_in_a_crashed_copy_fails_the_partition_until_recover_truncating_is_given(spark, tmp_path):
    """Issue 24: a copy of a live broker's dir (no .kafka_cleanshutdown, no recovery points) with one
    flipped bit in a sealed middle segment. The broker's loader would truncate there and delete the valid
    last segment; by default the partition fails untouched with one line and the other goes on."""
    _compacted_log(tmp_path)
    seg = tmp_path / "orders-1" / "00000000000000000004.log"
    data = bytearray(seg.read_bytes())
    data[-5] ^= 0x01  # inside the records of segment 4's only batch
    seg.write_bytes(bytes(data))
    last = (tmp_path / "orders-1" / "00000000000000000006.log").stat().st_size
    before = _tree(tmp_path / "orders-1")
    result = invoke(compact.command, *_json_args(tmp_path))
    assert result.exit_code == 1, result.output
    rows = {r["partition"]: r for r in json.loads(result.stdout)}
    assert rows[0]["status"] == "cleaned"
    assert rows[1]["status"] == "failed" and "\n" not in rows[1]["reason"]
    assert rows[1]["reason"].startswith(f"{seg} at position 0: CRC32C mismatch")
    assert f"would delete 1 valid record in 1 batch ({last} bytes)" in rows[1]["reason"]
    assert "--recover-truncating applies the broker's rule" in rows[1]["reason"]
    assert _tree(tmp_path / "orders-1") == before
    assert "Traceback" not in result.stderr and "recovery truncated" not in result.stderr

    table = invoke(compact.command, *_json_args(tmp_path)[:-2], "--output", "table", "--recover-truncating")
    assert table.exit_code == 0, table.output
    closing = table.stdout.strip().splitlines()[-1]
    assert closing.startswith("2 partitions: ") and closing.endswith(
        f"recovery truncated 3 records ({len(data) + last} bytes) in 1 partition"
    )
    assert not (tmp_path / "orders-1" / "00000000000000000006.log").exists()


def test_recover_truncating_and_no_recover_exclude_each_other(spark, tmp_path):
    _compacted_log(tmp_path, partitions=1)
    result = CliRunner().invoke(
        compact.command, [*_json_args(tmp_path), "--no-recover", "--recover-truncating"]
    )
    assert result.exit_code == 2
    assert "--recover-truncating and --no-recover exclude each other" in result.output


def test_unknown_config_name_is_a_usage_error_before_any_work(spark, tmp_path):
    _compacted_log(tmp_path, partitions=1)
    result = CliRunner().invoke(
        compact.command, ["--log-dir", str(tmp_path), "--set", "log.cleaner.min.cleanable.ratoi=0.1"]
    )
    assert result.exit_code == 2
    assert "log.cleaner.min.cleanable.ratoi" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "cleaner-offset-checkpoint").exists()


def test_a_log_dir_locked_by_a_running_broker_is_refused(spark, tmp_path):
    _compacted_log(tmp_path, partitions=1)
    lock = tmp_path / ".lock"
    lock.touch()
    # A stand-in for the broker: another process holding an exclusive lock over the whole file, as Java's
    # FileChannel.tryLock does.
    holder = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import fcntl, os, sys, time
            fd = os.open({str(lock)!r}, os.O_RDWR)
            fcntl.lockf(fd, fcntl.LOCK_EX)
            print("locked", flush=True)
            time.sleep(60)
        """)],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    try:
        assert holder.stdout.readline().strip() == b"locked"
        result = invoke(
            compact.command,
            *_json_args(tmp_path),
        )
        assert result.exit_code == 1
        (row,) = json.loads(result.stdout)
        assert row["status"] == "failed" and "running Kafka broker" in row["reason"]
    finally:
        holder.kill()
        holder.wait()
    assert read_records(tmp_path / "orders-0")[0] == (0, b"a", b"1")
    assert fcntl is not None and os.path.exists(lock)


def test_retain_job_deletes_by_time_and_moves_the_log_start_offset(spark, tmp_path):
    day = 86_400_000
    make_log(
        tmp_path,
        "clicks",
        0,
        {0: [batch(0, [("k", "old")], ts=NOW - 10 * day)], 1: [batch(1, [("k", "new")], ts=NOW - 1000)]},
    )
    args = ["--log-dir", str(tmp_path), "--now-ms", str(NOW), "--output", "json"]
    refused = invoke(retain.command, *args)  # no metadata log, no topic file: the settings are unknown
    assert refused.exit_code == 1
    assert json.loads(refused.stdout)[0]["status"] == "failed"
    assert len(read_records(tmp_path / "clicks-0")) == 2
    result = invoke(retain.command, *args, "--assume-broker-defaults")  # Kafka's 7 days
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert (row["status"], row["segments_deleted"], row["log_start_offset_after"]) == ("deleted", 1, 1)
    assert read_records(tmp_path / "clicks-0") == [(1, b"k", b"new")]
    assert not list((tmp_path / "clicks-0").glob("*.deleted"))


def test_retain_guard_refuses_short_retention_without_force(spark, tmp_path):
    make_log(
        tmp_path, "clicks", 0, {0: [batch(0, [("k", "v")], ts=NOW - 7200_000)], 1: [batch(1, [("k", "w")])]}
    )
    args = [
        "--log-dir",
        str(tmp_path),
        "--now-ms",
        str(NOW),
        "--output",
        "json",
        "--set",
        "retention.ms=60000",
        "--assume-broker-defaults",
    ]
    result = invoke(retain.command, *args)
    assert result.exit_code == 1
    (row,) = json.loads(result.stdout)
    assert row["status"] == "failed" and "--force" in row["reason"]
    assert len(read_records(tmp_path / "clicks-0")) == 2
    result = invoke(retain.command, *args, "--force")
    assert json.loads(result.stdout)[0]["status"] == "deleted"


def test_log_start_offset_option_is_offline_delete_records(spark, tmp_path):
    make_log(
        tmp_path,
        "t",
        0,
        {0: [batch(0, [("a", "1"), ("b", "2")])], 2: [batch(2, [("c", "3")])], 3: [batch(3, [("d", "4")])]},
    )
    result = invoke(
        retain.command,
        *[
            "--log-dir",
            str(tmp_path),
            "--now-ms",
            str(NOW),
            "--output",
            "json",
            "--log-start-offset",
            "t:0=2",
            "--set",
            "retention.ms=-1",
            "--assume-broker-defaults",
        ],
    )
    (row,) = json.loads(result.stdout)
    assert (row["segments_deleted"], row["log_start_offset_after"]) == (1, 2), row
    assert read_records(tmp_path / "t-0") == [(2, b"c", b"3"), (3, b"d", b"4")]


def test_report_path_writes_parquet_with_the_result_schema(spark, tmp_path):
    import pyarrow.parquet as pq

    logs = tmp_path / "logs"
    _compacted_log(logs, partitions=1)
    out = tmp_path / "result.parquet"
    result = invoke(compact.command, *_json_args(logs), "--report-path", str(out))
    assert result.exit_code == 0, result.output
    table = pq.read_table(out)
    assert table.column_names == compact.COLUMNS
    assert str(table.schema.field("first_dirty_offset").type) == "int64"
    assert table.to_pylist() == json.loads(result.stdout)


def test_spark_submit_and_the_cli_take_the_same_options_and_agree(spark, tmp_path):
    """`spark-submit jobs/compact.py …` and `kafka-log-jobs compact …` are the same job. The virtualenv's
    spark-submit, run as docs/cluster.md says when the virtualenv is not on PATH (without it the script finds
    neither Spark nor a Python with our modules), prints only the JSON rows on stdout (our stderr is merged
    into it) and, given the jobs' log4j2 file, only the JVM's own first line on stderr."""
    from pathlib import Path

    from jobs.cli import main

    _compacted_log(tmp_path)
    args = ["--log-dir", str(tmp_path), "--set", "cleanup.policy=compact", "--now-ms", str(NOW), "--dry-run"]
    via_cli = json.loads(invoke(main, "compact", *args, "--output", "json").stdout)
    venv, root = Path(sys.executable).parent, Path(compact.__file__).parent.parent
    bare = {"HOME": os.environ.get("HOME", "/root"), "PATH": "/usr/bin:/bin"}
    lost = subprocess.run([str(venv / "spark-submit"), "jobs/compact.py", *args], env=bare, cwd=root,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert lost.returncode != 0  # "Could not find valid SPARK_HOME": what users saw
    line = (f"PATH={venv}:$PATH spark-submit --master local[1] "
            "--driver-java-options -Dlog4j2.configurationFile=jobs/log4j2.properties "
            f"jobs/compact.py {' '.join(args)} --output json")  # fmt: skip
    done = subprocess.run(
        ["bash", "-c", line], env=bare, cwd=root, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, done.stderr[-2000:]
    via_submit = json.loads(done.stdout)
    strip = [{k: v for k, v in r.items() if k != "duration_ms"} for r in via_cli]
    assert [{k: v for k, v in r.items() if k != "duration_ms"} for r in via_submit] == strip
    assert done.stderr.splitlines() == ["WARNING: Using incubator modules: jdk.incubator.vector"]
    assert read_records(tmp_path / "orders-0")[0] == (0, b"a", b"1")  # dry runs changed nothing


def test_a_zookeeper_era_log_dir_takes_3x_settings_and_unknown_topics_are_refused(spark, tmp_path):
    """meta.properties version=0 (a ZooKeeper-mode 3.x broker): no metadata log, Kafka 3.9's rules, so a
    topic file's 16 KiB segment.bytes is legal; a topic without a file gets nothing deleted, one line."""
    from tests.metadata_build import write_meta_properties

    _compacted_log(tmp_path, partitions=1)
    make_log(
        tmp_path,
        "clicks",
        0,
        {0: [batch(0, [("k", "v")], ts=NOW - 30 * 86_400_000)], 1: [batch(1, [("k", "w")])]},
    )
    write_meta_properties(tmp_path, version=0)
    conf = tmp_path.parent / "conf"
    (conf / "topics").mkdir(parents=True)
    (conf / "topics" / "orders.properties").write_text("cleanup.policy=compact\nsegment.bytes=16384\n")
    args = ["--log-dir", str(tmp_path), "--conf-dir", str(conf), "--now-ms", str(NOW), "--output", "json"]
    compacted = invoke(compact.command, *args)
    rows = {r["topic"]: r for r in json.loads(compacted.stdout)}
    assert rows["orders"]["status"] == "cleaned"
    assert rows["orders"]["settings"].startswith(
        f"cleanup.policy=compact ({conf}/topics/orders.properties:1)"
    )
    assert "Kafka 3.9 rules (a ZooKeeper-era log dir" in compacted.stderr
    retained = invoke(retain.command, *args)
    assert retained.exit_code == 1
    (clicks,) = [r for r in json.loads(retained.stdout) if r["topic"] == "clicks"]
    assert clicks["status"] == "failed" and clicks["reason"].startswith(
        "no configuration known for topic clicks"
    )
    assert retained.stderr.count("no configuration known for topic clicks") == 1
    assert len(read_records(tmp_path / "clicks-0")) == 2
