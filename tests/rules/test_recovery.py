"""Recovery of a log dir left by a crashed broker, as Kafka's log loader does it (issue 13).

Expected values come from Kafka's rules (LogLoader.recoverLog, LogSegment.recover, the index and
snapshot rules; the scenarios of Kafka's own LogLoaderTest / LogSegmentTest / UnifiedLogTest where
named), worked out by hand from the bytes each test lays out -- never from the code under test. The
end-to-end comparison with a real broker's own recovery is test_broker_recovery.py.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from kafka_log_core.format import checkpoints
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.format.producer_snapshot import read_producer_snapshot
from kafka_log_core.javacompat import hashmap_capacity
from kafka_log_core.log.log_dir import LogDirState
from kafka_log_core.rules import recovery
from kafka_log_core.rules.producer_recovery import hashmap_order
from kafka_log_core.rules.producer_state import ProducerEntry
from kafka_log_core.settings.config import load_config
from kafka_log_core.work.tasks import (
    JobOptions,
    PartitionTask,
    compact_partition,
    retain_partition,
    retain_task,
)
from tests.logbuild import TS, batch, make_log, marker, with_partition_leader_epoch

NOW = TS + 3_600_000
TP = TopicPartition("t", 0)
SEG = "{:020d}"


def _configs(*sets: str):
    return load_config(
        None, [], [], ["cleanup.policy=delete", "retention.ms=-1", "retention.bytes=-1", *sets]
    )


def _task(log_dir: Path, topic: str = "t", partition: int = 0) -> PartitionTask:
    tp = TopicPartition(topic, partition)
    return PartitionTask(str(log_dir), topic, partition, LogDirState.read(log_dir).for_partition(tp))


def _retain(log_dir: Path, *sets: str, **opts) -> dict:
    """retain with nothing to delete: whatever changes is the loader's recovery."""
    return retain_partition(_task(log_dir), _configs(*sets), JobOptions(now_ms=NOW, **opts))


def _recovered(log_dir: Path, topic: str = "t") -> recovery.RecoveredPartition | None:
    """What the task of :func:`_retain` tells the driver it recovered."""
    return retain_task(_task(log_dir, topic), _configs(), JobOptions(now_ms=NOW)).recovered


def _recovery_points(log_dir: Path, **points: int) -> None:
    checkpoints.write_offset_checkpoint(
        log_dir / "recovery-point-offset-checkpoint", {TopicPartition(t, 0): o for t, o in points.items()}
    )


def _state(log_dir: Path) -> dict[str, tuple[bytes, int]]:
    """Every file under the log dir: bytes and mtime (the lock file aside)."""
    out = {}
    for root, _, files in os.walk(log_dir):
        for name in files:
            path = Path(root) / name
            if name != ".lock":
                out[str(path.relative_to(log_dir))] = (path.read_bytes(), path.stat().st_mtime_ns)
    return out


def _file(log_dir: Path, base: int, suffix: str) -> Path:
    return log_dir / "t-0" / (SEG.format(base) + suffix)


def _index(entries: list[tuple[int, int]]) -> bytes:
    return b"".join(struct.pack(">ii", rel, pos) for rel, pos in entries)


def _time_index(entries: list[tuple[int, int]]) -> bytes:
    return b"".join(struct.pack(">qi", ts, rel) for ts, rel in entries)


# ---------------------------------------------------------------------------------------------- truncation
def test_a_torn_last_batch_is_cut_where_it_starts(tmp_path):
    b0, b1 = batch(0, [("a", "1"), ("b", "1")]), batch(2, [("c", "1")])
    b2 = batch(3, [("d", "1"), ("e", "1"), ("f", "1")], ts=TS + 10)
    make_log(tmp_path, "t", 0, {0: [b0, b1, b2]})
    log = _file(tmp_path, 0, ".log")
    log.write_bytes(b0 + b1 + b2[:50])  # the crash came while the last batch was written
    row = _retain(tmp_path, "index.interval.bytes=0")
    assert log.read_bytes() == b0 + b1
    assert (row["truncated_bytes"], row["truncated_records"]) == (50, 0)  # a header cut short: count unknown
    assert row["recovered_segments"] == 1 and row["recovered_bytes"] == len(b0) + len(b1) + 50
    # index.interval.bytes=0: every batch but the one at position 0 gets an entry (last offset, position)
    assert _file(tmp_path, 0, ".index").read_bytes() == _index([(2, len(b0))])
    assert _file(tmp_path, 0, ".timeindex").read_bytes() == _time_index([(TS + 1, 1)])
    assert "50 bytes (0 records) truncated from segment 0 at position" in row["reason"]


