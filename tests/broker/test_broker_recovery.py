"""Recovery of a crashed broker's log dir against a real Kafka 4.x broker (issue 13).

One scenario for the module:

1. A broker (cleaner off, retention checks an hour apart, the recovery-point checkpoint written every
   second) gets three topics with 4 KiB segments: ``compacted`` (compact), ``deleted`` (delete) and
   ``both`` (compact,delete). Phase 1: an idempotent producer's keyed updates, a committed and an
   aborted transaction, and -- for ``deleted`` and ``both`` -- 30-day-old records from a plain producer
   followed by fresh ones (explicit timestamps, far from every threshold). Once the recovery-point
   checkpoint has moved past the first segments, phase 2: more updates, a transaction that is left
   open (its timeout far away), and a plain producer still sending to ``deleted`` when the broker is
   killed with SIGKILL.
2. The killed log dir is damaged as a crash can leave it: a torn last batch in ``deleted``'s active
   segment, half an entry written past the end of ``compacted``'s (zero-filled, preallocated) active
   offset index, and one flipped byte in a batch of ``both``'s segment before the active one (above
   the recovery point, so Kafka truncates there and drops the active segment). Then it is copied twice.
3. Copy A: a broker with its cleaner and retention on recovers it itself, cleans and deletes; a
   read_committed consumer reads every topic; it stops cleanly.
4. Copy B: our ``compact --recover-truncating`` then ``retain``, configured from the log dir's metadata
   log and the A broker's server.properties only.
5. Copy C: our ``compact`` without that option. The flipped byte in ``both`` is bit rot, not a crash
   tail (valid batches follow it): ``both`` fails untouched, its line naming the position the A broker
   logged and the valid records and bytes it deleted (counted here with kafka-python over the batches
   the A broker's log says it dropped); the crash tails of the other topics are recovered as by Kafka.

``compact`` runs the cleaner thread's retention on ``both`` itself, as broker A's cleaner thread does.

Compared, per topic: the segment and snapshot files (names and bytes; for ``both`` but the snapshot at
its log start offset, which retain's second load deletes as Kafka's next load would), log start offsets, cleaner
checkpoints, recovery points and high watermarks A and B leave, and the leader epochs (A's broker adds
one for its new leadership). Then a broker started on B logs no recovery of its own and serves the same
records as A to a read_committed consumer.
"""

from __future__ import annotations

import json
import re
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from jobs import compact, retain
from tests.broker.test_broker_interop import report_timings, start_with_spark
from tests.clirun import invoke
from tests.kafka_harness import (
    KafkaBroker,
    SentRecord,
    Transaction,
    consume_all,
    create_topic,
    earliest_offsets,
    produce,
    produce_transactions,
    read_offset_checkpoint,
    segment_files,
    wait_for_broker_cleaning,
)

pytestmark = pytest.mark.broker

