"""The jobs' listing works on each partition directory once, whatever names it has (issue #24 point 2): a
log dir given twice under two names, a partition directory reached from two log dirs; and it refuses a log
dir the broker would take offline, alone (point 5)."""

from __future__ import annotations

import os

from jobs import context
from tests.hostile import kafka_python_batch


def _log_dir(path, *names):
    for name in names:
        d = path / name
        d.mkdir(parents=True)
        (d / "00000000000000000000.log").write_bytes(kafka_python_batch(0, [(b"k", b"v")]))
        (d / "00000000000000000000.index").touch()
        (d / "00000000000000000000.timeindex").touch()
    return path


def test_a_log_dir_given_twice_under_two_names_is_listed_once(tmp_path):
    logs = _log_dir(tmp_path / "logs", "orders-0", "orders-1")
    os.symlink(logs, tmp_path / "same")
    listing = context.list_tasks([str(logs), str(tmp_path / "same")], None, writing=False)
    assert sorted((t.topic, t.partition) for t in listing.tasks) == [("orders", 0), ("orders", 1)]
    assert any("is the same directory as --log-dir" in note for note in listing.notes)


def test_a_partition_directory_reached_from_a_second_log_dir_is_skipped_there(tmp_path):
    first = _log_dir(tmp_path / "a", "orders-0")
    second = _log_dir(tmp_path / "b", "payments-0")
    os.symlink(first / "orders-0", second / "orders-0")
    listing = context.list_tasks([str(first), str(second)], None, writing=False)
    assert sorted((os.path.basename(t.log_dir), t.topic) for t in listing.tasks) == [
        ("a", "orders"),
        ("b", "payments"),
    ]
    (row,) = listing.skipped
    assert row.status == "skipped" and row.log_dir == str(second) and "an alias" in row.reason


def test_a_log_dir_whose_meta_properties_the_broker_cannot_read_fails_its_partitions_and_not_the_others(
    tmp_path,
):
    bad = _log_dir(tmp_path / "bad", "orders-0")
    (bad / "meta.properties").write_text("version=99\nnode.id=1\ncluster.id=J8qXyFz5T2uY8Vq5dA7bWw\n")
    good = _log_dir(tmp_path / "good", "orders-1")
    listing = context.list_tasks([str(bad), str(good)], None, writing=False)
    assert [(t.topic, t.partition) for t in listing.tasks] == [("orders", 1)]
    (row,) = listing.failed
    assert row.partition == 0 and "the broker would take this log dir offline" in row.reason
    assert "meta.properties: version: expected 0 or 1, found '99'" in row.reason
