"""The ``kafka-log`` source's ``maxDecompressedBatchBytes``, and ``--max-decompressed-batch-bytes`` in the
Spark jobs (``export``, ``report``): a batch whose records decompress to more than a lowered limit fails
the read of its partition (the source, as on other bad data), or its partition's row (the jobs), with one
line naming the file, the position and the option; with the limit raised to hold it (or the default) the
same data is read. The data is left as it was.

The large batch (one record: key "k", a 100,000-byte value of zeros) is a kafka-python record area
compressed by zstandard itself (tests/format/test_decompression_limits.py); expected rows are what the
tests wrote.
"""

from __future__ import annotations

import json

import pytest

from jobs.cli import main
from kafka_log_core.format.compression import ZSTD
from tests.clirun import invoke
from tests.format.test_decompression_limits import TS, _large_batch_log
from tests.logbuild import batch, make_log, mark_clean_shutdown, write_segment
from tests.spark_udfs.test_data_source import _read, kp_legacy

pytestmark = pytest.mark.spark
OPTION = "--max-decompressed-batch-bytes"
VALUE = bytes(100_000)  # the value _large_batch_log writes at offset 0


@pytest.fixture(scope="module")
def kafka_log(spark):
    import spark_udfs

    spark_udfs.register(spark)
    return spark


def _files(directory) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def _refusal(log, limit: int) -> str:
    return f"{log} at position 0: batch at offset 0: zstd data decompresses to more than {limit} bytes"


@pytest.mark.parametrize("level", ["records", "latest"])
def test_the_source_reads_a_batch_within_max_decompressed_batch_bytes_and_fails_past_it(
    kafka_log, tmp_path, level
):
    directory, area_bytes = _large_batch_log(tmp_path, ZSTD)
    log = directory / "00000000000000000000.log"
    before = _files(directory)
    with pytest.raises(Exception, match="kafka-log") as failure:
        _read(kafka_log, tmp_path, level=level, maxDecompressedBatchBytes=str(area_bytes - 1)).collect()
    said = str(failure.value)
    assert (
        f"[big-0 in {tmp_path}] {_refusal(log, area_bytes - 1)}" in said
        and "maxDecompressedBatchBytes" in said
    )
    assert _files(directory) == before
    expected = {
        "records": [(0, b"k", VALUE), (1, b"k", b"new"), (2, b"x", b"1")],
        "latest": [(1, b"k", b"new"), (2, b"x", b"1")],
    }[level]
    for limit in ({"maxDecompressedBatchBytes": str(area_bytes)}, {}):  # raised to hold it, and the default
        rows = _read(kafka_log, tmp_path, level=level, **limit).select("offset", "key", "value").collect()
        assert sorted((r.offset, bytes(r.key), bytes(r.value)) for r in rows) == expected


def test_a_legacy_wrapper_past_the_limit_is_an_invalid_batch_row_and_fails_a_records_read(
    kafka_log, tmp_path
):
    # A magic-1 gzip wrapper (kafka-python's) whose inner message of a 100,000-byte value takes more than
    # 50,000 bytes decompressed: the batches level reads its records for its base offset and count.
    wrapper, _ = kp_legacy(0, [(b"k", VALUE)], magic=1, codec=1)
    write_segment(tmp_path / "old-0", 0, [wrapper])
    mark_clean_shutdown(tmp_path)
    columns = ("base_offset", "records_count", "is_valid")
    limited = _read(kafka_log, tmp_path, level="batches", maxDecompressedBatchBytes="50000").select(*columns)
    assert [tuple(r) for r in limited.collect()] == [(None, None, False)]
    assert [tuple(r) for r in _read(kafka_log, tmp_path, level="batches").select(*columns).collect()] == [
        (0, 1, True)
    ]
    with pytest.raises(Exception, match="more than 50000 bytes"):
        _read(kafka_log, tmp_path, maxDecompressedBatchBytes="50000").collect()
    assert [bytes(r.value) for r in _read(kafka_log, tmp_path).collect()] == [VALUE]


def test_a_starting_timestamp_is_looked_up_within_the_limit(kafka_log, tmp_path):
    directory, area_bytes = _large_batch_log(tmp_path, ZSTD)
    log = directory / "00000000000000000000.log"
    with pytest.raises(Exception, match="kafka-log") as failure:
        _read(
            kafka_log, tmp_path, startingTimestamp=str(TS), maxDecompressedBatchBytes=str(area_bytes - 1)
        ).count()
    assert _refusal(log, area_bytes - 1) in str(failure.value)
    read = _read(kafka_log, tmp_path, startingTimestamp=str(TS), maxDecompressedBatchBytes=str(area_bytes))
    assert sorted(r.offset for r in read.select("offset").collect()) == [0, 1, 2]


