"""A compact run as the broker's cleaner thread goes (work/compact_run.py): cleaning, then retention on
compacted logs, and one row whose columns describe the whole run over several rounds.

References: the retain job's retention run after a compaction that does none (the broker's order:
cleaning, then ``deleteOldSegments``), kafka-python's decoding of the files before and after, and the
dry run's view of the partition before the run. The real brokers' cleaner thread on a
``compact,delete`` topic: tests/broker/test_broker_compact_delete.py.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.format.record_batch import Record
from kafka_log_core.log.partition_log import LogDirState
from kafka_log_core.settings.config import load_config
from kafka_log_core.settings.kafka_version import KafkaVersion
from kafka_log_core.simulator.writer import PartitionWriter
from kafka_log_core.work.tasks import (
    ALL_ROUNDS,
    JobOptions,
    PartitionTask,
    compact_partition,
    retain_partition,
)
from tests.logbuild import TS, read_records
from tests.rules.test_split_cleaning import TINY_MAP, assert_same_dirs, build, twin
from tests.work.test_crash_safety import _crash_child

DAY = 86_400_000
TOPIC = "orders"
NOW = TS + 3 * DAY + 1000
SEGMENTS = "segment.bytes=2000"  # as written (3.x takes it): the cleaner's groups are the segments
V3 = KafkaVersion(3, 9)
BOTH = [
    SEGMENTS,
    "cleanup.policy=compact,delete",
    f"retention.ms={DAY}",
    "retention.bytes=-1",
    "min.cleanable.dirty.ratio=0.01",
]


def _old_then_new(log_dir: Path, batches: int = 40) -> Path:
    """Keyed updates stamped three days before NOW over several segments, then updates of other keys
    stamped at NOW, then one record: the active segment."""
    with PartitionWriter(log_dir / f"{TOPIC}-0", segment_bytes=2000, index_interval_bytes=256) as w:
        for keys, at in ((b"old", TS), (b"new", TS + 3 * DAY)):
            for b in range(batches):
                recs = [
                    Record(0, at + b, keys + b"%02d" % ((b * 3 + i) % 25), b"v%d" % b * 8) for i in range(3)
                ]
                w.append_records(recs, now_ms=at + b)
        w.roll(now_ms=NOW)
        w.append_records([Record(0, NOW, b"last", b"now")], now_ms=NOW)
    for log in (log_dir / f"{TOPIC}-0").glob("*.log"):  # last written when its last record came
        keys = {key[:3] for _, key, _ in _file_records(log)}
        mtime = (TS + 40) / 1000 if keys == {b"old"} else NOW / 1000
        os.utime(log, (mtime, mtime))
    return log_dir


def _file_records(log: Path) -> list[tuple]:
    from kafka.record.memory_records import MemoryRecords

    records, batches = [], MemoryRecords(log.read_bytes())
    while (b := batches.next_batch()) is not None:
        records += [(r.offset, r.key, r.value) for r in b]
    return records


def _task(log_dir: Path) -> PartitionTask:
    tp = TopicPartition(TOPIC, 0)
    return PartitionTask(str(log_dir), TOPIC, 0, LogDirState.read(log_dir).for_partition(tp))


def _compact(log_dir: Path, settings: list[str], **opts) -> dict:
    return compact_partition(
        _task(log_dir), load_config(None, [], [], settings, version=V3), JobOptions(now_ms=NOW, **opts)
    )


def _offsets(log_dir: Path) -> list[int]:
    return [offset for offset, _, _ in read_records(log_dir / f"{TOPIC}-0")]


def test_compact_on_a_compact_delete_log_cleans_then_deletes_as_retain_would_after_it(tmp_path):
    source = _old_then_new(tmp_path / "source")
    ours, reference = twin(tmp_path, "ours", source), twin(tmp_path, "reference", source)
    row = _compact(ours, BOTH)
    assert row["status"] == "cleaned", row
    assert row["segments_deleted"] > 0 and row["bytes_deleted"] > 0, row
    assert (
        "the cleaner thread's retention then deleted" in row["reason"] and "by retention.ms" in row["reason"]
    )
    # the reference: cleaning alone (a compact-only policy), then the retain job with the topic's policy
    cleaned = _compact(reference, [SEGMENTS, "cleanup.policy=compact", "min.cleanable.dirty.ratio=0.01"])
    assert cleaned["status"] == "cleaned" and cleaned["segments_deleted"] is None, cleaned
    retained = retain_partition(
        _task(reference), load_config(None, [], [], BOTH, version=V3), JobOptions(now_ms=NOW)
    )
    assert retained["status"] == "deleted", retained
    assert row["segments_deleted"] == retained["segments_deleted"]
    assert row["log_start_offset_after"] == retained["log_start_offset_after"]
    assert_same_dirs(ours, reference)
    old = [o for o, key, _ in read_records(source / f"{TOPIC}-0") if key.startswith(b"old")]
    assert min(_offsets(ours)) > max(old)  # every old record is past retention.ms: all gone
    assert row["records_after"] == len(_offsets(ours)) - 1  # the active segment's record is not cleaned


def test_what_the_cleaner_thread_deleted_leaves_retain_nothing_to_do(tmp_path):
    log_dir = _old_then_new(tmp_path / "d")
    _compact(log_dir, BOTH)
    again = retain_partition(
        _task(log_dir), load_config(None, [], [], BOTH, version=V3), JobOptions(now_ms=NOW)
    )
    assert (again["status"], again["segments_deleted"]) == ("skipped", 0), again


def test_a_log_not_dirty_enough_to_clean_still_gets_the_retention(tmp_path):
    """The thread runs retention on every compacted log after each attempt, whether it cleaned or not."""
    log_dir = _old_then_new(tmp_path / "d")
    _compact(log_dir, [SEGMENTS, "cleanup.policy=compact", "min.cleanable.dirty.ratio=0.01"])
    row = _compact(log_dir, BOTH)
    assert row["status"] == "deleted" and row["segments_deleted"] > 0, row
    assert row["reason"].startswith("dirty ratio"), row["reason"]


def test_a_dry_run_says_what_the_retention_would_delete_and_changes_nothing(tmp_path):
    log_dir = _old_then_new(tmp_path / "d")
    before = read_records(log_dir / f"{TOPIC}-0")
    row = _compact(log_dir, BOTH, dry_run=True)
    assert row["status"] == "would clean" and row["segments_deleted"] > 0, row
    assert "retention would then delete" in row["reason"], row["reason"]
    assert read_records(log_dir / f"{TOPIC}-0") == before


def test_retention_the_safety_guard_refuses_leaves_the_cleaning_done_and_says_so(tmp_path):
    log_dir = _old_then_new(tmp_path / "d")
    row = _compact(log_dir, [*BOTH, "retention.ms=60000"])
    assert row["status"] == "cleaned" and row["segments_deleted"] is None, row
    assert "retention not applied" in row["reason"] and "--force" in row["reason"], row["reason"]
    assert any(key.startswith(b"old") for _, key, _ in read_records(log_dir / f"{TOPIC}-0"))


def test_a_compact_only_log_gets_the_log_start_offset_rule_only(tmp_path):
    log_dir = _old_then_new(tmp_path / "d")
    row = _compact(
        log_dir, [SEGMENTS, "cleanup.policy=compact", f"retention.ms={DAY}", "min.cleanable.dirty.ratio=0.01"]
    )
    assert row["status"] == "cleaned" and row["segments_deleted"] is None, row  # nothing by time
    assert any(key.startswith(b"old") for _, key, _ in read_records(log_dir / f"{TOPIC}-0"))


def _cleaner_checkpoint(log_dir: Path) -> int:
    """The partition's entry of cleaner-offset-checkpoint, parsed here (version, count, entries)."""
    lines = (log_dir / "cleaner-offset-checkpoint").read_text().split("\n")[2:]
    entries = {tuple(line.split()[:2]): int(line.split()[2]) for line in lines if line.strip()}
    return entries[(TOPIC, "0")]


