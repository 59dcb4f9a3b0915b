"""Split cleaning (one round over every key, cut into per-segment and per-group tasks) and --rounds.

The reference is the single-task cleaner of the same code base with a dedupe buffer large enough for
every key -- which the differential broker tests hold to Kafka's own cleaner -- and, for --rounds,
the same job run again and again. Files are compared byte for byte.
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

import pytest

from kafka_log_core.format import legacy_records, log_file, record_batch
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.format.record_batch import Record
from kafka_log_core.log.partition_log import LogDirState
from kafka_log_core.rules.split_cleaning import run_local
from kafka_log_core.settings.config import load_config
from kafka_log_core.settings.kafka_version import LATEST, KafkaVersion
from kafka_log_core.simulator.writer import PartitionWriter
from kafka_log_core.work.tasks import ALL_ROUNDS, JobOptions, PartitionTask, compact_partition
from tests.logbuild import TS, mark_clean_shutdown, read_records

TOPIC = "orders"
DAY = 86_400_000
BIG_BUFFER = "log.cleaner.dedupe.buffer.size=1073741824"
SETTINGS = [
    "cleanup.policy=compact",
    "segment.index.bytes=600",
    "delete.retention.ms=3600000",
]  # groups of a few segments
# the smallest buffer the broker accepts, with a load factor that makes it hold 218 keys a round
TINY_MAP = ("log.cleaner.dedupe.buffer.size=1048600", "log.cleaner.io.buffer.load.factor=0.005")
CODECS = (0, 1, 2, 3, 4)  # none, gzip, snappy, lz4, zstd


def _write(
    w: PartitionWriter, rng: random.Random, n_batches: int, keys: int, at: int, *, open_txn: bool,
    transactions: bool = True,
) -> None:  # fmt: skip
    """Keyed batches in every codec, tombstones, unkeyed records, idempotent and (with ``transactions``)
    transactional producers (committed and aborted), one transaction left open at the end when
    ``open_txn``."""
    seq = {7: 0, 9: 0}
    for b in range(n_batches):
        now = at + b * 10
        recs = []
        for i in range(rng.randrange(1, 12)):
            key = None if rng.random() < 0.03 else b"k%04d" % rng.randrange(keys)
            value = None if rng.random() < 0.12 else b"v%d-" % b + b"x" * rng.randrange(0, 60)
            recs.append(Record(0, now + i, key, value))
        kind = rng.random()
        codec = CODECS[b % len(CODECS)]
        if kind < 0.15 and transactions:  # a transaction of producer 9: committed or aborted
            w.append_records(recs, now_ms=now, codec=codec, producer_id=9, producer_epoch=0, base_sequence=seq[9],
                             is_transactional=True)  # fmt: skip
            seq[9] += len(recs)
            ctype = record_batch.CONTROL_COMMIT if rng.random() < 0.5 else record_batch.CONTROL_ABORT
            w.append_control(ctype, producer_id=9, producer_epoch=0, coordinator_epoch=1, now_ms=now + 1)
        elif kind < 0.3:  # idempotent producer 7
            w.append_records(
                recs, now_ms=now, codec=codec, producer_id=7, producer_epoch=0, base_sequence=seq[7]
            )
            seq[7] += len(recs)
        else:
            w.append_records(recs, now_ms=now, codec=codec)
    if open_txn:
        w.append_records([Record(0, at, b"k0001", b"open")], now_ms=at, producer_id=11, producer_epoch=0,
                         base_sequence=0, is_transactional=True)  # fmt: skip
    w.append_records([Record(0, at, b"tail", b"t")], now_ms=at)  # rolls nothing: the active segment's


def _legacy_prefix(w: PartitionWriter) -> None:
    """Magic 0 and 1 entries, plain and gzip-wrapped, as a pre-0.11 broker wrote them."""
    entries = []
    for i in range(40):
        key = b"k%04d" % (i % 15)
        value = None if i % 9 == 0 else b"old%d" % i
        entries.append(
            legacy_records.encode_message(i, 1 if i < 25 else 0, key, value, TS + i if i < 25 else -1)
        )
    w.append_batch(b"".join(entries[:20]), now_ms=TS)
    wrapped = [
        legacy_records.LegacyRecord(20 + i, 1, 0, TS + i, 0, b"k%04d" % (i % 7), b"w%d" % i) for i in range(5)
    ]
    w.append_batch(legacy_records.encode_wrapper(wrapped, 1, 1), now_ms=TS)
    w.append_batch(b"".join(entries[25:]), now_ms=TS)


def build(
    log_dir: Path, *, seed: int = 1, legacy: bool = False, keys: int = 300, batches: int = 260,
    transactions: bool = True,
) -> Path:  # fmt: skip
    rng = random.Random(seed)
    with PartitionWriter(log_dir / f"{TOPIC}-0", segment_bytes=6000, index_interval_bytes=512) as w:
        if legacy:
            _legacy_prefix(w)
        _write(w, rng, batches, keys, TS, open_txn=False, transactions=transactions)
    return log_dir / f"{TOPIC}-0"


def compact(
    log_dir: Path, now: int, *extra: str, rounds: int = 1, split: bool = False, version: KafkaVersion = LATEST
) -> dict:
    configs = load_config(None, [], [], [*SETTINGS, *extra], version=version)
    tp = TopicPartition(TOPIC, 0)
    task = PartitionTask(str(log_dir), TOPIC, 0, LogDirState.read(log_dir).for_partition(tp))
    opts = JobOptions(now_ms=now, rounds=rounds, split_above=0 if split else None)
    return compact_partition(task, configs, opts, split_runner=run_local if split else None)


def snapshot_files(log_dir: Path) -> dict[str, bytes]:
    """Every file of the log dir (names and bytes) but the lock files."""
    out = {}
    for p in sorted(log_dir.rglob("*")):
        if p.is_file() and not p.name.endswith(".lock") and p.name != ".lock":
            out[str(p.relative_to(log_dir))] = p.read_bytes()
    return out


def assert_same_dirs(a: Path, b: Path) -> None:
    fa, fb = snapshot_files(a), snapshot_files(b)
    assert sorted(fa) == sorted(fb)
    for name in fa:
        assert fa[name] == fb[name], f"{name} differs"
    for name in fa:
        if name.endswith(".log"):
            assert os.stat(a / name).st_mtime_ns // 10**6 == os.stat(b / name).st_mtime_ns // 10**6, name


def twin(tmp_path: Path, name: str, source: Path) -> Path:
    d = tmp_path / name
    shutil.copytree(source, d, copy_function=shutil.copy2)
    return d


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    """A partition cleaned once already (tombstones stamped with a horizon), then written more."""
    d = tmp_path_factory.mktemp("mixed")
    build(d, seed=3, legacy=True)
    first = compact(d, TS + DAY, BIG_BUFFER)
    assert first["status"] == "cleaned", first
    with PartitionWriter(d / f"{TOPIC}-0", segment_bytes=6000, index_interval_bytes=512) as w:
        _write(w, random.Random(4), 200, 300, TS + DAY + 1000, open_txn=True)
    return d


def test_split_round_equals_one_task_with_a_buffer_for_every_key(tmp_path, mixed):
    """Legacy entries, every codec, tombstones stamped past their horizon and new ones, committed,
    aborted and open transactions, markers: the split round writes the same files and checkpoint."""
    now = TS + 2 * DAY  # the first cleaning's horizons (TS + DAY + 1 h) have passed
    single, split = twin(tmp_path, "single", mixed), twin(tmp_path, "split", mixed)
    r1 = compact(single, now, BIG_BUFFER)
    r2 = compact(split, now, split=True)
    assert r1["status"] == r2["status"] == "cleaned", (r1, r2)
    assert "split cleaning" in r2["reason"] and "split cleaning" not in r1["reason"]
    assert (r1["records_before"], r1["records_after"], r1["tombstones_removed"]) == (
        r2["records_before"], r2["records_after"], r2["tombstones_removed"],
    )  # fmt: skip
    assert_same_dirs(single, split)
    assert r2["tombstones_removed"] > 0  # some horizons had passed
    assert read_records(split / f"{TOPIC}-0")  # kafka-python decodes the result


@pytest.mark.parametrize("seed", [5, 6])
def test_split_round_on_a_fresh_partition_matches_with_rule_r2_2_of_either_release(tmp_path, seed):
    source = tmp_path / "source"
    build(source, seed=seed, keys=80)
    # R2.2 on the high watermark (4.4), on the round's bound (4.0-4.3), none (3.8)
    for version in (LATEST, KafkaVersion(4, 3), KafkaVersion(3, 8)):
        single, split = twin(tmp_path, f"single{version}", source), twin(tmp_path, f"split{version}", source)
        r1 = compact(single, TS + DAY, BIG_BUFFER, version=version)
        r2 = compact(split, TS + DAY, version=version, split=True)
        assert r1["status"] == r2["status"] == "cleaned", (r1, r2)
        assert_same_dirs(single, split)


def test_a_lowered_max_decompressed_message_bytes_fails_either_path_before_any_write(tmp_path):
    """Kafka 4.4's cleaner fails on a compressed record above the limit (rules.record_size_limit): the
    single task and the split round refuse the round alike and leave every file as it was."""
    source = tmp_path / "source"
    build(source, seed=7, keys=80)
    mark_clean_shutdown(source)  # no recovery first: the round is the only thing that could write
    for split in (False, True):
        d = twin(tmp_path, f"split-{split}", source)
        before = snapshot_files(d)
        row = compact(d, TS + DAY, "max.decompressed.message.bytes=8", split=split)
        assert row["status"] == "failed" and "more than max.decompressed.message.bytes=8" in row["reason"], (
            row
        )
        assert snapshot_files(d) == before


def test_split_round_covers_keys_far_beyond_the_dedupe_buffer(tmp_path):
    """A tiny buffer: the single task takes many rounds; the split round is one, and equals the single
    task with a buffer for every key."""
    source = tmp_path / "source"
    build(source, seed=8, keys=2000)
    tiny = TINY_MAP
    big, split = twin(tmp_path, "big", source), twin(tmp_path, "split", source)
    compact(big, TS + DAY, BIG_BUFFER)
    row = compact(split, TS + DAY, *tiny, split=True)
    assert row["status"] == "cleaned" and "offset map full" not in row["reason"], row
    assert_same_dirs(big, split)


def test_rounds_all_equals_running_one_round_again_and_again(tmp_path):
    source = tmp_path / "source"
    build(source, seed=9, keys=600)
    tiny = TINY_MAP
    once, again = twin(tmp_path, "all", source), twin(tmp_path, "again", source)
    row = compact(once, TS + DAY, *tiny, rounds=ALL_ROUNDS)
    assert row["status"] == "cleaned", row
    runs = 0
    while True:
        r = compact(again, TS + DAY, *tiny)
        if r["status"] != "cleaned":
            break
        runs += 1
    assert runs >= 3, "the buffer should take several rounds"
    assert row["reason"].endswith(f"{runs} rounds"), row["reason"]
    assert_same_dirs(once, again)


def test_rounds_n_stops_after_n_rounds(tmp_path):
    source = tmp_path / "source"
    build(source, seed=9, keys=600)
    tiny = TINY_MAP
    two, again = twin(tmp_path, "two", source), twin(tmp_path, "again", source)
    compact(two, TS + DAY, *tiny, rounds=2)
    compact(again, TS + DAY, *tiny)
    compact(again, TS + DAY, *tiny)
    assert_same_dirs(two, again)


def test_without_a_runner_a_split_partition_is_left_to_the_driver(tmp_path):
    source = tmp_path / "source"
    build(source, seed=2, keys=50)
    before = {n: b for n, b in snapshot_files(source).items() if n.endswith(".log")}
    configs = load_config(None, [], [], SETTINGS)
    tp = TopicPartition(TOPIC, 0)
    task = PartitionTask(str(source), TOPIC, 0, LogDirState.read(source).for_partition(tp))
    row = compact_partition(task, configs, JobOptions(now_ms=TS + DAY, split_above=0))
    assert row["status"] == "split", row
    assert {n: b for n, b in snapshot_files(source).items() if n.endswith(".log")} == before
    assert not (source / "cleaner-offset-checkpoint").exists()


def test_small_partitions_keep_the_single_task_path(tmp_path):
    source = tmp_path / "source"
    build(source, seed=2, keys=50)
    configs = load_config(None, [], [], SETTINGS)
    tp = TopicPartition(TOPIC, 0)
    task = PartitionTask(str(source), TOPIC, 0, LogDirState.read(source).for_partition(tp))
    row = compact_partition(
        task, configs, JobOptions(now_ms=TS + DAY, split_above=4 * 2**30), split_runner=run_local
    )
    assert row["status"] == "cleaned" and "split" not in row["reason"], row


def test_a_segment_spanning_billions_of_offsets_with_few_records_splits_like_one_task(tmp_path):
    """A segment copied from a compacted log (a replica that fetched it: gaps of any size) spans up to
    2^31 offsets with a handful of records; pass 1 sizes its rows by the records the batch headers count,
    not by the offset span (48 GB here)."""
    from tests.logbuild import batch, make_log

    gap = 2_000_000_000
    source = tmp_path / "source"
    make_log(
        source, TOPIC, 0,
        {
            0: [batch(0, [("a", "1"), ("b", "1")])],
            2: [batch(2, [("a", "2"), ("c", "1")]), batch(gap, [("b", "2"), ("c", None)])],
            gap + 2: [batch(gap + 2, [("d", "1")])],
        },
        clean_shutdown=True,
    )  # fmt: skip
    single, split = twin(tmp_path, "single", source), twin(tmp_path, "split", source)
    row = compact(single, TS + DAY, BIG_BUFFER)
    assert row["status"] == "cleaned", row
    row = compact(split, TS + DAY, BIG_BUFFER, split=True)
    assert row["status"] == "cleaned" and "split cleaning: " in row["reason"], row
    assert_same_dirs(single, split)
    assert [(o, k) for o, k, _ in all_records(split)] == [
        (2, b"a"),
        (gap, b"b"),
        (gap + 1, b"c"),
        (gap + 2, b"d"),
    ]


def all_records(d: Path):
    out = []
    for path in sorted((d / f"{TOPIC}-0").glob("*.log")):
        for b in log_file.iter_file_batches(path, strict=True):
            b.verify()
            out += [(r.offset, r.key, r.value) for r in b.records()]
    return out


def test_committed_data_pass_one_takes_for_aborted_is_still_looked_up_in_pass_two(tmp_path):
    """Pass 1's tracker starts at the index entry below the first dirty offset (4, mid-segment, past the
    ABORT marker at 2) with the aborted transactions of that segment on (Kafka's), so producer 9's
    aborted transaction stays "ongoing" in it: its later committed record K@5 stays out of the map.
    Pass 2's tracker, from the log start, keeps that batch and looks K up: K@8, in another group,
    supersedes it. The split round must find K for
    that group too, as the single task's one map does (segments with transactional data give pass 2
    every keyed digest, not only the map entries)."""
    from kafka_log_core.format.checkpoints import write_offset_checkpoint
    from kafka_log_core.format.txn_index import AbortedTxn, encode_txn_index
    from kafka_log_core.log.segment import Segment
    from tests.logbuild import batch, make_log, marker

    pad, filler = "x" * 600_000, "f" * 5000  # one segment a group (segment.bytes is 1 MiB); index entries
    d = make_log(
        tmp_path / "source", TOPIC, 0,
        {
            0: [batch(0, [("f0", filler)]), batch(1, [("a", "1")], pid=9, epoch=0, seq=0, txn=True),
                marker(2, commit=False, pid=9), batch(3, [("f3", filler)]), batch(4, [("pad0", pad)])],
            5: [batch(5, [("K", "v1")], pid=9, epoch=0, seq=1, txn=True), marker(6, commit=True, pid=9),
                batch(7, [("pad1", pad)])],
            8: [batch(8, [("K", "v2")]), batch(9, [("pad2", pad)])],
            10: [batch(10, [("z", "1")])],
        },
        hw=11, clean_shutdown=True,
    )  # fmt: skip
    (d / "00000000000000000000.txnindex").write_bytes(encode_txn_index([AbortedTxn(9, 1, 2, 1)]))
    write_offset_checkpoint(tmp_path / "source" / "cleaner-offset-checkpoint", {TopicPartition(TOPIC, 0): 4})
    assert Segment.open(d, 0).offset_index.lookup(4).position > 0  # pass 1 starts after the ABORT marker
    single, split = (
        twin(tmp_path, "single", tmp_path / "source"),
        twin(tmp_path, "split", tmp_path / "source"),
    )
    r1 = compact(single, TS + DAY, BIG_BUFFER, "segment.bytes=1048576")
    r2 = compact(split, TS + DAY, "segment.bytes=1048576", split=True)
    assert r1["status"] == r2["status"] == "cleaned", (r1, r2)
    assert "3 groups" in r2["reason"], r2["reason"]
    assert [o for o, k, _ in all_records(single) if k == b"K"] == [8]  # K@5 went
    assert_same_dirs(single, split)


@pytest.mark.parametrize("buffers", ["default", "tiny"])
def test_split_round_keeping_by_offset_equals_one_task(tmp_path, monkeypatch, buffers):
    """Segments without transactions or legacy entries: pass 2 computes no digest and keeps the records
    whose offset is their key's latest (the keep list). With tiny pass-2 buffers a batch is decided
    again after each stop (output or rebuild buffer full), the keep list's cursor going back with it."""
    from kafka_log_core.rules import cleaner_segments

    if buffers == "tiny":
        monkeypatch.setattr(cleaner_segments, "OUTPUT_BYTES", 700)
        monkeypatch.setattr(cleaner_segments, "SCRATCH_BYTES", 300)
    source = tmp_path / "source"
    build(source, seed=21, legacy=True, transactions=False)  # the legacy segment: pass 2 looks keys up
    single, split = twin(tmp_path, "single", source), twin(tmp_path, "split", source)
    compact(single, TS + DAY, BIG_BUFFER)
    compact(split, TS + DAY, split=True)
    assert_same_dirs(single, split)
    first = compact(source, TS + DAY, BIG_BUFFER)  # a clean section below the next round's dirty one
    assert first["status"] == "cleaned", first
    with PartitionWriter(source / f"{TOPIC}-0", segment_bytes=6000, index_interval_bytes=512) as w:
        _write(w, random.Random(22), 200, 300, TS + DAY + 1000, open_txn=False, transactions=False)
    for now in (TS + DAY + 2000, TS + 9 * DAY):  # tombstones before and past the horizon
        single, split = twin(tmp_path, f"single{now}", source), twin(tmp_path, f"split{now}", source)
        compact(single, now, BIG_BUFFER)
        row = compact(split, now, split=True)
        assert row["status"] == "cleaned" and "split cleaning" in row["reason"], row
        assert_same_dirs(single, split)


