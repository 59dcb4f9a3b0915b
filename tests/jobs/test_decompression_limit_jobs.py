"""``--max-decompressed-batch-bytes`` in every command that decompresses a batch: compact, report, export,
dump and offsets take it (retain decompresses no data batch and does not); bad values are usage errors;
``report``'s duplicate estimate and ``offsets``' timestamp lookups honour it. (compact and dump on the
same data: tests/format/test_decompression_limits.py; the kafka-log source, export and the report job on
Spark: tests/spark_udfs/test_decompression_limit_source.py.)

The large batch is one kafka-python record area compressed by zstandard itself and framed with
``struct``; the expected figures are what the test wrote.
"""

from __future__ import annotations

import pytest

from jobs.cli import main
from kafka_log_core.format.compression import ZSTD
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.log.partition_log import LogDirState
from kafka_log_core.settings.config import load_config
from kafka_log_core.work.report import report_partition
from kafka_log_core.work.tasks import JobOptions, PartitionTask
from tests.clirun import invoke
from tests.format.test_decompression_limits import TS, _large_batch_log

OPTION = "--max-decompressed-batch-bytes"
# The commands and the other arguments they need to get as far as reading their options.
TAKING = {
    "compact": ["--log-dir", "."],
    "report": ["--log-dir", "."],
    "export": ["--log-dir", ".", "--out", "table"],
    "offsets": ["--log-dir", "."],
    "dump": ["--files", "x.log"],
}


@pytest.mark.parametrize("command", [*TAKING, "retain"])
def test_each_command_that_decompresses_shows_the_option_and_its_default_in_help(command):
    shown = invoke(main, command, "--help")
    assert shown.exit_code == 0, shown.output
    text = " ".join(shown.output.split())
    if command == "retain":
        assert OPTION not in text  # it reads batch headers only
    else:
        assert f"{OPTION} BYTES" in text and f"[default: {64 * 1024 * 1024}; x>=1]" in text


@pytest.mark.parametrize("value", ["0", "-1", "ten", "1.5"])
@pytest.mark.parametrize("command", list(TAKING))
def test_a_bad_limit_is_a_usage_error_naming_the_option(tmp_path, command, value):
    result = invoke(main, command, *TAKING[command], OPTION, value)
    assert result.exit_code == 2, result.output
    assert f"Invalid value for '{OPTION}'" in result.stderr and "Traceback" not in result.stderr


def _task(log_dir) -> PartitionTask:
    return PartitionTask(
        str(log_dir), "big", 0, LogDirState.read(log_dir).for_partition(TopicPartition("big", 0))
    )


def test_the_report_estimates_duplicates_within_the_limit_and_fails_the_partition_past_it(tmp_path):
    directory, area_bytes = _large_batch_log(tmp_path, ZSTD)
    log = directory / "00000000000000000000.log"
    configs = load_config(None, [], [], ["cleanup.policy=compact", "min.cleanable.dirty.ratio=0.01"])
    before = {p.name: p.read_bytes() for p in directory.iterdir()}
    row = report_partition(
        _task(tmp_path), configs, JobOptions(now_ms=TS + 60_000, max_batch_bytes=area_bytes - 1)
    )
    assert row["status"] == "failed", row
    assert (
        row["reason"].startswith(
            f"{log} at position 0: batch at offset 0: zstd data decompresses to more than {area_bytes - 1} bytes"
        )
        and OPTION in row["reason"]
    ), row["reason"]
    assert {p.name: p.read_bytes() for p in directory.iterdir()} == before
    for opts in (JobOptions(now_ms=TS + 60_000, max_batch_bytes=area_bytes), JobOptions(now_ms=TS + 60_000)):
        row = report_partition(_task(tmp_path), configs, opts)
        # the dirty section (offsets 0 and 1, the active segment from 2) holds key "k" twice
        assert (row["status"], row["duplicate_share"]) == ("ok", 0.5), row


def test_offsets_reads_the_batch_of_a_timestamp_within_the_limit_and_fails_past_it(tmp_path):
    directory, area_bytes = _large_batch_log(tmp_path, ZSTD)
    log = directory / "00000000000000000000.log"
    for args in ([OPTION, area_bytes], []):  # the default holds it too
        found = invoke(main, "offsets", "--log-dir", tmp_path, "--time", TS, *args)
        assert (found.exit_code, found.stdout) == (0, "big:0:0\n"), found.output
    refused = invoke(main, "offsets", "--log-dir", tmp_path, "--time", TS, OPTION, area_bytes - 1)
    assert (refused.exit_code, refused.stdout) == (1, "")
    assert (
        refused.stderr.startswith(
            f"error: {log} at position 0: batch at offset 0: zstd data decompresses to more than {area_bytes - 1}"
        )
        and OPTION in refused.stderr
    ), refused.stderr
    assert len(refused.stderr.splitlines()) == 1
    earliest = invoke(main, "offsets", "--log-dir", tmp_path, "--time", -2, OPTION, area_bytes - 1)
    assert earliest.stdout == "big:0:0\n"  # the log start offset: no record read
