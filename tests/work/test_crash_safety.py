"""Crash at any instant: a compaction killed between any two file operations, then run again, ends with
the same records as an uninterrupted run (nothing lost, nothing duplicated).

The crash is real: the job runs in a forked child that dies with ``os._exit`` (no ``finally``, no
cleanup) right before its N-th file operation (rename, unlink, fsync, utime). The parent then runs the
job again as a user would — loader leftovers first — and compares every record.
"""

from __future__ import annotations

import os
import shutil

import pytest

from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.log.partition_log import LogDirState
from kafka_log_core.settings.config import load_config
from kafka_log_core.work.tasks import (
    JobOptions,
    PartitionTask,
    compact_partition,
    retain_task,
)
from tests.logbuild import TS, batch, make_log, marker

NOW = TS + 3_600_000
OPS = ("replace", "unlink", "fsync", "utime", "rename", "ftruncate")


def _workload(log_dir):
    make_log(
        log_dir,
        "orders",
        0,
        {
            0: [
                batch(0, [("a", "1"), ("b", "1"), ("c", "1")]),
                batch(3, [("a", "2"), (None, "unkeyed")], pid=7, epoch=0, seq=0),
                batch(5, [("x", "t1")], pid=9, epoch=0, seq=0, txn=True),
            ],
            6: [
                marker(6, commit=False, pid=9),
                batch(7, [("b", None), ("d", "1")], codec=1),
                batch(9, [("c", "2"), ("e", "1")]),
            ],
            11: [batch(11, [("a", "3"), ("d", None)], pid=7, epoch=0, seq=2), batch(13, [("f", "1")])],
            15: [batch(15, [("g", "1")])],
        },
        interval=1,
    )
    (log_dir / "orders-0" / "00000000000000000005.txnindex").unlink(missing_ok=True)
    from kafka_log_core.format.txn_index import AbortedTxn, encode_txn_index

    (log_dir / "orders-0" / "00000000000000000006.txnindex").write_bytes(
        encode_txn_index([AbortedTxn(9, 5, 6, 5)])
    )


def _records(log_dir):
    from kafka_log_core.format import log_file

    out = []
    for path in sorted((log_dir / "orders-0").glob("*.log")):
        for b in log_file.iter_file_batches(path, strict=True):
            b.verify()
            out += [(r.offset, r.key, r.value, r.headers, r.timestamp) for r in b.records()]
    return out


def _run(log_dir):
    configs = load_config(None, [], [], ["cleanup.policy=compact", "delete.retention.ms=100000000"])
    tp = TopicPartition("orders", 0)
    task = PartitionTask(str(log_dir), "orders", 0, LogDirState.read(log_dir).for_partition(tp))
    return compact_partition(task, configs, JobOptions(now_ms=NOW))


