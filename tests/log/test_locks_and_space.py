"""Never two writers, and no space is no loss: a live broker's log dir is refused, two jobs cannot write
one partition, a broker cannot start under a job, and running out of disk mid-rewrite keeps the original."""

from __future__ import annotations

import errno
import hashlib
import textwrap

import pytest

from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.log.partition_log import LogDirState
from kafka_log_core.rules import cleaner_segments
from kafka_log_core.settings.config import load_config
from kafka_log_core.work.tasks import JobOptions, PartitionTask, compact_partition
from tests.hostile import another_process_holding
from tests.logbuild import TS, batch, make_log, read_records

NOW = TS + 3_600_000


def _layout(log_dir):
    make_log(
        log_dir,
        "t",
        0,
        {0: [batch(0, [("a", "1"), ("b", "1")]), batch(2, [("a", "2")])], 3: [batch(3, [("c", "1")])]},
        clean_shutdown=True,
    )
    return log_dir / "t-0"


def _compact(log_dir, **options):
    configs = load_config(None, [], [], ["cleanup.policy=compact"])
    tp = TopicPartition("t", 0)
    task = PartitionTask(str(log_dir), "t", 0, LogDirState.read(log_dir).for_partition(tp))
    return compact_partition(task, configs, JobOptions(now_ms=NOW, **options))


def _snapshot(directory):
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


TAKE_T0 = textwrap.dedent("""
    from kafka_log_core.log import locks
    from kafka_log_core.format.filenames import TopicPartition
    held = locks.partition_lock({log_dir!r}, TopicPartition("t", 0))
    held.__enter__()
""")


def _another_job_on_t0(log_dir):
    """Another process running a job on t-0: holds our partition lock for the block."""
    return another_process_holding(TAKE_T0.format(log_dir=str(log_dir)))


@pytest.mark.parametrize("busy_timeout_s", [0, 0.3])
def test_two_jobs_cannot_write_the_same_partition(tmp_path, busy_timeout_s):
    """A job that finds the partition held past its --busy-timeout skips it: the other job's result stands."""
    d = _layout(tmp_path)
    before = _snapshot(d)
    with _another_job_on_t0(tmp_path):
        row = _compact(tmp_path, busy_timeout_s=busy_timeout_s)
        assert row["status"] == "skipped"  # the other job's result stands: nothing failed
        assert "being written by another kafka-log-jobs process" in row["reason"]
        assert ("waited 0.3 s" in row["reason"]) == (busy_timeout_s > 0)
        assert _snapshot(d) == before
    assert _compact(tmp_path, busy_timeout_s=0)["status"] == "cleaned"  # the lock died with its process


def test_a_job_waits_for_a_partition_another_job_is_writing_then_cleans_it(tmp_path):
    """Two jobs started together end as one run after the other: the second waits its turn (by default up to
    --busy-timeout), then plans from what the first left."""
    _layout(tmp_path)
    with another_process_holding(TAKE_T0.format(log_dir=str(tmp_path)), hold_s=1):
        row = _compact(tmp_path)  # the other job still holds t-0 for about a second
    assert row["status"] == "cleaned", row
    assert read_records(tmp_path / "t-0") == [(1, b"b", b"1"), (2, b"a", b"2"), (3, b"c", b"1")]


def test_running_out_of_space_mid_rewrite_keeps_the_original(tmp_path, monkeypatch):
    d = _layout(tmp_path)
    before = _snapshot(d)

    # Fails when the cleaned segment's buffered batches would reach the disk.
    def full_disk(self, st, source=None, scratch=None):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(cleaner_segments.CleanedSegment, "flush", full_disk)
    row = _compact(tmp_path)
    assert row["status"] == "failed" and "No space left on device" in row["reason"]
    assert _snapshot(d) == before  # no .cleaned file left behind, originals untouched
    monkeypatch.undo()
    assert _compact(tmp_path)["status"] == "cleaned"


def test_too_little_free_space_is_refused_before_writing(tmp_path, monkeypatch):
    import shutil
    from collections import namedtuple

    d = _layout(tmp_path)
    before = _snapshot(d)
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda path: usage(10**9, 10**9 - 10, 10))
    row = _compact(tmp_path)
    assert (
        row["status"] == "failed" and "bytes free" in row["reason"] and "nothing was changed" in row["reason"]
    )
    assert _snapshot(d) == before


@pytest.mark.broker
def test_a_running_broker_is_refused_and_cannot_start_under_a_job(kafka_broker, tmp_path):
    from tests.kafka_harness import BrokerHarnessError, create_topic, produce

    broker = kafka_broker(**{"log.cleaner.enable": "false"})
    create_topic(broker.bootstrap, "t", 1, {"cleanup.policy": "compact"})
    produce(broker.bootstrap, "t", [(b"a", b"1"), (b"a", b"2"), (b"b", b"1")])
    log_dir = broker.log_dir
    row = _compact(log_dir)
    assert row["status"] == "failed" and "running" in row["reason"]
    broker.stop()
    # While a job holds the log dir, the broker refuses to start (it cannot take .lock).
    try:
        with _another_job_on_t0(log_dir), pytest.raises(BrokerHarnessError, match=r"(?i)lock"):
            broker.start(timeout=30)
    finally:
        if broker.running:
            broker.stop()
