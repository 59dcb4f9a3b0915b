"""`kafka-log-jobs dump`'s command line as kafka-dump-log's: file lists, unknown and missing files, bad
options (how the expected lines are made: ``test_dump``).
"""

from __future__ import annotations

import pytest

from kafka_log_core.format import offset_index
from kafka_log_core.format.offset_index import OffsetPosition
from kafka_log_core.tools.dump import DumpedFile
from tests.tools.dump_harness import (
    E1,
    E2,
    E4,
    run_dump,
    segment_name,
    write,
)


# ---------------------------------------------------------------------------------------------- command line
def test_unknown_files_are_ignored_on_stderr_like_kafka(tmp_path):
    deleted = write(tmp_path, segment_name(0, ".log.deleted"), E1)
    epochs = write(tmp_path, "leader-epoch-checkpoint", b"0\n0\n")
    result = run_dump("--files", deleted, "--files", epochs)
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [f"Dumping {deleted}", f"Dumping {epochs}"]
    assert result.stderr.splitlines() == [
        f"Ignoring unknown file {deleted}",
        f"Ignoring unknown file {epochs}",
    ]


def test_files_may_be_repeated_and_comma_separated_and_keep_their_order(tmp_path):
    a = write(tmp_path, segment_name(0, ".log"), E1)
    b = write(tmp_path, segment_name(100, ".log"), E2)
    c = write(tmp_path, segment_name(200, ".log"), E4)
    result = run_dump("--files", f"{c},{a}", "--files", b)
    assert [line for line in result.stdout.splitlines() if line.startswith("Dumping")] == [
        f"Dumping {c}",
        f"Dumping {a}",
        f"Dumping {b}",
    ]


def test_missing_file_is_a_usage_error_before_anything_is_dumped(tmp_path):
    good = write(tmp_path, segment_name(0, ".log"), E1)
    result = run_dump("--files", f"{good},{tmp_path / 'nope.log'}")
    assert result.exit_code == 2
    assert result.stdout == ""
    assert "Invalid value for '--files'" in result.stderr and "nope.log" in result.stderr


@pytest.mark.parametrize(
    "args", [[], ["--files", "x.log", "--max-bytes", "-1"], ["--files", "x.log", "--bogus"]]
)
def test_bad_options_are_usage_errors(tmp_path, args):
    result = run_dump(*args)
    assert result.exit_code == 2
    assert result.stderr.startswith("Usage: ")


def test_index_without_its_log_is_an_error_naming_the_missing_file(tmp_path):
    index = tmp_path / segment_name(0, ".index")
    offset_index.write_offset_index(index, 0, [OffsetPosition(2, 70)])
    result = run_dump("--files", index)
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        f"error: {index}: cannot check it: {tmp_path / segment_name(0, '.log')} does not exist"
    ]


def test_file_named_like_kafka_does_java_io_file(tmp_path):
    file = DumpedFile.of("a//b///00000000000000000000.log/", cwd="/work")
    assert (file.shown, file.name, file.absolute) == (
        "a/b/00000000000000000000.log",
        "00000000000000000000.log",
        "/work/a/b/00000000000000000000.log",
    )
