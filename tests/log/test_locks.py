"""The locks know a log dir and a partition directory by what they are on disk (issue #24 point 2): one
directory reached under two names -- a bind mount of the log dir, a symlinked partition directory -- is one
thing to lock, in this process as in others."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from kafka_log_core.errors import LogDirLockedError, PartitionBusyError
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.log import locks
from tests.hostile import bind_mount

ORDERS_0 = TopicPartition("orders", 0)


def _log_dir(path):
    (path / "orders-0").mkdir(parents=True)
    (path / "orders-1").mkdir()
    (path / ".lock").touch()
    return path


def _a_broker_could_lock(log_dir) -> bool:
    """Whether another process (a broker starting) could lock ``.lock`` now: byte 0, which a broker's
    whole-file lock and every job's shared lock cover (the partition bytes are left out)."""
    probe = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(f"""
            import fcntl, os, sys
            fd = os.open({str(log_dir / locks.LOCK_FILE)!r}, os.O_RDWR)
            try:
                fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, 0)
            except OSError:
                sys.exit(1)
        """)],
    )  # fmt: skip
    return probe.returncode == 0


def test_a_partition_of_a_log_dir_mounted_twice_is_busy_under_the_second_path(tmp_path):
    logs = _log_dir(tmp_path / "logs")
    with bind_mount(logs, tmp_path / "again") as again:
        with locks.partition_lock(logs, ORDERS_0):
            with pytest.raises(PartitionBusyError, match="being written by another kafka-log-jobs process"):
                with locks.partition_lock(again, ORDERS_0):
                    pass
        with locks.partition_lock(again, ORDERS_0):  # released under the first path: free under both
            pass


def test_a_log_dir_held_under_one_path_stays_held_when_a_lock_under_its_other_path_ends(tmp_path):
    """POSIX locks belong to the process and the file: releasing the broker byte under one path of the log
    dir would release it under every path. Keyed by identity, the process holds it until its last lock."""
    logs = _log_dir(tmp_path / "logs")
    with bind_mount(logs, tmp_path / "again") as again:
        with locks.partition_lock(logs, ORDERS_0):
            with locks.partition_lock(again, TopicPartition("orders", 1)):
                pass
            assert not _a_broker_could_lock(logs)
        assert _a_broker_could_lock(logs)


def test_the_checkpoint_lock_of_a_log_dir_is_one_lock_under_two_paths(tmp_path):
    logs = _log_dir(tmp_path / "logs")
    with bind_mount(logs, tmp_path / "again") as again:
        with locks.checkpoint_lock(logs):
            with pytest.raises(
                LogDirLockedError, match="timed out after 0.2 s waiting for the checkpoint lock"
            ):
                with locks.checkpoint_lock(again, timeout_s=0.2):
                    pass