def test_a_multi_round_row_describes_the_run_before_and_after(tmp_path):
    """A dedupe buffer for 218 keys: several rounds. The columns all describe the run: the state before
    it (as the dry run sees it) and the records of the cleaned section before and after it."""
    source = tmp_path / "source"
    build(source, seed=9, keys=600, transactions=False)
    settings = ["cleanup.policy=compact", "segment.index.bytes=600", "delete.retention.ms=3600000", *TINY_MAP]
    dry = _compact(twin(tmp_path, "dry", source), settings, dry_run=True)
    ours = twin(tmp_path, "ours", source)
    row = _compact(ours, settings, rounds=ALL_ROUNDS)
    assert row["status"] == "cleaned" and row["reason"].endswith(" rounds"), row
    rounds = int(row["reason"].rsplit("; ", 1)[1].split()[0])
    assert rounds >= 3, row["reason"]
    for column in ("dirty_ratio", "first_dirty_offset", "first_uncleanable_offset", "bytes_before"):
        assert row[column] == dry[column], column
    assert row["reason"].split("; ")[0] == dry["reason"].split("; ")[0]  # why the run cleaned
    end = _cleaner_checkpoint(ours)  # the rounds rewrote whole segments: up to the next one the source has
    bases = sorted(int(p.name[:20]) for p in (source / f"{TOPIC}-0").glob("*.log"))
    source_records = read_records(source / f"{TOPIC}-0")
    section_end = next((b for b in bases if b >= end), source_records[-1][0] + 1)
    before = [r for r in source_records if r[0] < section_end]
    after = [r for r in read_records(ours / f"{TOPIC}-0") if r[0] < section_end]
    assert (row["records_before"], row["records_after"]) == (len(before), len(after))
    tombstones = sum(r[2] is None for r in before) - sum(r[2] is None for r in after)
    assert row["tombstones_removed"] == tombstones
    assert row["bytes_after"] == sum(p.stat().st_size for p in (ours / f"{TOPIC}-0").glob("*.log"))


