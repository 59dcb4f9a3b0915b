"""Bad input gets a clear error naming the file and position, and loses nothing: each corruption below
is planted in one partition of a log dir; that partition is reported as failed with a one-line reason
and left byte-for-byte as it was, while a healthy partition beside it is compacted."""

from __future__ import annotations

import hashlib
import os
import stat
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kafka_log_core.errors import KafkaLogError
from kafka_log_core.format import (
    checkpoints,
    log_file,
    offset_index,
    producer_snapshot,
    time_index,
    txn_index,
)
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.format.record_batch import Record, build_batch
from kafka_log_core.log.partition_log import LogDirState
from kafka_log_core.rules import leftovers
from kafka_log_core.settings.config import load_config
from kafka_log_core.work.tasks import JobOptions, PartitionTask, compact_partition
from tests.logbuild import TS, batch, make_log

NOW = TS + 3_600_000
SEG0 = "00000000000000000000"


def _layout(log_dir, topic):
    make_log(
        log_dir,
        topic,
        0,
        {
            0: [
                batch(0, [("a", "1"), ("b", "1")]),
                batch(2, [("a", "2"), ("c", "1")]),
                batch(4, [("b", "2")]),
            ],
            5: [batch(5, [("a", "3")])],
            6: [batch(6, [("d", "1")])],
        },
        interval=1,
        clean_shutdown=True,
    )
    return log_dir / f"{topic}-0"


def _snapshot(directory):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


def _compact(log_dir, topic):
    configs = load_config(None, [], [], ["cleanup.policy=compact"])
    tp = TopicPartition(topic, 0)
    task = PartitionTask(str(log_dir), topic, 0, LogDirState.read(log_dir).for_partition(tp))
    return compact_partition(task, configs, JobOptions(now_ms=NOW))


def _flip(path, at):
    data = bytearray(path.read_bytes())
    data[at] ^= 0x5A
    path.write_bytes(bytes(data))


def _truncate(path, cut):
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - cut])


CORRUPTIONS = {
    # name: (how to damage the partition dir, text the reason must contain)
    "bit flip inside a batch": (
        lambda d: _flip(d / f"{SEG0}.log", 50),
        f"{SEG0}.log at position 0: CRC32C mismatch",
    ),
    "truncated segment": (lambda d: _truncate(d / f"{SEG0}.log", 7), "truncated segment"),
    "batch length past the end of the file": (
        lambda d: _patch(d / f"{SEG0}.log", 8, struct.pack(">i", 10_000)),
        f"{SEG0}.log at position 0",
    ),
    "size below the minimum": (
        lambda d: _patch(d / f"{SEG0}.log", 8, struct.pack(">i", 3)),
        "minimum record overhead",
    ),
    "unknown magic": (lambda d: _patch(d / f"{SEG0}.log", 16, b"\x07"), "unknown magic 7"),
    "unknown codec": (lambda d: _recrc(d / f"{SEG0}.log", 22, b"\x05"), "unknown compression codec id 5"),
    "index entry past the end of the log": (
        lambda d: (d / f"{SEG0}.index").write_bytes(struct.pack(">ii", 2, 99_999)),
        f"{SEG0}.index at position 0: entry 0 points at position 99999",
    ),
    "index entries out of order": (
        lambda d: (d / f"{SEG0}.index").write_bytes(struct.pack(">iiii", 3, 100, 1, 50)),
        f"{SEG0}.index at position 8",
    ),
    "index with a partial entry": (lambda d: (d / f"{SEG0}.index").write_bytes(b"\0" * 12), "multiple of 8"),
    "time index out of order": (
        lambda d: (d / f"{SEG0}.timeindex").write_bytes(struct.pack(">qiqi", TS + 5, 1, TS + 1, 2)),
        f"{SEG0}.timeindex",
    ),
    "overlapping segments": (
        lambda d: _rename(d, "00000000000000000005", "00000000000000000003"),
        "past the next segment",
    ),
}


def _patch(path, at, raw):
    data = bytearray(path.read_bytes())
    data[at : at + len(raw)] = raw
    path.write_bytes(bytes(data))


def _recrc(path, at, raw):
    """Change bytes inside the first batch and fix its CRC, so only the field is wrong."""
    import crc32c

    data = bytearray(path.read_bytes())
    data[at : at + len(raw)] = raw
    size = struct.unpack_from(">i", data, 8)[0]
    struct.pack_into(">I", data, 17, crc32c.crc32c(bytes(data[21 : 12 + size])))
    path.write_bytes(bytes(data))