DAY = 86_400_000
SEGMENT = {"internal.segment.bytes": "4096", "index.interval.bytes": "512"}
TOPICS = {
    "compacted": {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", **SEGMENT},
    "deleted": {"cleanup.policy": "delete", **SEGMENT},
    "both": {"cleanup.policy": "compact,delete", "min.cleanable.dirty.ratio": "0.01", **SEGMENT},
}
COMMON_PROPS = {"log.segment.delete.delay.ms": 0}
PREALLOCATED = 10 * 1024 * 1024  # log.index.size.max.bytes: an active segment's indexes
SOURCE_PROPS = {
    **COMMON_PROPS,
    "log.cleaner.enable": "false",
    "log.retention.check.interval.ms": 3_600_000,
    # Written at start-up and every 15 s: phase 2 and the kill happen between two writes.
    "log.flush.offset.checkpoint.interval.ms": 15_000,
}
REFERENCE_PROPS = {**COMMON_PROPS, "log.cleaner.backoff.ms": 100, "log.retention.check.interval.ms": 500}
TORN = 66  # bytes of the torn last batch
COMPARED_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
#: What the broker logs when it recovers a partition (the metadata log is always recovered: not a partition).
RECOVERY_LINES = re.compile(
    r"since no clean shutdown file was found|Recovering unflushed segment|recovering segment and rebuilding"
    r"|Found invalid messages|Corruption found in segment|Deleting segments as part of log recovery"
)


@dataclass
class Outcome:
    killed: Path = Path()
    dirs: dict[str, Path] = field(default_factory=dict)  # a: Kafka's result; b: ours, as our jobs left it
    points_after_phase_1: dict = field(default_factory=dict)
    first_recent: dict[str, int] = field(default_factory=dict)  # offset of the first fresh record
    open_txn_first_offset: int = -1
    flipped: tuple[str, int] = ("", -1)  # (.log name, byte position) of the flipped byte in both-0
    torn_records: int = -1  # records announced by the header of the torn batch
    rows: dict[str, list[dict]] = field(default_factory=dict)  # our jobs' rows
    notes: dict[str, str] = field(default_factory=dict)  # our jobs' stderr
    consumed: dict[str, dict[str, list]] = field(default_factory=dict)  # side -> topic -> records
    broker_b_log: str = ""
    broker_a_log: str = ""
    default_rows: list[dict] = field(default_factory=list)  # our compact on copy C, without the option
    default_exit: int = -1
    done_ms: int = 0


def _records(n: int, key, ts: int) -> list[SentRecord]:
    return [SentRecord(key(i), f"value-{i:05d}-".encode() * 3, (), ts + i) for i in range(n)]


def _wait_for_recovery_points(log_dir: Path, minimum: dict[str, int], timeout: float = 40.0) -> dict:
    path = log_dir / "recovery-point-offset-checkpoint"
    deadline = time.monotonic() + timeout
    while True:
        entries = read_offset_checkpoint(path)
        if all(entries.get((t, 0), 0) >= m for t, m in minimum.items()):
            return entries
        assert time.monotonic() < deadline, f"recovery points did not move past {minimum}: {entries}"
        time.sleep(0.2)


def _keep_producing(bootstrap: str, stop: threading.Event, now: int) -> None:
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 1, "batch.size": 1024, "log_level": 0,
                         "message.timeout.ms": 5000})  # fmt: skip
    i = 0
    while not stop.is_set():
        producer.produce("deleted", key=None, value=b"late-%06d" % i, timestamp=now + i)
        producer.poll(0.005)
        i += 1
    producer.purge()


def _produce(boot: str, log_dir: Path, outcome: Outcome):
    """Phases 1 and 2; returns the producer holding the open transaction (kept alive until the kill)."""
    now = int(time.time() * 1000) - 3_600_000
    old = now - 30 * DAY
    produce(boot, "deleted", _records(120, lambda i: None, old))
    produce(boot, "both", _records(60, lambda i: b"old-%03d" % i, old))
    for topic, key in (("deleted", lambda i: None), ("both", lambda i: b"r%02d" % (i % 20))):
        delivered = produce(boot, topic, _records(100, key, now), idempotent=topic == "both")
        outcome.first_recent[topic] = delivered[0].offset
    produce(boot, "compacted", _records(150, lambda i: b"k%02d" % (i % 30), now), idempotent=True)
    produce_transactions(
        boot,
        "compacted",
        [Transaction(_records(20, lambda i: b"t%02d" % i, now + 1000)),
         Transaction(_records(10, lambda i: b"a%02d" % i, now + 2000), commit=False)],
        transactional_id="committer",
    )  # fmt: skip
    outcome.points_after_phase_1 = _wait_for_recovery_points(
        log_dir, {"compacted": 1, "deleted": 1, "both": 1}
    )

    produce(boot, "compacted", _records(100, lambda i: b"k%02d" % (i % 30), now + 3000), idempotent=True)
    produce(boot, "both", _records(160, lambda i: b"r%02d" % (i % 20), now + 3000), idempotent=True)
    from confluent_kafka import Producer

    left_open = Producer({"bootstrap.servers": boot, "transactional.id": "left-open", "log_level": 0,
                          "transaction.timeout.ms": 900_000, "batch.size": 1024})  # fmt: skip
    left_open.init_transactions(30)
    left_open.begin_transaction()
    offsets: list[int] = []
    for r in _records(10, lambda i: b"o%02d" % i, now + 4000):
        left_open.produce("compacted", key=r.key, value=r.value, timestamp=r.timestamp_ms,
                          on_delivery=lambda err, msg: offsets.append(msg.offset()))  # fmt: skip
    assert left_open.flush(30) == 0
    outcome.open_txn_first_offset = min(offsets)
    produce(boot, "compacted", _records(20, lambda i: b"k%02d" % i, now + 5000), idempotent=True)
    return left_open, now


