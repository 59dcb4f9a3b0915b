"""The listing every job starts from (:mod:`kafka_log_core.log.listing`): each directory once whatever its
names (issue #24 point 2: a symlink, a bind mount, a log dir given twice, a partition directory reached
from a second log dir); a log dir the broker would take offline refused alone (point 5); a log dir a
running broker holds."""

from __future__ import annotations

import os
import re

import pytest

from kafka_log_core.log.listing import list_log_dirs
from kafka_log_core.log.log_dir import PartitionCheckpoints
from tests.hostile import another_process_holding, bind_mount, kafka_python_batch


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


def test_a_log_dir_given_twice_under_two_names_is_listed_once(tmp_path):
    logs = _log_dir(tmp_path / "logs", "orders-0", "orders-1")
    os.symlink(logs, tmp_path / "same")
    listing = list_log_dirs([str(logs), str(tmp_path / "same")], None, writing=False)
    assert _listed(listing) == [("logs", "orders", 0), ("logs", "orders", 1)]
    assert listing.notes == [
        f"--log-dir {tmp_path / 'same'} is the same directory as --log-dir {logs}: listed once"
    ]


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
    with another_process_holding(f"""
        import fcntl, os
        fd = os.open({str(logs / ".lock")!r}, os.O_RDWR)
        fcntl.lockf(fd, fcntl.LOCK_EX)
    """):
        yield logs


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


def test_a_partition_directory_reached_from_a_second_log_dir_is_skipped_there(tmp_path):
    first = _log_dir(tmp_path / "a", "orders-0")
    second = _log_dir(tmp_path / "b", "payments-0")
    os.symlink(first / "orders-0", second / "orders-0")
    listing = list_log_dirs([str(first), str(second)], None, writing=False)
    assert _listed(listing) == [("a", "orders", 0), ("b", "payments", 0)]
    (row,) = listing.skipped
    assert row.status == "skipped" and row.log_dir == str(second) and "an alias" in row.reason


def test_a_log_dir_whose_meta_properties_the_broker_cannot_read_fails_its_partitions_and_not_the_others(
    tmp_path,
):
    bad = _log_dir(tmp_path / "bad", "orders-0")
    (bad / "meta.properties").write_text("version=99\nnode.id=1\ncluster.id=J8qXyFz5T2uY8Vq5dA7bWw\n")
    good = _log_dir(tmp_path / "good", "orders-1")
    listing = list_log_dirs([str(bad), str(good)], None, writing=False)
    assert _listed(listing) == [("good", "orders", 1)]
    (row,) = listing.failed
    assert row.partition == 0 and "the broker would take this log dir offline" in row.reason
    assert "meta.properties: version: expected 0 or 1, found '99'" in row.reason


def test_each_task_carries_its_entries_of_the_four_checkpoint_files(tmp_path):
    logs = _log_dir(tmp_path / "logs", "orders-0", "orders-1", "orders-10", "payments-0")
    (logs / "recovery-point-offset-checkpoint").write_bytes(
        b"0\n5\norders 10 7\ngone 0 3\norders 0 5\norders 10 9\npayments 0 -1\n"  # orders-10 twice: the last
    )
    (logs / "log-start-offset-checkpoint").write_bytes(b"0\n1\norders 1 2\n")
    (logs / "replication-offset-checkpoint").write_bytes(b"0\r\n1\r\npayments +0 9223372036854775807\r\n")
    (logs / ".kafka_cleanshutdown").write_text('{"version":0,"brokerEpoch":7}')
    listing = list_log_dirs([str(logs)], None, writing=False)
    assert [(t.topic, t.partition, t.checkpoints) for t in listing.tasks] == [
        ("orders", 0, PartitionCheckpoints(recovery_point=5, clean_shutdown=True)),
        ("orders", 1, PartitionCheckpoints(log_start_offset=2, clean_shutdown=True)),
        ("orders", 10, PartitionCheckpoints(recovery_point=9, clean_shutdown=True)),
        (
            "payments",
            0,
            PartitionCheckpoints(recovery_point=-1, high_watermark=2**63 - 1, clean_shutdown=True),
        ),
    ]
    assert listing.tasks[-1] == listing.tasks[3] and listing.tasks[1:3] == list(listing.tasks)[1:3]
    assert all(t.log_dir == str(logs) for t in listing.tasks)


def test_a_corrupt_checkpoint_file_fails_its_log_dir_naming_the_line(tmp_path):
    logs = _log_dir(tmp_path / "logs", "orders-0")
    (logs / "cleaner-offset-checkpoint").write_bytes(b"0\n2\norders 0 5\n")
    listing = list_log_dirs([str(logs)], None, writing=False)
    (row,) = listing.failed
    assert not listing.tasks and (row.topic, row.partition) == ("orders", 0)
    assert f"{logs / 'cleaner-offset-checkpoint'} at position" in row.reason
    assert "expected 2 '<topic> <partition> <offset>' lines after the count line, found 1" in row.reason


def test_a_second_directory_of_one_partition_is_skipped_and_the_one_kafka_names_worked_on(tmp_path):
    logs = _log_dir(tmp_path / "logs", "orders-007", "orders-7", "orders-08")
    listing = list_log_dirs([str(logs)], None, writing=False)
    assert _listed(listing) == [("logs", "orders", 7)]
    twin, lone = listing.skipped
    assert (twin.topic, twin.partition, twin.status) == ("orders", 7, "skipped")
    assert twin.reason.startswith(f"{logs / 'orders-007'}: a second directory of partition orders-7: skipped")
    assert (lone.topic, lone.partition, lone.status) == ("orders", 8, "skipped")


def test_a_lone_directory_named_with_leading_zeros_is_skipped_saying_how_to_work_on_it(tmp_path):
    # The broker reads "orders-08" as partition 8 (Integer.parseInt), but every file of partition 8 is
    # looked for under "orders-8": the directory is skipped with the rename that would make it work,
    # never worked on as a directory that does not exist.
    logs = _log_dir(tmp_path / "logs", "orders-08", "orders-1")
    listing = list_log_dirs([str(logs)], None, writing=True)
    assert _listed(listing) == [("logs", "orders", 1)]
    (row,) = listing.skipped
    assert (row.topic, row.partition, row.status) == ("orders", 8, "skipped")
    assert row.reason == (
        f"{logs / 'orders-08'}: the directory of partition orders-8, not named as the broker "
        "names it (orders-8): skipped (rename it to orders-8 to work on it)"
    )
    assert sorted(p.name for p in logs.iterdir()) == [".lock", "orders-08", "orders-1"]