def test_a_run_killed_at_every_file_operation_then_rerun_loses_nothing_the_uninterrupted_run_keeps(tmp_path):
    """Cleaning, then the cleaner thread's retention: killed before any file operation of either (a
    forked child that dies with os._exit), a second run keeps every record the uninterrupted run keeps
    and leaves no leftover. It can keep more: killed amid the round's swaps, the rerun's round groups the
    segments already cleaned anew (as a broker's cleaner does after a crash), and a group holding newer
    records then holds time retention back for old ones (a later run deletes them)."""
    reference = _old_then_new(tmp_path / "reference", batches=16)
    assert _compact(reference, BOTH)["segments_deleted"] > 0
    expected = read_records(reference / f"{TOPIC}-0")
    tried = crash_at = same = 0
    while True:
        d = _old_then_new(tmp_path / f"crash{crash_at}", batches=16)
        if _crash_child(d, crash_at, lambda log_dir: _compact(log_dir, BOTH)) == -1:
            break  # the run finished before reaching this operation: every point tried
        tried += 1
        row = _compact(d, BOTH)
        assert row["status"] in ("cleaned", "deleted", "skipped"), row
        records = read_records(d / f"{TOPIC}-0")
        extra = sorted(set(records) - set(expected))
        assert set(expected) <= set(records), f"crash before file operation {crash_at}"
        assert all(key.startswith(b"old") for _, key, _ in extra), (crash_at, extra)
        same += not extra
        assert not [p for p in (d / f"{TOPIC}-0").iterdir() if p.suffix in (".deleted", ".swap", ".cleaned")]
        shutil.rmtree(d)
        crash_at += 1
    assert tried > 10
    print(f"crash points: {tried}, the same records as uninterrupted after {same}")