def _damage(log_dir: Path, outcome: Outcome) -> None:
    """What a crash can leave besides the zero-filled indexes: a torn batch, half an index entry, a bad byte."""
    deleted = segment_files(log_dir / "deleted-0")[-1]
    data = deleted.read_bytes()
    last = _batch_starts(data)[-1]
    assert int.from_bytes(data[last + 8 : last + 12], "big") + 12 > TORN
    deleted.write_bytes(data + data[last : last + TORN])  # a batch's header and the start of its records
    outcome.torn_records = int.from_bytes(data[last + 57 : last + 61], "big")  # v2 header: recordsCount

    index = segment_files(log_dir / "compacted-0", ".index")[-1]
    raw = bytearray(index.read_bytes())
    entries = next(n for n in range(0, len(raw), 8) if raw[n : n + 8] == bytes(8)) // 8
    previous = int.from_bytes(raw[(entries - 1) * 8 : entries * 8 - 4], "big") if entries else 0
    raw[entries * 8 : entries * 8 + 4] = (previous + 7).to_bytes(4, "big")  # the offset half only
    index.write_bytes(bytes(raw))

    logs = segment_files(log_dir / "both-0")
    assert len(logs) >= 3, logs
    target = logs[-2]
    data = bytearray(target.read_bytes())
    starts = _batch_starts(bytes(data))
    position = starts[len(starts) // 2] + 70  # inside the records of a batch in the middle
    data[position] ^= 0xFF
    target.write_bytes(bytes(data))
    outcome.flipped = (target.name, position)


def _batch_starts(data: bytes) -> list[int]:
    starts, pos = [], 0
    while pos + 12 <= len(data):
        size = int.from_bytes(data[pos + 8 : pos + 12], "big")
        if size <= 0 or pos + 12 + size > len(data):
            break
        starts.append(pos)
        pos += 12 + size
    return starts


def _invoke(command, *args, exit_code: int = 0) -> tuple[list[dict], str]:
    result = invoke(command, *args)
    assert result.exit_code == exit_code, result.output
    return json.loads(result.stdout), result.stderr


def _consume(boot: str) -> dict[str, list]:
    return {
        t: [
            (r.offset, r.key, r.value, r.timestamp)
            for r in consume_all(boot, t, isolation_level="read_committed")
        ]
        for t in TOPICS
    }


@pytest.fixture(scope="module")
def outcome(kafka_jars, tmp_path_factory, pytestconfig, request):
    started = time.monotonic()
    timings: dict[str, float] = {}
    work = tmp_path_factory.mktemp("recovery")
    result = Outcome()
    source = KafkaBroker(work / "source-log-dir", work / "source", SOURCE_PROPS, lib_dir=kafka_jars)
    reference = KafkaBroker(work / "a-log-dir", work / "a", REFERENCE_PROPS, lib_dir=kafka_jars)
    restarted = KafkaBroker(work / "b-log-dir", work / "b", REFERENCE_PROPS, lib_dir=kafka_jars)
    try:
        t = time.monotonic()
        start_with_spark(source, request)
        for topic, config in TOPICS.items():
            create_topic(source.bootstrap, topic, 1, config)
        left_open, now = _produce(source.bootstrap, source.log_dir, result)
        stop = threading.Event()
        late = threading.Thread(target=_keep_producing, args=(source.bootstrap, stop, now + 6000))
        late.start()
        time.sleep(1.0)
        source.kill()  # mid-production
        stop.set()
        late.join(30)
        left_open.purge()
        del left_open
        timings["produce and kill"] = time.monotonic() - t

        result.killed = work / "killed"
        shutil.copytree(source.log_dir, result.killed)
        _damage(source.log_dir, result)
        for side, broker in (("a", reference), ("b", restarted)):
            shutil.copytree(source.log_dir, broker.log_dir)
            result.dirs[side] = broker.log_dir
        result.dirs["damaged"] = work / "damaged"
        shutil.copytree(source.log_dir, result.dirs["damaged"])
        result.dirs["c"] = work / "c"
        shutil.copytree(source.log_dir, result.dirs["c"])

        t = time.monotonic()
        reference.start()
        lso_segment = max(
            int(p.name[:20])
            for p in segment_files(result.killed / "compacted-0")
            if int(p.name[:20]) <= result.open_txn_first_offset
        )
        wait_for_broker_cleaning(reference.log_dir, "compacted", 0, lso_segment, timeout=60)
        wait_for_broker_cleaning(reference.log_dir, "both", 0, int(result.flipped[0][:20]), timeout=60)
        deadline = time.monotonic() + 60
        while not all(
            earliest_offsets(reference.bootstrap, topic)[0] >= result.first_recent[topic]
            for topic in ("deleted", "both")
        ):
            assert time.monotonic() < deadline, "the reference broker applied no retention in 60 s"
            time.sleep(0.2)
        time.sleep(1.0)  # a few more cleaner and retention passes, none of which may change anything
        result.consumed["a"] = _consume(reference.bootstrap)
        result.done_ms = int(time.time() * 1000)
        reference.stop()
        result.broker_a_log = reference.log_path.read_text(errors="replace")
        timings["broker A: recovery, cleaner, retention"] = time.monotonic() - t

        t = time.monotonic()
        common = [
            "--log-dir",
            result.dirs["b"],
            "--config",
            reference.properties_path,
            "--now-ms",
            result.done_ms,
        ]
        for name, command, more in (
            ("compact", compact.command, ["--recover-truncating"]),
            ("retain", retain.command, []),
        ):
            result.rows[name], result.notes[name] = _invoke(command, *common, *more, "--output", "json")
        timings["our compact and retain"] = time.monotonic() - t
        default = ["--log-dir", result.dirs["c"], *common[2:], "--output", "json"]
        result.default_rows, _ = _invoke(compact.command, *default, exit_code=1)

        t = time.monotonic()
        shutil.copytree(restarted.log_dir, work / "b-ours")  # what our jobs left, before a broker runs on it
        result.dirs["b"] = work / "b-ours"
        restarted.start()
        result.consumed["b"] = _consume(restarted.bootstrap)
        restarted.stop()
        result.broker_b_log = restarted.log_path.read_text(errors="replace")
        timings["broker on B"] = time.monotonic() - t
        timings["total"] = time.monotonic() - started
        yield result
        report_timings(pytestconfig, "recovery", timings)
    finally:
        restarted.stop()
        reference.stop()
        source.kill()


def _files(partition_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(partition_dir.iterdir()) if p.suffix in COMPARED_SUFFIXES}


def _entries(log_dir: Path, name: str) -> dict[str, int]:
    return {t: o for (t, p), o in read_offset_checkpoint(log_dir / name).items() if t in TOPICS}


def test_the_crash_left_what_recovery_must_repair(outcome):
    """The scenario is the one described: no clean-shutdown marker, zero-filled active indexes, recovery
    points past the first segments but below the damaged ones; our jobs said what they recovered."""
    assert not (outcome.killed / ".kafka_cleanshutdown").exists()
    points = _entries(outcome.killed, "recovery-point-offset-checkpoint")
    assert points == {t: o for (t, _), o in outcome.points_after_phase_1.items() if t in TOPICS}
    for topic in TOPICS:
        logs = segment_files(outcome.killed / f"{topic}-0")
        assert 0 < points[topic] < int(logs[-1].name[:20]), (topic, points)
        # The active segment's indexes are preallocated (10 MiB) and zero-filled past their entries. A kill
        # while ``deleted`` is still being written to may land in a roll: the offset index already trimmed
        # and the time index not yet (seen), or a new segment whose indexes the broker has not created yet
        # (it creates them lazily). Both are states a crash leaves too.
        last = {s: segment_files(outcome.killed / f"{topic}-0", s)[-1] for s in (".index", ".timeindex")}
        preallocated = {
            s
            for s, p in last.items()
            if p.stat().st_size > PREALLOCATED - 12 and p.read_bytes()[-8:] == bytes(8)
        }
        assert ".index" in preallocated or (topic == "deleted" and preallocated), (topic, last)
    assert points["both"] <= int(outcome.flipped[0][:20])  # the bad byte is in a segment Kafka recovers
    by_job = {(job, r["topic"]): r for job in ("compact", "retain") for r in outcome.rows[job]}
    both = by_job[("compact", "both")]
    assert both["truncated_bytes"] > 0 and both["truncated_records"] > 0
    assert "later segment deleted" in both["reason"] and "CRC32C mismatch" in both["reason"]
    assert by_job[("retain", "deleted")]["truncated_bytes"] == TORN  # the torn batch, and only it
    assert by_job[("retain", "deleted")]["truncated_records"] == outcome.torn_records > 0
    assert by_job[("compact", "compacted")]["recovered_segments"] >= 1
    assert by_job[("retain", "compacted")]["truncated_bytes"] == 0  # recovered again: nothing left to do
    assert {r["status"] for r in outcome.rows["compact"] if r["topic"] in TOPICS} == {"cleaned", "skipped"}
    assert "wrote .kafka_cleanshutdown" in outcome.notes["retain"]
    assert ".kafka_cleanshutdown not written" in outcome.notes["compact"]  # the delete topic was retain's


@pytest.mark.parametrize("topic", list(TOPICS))
def test_segment_and_snapshot_files_equal_what_the_broker_left(outcome, topic):
    kafka, ours = (_files(outcome.dirs[side] / f"{topic}-0") for side in ("a", "b"))
    if topic == "both":
        # compact's retention (the cleaner thread's) moved the log start offset to the first segment
        # left; retain's load then (the log dir is still unclean: compact leaves the delete topic to
        # retain) deletes the producer snapshot at it, as Kafka's loader does on its next load
        # (ProducerStateManager.truncateAndReload drops snapshots at or below the log start offset).
        start = min(int(name[:20]) for name in kafka if name.endswith(".log"))
        assert kafka.pop(f"{start:020d}.snapshot", None) is not None
    assert sorted(ours) == sorted(kafka)
    different = [name for name in kafka if kafka[name] != ours[name]]
    assert different == [], different


def test_log_start_offsets_cleaner_checkpoints_and_recovery_points_equal(outcome):
    for name in (
        "log-start-offset-checkpoint",
        "cleaner-offset-checkpoint",
        "recovery-point-offset-checkpoint",
        "replication-offset-checkpoint",
    ):
        kafka, ours = (_entries(outcome.dirs[side], name) for side in ("a", "b"))
        assert ours == kafka, name
    for topic in ("deleted", "both"):  # retention did delete: the old segments are gone
        assert (
            int(segment_files(outcome.dirs["b"] / f"{topic}-0")[0].name[:20]) == outcome.first_recent[topic]
        )


def _epochs(partition_dir: Path) -> list[tuple[int, int]]:
    lines = (partition_dir / "leader-epoch-checkpoint").read_text().splitlines()
    return [(int(epoch), int(start)) for epoch, start in (line.split() for line in lines[2:])]


def test_leader_epochs_equal_but_the_reference_brokers_new_leadership(outcome):
    ends = _entries(outcome.dirs["b"], "recovery-point-offset-checkpoint")
    for topic in TOPICS:
        kafka, ours = (_epochs(outcome.dirs[side] / f"{topic}-0") for side in ("a", "b"))
        assert ours == [e for e in kafka if e[1] < ends[topic]], topic
        assert kafka[-1][1] == ends[topic]  # the new leader epoch starts at the recovered log end offset


def test_a_broker_started_on_our_result_recovers_nothing(outcome):
    assert (outcome.dirs["b"] / ".kafka_cleanshutdown").read_text() == '{"version":0,"brokerEpoch":-1}'
    assert re.search(r"Skipping recovery of \d+ logs from \S*b-log-dir since clean shutdown file was found",
                     outcome.broker_b_log)  # fmt: skip
    recovered = [
        line
        for line in outcome.broker_b_log.splitlines()
        if RECOVERY_LINES.search(line) and "__cluster_metadata" not in line
    ]
    assert recovered == []


def test_read_committed_consumers_get_the_same_records(outcome):
    a, b = outcome.consumed["a"], outcome.consumed["b"]
    assert all(a[t] for t in TOPICS)
    assert b == a
    offsets = [o for o, *_ in a["compacted"]]
    assert max(offsets) < outcome.open_txn_first_offset  # read_committed stops at the open transaction


# ---------------------------------------------------------------------------------------------- bit rot
def _valid_batches(data: bytes) -> tuple[int, int, int]:
    """(batches, records, bytes) of the batches kafka-python reads from ``data`` whose CRC matches."""
    from kafka.record.memory_records import MemoryRecords

    records = MemoryRecords(data)
    found = [0, 0, 0]
    while (b := records.next_batch()) is not None:
        if b.validate_crc():
            found[0] += 1
            found[1] += b.records_count
            found[2] += b.size_in_bytes
    return found[0], found[1], found[2]


def test_without_recover_truncating_bit_rot_fails_the_partition_and_names_what_the_broker_deleted(outcome):
    """The A broker's own log says where it found the invalid batch and which later segments its recovery
    deleted; our default run names that position and the valid records and bytes in what the broker
    dropped after it (the bad batch itself excluded), and leaves every file of the partition as it was."""
    name, _ = outcome.flipped
    prefix = "partition=both-0,"
    invalid = re.search(
        r"Found invalid messages in log segment \S*both-0/" + re.escape(name) + r" at byte offset (\d+)",
        outcome.broker_a_log,
    )
    assert invalid is not None, "the broker did not log the invalid batch"
    position = int(invalid.group(1))
    deleting = [line for line in outcome.broker_a_log.splitlines()
                if "Deleting segments as part of log recovery" in line and prefix in line]  # fmt: skip
    assert len(deleting) == 1, deleting
    dropped = [int(b) for b in re.findall(r"baseOffset=(\d+)", deleting[0])]
    damaged = outcome.dirs["damaged"] / "both-0"
    assert dropped and all(int(name[:20]) < b for b in dropped)
    data = (damaged / name).read_bytes()
    bad_end = (
        position + 12 + int.from_bytes(data[position + 8 : position + 12], "big")
    )  # its length is intact
    counts = [_valid_batches(data[bad_end:])] + [
        _valid_batches((damaged / f"{b:020d}.log").read_bytes()) for b in dropped
    ]
    batches, records, size = (sum(c[i] for c in counts) for i in range(3))
    assert records > 0

    rows = {r["topic"]: r for r in outcome.default_rows}
    both = rows["both"]
    assert both["status"] == "failed" and "\n" not in both["reason"]
    assert both["reason"].startswith(
        f"{outcome.dirs['c'] / 'both-0' / name} at position {position}: CRC32C mismatch"
    )
    assert f"would delete {records} valid records in {batches} batches ({size} bytes)" in both["reason"]
    assert f"in {len(dropped)} later segment" in both["reason"]
    assert _files(outcome.dirs["c"] / "both-0") == _files(damaged)
    assert rows["compacted"]["status"] == "cleaned"  # a crash tail only: recovered by default
