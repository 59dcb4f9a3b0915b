"""The listing every job starts from (:mod:`kafka_log_core.log.listing`): each directory once whatever its
names (issue #24 point 2: bind mounts, a log dir given twice), and a log dir a running broker holds."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap

import pytest

from kafka_log_core.log.listing import list_log_dirs
from tests.hostile import bind_mount, kafka_python_batch


def _log_dir(path, *names):
    for name in names:
        d = path / name
        d.mkdir(parents=True)
        (d / "00000000000000000000.log").write_bytes(kafka_python_batch(0, [(b"k", b"v")]))
        (d / "00000000000000000000.index").touch()
        (d / "00000000000000000000.timeindex").touch()
    (path / ".lock").touch()
    return path


def _listed(listing):
    return sorted((os.path.basename(t.log_dir), t.topic, t.partition) for t in listing.tasks)


def test_a_log_dir_mounted_a_second_time_and_given_twice_is_listed_once(tmp_path):
    logs = _log_dir(tmp_path / "logs", "orders-0")
    with bind_mount(logs, tmp_path / "again") as again:
        listing = list_log_dirs([str(logs), str(again)], None, writing=False)
    assert _listed(listing) == [("logs", "orders", 0)]
    assert listing.notes == [f"--log-dir {again} is the same directory as --log-dir {logs}: listed once"]


def test_a_partition_directory_mounted_under_a_second_name_is_an_alias(tmp_path):
    logs = _log_dir(tmp_path / "logs", "orders-0")
    with bind_mount(logs / "orders-0", logs / "x-0"):
        listing = list_log_dirs([str(logs)], None, writing=True)
    assert _listed(listing) == [("logs", "orders", 0)]
    (row,) = listing.skipped
    assert (row.topic, row.partition, row.status) == ("x", 0, "skipped")
    assert row.reason == (
        f"{logs / 'x-0'}: a second name (a bind mount), the same directory as orders-0: an alias, skipped "
        "(worked on as orders-0)"
    )


def test_an_alias_of_a_topic_not_selected_is_not_mentioned(tmp_path):
    logs = _log_dir(tmp_path / "logs", "orders-0", "payments-0")
    os.symlink("orders-0", logs / "x-0")
    listing = list_log_dirs([str(logs)], re.compile("payments"), writing=False)
    assert _listed(listing) == [("logs", "payments", 0)] and listing.skipped == []


@pytest.fixture
def broker(tmp_path):
    """A process holding ``.lock`` of a log dir as a running broker does (an exclusive POSIX lock)."""
    logs = _log_dir(tmp_path / "logs", "orders-0", "orders-1")
    child = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(f"""
            import fcntl, os, time
            fd = os.open({str(logs / ".lock")!r}, os.O_RDWR)
            fcntl.lockf(fd, fcntl.LOCK_EX)
            print("held", flush=True)
            time.sleep(60)
        """)],
        stdout=subprocess.PIPE,
    )  # fmt: skip
    assert child.stdout.readline().strip() == b"held"
    yield logs
    child.kill()
    child.wait()


def test_a_log_dir_a_broker_holds_fails_each_partition_for_a_job_that_writes(broker, tmp_path):
    other = _log_dir(tmp_path / "other", "clicks-0")
    listing = list_log_dirs([str(broker), str(other)], None, writing=True)
    assert _listed(listing) == [("other", "clicks", 0)]
    assert [(row.topic, row.partition) for row in listing.failed] == [("orders", 0), ("orders", 1)]
    assert {row.reason for row in listing.failed} == {
        f"{broker / '.lock'} is held by a running Kafka broker: stop it before running a job that writes"
    }


def test_a_log_dir_a_broker_holds_is_read_with_a_note(broker):
    listing = list_log_dirs([str(broker)], None, writing=False)
    assert _listed(listing) == [("logs", "orders", 0), ("logs", "orders", 1)] and listing.failed == []
    assert f"{broker}: a running broker holds this log dir; figures may change under us" in listing.notes