def test_a_torn_batch_with_its_whole_header_counts_its_records(tmp_path):
    b0, b1 = batch(0, [("a", "1")]), batch(1, [("b", "1"), ("c", "1"), ("d", "1")])
    make_log(tmp_path, "t", 0, {0: [b0, b1]})
    _file(tmp_path, 0, ".log").write_bytes(b0 + b1[:70])
    row = _retain(tmp_path)
    assert _file(tmp_path, 0, ".log").read_bytes() == b0
    assert (row["truncated_bytes"], row["truncated_records"]) == (70, 3)


def test_a_zero_filled_index_tail_is_trimmed_to_the_rebuilt_entries(tmp_path):
    """The active segment of a killed broker: .index and .timeindex preallocated, zeros after the entries
    (LogSegmentTest.testRecoveryFixesCorruptIndex: the rebuilt entries replace whatever was there)."""
    batches = [batch(i, [(f"k{i}", "v" * 30)], ts=TS + i) for i in range(5)]
    make_log(tmp_path, "t", 0, {0: batches})
    index, times = _file(tmp_path, 0, ".index"), _file(tmp_path, 0, ".timeindex")
    index.write_bytes(index.read_bytes() + bytes(10 * 1024 * 1024 - len(index.read_bytes())))
    times.write_bytes(times.read_bytes() + bytes(10 * 1024 * 1024 // 12 * 12 - len(times.read_bytes())))
    size = len(batches[0])
    assert all(len(b) == size for b in batches)
    row = _retain(tmp_path, f"index.interval.bytes={size}")
    # an entry when more than `size` bytes passed since the last one: at positions 2*size and 4*size
    assert index.read_bytes() == _index([(2, 2 * size), (4, 4 * size)])
    # the largest timestamp so far at each entry, then the final entry (already written: not repeated)
    assert times.read_bytes() == _time_index([(TS + 2, 2), (TS + 4, 4)])
    assert row["truncated_bytes"] == 0 and "nothing truncated" in row["reason"]
    assert _file(tmp_path, 0, ".log").read_bytes() == b"".join(batches)


def test_a_half_written_index_entry_is_dropped(tmp_path):
    batches = [batch(i, [("k", "v")], ts=TS + i) for i in range(3)]
    make_log(tmp_path, "t", 0, {0: batches})
    index = _file(tmp_path, 0, ".index")
    index.write_bytes(index.read_bytes() + struct.pack(">i", 9))  # the relative offset half of an entry
    _retain(tmp_path, "index.interval.bytes=0")
    assert index.read_bytes() == _index([(1, len(batches[0])), (2, 2 * len(batches[0]))])


def test_zero_padding_after_the_last_batch_is_truncated(tmp_path):
    """log.preallocate=true: the killed active .log is zeros after the data (a size of 0 is corrupt)."""
    b0 = batch(0, [("a", "1")])
    make_log(tmp_path, "t", 0, {0: [b0]})
    _file(tmp_path, 0, ".log").write_bytes(b0 + bytes(4096))
    row = _retain(tmp_path)
    assert _file(tmp_path, 0, ".log").read_bytes() == b0
    assert (row["truncated_bytes"], row["truncated_records"]) == (4096, 0)
    assert "batch size 0 at position" in row["reason"]


S0 = [batch(0, [("a", "1")]), batch(1, [("b", "1")])]
S2 = [batch(2, [("c", "1")]), batch(3, [("d", "1"), ("e", "1")]), batch(5, [("f", "1")])]
S6 = [batch(6, [("g", "1")], pid=4, epoch=0, seq=0)]
S7 = [batch(7, [("h", "1")])]


def _bit_rot_above_the_recovery_point(log_dir: Path) -> bytes:
    """Segments 0, 2, 6, 7, the recovery point in segment 2, one bit flipped in segment 2's second batch
    (its CRC no longer matches; the batches after it are valid). Returns segment 2's damaged bytes."""
    make_log(log_dir, "t", 0, {0: S0, 2: S2, 6: S6, 7: S7})
    _recovery_points(log_dir, t=3)  # segment 2 holds it: segments 2, 6 and 7 are recovered
    log2 = _file(log_dir, 2, ".log")
    data = bytearray(log2.read_bytes())
    data[len(S2[0]) + 65] ^= 0x01  # inside the second batch's records
    log2.write_bytes(bytes(data))
    return bytes(data)


def test_bit_rot_followed_by_valid_batches_fails_the_partition_untouched_by_default(tmp_path):
    """Not a crash tail: the broker's rule would delete the valid batch after the bad one and the two
    later segments, which offline nothing restores. One line: file, position, what would be lost."""
    _bit_rot_above_the_recovery_point(tmp_path)
    before = _state(tmp_path)
    row = _retain(tmp_path)
    assert row["status"] == "failed" and "\n" not in row["reason"]
    assert row["reason"].startswith(f"{_file(tmp_path, 2, '.log')} at position {len(S2[0])}: CRC32C mismatch")
    lost = len(S2[2]) + len(S6[0]) + len(S7[0])
    assert f"would delete 3 valid records in 3 batches ({lost} bytes)" in row["reason"]
    assert f"1 valid record in 1 batch ({len(S2[2])} bytes) in the rest of the segment" in row["reason"]
    assert "in 2 later segments" in row["reason"] and row["reason"].endswith(
        "--recover-truncating applies the broker's rule"
    )
    assert row["truncated_bytes"] is None  # nothing was truncated
    assert _state(tmp_path) == before
    assert recovery.finish_log_dirs([_recovered(tmp_path)]) == []  # the log dir stays unclean: no marker
    assert not (tmp_path / ".kafka_cleanshutdown").exists()


def test_a_length_that_lies_is_resynchronised_past(tmp_path):
    """The bad batch's size field points past the end of the file, which alone reads as a torn tail; the
    search goes on byte by byte and finds the valid batch after it."""
    b0, b1, b2 = batch(0, [("a", "1")]), batch(1, [("b", "1"), ("c", "1")]), batch(3, [("d", "1")])
    make_log(tmp_path, "t", 0, {0: [b0, b1, b2]})
    data = bytearray(b0 + b1 + b2)
    struct.pack_into(">i", data, len(b0) + 8, 10_000)
    _file(tmp_path, 0, ".log").write_bytes(bytes(data))
    before = _state(tmp_path)
    row = _retain(tmp_path)
    assert row["status"] == "failed"
    assert f"at position {len(b0)}: the batch at position {len(b0)} declares 10000 bytes" in row["reason"]
    assert f"1 valid record in 1 batch ({len(b2)} bytes)" in row["reason"]
    assert _state(tmp_path) == before
    row = _retain(tmp_path, recover_truncating=True)
    assert _file(tmp_path, 0, ".log").read_bytes() == b0
    assert row["truncated_bytes"] == len(b1) + len(b2)


def test_a_crash_tail_before_a_later_segment_with_valid_batches_is_refused(tmp_path):
    """A zero-filled tail (lost pages) in a segment above the recovery point, and a later segment whose
    batches are valid: the broker would delete that segment too."""
    b0, b1 = batch(0, [("a", "1")]), batch(1, [("b", "1"), ("c", "1")])
    make_log(tmp_path, "t", 0, {0: [b0], 1: [b1]})
    _file(tmp_path, 0, ".log").write_bytes(b0 + bytes(500))
    before = _state(tmp_path)
    row = _retain(tmp_path)
    assert row["status"] == "failed"
    assert f"2 valid records in 1 batch ({len(b1)} bytes) in 1 later segment" in row["reason"]
    assert _state(tmp_path) == before


def test_a_later_segment_without_a_valid_batch_does_not_stop_crash_tail_recovery(tmp_path):
    """A torn tail, then a rolled segment holding only zeros (preallocated, never written): nothing valid
    follows, so this is a crash tail and the loader's rule applies by default."""
    b0, b1 = batch(0, [("a", "1")]), batch(1, [("b", "1")])
    make_log(tmp_path, "t", 0, {0: [b0, b1], 2: []})
    _file(tmp_path, 0, ".log").write_bytes(b0 + b1[:40])
    _file(tmp_path, 2, ".log").write_bytes(bytes(4096))
    row = _retain(tmp_path)
    assert row["status"] == "skipped", row
    assert _file(tmp_path, 0, ".log").read_bytes() == b0
    assert not _file(tmp_path, 2, ".log").exists()
    assert row["truncated_bytes"] == 40 + 4096


def test_non_increasing_offsets_that_would_empty_a_segment_are_refused_by_default(tmp_path):
    """LogLoader.recoverLog empties a segment whose offsets go backwards where an index entry is due
    (InvalidOffsetException -> truncateTo(base)): every valid batch of it goes."""
    batches = [batch(0, [("a", "1")]), batch(5, [("b", "1")]), batch(3, [("c", "1")])]
    make_log(tmp_path, "t", 0, {0: batches[:2]}, interval=1)
    _file(tmp_path, 0, ".log").write_bytes(b"".join(batches))
    before = _state(tmp_path)
    row = _retain(tmp_path, "index.interval.bytes=1")
    assert row["status"] == "failed"
    assert f"{_file(tmp_path, 0, '.log')} at position 0: offsets that do not increase" in row["reason"]
    assert f"3 valid records in 3 batches ({sum(map(len, batches))} bytes)" in row["reason"]
    assert _state(tmp_path) == before
    row = _retain(tmp_path, "index.interval.bytes=1", recover_truncating=True)
    assert _file(tmp_path, 0, ".log").read_bytes() == b""


def test_a_bad_batch_above_the_recovery_point_deletes_every_later_segment_with_recover_truncating(tmp_path):
    """LogLoaderTest.testCorruptLog / recoverLog: the first segment that loses bytes ends recovery, every
    later segment is deleted. The recovery point's segment is the first one recovered."""
    s2, s6, s7 = S2, S6, S7
    _bit_rot_above_the_recovery_point(tmp_path)
    log2 = _file(tmp_path, 2, ".log")
    s0_before = _file(tmp_path, 0, ".log").read_bytes()
    row = _retain(tmp_path, recover_truncating=True)
    assert log2.read_bytes() == s2[0]
    remaining = sorted(p.name for p in (tmp_path / "t-0").iterdir())
    assert [n for n in remaining if n.endswith(".log")] == [SEG.format(0) + ".log", SEG.format(2) + ".log"]
    assert not [n for n in remaining if n.endswith(".deleted")]
    assert _file(tmp_path, 0, ".log").read_bytes() == s0_before  # below the recovery point: untouched
    assert row["truncated_bytes"] == len(s2[1]) + len(s2[2]) + len(s6[0]) + len(s7[0])
    assert row["truncated_records"] == 2 + 1 + 1 + 1
    assert row["recovered_segments"] == 1  # segment 2 only: recovery stopped there
    assert "CRC32C mismatch in the batch at position" in row["reason"]
    assert "2 later segments deleted" in row["reason"]
    assert (
        "3 valid records in 3 batches" in row["reason"]
        and "deleted among them (--recover-truncating)" in row["reason"]
    )
    points = checkpoints.read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint")
    assert points == {TP: 3}  # the recovered log end offset
    # the throw-away producer state of segment 2 snapshots its base, its recovery snapshots its end
    assert [n for n in remaining if n.endswith(".snapshot")] == [
        SEG.format(2) + ".snapshot",
        SEG.format(3) + ".snapshot",
    ]


def test_corruption_below_the_recovery_point_is_reported_and_never_truncated(tmp_path):
    """A broker never looks at segments below the recovery point: neither does recovery. The job that
    reads the bad batch reports it with the file and position and changes nothing there."""
    s0 = [batch(0, [("a", "1")]), batch(1, [("b", "1")])]
    make_log(tmp_path, "t", 0, {0: s0, 2: [batch(2, [("c", "1")])]})
    _recovery_points(tmp_path, t=2)
    log0 = _file(tmp_path, 0, ".log")
    data = bytearray(log0.read_bytes())
    data[len(s0[0]) + 65] ^= 0x01
    log0.write_bytes(bytes(data))
    configs = load_config(None, [], [], ["cleanup.policy=compact"])
    row = compact_partition(_task(tmp_path), configs, JobOptions(now_ms=NOW))
    assert row["status"] == "failed"
    assert f"{SEG.format(0)}.log at position {len(s0[0])}: CRC32C mismatch" in row["reason"]
    assert log0.read_bytes() == bytes(data)
    assert row["recovered_segments"] == 1 and row["truncated_bytes"] == 0  # segment 2 was checked


def test_the_log_ending_below_the_log_start_checkpoint_restarts_empty_there(tmp_path):
    """LogLoaderTest.testLogEndLessThanStartAfterReopen: every segment goes, one empty segment at the
    log-start checkpoint, the leader-epoch cache cleared, no snapshot left."""
    make_log(tmp_path, "t", 0, {0: [batch(0, [("a", "1")])], 1: [batch(1, [("b", "1")])]})
    (tmp_path / "t-0" / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
    checkpoints.write_offset_checkpoint(tmp_path / "log-start-offset-checkpoint", {TP: 20})
    row = _retain(tmp_path)
    names = sorted(p.name for p in (tmp_path / "t-0").iterdir())
    assert names == [SEG.format(20) + s for s in (".index", ".log", ".timeindex")] + [
        "leader-epoch-checkpoint"
    ]
    assert all((tmp_path / "t-0" / n).stat().st_size == 0 for n in names if n.startswith(SEG.format(20)))
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == "0\n0\n"
    assert "empty segment created at the log start offset 20" in row["reason"]
    # the log now starts at its first segment: no log-start entry; the recovery point is 20
    assert checkpoints.read_offset_checkpoint(tmp_path / "log-start-offset-checkpoint") == {}
    assert checkpoints.read_offset_checkpoint(tmp_path / "recovery-point-offset-checkpoint") == {TP: 20}


# ---------------------------------------------------------------------------------------------- indexes, epochs
@pytest.mark.parametrize(
    "before,after",
    [
        (None, "0\n3\n0 104\n1 106\n2 110\n"),
        ("0\n2\n0 104\n5 200\n", "0\n1\n0 104\n"),
    ],
    ids=["no checkpoint", "a stale entry past the end"],
)
def test_recovery_rebuilds_the_leader_epoch_cache(tmp_path, before, after):
    """LogSegmentTest.testRecoveryRebuildsEpochCache: batches of epochs 0, 1, 1, 2 from offset 104 give
    (0, 104), (1, 106), (2, 110). An epoch is assigned only above the cache's latest: behind a stale
    entry (epoch 5 from offset 200) none is, and the stale one goes as it starts past the log end."""
    epochs = [(104, 0), (106, 1), (108, 1), (110, 2)]
    batches = [with_partition_leader_epoch(batch(o, [("k", "v"), ("k", "w")]), e) for o, e in epochs]
    make_log(tmp_path, "t", 0, {104: batches})
    if before is not None:
        (tmp_path / "t-0" / "leader-epoch-checkpoint").write_text(before)
    _retain(tmp_path)
    assert (tmp_path / "t-0" / "leader-epoch-checkpoint").read_text() == after


def test_the_transaction_index_is_rebuilt_with_each_aborts_last_stable_offset(tmp_path):
    """LogSegmentTest.testRecoverTransactionIndex: an aborted transaction's LSO is the first offset of
    another producer's open transaction, else the marker offset + 1."""
    batches = [
        batch(100, [("a", "1")], pid=1, epoch=0, seq=0, txn=True),
        batch(101, [("b", "1")], pid=2, epoch=0, seq=0, txn=True),
        marker(102, commit=False, pid=1),
        marker(103, commit=False, pid=2),
    ]
    make_log(tmp_path, "t", 0, {100: batches})
    _retain(tmp_path)
    expected = struct.pack(">hqqqq", 0, 1, 100, 102, 101) + struct.pack(">hqqqq", 0, 2, 101, 103, 104)
    assert _file(tmp_path, 100, ".txnindex").read_bytes() == expected


# ---------------------------------------------------------------------------------------------- snapshots
@pytest.mark.parametrize(
    "recovery_point,expected",
    [(0, [10, 20, 30, 35]), (35, [20, 30, 35])],
    ids=["recovery point 0", "recovery point at the end"],
)
def test_producer_snapshots_as_kafkas_upgrade_path_test(tmp_path, recovery_point, expected):
    """UnifiedLogTest.testInitializationOfProducerSnapshotsUpgradePath, unclean cases, no snapshot at
    first: recovering from 0 leaves one at every base but the first and at the end; recovering the last
    segment only leaves the last two bases and the end."""
    segments = {
        b: [batch(b, [("k", "v")] * (5 if b == 30 else 10), pid=7, epoch=0, seq=b)] for b in (0, 10, 20, 30)
    }
    make_log(tmp_path, "t", 0, segments)
    _recovery_points(tmp_path, t=recovery_point)
    _retain(tmp_path)
    snapshots = sorted(int(p.name[:20]) for p in (tmp_path / "t-0").glob("*.snapshot"))
    assert snapshots == expected
    (entry,) = read_producer_snapshot(_file(tmp_path, 35, ".snapshot"))
    assert (entry.producer_id, entry.epoch, entry.last_offset, entry.last_sequence) == (7, 0, 34, 34)


def test_snapshot_entries_are_in_java_hashmap_order():
    """HashMap<Long, _>: bucket = spread(Long.hashCode(id)) & (capacity - 1), insertion order within a
    bucket; the table starts at 16 and doubles past three quarters full."""
    table = {pid: ProducerEntry(pid) for pid in (17, 5, 1, 2**32 + 6, 33)}
    # buckets with 16 slots: 17 -> 1, 5 -> 5, 1 -> 1, 2^32+6 -> (6 ^ 1) = 7, 33 -> 1
    assert hashmap_order(table, len(table)) == [17, 1, 33, 5, 2**32 + 6]
    assert [hashmap_capacity(n) for n in (0, 12, 13, 24, 25)] == [16, 16, 32, 32, 64]


# ---------------------------------------------------------------------------------------------- when, and how
def test_no_recovery_after_a_clean_shutdown(tmp_path):
    """LogLoaderTest.testCleanShutdownFile: with the marker nothing is recovered, even with no recovery
    point; the job changes no file (not even a snapshot) when it has nothing to do."""
    make_log(
        tmp_path, "t", 0, {0: [batch(0, [("a", "1")])], 1: [batch(1, [("b", "1")])]}, clean_shutdown=True
    )
    before = _state(tmp_path)
    row = _retain(tmp_path)
    assert row["status"] == "skipped" and row["recovered_segments"] is None
    assert _state(tmp_path) == before


def test_a_clean_load_deletes_the_producer_snapshot_at_or_below_the_log_start_offset(tmp_path):
    """What a broker started on a cleanly stopped log dir does first (LogLoader.load: truncateAndReload from
    the log start offset): after a DeleteRecords into the second segment, that segment's snapshot goes; the
    one at the log end stays; retention then deletes the first segment. A dry run says so, deletes nothing."""
    from kafka_log_core.format.producer_snapshot import encode_producer_snapshot

    make_log(tmp_path, "t", 0, {0: [batch(0, [("a", "1"), ("b", "1")])], 2: [batch(2, [("c", "1"), ("d", "1")])]},
             clean_shutdown=True)  # fmt: skip
    for offset in (2, 4):
        _file(tmp_path, offset, ".snapshot").write_bytes(encode_producer_snapshot([]))
    checkpoints.write_offset_checkpoint(tmp_path / "log-start-offset-checkpoint", {TP: 3})
    before = _state(tmp_path)
    dry = _retain(tmp_path, dry_run=True)
    assert "would delete the producer snapshots at 2 " in dry["reason"] and _state(tmp_path) == before
    row = _retain(tmp_path)
    assert "deleted the producer snapshots at 2 " in row["reason"]
    after = _state(tmp_path)
    gone = [f"{SEG.format(0)}{suffix}" for suffix in (".index", ".log", ".timeindex")]
    assert sorted(set(before) - set(after)) == [
        str(Path("t-0") / n) for n in (*gone, f"{SEG.format(2)}.snapshot")
    ]
    assert {k: v for k, v in before.items() if k in after} == after
    assert _retain(tmp_path)["reason"] == _retain(tmp_path)["reason"]  # a second run finds nothing to delete
    assert _state(tmp_path) == after


def test_a_missing_index_is_recovered_even_after_a_clean_shutdown_without_touching_later_segments(tmp_path):
    """LogLoader.loadSegmentFiles: a segment without .index is recovered whatever the shutdown; bytes it
    loses do not delete the segments after it (unlike the unclean pass)."""
    s0 = [batch(0, [("a", "1")]), batch(1, [("b", "1")])]
    make_log(tmp_path, "t", 0, {0: s0, 2: [batch(2, [("c", "1")])]}, clean_shutdown=True)
    _file(tmp_path, 0, ".index").unlink()
    _file(tmp_path, 0, ".log").write_bytes(s0[0] + s0[1][:30])
    later = _file(tmp_path, 2, ".log").read_bytes()
    row = _retain(tmp_path, "index.interval.bytes=0")
    assert _file(tmp_path, 0, ".log").read_bytes() == s0[0]
    assert _file(tmp_path, 0, ".index").read_bytes() == b""
    assert _file(tmp_path, 2, ".log").read_bytes() == later
    assert "its .index is missing" in row["reason"] and row["truncated_bytes"] == 30


def test_a_second_run_changes_nothing(tmp_path):
    make_log(
        tmp_path, "t", 0, {0: [batch(0, [("a", "1")], pid=3, epoch=0, seq=0)], 1: [batch(1, [("b", "1")])]}
    )
    _file(tmp_path, 1, ".log").write_bytes(_file(tmp_path, 1, ".log").read_bytes() + b"\x00" * 100)
    assert _retain(tmp_path)["truncated_bytes"] == 100
    after_first = _state(tmp_path)
    again = _retain(tmp_path)
    assert again["truncated_bytes"] == 0 and again["recovered_segments"] == 1  # the last segment, re-checked
    assert _state(tmp_path) == after_first


def test_dry_runs_and_reports_change_nothing_and_say_what_recovery_would_do(tmp_path):
    from kafka_log_core.work.report import report_partition

    b0, b1 = batch(0, [("a", "1")]), batch(1, [("b", "1")])
    make_log(tmp_path, "t", 0, {0: [b0], 1: [b1]})
    _file(tmp_path, 0, ".log").write_bytes(b0 + b"\x01" * 20)  # a size field far past the end: torn
    before = _state(tmp_path)
    # segment 1 is valid: the broker's rule would delete it, so each mode is said
    for row in (
        _retain(tmp_path, dry_run=True),
        report_partition(_task(tmp_path), _configs(), JobOptions(now_ms=NOW)),
    ):
        assert row["status"] == "failed" and row["truncated_bytes"] is None
        default, _, truncating = row["reason"].partition("; with --recover-truncating it would recover: ")
        assert f"1 valid record in 1 batch ({len(b1)} bytes) in 1 later segment" in default
        assert "partition not touched" in default
        assert f"truncated from segment 0 at position {len(b0)}" in truncating
        assert "1 later segment deleted" in truncating
    row = _retain(tmp_path, dry_run=True, recover_truncating=True)
    assert row["truncated_bytes"] == 20 + len(b1) and "would recover" in row["reason"]
    opts = JobOptions(now_ms=NOW, recover_truncating=True)
    reported = report_partition(_task(tmp_path), _configs(), opts)
    assert reported["status"] == "ok" and reported["truncated_bytes"] == 20 + len(b1)
    assert (reported["segments"], reported["log_end_offset"]) == (1, 1)  # the figures of the recovered log
    assert _state(tmp_path) == before


def test_no_recover_refuses_what_recovery_would_change_and_changes_nothing(tmp_path):
    b0 = batch(0, [("a", "1")])
    make_log(tmp_path, "t", 0, {0: [b0]})
    _file(tmp_path, 0, ".log").write_bytes(b0 + bytes(64))
    before = _state(tmp_path)
    row = _retain(tmp_path, recover=False)
    assert row["status"] == "failed"
    assert "--no-recover" in row["reason"] and "64 bytes (0 records) truncated" in row["reason"]
    assert "\n" not in row["reason"]
    assert _state(tmp_path) == before


def test_the_driver_marks_a_fully_recovered_log_dir_cleanly_shut_down(tmp_path):
    make_log(tmp_path, "t", 0, {0: [batch(0, [("a", "1")])]})
    make_log(tmp_path, "u", 0, {0: [batch(0, [("b", "1")])]})
    rows = [_recovered(tmp_path)]
    assert recovery.finish_log_dirs(rows)[0].startswith(f"{tmp_path}: .kafka_cleanshutdown not written")
    assert not (tmp_path / ".kafka_cleanshutdown").exists()
    other = _recovered(tmp_path, "u")
    (note,) = recovery.finish_log_dirs([*rows, other])
    assert "wrote .kafka_cleanshutdown" in note
    assert (tmp_path / ".kafka_cleanshutdown").read_bytes() == b'{"version":0,"brokerEpoch":-1}'
    assert recovery.finish_log_dirs([*rows, other]) == []  # already there


def test_a_future_log_keeps_the_log_dir_unclean(tmp_path):
    make_log(tmp_path, "t", 0, {0: [batch(0, [("a", "1")])]})
    (tmp_path / "t-0.0123456789abcdef0123456789abcdef-future").mkdir()
    (note,) = recovery.finish_log_dirs([_recovered(tmp_path)])
    assert "not written" in note and "-future" in note
    assert not (tmp_path / ".kafka_cleanshutdown").exists()


# ---------------------------------------------------------------------------------------------- high watermark
def test_the_high_watermark_of_a_single_replica_partition_becomes_the_log_end_offset(tmp_path):
    """After a crash the replication-offset-checkpoint is stale. A partition whose only replica is this
    broker gets its recovered log end offset (its HW once it leads again); another keeps the checkpoint."""
    from tests.metadata_build import (
        feature_level,
        partition_record,
        topic_record,
        write_meta_properties,
        write_metadata_log,
    )

    topic_id = "KB9btG56TIKDzbjC1Rj0pA"
    write_meta_properties(tmp_path)
    records = [feature_level("metadata.version", 21), topic_record("t", topic_id),
               partition_record(topic_id, 0, [1], [1], 1), partition_record(topic_id, 1, [1, 2], [1, 2], 1)]  # fmt: skip
    write_metadata_log(tmp_path / "__cluster_metadata-0", {0: [records]})
    for p in (0, 1):
        make_log(tmp_path, "t", p, {0: [batch(0, [("a", "1")]), batch(1, [("b", "1"), ("c", "1")])]})
        checkpoints.write_partition_metadata(tmp_path / f"t-{p}" / "partition.metadata", topic_id)
    hw = {TopicPartition("t", 0): 1, TopicPartition("t", 1): 1}
    checkpoints.write_offset_checkpoint(tmp_path / "replication-offset-checkpoint", hw)
    from kafka_log_core.settings.log_dir_config import resolve_log_dir_configs

    (resolved,) = resolve_log_dir_configs([tmp_path], sets=["retention.ms=-1"]).values()
    rows = {
        p: retain_partition(_task(tmp_path, "t", p), resolved.configs, JobOptions(now_ms=NOW)) for p in (0, 1)
    }
    assert (
        "high watermark 1 -> 3, the recovered log end offset (broker 1 is the only replica"
        in rows[0]["reason"]
    )
    assert "high watermark 1 from replication-offset-checkpoint kept (replicas [1, 2]" in rows[1]["reason"]
    assert checkpoints.read_offset_checkpoint(tmp_path / "replication-offset-checkpoint") == {
        TopicPartition("t", 0): 3,
        TopicPartition("t", 1): 1,
    }
