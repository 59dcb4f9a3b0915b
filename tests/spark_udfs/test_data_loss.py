"""Issue 24 point 7: the ``kafka-log`` source and ``export`` never skip or duplicate records silently.

A partition that cannot be read whole -- a torn batch at the end of a non-active segment, a batch length
past the end of the file with batches after it, offsets going backwards -- fails the read with one line
naming the file and the position (``failOnDataLoss=true``, the default, as Spark's Kafka source), or is
read around with a warning (``false``: exactly the records that can be read); ``export`` fails that
partition's row and exports the others, with our one line per failure on stderr and no traceback.

The log dirs are cleanly shut down, so what is read is the files as they are (no recovery). Batches come
from kafka-python's builder; the expected offsets are the ones each test wrote.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from jobs.cli import main
from tests.clirun import invoke
from tests.logbuild import mark_clean_shutdown
from tests.spark_udfs.test_data_source import SAMPLE, _read, _write, kp_batch

pytestmark = pytest.mark.spark
THREE = SAMPLE[:3]


def _offsets(df) -> list[int]:
    return sorted(r.offset for r in df.select("offset").collect())


def _torn_non_active(log_dir: Path, partition: int = 0) -> tuple[Path, int]:
    """Segment 0 (offsets 0-5), its second batch cut short; segment 6 whole. Returns (file, position)."""
    _write(log_dir, "t", partition, {0: [kp_batch(0, THREE), kp_batch(3, THREE)], 6: [kp_batch(6, THREE)]})
    path = log_dir / f"t-{partition}" / f"{0:020d}.log"
    data = path.read_bytes()
    first = len(kp_batch(0, THREE)[0])
    path.write_bytes(data[: first + 40])
    return path, first


def _length_past_the_end(log_dir: Path, partition: int = 0) -> tuple[Path, int]:
    """One segment of three batches; the second one's length points past the end of the file."""
    _write(log_dir, "t", partition, {0: [kp_batch(0, THREE), kp_batch(3, THREE), kp_batch(6, THREE)]})
    path = log_dir / f"t-{partition}" / f"{0:020d}.log"
    data = bytearray(path.read_bytes())
    first = len(kp_batch(0, THREE)[0])
    struct.pack_into(">i", data, first + 8, 1_000_000)
    path.write_bytes(bytes(data))
    return path, first


def _backwards(log_dir: Path, partition: int = 0) -> tuple[Path, int]:
    """Offsets 0-2, 10-12, then a batch at 5-7, then 13-15."""
    batches = [kp_batch(0, THREE), kp_batch(10, THREE), kp_batch(5, THREE), kp_batch(13, THREE)]
    _write(log_dir, "t", partition, {0: batches})
    return log_dir / f"t-{partition}" / f"{0:020d}.log", 2 * len(batches[0][0])


CASES = {
    "torn non-active segment": (
        _torn_non_active,
        "declares",
        [0, 1, 2, 6, 7, 8],  # failOnDataLoss=false: the torn batch's records are not there
    ),
    "length past the end": (
        _length_past_the_end,
        "bytes after the last whole batch of the active segment do not form a batch",
        [0, 1, 2],  # the log ends there, as the broker's log end offset says
    ),
    "offsets going backwards": (
        _backwards,
        "offsets go backwards: the batch at offset 5 follows one that ended at offset 12",
        [0, 1, 2, 10, 11, 12, 13, 14, 15],  # the batch going backwards is skipped
    ),
}


@pytest.fixture(scope="module")
def kafka_log(spark):
    import spark_udfs

    spark_udfs.register(spark)
    return spark


@pytest.mark.parametrize("case", list(CASES))
def test_the_source_fails_the_read_unless_fail_on_data_loss_is_false(kafka_log, tmp_path, case):
    make, problem, readable = CASES[case]
    path, position = make(tmp_path)
    mark_clean_shutdown(tmp_path)
    with pytest.raises(Exception, match="cannot be read whole") as failure:
        _read(kafka_log, tmp_path).collect()
    assert f"{path} at position {position}: " in str(failure.value) and problem in str(failure.value)
    assert _offsets(_read(kafka_log, tmp_path, failOnDataLoss="false")) == readable


def test_the_latest_view_checks_the_whole_partition_too(kafka_log, tmp_path):
    path, position = _backwards(tmp_path)
    mark_clean_shutdown(tmp_path)
    with pytest.raises(Exception, match=f"at position {position}: offsets go backwards"):
        _read(kafka_log, tmp_path, level="latest").collect()


def test_export_fails_each_partition_that_cannot_be_read_whole_and_exports_the_others(spark, tmp_path):
    log_dir = tmp_path / "logs"
    damaged = {p: make(log_dir, p) for p, (make, _, _) in enumerate(CASES.values())}
    _write(log_dir, "t", 3, {0: [kp_batch(0, THREE), kp_batch(3, THREE)]})
    mark_clean_shutdown(log_dir)
    out = tmp_path / "table"
    result = invoke(
        main, "export", "--log-dir", log_dir, "--view", "records", "--out", out, "--output", "json"
    )
    assert result.exit_code == 1, result.output
    rows = {r["partition"]: r for r in json.loads(result.stdout)}
    for p, (_, problem, _) in enumerate(CASES.values()):
        path, position = damaged[p]
        assert rows[p]["status"] == "failed" and rows[p]["rows"] is None
        assert (
            rows[p]["reason"].startswith(f"{path} at position {position}: ") and problem in rows[p]["reason"]
        )
    assert (rows[3]["status"], rows[3]["rows"], rows[3]["first_offset"], rows[3]["last_offset"]) == (
        "exported", 6, 0, 5,
    )  # fmt: skip
    assert "Traceback" not in result.stderr and "Exception" not in result.stderr
    said = [line for line in result.stderr.splitlines() if "cannot be read whole" in line]
    assert len(said) == 3  # our one line per failed partition
    table = spark.read.parquet(str(out))
    assert sorted(r.offset for r in table.collect()) == list(range(6))