def test_a_scratch_directory_an_interrupted_split_run_left_is_removed_by_the_next_job(tmp_path):
    """The tasks of a split round exchange their rows through files in the partition directory's
    scratch directory (which the broker's loader never reads: it loads files, not directories). A run
    killed mid-round leaves it; the next job holding the partition removes it, split or not."""
    from kafka_log_core.format.filenames import SPLIT_SCRATCH_DIR

    d = build(tmp_path, seed=5, keys=40, batches=60)
    scratch = d / SPLIT_SCRATCH_DIR
    scratch.mkdir()
    (scratch / "0.map").write_bytes(b"\0" * 48)
    row = compact(tmp_path, TS + DAY, BIG_BUFFER)
    assert row["status"] == "cleaned", row
    assert not scratch.exists()


# ---------------------------------------------------------------------------------------- crash safety
SMALL_GROUPS = "segment.index.bytes=30"  # two segments a group (one index entry each after recovery)


def test_split_round_killed_at_every_file_operation_then_rerun_keeps_every_record(tmp_path):
    """The crash-safety machinery of test_crash_safety (a forked child dies right before its N-th file
    operation), on a split round of several groups: the rerun ends with the records of an
    uninterrupted run, whatever was written or swapped when it died."""
    from tests.work.test_crash_safety import _crash_child

    source = tmp_path / "source"
    build(source, seed=12, keys=60, batches=100)
    reference = twin(tmp_path, "reference", source)
    row = compact(reference, TS + DAY, SMALL_GROUPS, split=True)
    assert row["status"] == "cleaned" and "split cleaning: " in row["reason"], row
    assert "1 groups" not in row["reason"], "the workload should make several groups"
    expected = all_records(reference)
    tried = crash_at = 0
    while True:
        d = twin(tmp_path, f"crash{crash_at}", source)
        if _crash_child(d, crash_at, run=lambda x: compact(x, TS + DAY, SMALL_GROUPS, split=True)) == -1:
            break  # the run finished before this operation: every point tried
        tried += 1
        row = compact(d, TS + DAY, SMALL_GROUPS, split=True)
        assert row["status"] in ("cleaned", "skipped"), row
        assert all_records(d) == expected, f"crash before file operation {crash_at}"
        assert not list((d / f"{TOPIC}-0").glob("*.cleaned")) and not list((d / f"{TOPIC}-0").glob("*.swap"))
        assert not (d / f"{TOPIC}-0" / ".kafka-log-jobs-split").exists()
        shutil.rmtree(d)
        crash_at += 1
    assert tried > 20