def _crash_child(log_dir, crash_at: int, run=None) -> int:
    """Fork; the child compacts (or runs ``run``) and dies before its ``crash_at``-th file operation.
    Returns the number of operations the child got through (== crash_at when it died)."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child
        os.close(r)
        count = [0]
        originals = {name: getattr(os, name) for name in OPS}

        def wrap(name):
            def op(*args, **kwargs):
                if count[0] == crash_at:
                    os.write(w, str(count[0]).encode())
                    os._exit(137)
                count[0] += 1
                return originals[name](*args, **kwargs)

            return op

        for name in OPS:
            setattr(os, name, wrap(name))
        try:
            (run or _run)(log_dir)
        finally:
            os.write(w, str(count[0]).encode())
            os._exit(0)
    os.close(w)
    _, status = os.waitpid(pid, 0)
    done = int(os.read(r, 64) or b"0")
    os.close(r)
    return done if os.WEXITSTATUS(status) == 137 else -1


@pytest.fixture(scope="module")
def expected(tmp_path_factory):
    d = tmp_path_factory.mktemp("reference")
    _workload(d)
    row = _run(d)
    assert row["status"] == "cleaned", row
    return _records(d)


def test_compaction_killed_at_every_file_operation_then_rerun_keeps_every_record(tmp_path, expected):
    tried = 0
    crash_at = 0
    while True:
        d = tmp_path / f"crash{crash_at}"
        _workload(d)
        survived = _crash_child(d, crash_at)
        if survived == -1:  # the run finished before reaching this operation: all points tried
            break
        tried += 1
        row = _run(d)
        assert row["status"] in ("cleaned", "skipped"), row
        assert _records(d) == expected, f"crash before file operation {crash_at}"
        shutil.rmtree(d)
        crash_at += 1
    print(f"compaction crash points tried: {tried}")
    assert tried > 10


# --------------------------------------------------------------------------- SIGKILL at random instants
_CHILD = """
import sys
from kafka_log_core.settings.config import load_config
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.log.partition_log import LogDirState
from kafka_log_core.work.tasks import JobOptions, PartitionTask, compact_partition, retain_partition
log_dir = sys.argv[1]
configs = load_config(None, [], [], ["cleanup.policy=compact", "delete.retention.ms=100000000", "segment.bytes=1048576"])
tp = TopicPartition("orders", 0)
task = PartitionTask(log_dir, "orders", 0, LogDirState.read(log_dir).for_partition(tp))
print("ready", flush=True)
sys.stdin.readline()
compact_partition(task, configs, JobOptions(now_ms=int(sys.argv[2])))
"""


def _big_workload(log_dir):
    import random

    from kafka_log_core.format.record_batch import Record
    from kafka_log_core.simulator.writer import PartitionWriter

    rng = random.Random(7)
    with PartitionWriter(log_dir / "orders-0", segment_bytes=256 * 1024, index_interval_bytes=4096) as w:
        for b in range(400):
            recs = []
            for i in range(40):
                key = b"k%05d" % rng.randrange(3000)
                value = None if rng.random() < 0.02 else b"v" * rng.randrange(20, 120)
                recs.append(Record(0, TS + b * 40 + i, key, value))
            w.append_records(recs, now_ms=TS + b * 40, codec=b % 3)


def _big_records(log_dir):
    from kafka_log_core.format import log_file

    out = []
    for path in sorted((log_dir / "orders-0").glob("*.log")):
        for b in log_file.iter_file_batches(path, strict=True):
            b.verify()
            out += [(r.offset, r.key, r.value) for r in b.records()]
    return out


def test_compaction_sigkilled_at_random_instants_then_rerun_keeps_every_record(tmp_path):
    import random
    import subprocess
    import sys
    import time

    from kafka_log_core.settings.config import load_config as _load

    rounds = int(os.environ.get("SOAK_ROUNDS", "40" if os.environ.get("SOAK") else "4"))
    reference = tmp_path / "reference"
    _big_workload(reference)
    configs = _load(
        None, [], [], ["cleanup.policy=compact", "delete.retention.ms=100000000", "segment.bytes=1048576"]
    )
    tp = TopicPartition("orders", 0)
    task = PartitionTask(str(reference), "orders", 0, LogDirState.read(reference).for_partition(tp))
    assert compact_partition(task, configs, JobOptions(now_ms=NOW))["status"] == "cleaned"
    expected = _big_records(reference)

    def start_child(d):
        child = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(d), str(NOW)], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert child.stdout.readline().strip() == b"ready"
        child.stdin.write(b"go\n")
        child.stdin.flush()
        return child, time.monotonic()

    timing = tmp_path / "timing"
    _big_workload(timing)
    child, started = start_child(timing)
    child.wait()
    full_run = time.monotonic() - started  # an uninterrupted child run, from "go" to exit
    assert _big_records(timing) == expected
    rng = random.Random(11)
    killed = 0
    for r in range(rounds):
        d = tmp_path / f"run{r}"
        _big_workload(d)
        child, _ = start_child(d)
        time.sleep(rng.uniform(0, full_run))
        child.kill()
        child.wait()
        killed += child.returncode == -9
        task = PartitionTask(str(d), "orders", 0, LogDirState.read(d).for_partition(tp))
        row = compact_partition(task, configs, JobOptions(now_ms=NOW))
        assert row["status"] in ("cleaned", "skipped"), row
        assert _big_records(d) == expected, f"round {r}"
        shutil.rmtree(d)
    print(
        f"random SIGKILL rounds: {rounds}, killed mid-run: {killed}, uninterrupted child run {full_run:.2f}s"
    )


# --------------------------------------------------------------------------------------------- recovery
def _crashed_broker_dir(log_dir):
    """A log dir as a killed broker leaves it: no .kafka_cleanshutdown, a recovery point in segment 3, a
    bad batch in segment 8 (so segment 12 goes), zero-filled index tails, producer snapshots of the
    broker that the loader replaces, a stale leader epoch, a stale high watermark."""
    from kafka_log_core.format import checkpoints
    from tests.logbuild import with_partition_leader_epoch

    def epoch(b, e):
        return with_partition_leader_epoch(b, e)

    make_log(
        log_dir,
        "orders",
        0,
        {
            0: [
                epoch(batch(0, [("a", "1"), ("b", "1")], pid=7, epoch=0, seq=0), 0),
                epoch(batch(2, [("c", "1")]), 0),
            ],
            3: [
                epoch(batch(3, [("x", "t1")], pid=9, epoch=0, seq=0, txn=True), 1),
                epoch(batch(4, [("a", "2")], pid=7, epoch=0, seq=2), 1),
                epoch(marker(5, commit=False, pid=9), 1),
                epoch(batch(6, [("d", "1"), ("e", "1")]), 2),
            ],
            8: [
                epoch(batch(8, [("f", "1")], pid=7, epoch=0, seq=3), 2),
                epoch(batch(9, [("g", "1"), ("h", "1")]), 2),
            ],
            12: [epoch(batch(12, [("i", "1")]), 3)],
        },
        interval=1,
    )
    part = log_dir / "orders-0"
    for base in (8, 12):
        for suffix, size in ((".index", 8 * 64), (".timeindex", 12 * 64)):
            path = part / f"{base:020d}{suffix}"
            path.write_bytes(path.read_bytes() + bytes(size))
    seg8 = part / f"{8:020d}.log"
    data = bytearray(seg8.read_bytes())
    data[-10] ^= 0xFF  # the second batch of segment 8: its CRC fails
    seg8.write_bytes(bytes(data))
    from kafka_log_core.format.producer_snapshot import write_producer_snapshot

    for offset in (3, 8, 12):
        write_producer_snapshot(part / f"{offset:020d}.snapshot", [])
    (part / "leader-epoch-checkpoint").write_text("0\n4\n0 0\n1 3\n2 6\n3 12\n")
    tp = TopicPartition("orders", 0)
    checkpoints.write_offset_checkpoint(log_dir / "recovery-point-offset-checkpoint", {tp: 4})
    checkpoints.write_offset_checkpoint(log_dir / "replication-offset-checkpoint", {tp: 6})


def _recover_run(log_dir):
    """retain with nothing to delete, then the driver's last step: every change is the recovery's
    (--recover-truncating: the bad batch of segment 8 is followed by valid data, so the broker's rule
    deletes segment 12, which takes the most file operations)."""
    from kafka_log_core.rules import recovery

    configs = load_config(None, [], [], ["cleanup.policy=delete", "retention.ms=-1", "retention.bytes=-1"])
    tp = TopicPartition("orders", 0)
    task = PartitionTask(str(log_dir), "orders", 0, LogDirState.read(log_dir).for_partition(tp))
    outcome = retain_task(task, configs, JobOptions(now_ms=NOW, recover_truncating=True))
    recovery.finish_log_dirs([outcome.recovered])
    return outcome.row


def _dir_state(log_dir):
    return {
        str(p.relative_to(log_dir)): p.read_bytes()
        for p in sorted(log_dir.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def test_recovery_killed_at_every_file_operation_then_rerun_ends_as_an_uninterrupted_run(tmp_path):
    reference = tmp_path / "reference"
    _crashed_broker_dir(reference)
    row = _recover_run(reference)
    assert row["status"] == "skipped" and row["truncated_bytes"] > 0, row
    expected = _dir_state(reference)
    assert (reference / ".kafka_cleanshutdown").exists()
    assert _recover_run(reference)["recovered_segments"] is None  # now clean: nothing to recover
    assert _dir_state(reference) == expected
    tried = 0
    crash_at = 0
    while True:
        d = tmp_path / f"crash{crash_at}"
        _crashed_broker_dir(d)
        survived = _crash_child(d, crash_at, _recover_run)
        if survived == -1:
            break
        tried += 1
        row = _recover_run(d)
        assert row["status"] == "skipped", row
        assert _dir_state(d) == expected, f"crash before file operation {crash_at}"
        shutil.rmtree(d)
        crash_at += 1
    print(f"recovery crash points tried: {tried}")
    assert tried > 10