def _rename(d, old, new):
    for suffix in (".log", ".index", ".timeindex"):
        os.replace(d / f"{old}{suffix}", d / f"{new}{suffix}")


@pytest.mark.parametrize("damage,expected", CORRUPTIONS.values(), ids=CORRUPTIONS.keys())
def test_corrupt_partition_fails_with_file_and_position_and_is_left_untouched(tmp_path, damage, expected):
    bad = _layout(tmp_path, "bad")
    _layout(tmp_path, "good")
    damage(bad)
    before = _snapshot(bad)
    row = _compact(tmp_path, "bad")
    assert row["status"] == "failed", row
    assert expected in row["reason"], row["reason"]
    assert "Traceback" not in row["reason"] and "\n" not in row["reason"]
    assert _snapshot(bad) == before
    assert _compact(tmp_path, "good")["status"] == "cleaned"


def test_malformed_checkpoint_names_the_file_and_line(tmp_path):
    _layout(tmp_path, "t")
    (tmp_path / "replication-offset-checkpoint").write_text("0\n2\nt 0 5\n")
    with pytest.raises(KafkaLogError, match=r"replication-offset-checkpoint.*line"):
        LogDirState.read(tmp_path)


def test_checkpoint_with_a_bad_version_is_refused(tmp_path):
    (tmp_path / "cleaner-offset-checkpoint").write_text("1\n0\n")
    with pytest.raises(KafkaLogError, match="cleaner-offset-checkpoint"):
        LogDirState.read(tmp_path)


def test_symlinked_partition_dir_leading_outside_is_refused(tmp_path):
    outside = tmp_path / "elsewhere"
    log_dir = tmp_path / "logs"
    log_dir.mkdir()
    real = _layout(outside, "t")
    os.symlink(real, log_dir / "t-0")
    before = _snapshot(real)
    row = _compact(log_dir, "t")
    assert row["status"] == "failed" and "outside the log dir" in row["reason"]
    assert _snapshot(real) == before


def test_rewritten_segments_keep_the_permissions_of_the_originals(tmp_path):
    d = _layout(tmp_path, "t")
    for p in d.iterdir():
        os.chmod(p, 0o640)
    assert _compact(tmp_path, "t")["status"] == "cleaned"
    for suffix in (".log", ".index", ".timeindex"):
        assert stat.S_IMODE((d / f"{SEG0}{suffix}").stat().st_mode) == 0o640


def test_empty_partition_directory_is_skipped_cleanly(tmp_path):
    (tmp_path / "empty-0").mkdir()
    row = _compact(tmp_path, "empty")
    assert row["status"] == "skipped", row


def test_files_with_unexpected_names_are_left_alone(tmp_path):
    d = _layout(tmp_path, "t")
    (d / "notes.txt").write_text("keep me")
    (d / "123.log.bak").write_text("keep me too")
    assert _compact(tmp_path, "t")["status"] == "cleaned"
    assert (d / "notes.txt").read_text() == "keep me" and (d / "123.log.bak").exists()
    assert leftovers.plan_leftovers(d).empty


READERS = [
    (
        "log",
        lambda data: [b.verify() or b.records() for b in log_file.iter_batches(data, "f.log", strict=True)],
    ),
    ("index", lambda data: offset_index.parse_offset_index(data, 0, "f.index").sanity_check()),
    ("timeindex", lambda data: time_index.parse_time_index(data, 0, "f.timeindex").sanity_check()),
    ("txnindex", lambda data: txn_index.parse_txn_index(data, 0, "f.txnindex")),
    ("snapshot", lambda data: producer_snapshot.parse_producer_snapshot(data, "f.snapshot")),
    ("checkpoint", lambda data: checkpoints.parse_offset_checkpoint(data, "f")),
    ("epochs", lambda data: checkpoints.parse_leader_epoch_checkpoint(data, "f")),
]
SEED = build_batch(0, [Record(i, TS + i, b"k%d" % i, b"v" * i) for i in range(4)], codec=1)


@pytest.mark.parametrize("name,reader", READERS, ids=[r[0] for r in READERS])
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    data=st.binary(max_size=200)
    | st.builds(
        lambda i, b: SEED[:i] + bytes([b]) + SEED[i + 1 :], st.integers(0, len(SEED) - 1), st.integers(0, 255)
    )
)
def test_fuzzed_bytes_raise_only_our_errors(name, reader, data):
    """A bounded fuzz run over every reader: random and mutated bytes never raise anything but ours."""
    try:
        reader(data)
    except KafkaLogError:
        pass