# ------------------------------------------------------------------------------------------- on Spark
@pytest.mark.spark
def test_compact_job_on_spark_splits_the_round_into_tasks_and_matches_one_task(tmp_path, spark, mixed):
    """The compact job: the executor leaves the partition to the driver, which runs pass 1 per segment,
    the combine by digest and pass 2 per group as Spark tasks; the files equal a single task's with a
    buffer for every key (this one holds 218 keys a round)."""
    from jobs import compact as compact_job

    now = TS + 2 * DAY
    single, split = twin(tmp_path, "single", mixed), twin(tmp_path, "split", mixed)
    compact(single, now, BIG_BUFFER)
    configs = load_config(None, [], [], [*SETTINGS, *TINY_MAP])
    rows = compact_job.run(spark, [str(split)], None, configs, JobOptions(now_ms=now, split_above=0))
    assert [r["status"] for r in rows] == ["cleaned"] and "split cleaning" in rows[0]["reason"], rows
    files_single = {n: b for n, b in snapshot_files(single).items() if not n.startswith(".kafka")}
    files_split = {n: b for n, b in snapshot_files(split).items() if not n.startswith(".kafka")}
    assert files_single.keys() == files_split.keys()
    for name in files_single:
        assert files_single[name] == files_split[name], name


# ------------------------------------------------------------------------------------------ bench smoke
@pytest.mark.slow
def test_bench_split_section_reports_both_cases_with_equal_results(tmp_path):
    """``bench.split`` on a small partition: both cases ran and their results agree (speeds are
    reported, never asserted)."""
    import json
    import subprocess
    import sys

    cmd = [sys.executable, "-m", "bench.split", "--work", str(tmp_path), "--quick", "--size", "8MiB"]
    proc = subprocess.run(cmd, cwd=Path(__file__).resolve().parents[2], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads([line for line in proc.stdout.splitlines() if line.startswith("{")][-1])
    assert result["speed"]["identical_files"] is True
    assert {r["status"] for r in result["speed"]["runs"].values()} == {"cleaned"}
    assert result["keys"]["equal_records"] is True
    assert result["keys"]["distinct_keys"] == 10 * result["keys"]["buffer_keys"]
    assert "rounds" in result["keys"]["runs"]["rounds_all"]["reason"]
    assert result["speed"]["split_vs_single"] > 0 and result["keys"]["split_vs_rounds_all"] > 0


@pytest.mark.parametrize(
    "sizes, bins",
    [([5] * 16, 4), ([9, 1, 1, 1, 1, 1, 1, 1, 1, 1], 2), ([3, 7, 2], 8), ([], 4), ([4, 4, 4], 1)],
    ids=["equal", "one-large", "more-bins-than-pieces", "none", "one-bin"],
)
def test_balanced_bins_hold_every_piece_once_with_nearly_equal_totals(sizes, bins):
    from kafka_log_core.rules.split_cleaning import balanced_bins

    got = balanced_bins(sizes, bins)
    assert sorted(i for b in got for i in b) == list(range(len(sizes)))
    assert len(got) <= max(1, min(bins, len(sizes))) and all(got)
    totals = [sum(sizes[i] for i in b) for b in got]
    assert totals == sorted(totals, reverse=True)  # the largest bin first: Spark starts it first
    if sizes:
        assert totals[0] - totals[-1] <= max(sizes)  # no bin ahead of another by more than a piece