def test_a_bad_limit_fails_the_load_with_one_line(kafka_log, tmp_path):
    _large_batch_log(tmp_path, ZSTD)
    for value, why in (("0", "must be positive"), ("lots", "expected a whole number")):
        with pytest.raises(Exception, match=f"kafka-log: option maxdecompressedbatchbytes='{value}': {why}"):
            _read(kafka_log, tmp_path, maxDecompressedBatchBytes=value)


def test_export_fails_the_partition_past_the_limit_exports_the_others_and_all_of_it_when_raised(
    spark, tmp_path
):
    logs = tmp_path / "logs"
    directory, area_bytes = _large_batch_log(logs, ZSTD)
    make_log(logs, "small", 0, {0: [batch(0, [("a", "1"), ("b", "2")])]}, clean_shutdown=True)
    log = directory / "00000000000000000000.log"
    before = _files(directory)
    out = tmp_path / "table"
    common = ("export", "--log-dir", logs, "--view", "records", "--out", out, "--output", "json")
    refused = invoke(main, *common, OPTION, area_bytes - 1)
    assert refused.exit_code == 1, refused.output
    rows = {r["topic"]: r for r in json.loads(refused.stdout)}
    assert rows["big"]["status"] == "failed" and rows["big"]["rows"] is None
    assert rows["big"]["reason"].startswith(_refusal(log, area_bytes - 1)) and OPTION in rows["big"]["reason"]
    assert (rows["small"]["status"], rows["small"]["rows"]) == ("exported", 2)
    assert "Traceback" not in refused.stderr
    assert [line for line in refused.stderr.splitlines() if "decompresses to more than" in line] == [
        f"{logs}: big-0: {rows['big']['reason']}"
    ]
    assert _files(directory) == before
    assert sorted(r.topic for r in spark.read.parquet(str(out)).collect()) == ["small", "small"]
    exported = invoke(main, *common, OPTION, area_bytes)
    assert exported.exit_code == 0, exported.output
    rows = {r["topic"]: r for r in json.loads(exported.stdout)}
    assert (rows["big"]["status"], rows["big"]["rows"], rows["big"]["first_offset"]) == ("exported", 3, 0)
    table = {(r.topic, r.offset): bytes(r.value) for r in spark.read.parquet(str(out)).collect()}
    assert table[("big", 0)] == VALUE and len(table) == 5


def test_the_report_job_fails_the_partition_past_the_limit_and_counts_it_within(spark, tmp_path):
    directory, area_bytes = _large_batch_log(tmp_path, ZSTD)
    log = directory / "00000000000000000000.log"
    common = ("report", "--log-dir", tmp_path, "--now-ms", TS + 60_000, "--format", "json",
              "--set", "cleanup.policy=compact", "--set", "min.cleanable.dirty.ratio=0.01")  # fmt: skip
    refused = invoke(main, *common, OPTION, area_bytes - 1)
    assert refused.exit_code == 1, refused.output
    (row,) = json.loads(refused.stdout)
    assert row["status"] == "failed" and row["reason"].startswith(_refusal(log, area_bytes - 1))
    (row,) = json.loads(invoke(main, *common, OPTION, area_bytes).stdout)
    assert (row["status"], row["duplicate_share"]) == ("ok", 0.5)


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "clean"])
def test_the_compact_job_takes_the_limit_from_its_command_line_in_the_plan_and_the_clean(
    spark, tmp_path, dry_run
):
    directory, area_bytes = _large_batch_log(tmp_path, ZSTD)
    log = directory / "00000000000000000000.log"
    common = ("compact", "--log-dir", tmp_path, "--now-ms", TS + 60_000, "--output", "json",
              "--set", "cleanup.policy=compact", "--set", "min.cleanable.dirty.ratio=0.01",
              *(["--dry-run"] if dry_run else []))  # fmt: skip
    before = _files(directory)
    refused = invoke(main, *common, OPTION, area_bytes - 1)
    assert refused.exit_code == 1, refused.output
    (row,) = json.loads(refused.stdout)
    assert row["status"] == "failed" and row["reason"].startswith(_refusal(log, area_bytes - 1)), row
    assert _files(directory) == before
    done = invoke(main, *common, OPTION, area_bytes)
    assert done.exit_code == 0, done.output
    (row,) = json.loads(done.stdout)
    assert row["status"] == ("would clean" if dry_run else "cleaned"), row
