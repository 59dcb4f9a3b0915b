"""Our compaction of a real broker's log dir, read back by that broker (issue 3, items 3 and 4).

One scenario per module, on a real Kafka broker (tests/kafka_harness.py) whose own log cleaner is off, so
only we compact:

1. A workload is produced on a 3-partition topic with segments of a few KiB: keyed updates, tombstones,
   null keys (produced while the topic's policy is still ``delete``; a compacted topic refuses them, so
   the policy is switched to ``compact`` afterwards, as an operator would), every codec, a plain
   producer, one idempotent producer that stays connected through the whole scenario, committed and
   aborted transactions, headers. Last, one record per partition with a timestamp past ``segment.ms``
   rolls the segment, and a few records (among them an aborted transaction) follow it: everything before
   that roll is cleanable, the rest is the active segment, which compaction never touches.
2. The broker is stopped cleanly and our compact job (``jobs.compact.run``) runs on its log dir.
3. Kafka's DumpLogSegments checks every file we wrote.
4. The broker is started again on the same directory; a real client reads every partition with
   read_uncommitted and read_committed, and producing goes on (same idempotent producer, same
   transactional id).

A second scenario does the same for retention (``jobs.retain``): time, size and log-start-offset rules
on three topics, then the broker reads what is left (see the section at the end).

Every expectation comes from what the test produced (keys, values, headers, timestamps, the offsets the
broker assigned, which transactions were aborted), from the broker's own directory listing, or from
Kafka's DumpLogSegments, never from the code under test. The rules (spec cleaner-and-retention §3, §5):
below the first uncleanable offset, the newest non-aborted record of each key survives, tombstones
included on this first round; unkeyed and aborted records go; transaction markers stay but are invisible
to consumers; at and above it nothing changes.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import itertools
import random
import re
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.kafka_harness import (
    COMPRESSION_CODECS,
    SMALL_BATCH_BYTES,
    SMALL_SEGMENT_BYTES,
    SMALL_SEGMENT_CONFIG,
    BrokerHarnessError,
    Delivered,
    KafkaBroker,
    SentRecord,
    Transaction,
    consume_all,
    create_topic,
    earliest_offsets,
    latest_offsets,
    produce,
    produce_transactions,
    run_dump_log_segments,
    segment_files,
)

pytestmark = pytest.mark.broker

PARTITIONS = 3
#: The roll age of the workload topic; the record that rolls the last segment is stamped past it.
SEGMENT_MS = 600_000
#: Long enough that no tombstone or marker horizon expires during a test.
DELETE_RETENTION_MS = 7 * 86_400_000
#: The broker's key map size in the harness (DEFAULT_SERVER_PROPS); our job gets the same.
DEDUPE_BUFFER_BYTES = 16 * 1024 * 1024
KEYS = tuple(f"key-{i:02d}".encode() for i in range(12))
#: Keys written only inside an aborted transaction: after compaction no trace of them may remain.
GHOST_KEYS = tuple(f"ghost-{i}".encode() for i in range(PARTITIONS))
TAIL_KEY = b"tail"
CLEANED_TOPIC_CONFIG = {
    "cleanup.policy": "compact",
    "min.cleanable.dirty.ratio": "0.01",
    "delete.retention.ms": str(DELETE_RETENTION_MS),
}


# ==================================================================================================
# The workload
# ==================================================================================================


@dataclass(frozen=True, slots=True)
class Produced:
    """One record as the test sent it, and where the broker put it."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple
    timestamp: int
    aborted: bool
    producer: str  # "plain", "idempotent", or the transactional id

    def as_read(self) -> tuple:
        return (self.partition, self.offset, self.key, self.value, self.headers, self.timestamp)


@dataclass
class Workload:
    topic: str
    records: list[Produced]
    #: Offset of each partition's record that rolled the last segment (the first uncleanable offset).
    tail_offsets: dict[int, int]
    #: Log end offset of each partition as the broker reported it (high watermark = LSO at the end).
    end_offsets: dict[int, int]
    producer: LiveProducer
    timings: dict[str, float] = field(default_factory=dict)


def partition_of(key: bytes | None, index: int) -> int:
    return index % PARTITIONS if key is None else sum(key) % PARTITIONS


class _Records:
    """Deterministic records: strictly increasing explicit timestamps, compressible ASCII values."""

    def __init__(self, seed: int, first_timestamp: int) -> None:
        self.rng = random.Random(seed)
        self.clock = itertools.count(first_timestamp)

    def make(
        self,
        tag: str,
        count: int,
        *,
        keys: Sequence[bytes] = KEYS,
        null_keys: float = 0.0,
        tombstones: float = 0.0,
    ) -> list[SentRecord]:
        out = []
        for i in range(count):
            key = None if self.rng.random() < null_keys else self.rng.choice(keys)
            value = (
                None if self.rng.random() < tombstones else (f"{tag}.{i}." * self.rng.randint(4, 14)).encode()
            )
            if i % 3 == 0:
                headers: tuple = (("tag", tag.encode()), ("i", str(i).encode()), ("tag", b"again"))
            elif i % 3 == 1:
                headers = (("null-value", None),)
            else:
                headers = ()
            out.append(SentRecord(key, value, headers, next(self.clock), partition_of(key, i)))
        return out

    def one_per_partition(self, tag: str, key: bytes | None) -> list[SentRecord]:
        return [
            SentRecord(key, f"{tag}.{p}".encode(), (("tag", tag.encode()),), next(self.clock), p)
            for p in range(PARTITIONS)
        ]


class LiveProducer:
    """One idempotent confluent-kafka producer, kept open for the whole scenario (across broker stops),
    so it keeps its producer id and its sequence numbers."""

    name = "idempotent"

    def __init__(self, bootstrap: str) -> None:
        from confluent_kafka import Producer

        self._producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "enable.idempotence": True,
                "acks": "all",
                "compression.type": "lz4",
                "batch.size": SMALL_BATCH_BYTES,
                "linger.ms": 5,
                "reconnect.backoff.max.ms": 500,
                "log_level": 0,  # quiet while its broker is down
            }
        )

    def send(self, topic: str, records: Sequence[SentRecord], timeout: float = 60.0) -> list[Delivered]:
        delivered: list[Delivered | None] = [None] * len(records)
        errors: list[str] = []
        for index, rec in enumerate(records):

            def on_delivery(err, msg, index=index):
                if err is not None:
                    errors.append(f"record #{index}: {err}")
                else:
                    delivered[index] = Delivered(msg.partition(), msg.offset(), msg.timestamp()[1])

            kwargs: dict = {"key": rec.key, "value": rec.value, "on_delivery": on_delivery}
            if rec.headers:
                kwargs["headers"] = list(rec.headers)
            self._producer.produce(topic, partition=rec.partition, timestamp=rec.timestamp_ms, **kwargs)
            self._producer.poll(0)
        left = self._producer.flush(timeout)
        if left or errors:
            raise BrokerHarnessError(
                f"idempotent producer on {topic!r}: {left} undelivered, errors {errors[:5]}"
            )
        return list(delivered)  # type: ignore[arg-type]


def alter_topic_config(
    bootstrap: str, topic: str, settings: Mapping[str, str], timeout: float = 30.0
) -> None:
    """IncrementalAlterConfigs SET on a topic (what ``kafka-configs.sh --alter`` does)."""
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in settings.items()]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.incremental_alter_configs(
        [ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)]
    )
    for future in futures.values():
        future.result(timeout)


def _collect(
    out: list[Produced],
    sent: Sequence[SentRecord],
    delivered: Sequence[Delivered],
    producer: str,
    aborted: bool,
) -> None:
    for rec, where in zip(sent, delivered, strict=True):
        if where.partition != rec.partition:
            raise BrokerHarnessError(f"record sent to partition {rec.partition} landed in {where.partition}")
        out.append(
            Produced(
                where.partition,
                where.offset,
                rec.key,
                rec.value,
                rec.headers,
                rec.timestamp_ms,
                aborted,
                producer,
            )
        )


def _transactions(
    out: list[Produced],
    bootstrap: str,
    topic: str,
    txns: Sequence[Transaction],
    transactional_id: str,
    compression: str,
) -> None:
    delivered = produce_transactions(
        bootstrap, topic, txns, transactional_id=transactional_id, compression=compression
    )
    at = 0
    for txn in txns:
        n = len(txn.records)
        _collect(out, txn.records, delivered[at : at + n], transactional_id, aborted=not txn.commit)
        at += n


def produce_workload(bootstrap: str, topic: str, seed: int = 20261122) -> Workload:
    """Produce the scenario's workload on a new topic and wait until every transaction is decided."""
    timings: dict[str, float] = {}
    started = time.monotonic()
    # Explicit timestamps from a minute ago, one millisecond apart; transaction markers carry the broker's
    # clock. All stay within SEGMENT_MS of each other, so no segment rolls by time until the tail.
    gen = _Records(seed, int(time.time() * 1000) - 60_000)
    out: list[Produced] = []
    create_topic(
        bootstrap,
        topic,
        PARTITIONS,
        {"cleanup.policy": "delete", "retention.ms": -1, "segment.ms": SEGMENT_MS, **SMALL_SEGMENT_CONFIG},
    )
    live = LiveProducer(bootstrap)

    # Phase 1, policy delete: null keys are still accepted. Every codec, a plain producer.
    for codec in COMPRESSION_CODECS:
        sent = gen.make(f"plain-{codec}", 45, null_keys=0.25, tombstones=0.15)
        _collect(out, sent, produce(bootstrap, topic, sent, compression=codec), "plain", False)
    _transactions(
        out,
        bootstrap,
        topic,
        [
            Transaction(gen.make("txa-commit", 24, null_keys=0.3, tombstones=0.1), commit=True),
            Transaction(gen.make("txa-abort", 24, null_keys=0.3, tombstones=0.1), commit=False),
        ],
        "wl-txn-a",
        "gzip",
    )

    # Phase 2, policy compact (the broker's cleaner is off; only we compact).
    alter_topic_config(bootstrap, topic, CLEANED_TOPIC_CONFIG)
    sent = gen.make("idem-1", 60, tombstones=0.15)
    _collect(out, sent, live.send(topic, sent), live.name, False)
    _transactions(
        out,
        bootstrap,
        topic,
        [
            Transaction(gen.make("txb-commit-1", 30, tombstones=0.1), commit=True),
            Transaction(gen.make("txb-abort", 30, keys=KEYS + GHOST_KEYS, tombstones=0.1), commit=False),
            Transaction(gen.make("txb-commit-2", 30, tombstones=0.1), commit=True),
        ],
        "wl-txn-b",
        "zstd",
    )
    sent = gen.make("plain-snappy-2", 45, tombstones=0.2)
    _collect(out, sent, produce(bootstrap, topic, sent, compression="snappy"), "plain", False)
    idem_2 = gen.make("idem-2", 30, tombstones=0.1)
    _collect(out, idem_2, live.send(topic, idem_2), live.name, False)
    # Every key the idempotent producer wrote last is written again: its last batches end up with no
    # record left, and compaction must keep them as empty batches (its sequence state, rule R2.1).
    sent = [SentRecord(r.key, b"over." + (r.value or b"-"), (), next(gen.clock), r.partition) for r in idem_2]
    _collect(out, sent, produce(bootstrap, topic, sent, compression="none"), "plain", False)

    # Keys written once (enough kept bytes for offset-index entries), then tombstones nothing overwrites.
    sent = [
        SentRecord(
            f"uniq-{i:03d}".encode(), f"unique.{i}.".encode() * 30, (), next(gen.clock), i % PARTITIONS
        )
        for i in range(90)
    ]
    _collect(out, sent, produce(bootstrap, topic, sent), "plain", False)
    sent = [
        SentRecord(k, None, (("deleted", b"yes"),), next(gen.clock), partition_of(k, 0)) for k in KEYS[-6:]
    ]
    _collect(out, sent, produce(bootstrap, topic, sent, compression="zstd"), "plain", False)

    # The tail: one record per partition stamped past segment.ms rolls the last segment.
    wall = int(time.time() * 1000)
    gen.clock = itertools.count(wall + SEGMENT_MS + 60_000)
    sent = gen.one_per_partition("tail", TAIL_KEY)
    delivered = produce(bootstrap, topic, sent)
    _collect(out, sent, delivered, "plain", False)
    tail_offsets = {d.partition: d.offset for d in delivered}
    # The active segment: an aborted and a committed transaction after the tail, left as they are.
    _transactions(
        out,
        bootstrap,
        topic,
        [
            Transaction(gen.one_per_partition("active-abort", KEYS[0]), commit=False),
            Transaction(gen.one_per_partition("active-commit", KEYS[1]), commit=True),
        ],
        "wl-txn-b",
        "gzip",
    )
    timings["produce workload"] = time.monotonic() - started

    wait_until_decided(bootstrap, topic)
    ends = latest_offsets(bootstrap, topic)
    return Workload(
        topic, sorted(out, key=lambda r: (r.partition, r.offset)), tail_offsets, ends, live, timings
    )


def wait_until_decided(bootstrap: str, topic: str, timeout: float = 30.0) -> None:
    """Wait until the last stable offset reaches the high watermark everywhere: the transaction
    coordinator writes the markers after the commit/abort call has returned."""
    deadline = time.monotonic() + timeout
    while latest_offsets(bootstrap, topic, isolation_level="read_committed") != latest_offsets(
        bootstrap, topic
    ):
        if time.monotonic() > deadline:
            raise BrokerHarnessError(f"{topic}: the last stable offset did not reach the high watermark")
        time.sleep(0.1)


def expected_after_compaction(
    records: Iterable[Produced], first_uncleanable: Mapping[int, int]
) -> list[Produced]:
    """What one cleaning round leaves, per spec §3 and §5 (first round: tombstones have no horizon yet)."""
    records = list(records)
    newest: dict[tuple[int, bytes], int] = {}
    for r in records:
        if r.offset < first_uncleanable[r.partition] and r.key is not None and not r.aborted:
            newest[(r.partition, r.key)] = max(newest.get((r.partition, r.key), -1), r.offset)
    kept = [
        r
        for r in records
        if r.offset >= first_uncleanable[r.partition]
        or (r.key is not None and not r.aborted and newest[(r.partition, r.key)] == r.offset)
    ]
    return sorted(kept, key=lambda r: (r.partition, r.offset))


# ==================================================================================================
# Kafka's DumpLogSegments
# ==================================================================================================

_FIELD = re.compile(r"(\w+): (\[[^\]]*\]|\S+)")
#: What DumpLogSegments prints when a file is wrong (index/log mismatches, bad CRCs, trailing bytes, ...).
DUMP_PROBLEMS = re.compile(
    r"Mismatches in|mismatch|out of order|not found in|invalid bytes|Error at|Exception|isvalid: false|corrupt",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class DumpedBatch:
    partition: int
    fields: dict
    records: tuple[dict, ...]

    def get(self, name: str) -> str:
        return self.fields[name]

    def int(self, name: str) -> int:
        return int(self.fields[name])


def parse_dump(stdout: str, partition: int) -> list[DumpedBatch]:
    """Batches and records of ``DumpLogSegments --deep-iteration --print-data-log`` output."""
    batches: list[DumpedBatch] = []
    fields: dict | None = None
    records: list[dict] = []
    for line in stdout.splitlines():
        if line.startswith("baseOffset: "):
            if fields is not None:
                batches.append(DumpedBatch(partition, fields, tuple(records)))
            fields, records = dict(_FIELD.findall(line)), []
        elif line.startswith("| offset: "):
            records.append(dict(_FIELD.findall(line[2:])))
    if fields is not None:
        batches.append(DumpedBatch(partition, fields, tuple(records)))
    return batches


def dump_partition(partition_dir: Path, partition: int) -> list[DumpedBatch]:
    """Every batch of a stopped partition, by DumpLogSegments, in offset order."""
    logs = segment_files(partition_dir)
    dump = run_dump_log_segments(logs, "--deep-iteration", "--print-data-log")
    if dump.returncode != 0 or DUMP_PROBLEMS.search(dump.stdout):
        raise AssertionError(
            f"DumpLogSegments on {partition_dir}: exit {dump.returncode}\n{dump.stdout[-3000:]}{dump.stderr}"
        )
    return parse_dump(dump.stdout, partition)


#: Gaps between offsets are what compaction leaves; DumpLogSegments reports them on stderr, for Kafka's
#: own cleaned segments too (see test_broker_differential), so they are not problems.
_GAP_REPORT = re.compile(r"^(Non-consecutive offsets in \S+|\s+-?\d+ is followed by \d+)$")


def check_with_dump_log_segments(files: Sequence[Path]) -> list[str]:
    """Both of Kafka's checks on ``files``; returns the problems found (empty when all is well)."""
    problems = []
    for args in (("--deep-iteration", "--index-sanity-check"), ("--verify-index-only",)):
        dump = run_dump_log_segments(files, *args)
        where = f"DumpLogSegments {' '.join(args)}"
        if dump.returncode != 0:
            problems.append(f"{where}: exit {dump.returncode}\n{dump.stdout[-2000:]}\n{dump.stderr[-2000:]}")
        problems += [f"{where}: {line}" for line in dump.stdout.splitlines() if DUMP_PROBLEMS.search(line)]
        problems += [
            f"{where} (stderr): {line}"
            for line in dump.stderr.splitlines()
            if line.strip() and not _GAP_REPORT.match(line)
        ]
        if "--index-sanity-check" in args:
            for f in files:
                if f.suffix in (".index", ".timeindex") and not (
                    f"{f} passed sanity check." in dump.stdout or f"{f} is empty." in dump.stdout
                ):
                    problems.append(f"{where}: no 'passed sanity check' for {f}")
    return problems


def file_identities(directory: Path) -> dict[str, str]:
    return {
        p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir()) if p.is_file()
    }


# ==================================================================================================
# The scenario
# ==================================================================================================


def run_our_compaction(spark, log_dir: Path, topic: str, now_ms: int) -> list[dict]:
    from jobs import compact
    from kafka_log_core.settings.config import load_config
    from kafka_log_core.work.tasks import JobOptions

    configs = load_config(
        None,
        (),
        [f"{topic}:{k}={v}" for k, v in {**CLEANED_TOPIC_CONFIG, "segment.ms": SEGMENT_MS}.items()],
        [f"log.cleaner.dedupe.buffer.size={DEDUPE_BUFFER_BYTES}"],
    )
    return compact.run(spark, [str(log_dir)], re.escape(topic), configs, JobOptions(now_ms=now_ms))


def job_spark(request):
    """The shared ``spark`` session, created on first use (so it can come up while a broker starts)."""
    return request.getfixturevalue("spark")


@contextmanager
def source_and_reference(
    work: Path, lib_dir: Path, source_props: Mapping[str, object], reference_props: Mapping[str, object]
) -> Iterator[tuple[KafkaBroker, KafkaBroker]]:
    """The two brokers of a scenario compared with Kafka: ``source`` writes the log dir, ``reference``
    (log dir ``work/kafka-log-dir``) works on a copy of it; both stopped however the scenario ends."""
    source = KafkaBroker(work / "source-log-dir", work / "source", source_props, lib_dir=lib_dir)
    reference = KafkaBroker(work / "kafka-log-dir", work / "kafka", reference_props, lib_dir=lib_dir)
    try:
        yield source, reference
    finally:
        reference.stop()
        source.stop()


def start_with_spark(broker: KafkaBroker, request):
    """Start the broker while the Spark session comes up (each takes seconds); returns the session."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        starting = pool.submit(broker.start)
        spark = job_spark(request)
        starting.result()
    return spark


def report_timings(pytestconfig, title: str, timings: Mapping[str, float]) -> None:
    """One line on the terminal, past pytest's output capture (module fixtures finish while it is on)."""
    line = f"{title}: " + ", ".join(f"{name} {seconds:.1f}s" for name, seconds in timings.items())
    reporter = pytestconfig.pluginmanager.get_plugin("terminalreporter")
    capture = pytestconfig.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        print(line)
        return
    with capture.global_and_fixture_disabled():
        reporter.write("\n")
        reporter.write_line(line)


@dataclass
class Scenario:
    workload: Workload
    first_uncleanable: dict[int, int]
    segment_counts: dict[int, int]  # segments per partition before our job
    before: dict[int, list[DumpedBatch]]  # DumpLogSegments of each partition as the broker wrote it
    after: dict[int, list[DumpedBatch]]  # ... and after our compaction
    job_rows: list[dict]
    written: list[Path]  # every file our job created or changed
    leftovers: list[str]
    dump_problems: list[str]
    read_uncommitted: list
    read_committed: list
    earliest: dict[int, int]
    latest: dict[int, int]
    broker: KafkaBroker
    timings: dict[str, float]


@pytest.fixture(scope="module")
def scenario(kafka_jars, tmp_path_factory, pytestconfig, request):
    started = time.monotonic()
    work = tmp_path_factory.mktemp("interop")
    broker = KafkaBroker(work / "log-dir", work, {"log.cleaner.enable": "false"}, lib_dir=kafka_jars)
    try:
        t = time.monotonic()
        spark = start_with_spark(broker, request)
        timings = {"broker start + Spark session": time.monotonic() - t}
        workload = produce_workload(broker.bootstrap, "interop")
        timings.update(workload.timings)
        t = time.monotonic()
        broker.stop()
        timings["stop"] = time.monotonic() - t
        log_dir = broker.log_dir
        dirs = {p: log_dir / f"{workload.topic}-{p}" for p in range(PARTITIONS)}
        # The broker's own layout: the active segment (the last one) is never cleaned.
        first_uncleanable = {p: int(segment_files(d)[-1].name[:20]) for p, d in dirs.items()}
        segment_counts = {p: len(segment_files(d)) for p, d in dirs.items()}
        t = time.monotonic()
        before = {p: dump_partition(d, p) for p, d in dirs.items()}
        digests = {p: file_identities(d) for p, d in dirs.items()}
        timings["dump before"] = time.monotonic() - t

        t = time.monotonic()
        rows = run_our_compaction(spark, log_dir, workload.topic, int(time.time() * 1000))
        timings["our compact job"] = time.monotonic() - t

        written, leftovers = [], []
        for p, d in dirs.items():
            now = file_identities(d)
            written += [d / name for name, digest in now.items() if digests[p].get(name) != digest]
            leftovers += [name for name in now if name.endswith((".cleaned", ".swap", ".deleted"))]
        segment_kinds = (".log", ".index", ".timeindex", ".txnindex")
        written = [p for p in written if p.suffix in segment_kinds]
        t = time.monotonic()
        problems = check_with_dump_log_segments(written) if written else ["our job wrote no segment file"]
        after = {p: dump_partition(d, p) for p, d in dirs.items()}
        timings["DumpLogSegments checks"] = time.monotonic() - t

        t = time.monotonic()
        broker.start()
        timings["restart"] = time.monotonic() - t
        t = time.monotonic()
        uncommitted = consume_all(broker.bootstrap, workload.topic)
        committed = consume_all(broker.bootstrap, workload.topic, isolation_level="read_committed")
        earliest = earliest_offsets(broker.bootstrap, workload.topic)
        latest = latest_offsets(broker.bootstrap, workload.topic)
        timings["consume"] = time.monotonic() - t
        timings["set-up total"] = time.monotonic() - started
        yield Scenario(
            workload, first_uncleanable, segment_counts, before, after, rows, written, leftovers, problems,
            uncommitted, committed, earliest, latest, broker, timings,
        )  # fmt: skip
        report_timings(pytestconfig, "broker interop", timings)
    finally:
        broker.stop()


# ==================================================================================================
# Tests
# ==================================================================================================


def test_workload_exercises_every_rule(scenario):
    """The expectation is only as good as the workload: it must hit every rule (guards the other tests)."""
    w, u = scenario.workload, scenario.first_uncleanable
    cleanable = [r for r in w.records if r.offset < u[r.partition]]
    kept = {(r.partition, r.offset) for r in expected_after_compaction(w.records, u)}
    # The record stamped past segment.ms did roll the segment.
    assert u == w.tail_offsets
    assert all(
        any(r.offset >= u[p] and r.aborted for r in w.records if r.partition == p) for p in range(PARTITIONS)
    )
    assert any(r.key is None for r in cleanable)
    assert any(r.aborted for r in cleanable)
    assert any(r.value is None and (r.partition, r.offset) in kept for r in cleanable)  # tombstone kept
    assert any(r.value is None and (r.partition, r.offset) not in kept for r in cleanable)  # superseded one
    assert any(r.key is not None and not r.aborted and (r.partition, r.offset) not in kept for r in cleanable)
    assert any(r.key in GHOST_KEYS for r in cleanable)
    # Several segments per partition, and every codec on disk (a producer may send small batches plain).
    assert min(scenario.segment_counts.values()) > 5, scenario.segment_counts
    codecs = {b.get("compresscodec") for bs in scenario.before.values() for b in bs}
    assert codecs == {"none", "gzip", "snappy", "lz4", "zstd"}, codecs
    assert sum(b.get("isControl") == "true" for bs in scenario.before.values() for b in bs) == 7 * PARTITIONS


def test_our_job_cleaned_every_partition_up_to_the_active_segment(scenario):
    rows = {r["partition"]: r for r in scenario.job_rows if r["topic"] == scenario.workload.topic}
    assert sorted(rows) == list(range(PARTITIONS)), scenario.job_rows
    for p, row in rows.items():
        assert row["status"] == "cleaned", row
        assert row["first_dirty_offset"] == 0
        assert row["first_uncleanable_offset"] == scenario.first_uncleanable[p]
    assert scenario.leftovers == []


def test_dump_log_segments_accepts_every_file_we_wrote(scenario):
    assert {p.suffix for p in scenario.written} >= {".log", ".index", ".timeindex", ".txnindex"}
    assert any(p.suffix == ".index" and p.stat().st_size > 0 for p in scenario.written)
    assert scenario.dump_problems == []


def test_read_uncommitted_sees_exactly_what_compaction_keeps(scenario):
    w = scenario.workload
    expected = [r.as_read() for r in expected_after_compaction(w.records, scenario.first_uncleanable)]
    got = [(r.partition, r.offset, r.key, r.value, r.headers, r.timestamp) for r in scenario.read_uncommitted]
    assert got == expected
    assert {r.timestamp_type for r in scenario.read_uncommitted} == {"CreateTime"}
    assert scenario.earliest == dict.fromkeys(range(PARTITIONS), 0)
    assert scenario.latest == w.end_offsets


def test_read_committed_sees_only_committed_data(scenario):
    w = scenario.workload
    expected = [
        r.as_read() for r in expected_after_compaction(w.records, scenario.first_uncleanable) if not r.aborted
    ]
    got = [(r.partition, r.offset, r.key, r.value, r.headers, r.timestamp) for r in scenario.read_committed]
    assert got == expected
    aborted_values = {r.value for r in w.records if r.aborted and r.value is not None}
    assert not aborted_values & {r.value for r in scenario.read_committed}


def test_markers_and_producer_state_survive_as_batches(scenario):
    """On disk (DumpLogSegments): every marker is still there after one round (their data is kept, or
    their aborted data was seen this round), and each producer's last batch is kept, empty if need be."""
    for p in range(PARTITIONS):
        markers = [
            (b.int("baseOffset"), b.records[0].get("endTxnMarker"))
            for b in scenario.before[p]
            if b.get("isControl") == "true"
        ]
        assert markers and {m for _, m in markers} == {"COMMIT", "ABORT"}
        assert [
            (b.int("baseOffset"), b.records[0].get("endTxnMarker"))
            for b in scenario.after[p]
            if b.get("isControl") == "true"
        ] == markers
        live = [r for r in scenario.workload.records if r.partition == p and r.producer == LiveProducer.name]
        last = max(r.offset for r in live)
        pid = {
            b.get("producerId")
            for b in scenario.before[p]
            if b.int("baseOffset") <= last <= b.int("lastOffset")
        }
        kept = [b for b in scenario.after[p] if b.int("lastOffset") == last]
        assert len(kept) == 1 and {kept[0].get("producerId")} == pid, kept
        assert kept[0].int("count") == 0  # every key of it was written again later


def test_producing_after_restart_continues_the_log(scenario):
    """The idempotent producer that wrote before our compaction goes on with its producer id and next
    sequence number; a transactional id is re-initialised; the records land at the old log end."""
    w, broker = scenario.workload, scenario.broker
    ends = w.end_offsets
    gen = _Records(7, int(time.time() * 1000))
    sent = gen.one_per_partition("after-restart", KEYS[2])
    delivered = w.producer.send(w.topic, sent)
    assert {d.partition: d.offset for d in delivered} == ends
    # The broker kept the producer's state through our rewrite: same id and epoch, next sequence.
    for p in range(PARTITIONS):
        active = segment_files(broker.log_dir / f"{w.topic}-{p}")[-1]
        dump = run_dump_log_segments(active, "--deep-iteration")
        batches = parse_dump(dump.stdout, p)
        new = [b for b in batches if b.int("baseOffset") == ends[p]]
        live_before = [
            b
            for b in scenario.before[p]
            if b.get("producerId") == new[0].get("producerId") and b.get("isControl") == "false"
        ]
        assert live_before, "the idempotent producer had to get a new producer id"
        assert new[0].get("producerEpoch") == live_before[-1].get("producerEpoch")
        assert new[0].int("baseSequence") == live_before[-1].int("lastSequence") + 1
    txn = gen.one_per_partition("after-restart-txn", KEYS[3])
    txn_delivered = produce_transactions(
        broker.bootstrap, w.topic, [Transaction(txn)], transactional_id="wl-txn-b"
    )
    assert {d.partition: d.offset for d in txn_delivered} == {p: e + 1 for p, e in ends.items()}
    wait_until_decided(broker.bootstrap, w.topic)
    committed = consume_all(broker.bootstrap, w.topic, isolation_level="read_committed")
    tail = [(r.partition, r.offset, r.key, r.value) for r in committed if r.offset >= ends[r.partition]]
    assert tail == sorted(
        [
            (d.partition, d.offset, s.key, s.value)
            for s, d in zip(sent + txn, delivered + txn_delivered, strict=True)
        ]
    )


# ==================================================================================================
# Retention read-back: our retain job on a stopped broker's log dir, then the broker again
# ==================================================================================================
#
# Three topics on a broker that never deletes anything itself (retention.ms=-1, retention.bytes=-1 in
# its metadata); our job gets the rules it applies as topic overrides. The expected survivors follow
# from spec §8 (D2, D3) applied to the broker's own files: segment bases and sizes from the directory
# listing, each segment's largest timestamp from DumpLogSegments.

RETAIN_TIME = "retain-time"  # retention.ms = 2 h over records from 3 h ago, then from a minute ago
RETAIN_SIZE = "retain-size"  # retention.bytes = 3 small segments
RETAIN_START = "retain-start"  # an offline DeleteRecords: the log start offset moved inside a segment
RETENTION_MS = 2 * 3_600_000
RETENTION_BYTES = 3 * SMALL_SEGMENT_BYTES
RETAIN_PARTITIONS = {RETAIN_TIME: 2, RETAIN_SIZE: 1, RETAIN_START: 1}


@dataclass(frozen=True, slots=True)
class SegmentFacts:
    base: int
    size: int
    largest_timestamp: int


def segment_facts(partition_dir: Path, batches: Sequence[DumpedBatch]) -> list[SegmentFacts]:
    logs = segment_files(partition_dir)
    bases = [int(p.name[:20]) for p in logs]
    largest = dict.fromkeys(bases, -1)
    for b in batches:
        owner = max(base for base in bases if base <= b.int("baseOffset"))
        largest[owner] = max(largest[owner], int(b.get("CreateTime")))
    return [SegmentFacts(base, p.stat().st_size, largest[base]) for base, p in zip(bases, logs, strict=True)]


def expected_log_start(
    segments: Sequence[SegmentFacts],
    end: int,
    *,
    now_ms: int,
    retention_ms: int,
    retention_bytes: int,
    start: int,
) -> tuple[int, int]:
    """Spec D1-D3 (high watermark = log end after a clean stop): (new log start, new first segment base)
    after the log-start-offset rule, then the size rule, then the time rule."""
    segs = list(segments)

    def walk(deletable) -> None:
        while len(segs) > 1:  # these workloads never make every segment deletable (no roll)
            upper = segs[1].base
            if not (end >= upper and deletable(segs[0], upper)):
                return
            segs.pop(0)

    walk(lambda s, upper: upper <= start)
    if retention_bytes >= 0 and sum(s.size for s in segs) >= retention_bytes:
        excess = [sum(s.size for s in segs) - retention_bytes]

        def too_big(s: SegmentFacts, upper: int) -> bool:
            if excess[0] - s.size < 0:
                return False
            excess[0] -= s.size
            return True

        walk(too_big)
    if retention_ms >= 0:
        walk(lambda s, upper: now_ms - s.largest_timestamp > retention_ms)
    return max(start, segs[0].base), segs[0].base


@dataclass
class RetentionScenario:
    produced: dict[str, list[Produced]]
    end_offsets: dict[tuple[str, int], int]
    expected_start: dict[tuple[str, int], int]
    expected_first_segment: dict[tuple[str, int], int]
    segment_names_before: dict[tuple[str, int], set[str]]
    identities_before: dict[tuple[str, int], dict[str, tuple[int, str]]]
    identities_after: dict[tuple[str, int], dict[str, tuple[int, str]]]
    job_rows: list[dict]
    dump_problems: list[str]
    earliest: dict[str, dict[int, int]]
    latest: dict[str, dict[int, int]]
    read_uncommitted: dict[str, list]
    broker: KafkaBroker


def _produce_retention_workload(bootstrap: str, now_ms: int) -> dict[str, list[Produced]]:
    out: dict[str, list[Produced]] = {}
    for topic, partitions in RETAIN_PARTITIONS.items():
        create_topic(
            bootstrap,
            topic,
            partitions,
            {"cleanup.policy": "delete", "retention.ms": -1, "retention.bytes": -1, **SMALL_SEGMENT_CONFIG},
        )
        records: list[Produced] = []
        rng = random.Random(topic)
        for phase, first_ts in (("old", now_ms - 3 * 3_600_000), ("fresh", now_ms - 60_000)):
            for codec in ("none", "zstd", "lz4"):
                sent = [
                    SentRecord(
                        f"k{rng.randrange(50)}".encode(),
                        f"{topic}.{phase}.{codec}.{i}.".encode() * rng.randint(3, 8),
                        (("phase", phase.encode()),),
                        first_ts + len(records) + i,
                        i % partitions,
                    )
                    for i in range(40 * partitions)
                ]
                _collect(records, sent, produce(bootstrap, topic, sent, compression=codec), "plain", False)
        out[topic] = sorted(records, key=lambda r: (r.partition, r.offset))
    return out


@pytest.fixture(scope="module")
def retention(kafka_jars, tmp_path_factory, pytestconfig, request):
    from jobs import retain
    from kafka_log_core.settings.config import load_config
    from kafka_log_core.work.tasks import JobOptions

    started = time.monotonic()
    work = tmp_path_factory.mktemp("retention")
    broker = KafkaBroker(work / "log-dir", work, {"log.cleaner.enable": "false"}, lib_dir=kafka_jars)
    timings: dict[str, float] = {}
    try:
        t = time.monotonic()
        spark = start_with_spark(broker, request)
        timings["broker start + Spark session"] = time.monotonic() - t
        now_ms = int(time.time() * 1000)
        t = time.monotonic()
        produced = _produce_retention_workload(broker.bootstrap, now_ms)
        ends = {
            (topic, p): o
            for topic in RETAIN_PARTITIONS
            for p, o in latest_offsets(broker.bootstrap, topic).items()
        }
        timings["produce"] = time.monotonic() - t
        broker.stop()

        tps = [(topic, p) for topic, n in RETAIN_PARTITIONS.items() for p in range(n)]
        dirs = {tp: broker.log_dir / f"{tp[0]}-{tp[1]}" for tp in tps}
        # The offline DeleteRecords lands in the middle of the third segment.
        start_segments = segment_files(dirs[(RETAIN_START, 0)])
        delete_records_to = int(start_segments[2].name[:20]) + 3
        expected_start, expected_first = {}, {}
        t = time.monotonic()
        for tp, d in dirs.items():
            facts = segment_facts(d, dump_partition(d, tp[1]))
            expected_start[tp], expected_first[tp] = expected_log_start(
                facts,
                ends[tp],
                now_ms=now_ms,
                retention_ms=RETENTION_MS if tp[0] == RETAIN_TIME else -1,
                retention_bytes=RETENTION_BYTES if tp[0] == RETAIN_SIZE else -1,
                start=delete_records_to if tp[0] == RETAIN_START else facts[0].base,
            )
        timings["dump before"] = time.monotonic() - t
        names_before = {tp: {p.name for p in segment_files(d)} for tp, d in dirs.items()}
        before = {tp: file_identities(d) for tp, d in dirs.items()}

        configs = load_config(
            None,
            (),
            [
                *(f"{topic}:retention.ms=-1" for topic in (RETAIN_SIZE, RETAIN_START)),
                f"{RETAIN_TIME}:retention.ms={RETENTION_MS}",
                f"{RETAIN_SIZE}:retention.bytes={RETENTION_BYTES}",
            ],
            (),
        )
        opts = JobOptions(now_ms=now_ms, log_start_offsets=((RETAIN_START, 0, delete_records_to),))
        t = time.monotonic()
        rows = retain.run(spark, [str(broker.log_dir)], "retain-.*", configs, opts)
        timings["our retain job"] = time.monotonic() - t
        after = {tp: file_identities(d) for tp, d in dirs.items()}
        written = [
            dirs[tp] / name
            for tp in tps
            for name, identity in after[tp].items()
            if before[tp].get(name) != identity
            and Path(name).suffix in (".log", ".index", ".timeindex", ".txnindex")
        ]
        t = time.monotonic()
        problems = check_with_dump_log_segments(written) if written else []
        timings["DumpLogSegments checks"] = time.monotonic() - t

        t = time.monotonic()
        broker.start()
        timings["restart"] = time.monotonic() - t
        earliest = {topic: earliest_offsets(broker.bootstrap, topic) for topic in RETAIN_PARTITIONS}
        latest = {topic: latest_offsets(broker.bootstrap, topic) for topic in RETAIN_PARTITIONS}
        read = {topic: consume_all(broker.bootstrap, topic) for topic in RETAIN_PARTITIONS}
        timings["set-up total"] = time.monotonic() - started
        yield RetentionScenario(
            produced, ends, expected_start, expected_first, names_before, before, after, rows, problems,
            earliest, latest, read, broker,
        )  # fmt: skip
        report_timings(pytestconfig, "broker retention read-back", timings)
    finally:
        broker.stop()


def test_retention_workload_exercises_every_rule(retention):
    """Each topic loses some segments and keeps some; the DeleteRecords offset is inside a segment."""
    for tp, first in retention.expected_first_segment.items():
        assert first > 0, tp
        assert len(retention.segment_names_before[tp]) - 2 > sum(
            int(name[:20]) < first for name in retention.segment_names_before[tp]
        ), tp
    start_tp = (RETAIN_START, 0)
    assert retention.expected_start[start_tp] > retention.expected_first_segment[start_tp]


def test_retain_job_deletes_exactly_the_expired_segments(retention):
    rows = {(r["topic"], r["partition"]): r for r in retention.job_rows}
    for tp, first in retention.expected_first_segment.items():
        assert rows[tp]["status"] == "deleted", rows[tp]
        assert rows[tp]["log_start_offset_after"] == retention.expected_start[tp]
        kept = {name for name in retention.segment_names_before[tp] if int(name[:20]) >= first}
        assert {n for n in retention.identities_after[tp] if n.endswith(".log")} == kept
        # Surviving segments are left as the broker wrote them; nothing half-deleted stays behind.
        for name in kept:
            assert retention.identities_after[tp][name] == retention.identities_before[tp][name]
        assert not [
            n for n in retention.identities_after[tp] if n.endswith((".deleted", ".swap", ".cleaned"))
        ]
    assert retention.dump_problems == []


def test_broker_reads_what_retention_left(retention):
    for topic, n in RETAIN_PARTITIONS.items():
        assert retention.earliest[topic] == {p: retention.expected_start[(topic, p)] for p in range(n)}
        assert retention.latest[topic] == {p: retention.end_offsets[(topic, p)] for p in range(n)}
        expected = [
            r.as_read()
            for r in retention.produced[topic]
            if r.offset >= retention.expected_start[(topic, r.partition)]
        ]
        got = [
            (r.partition, r.offset, r.key, r.value, r.headers, r.timestamp)
            for r in retention.read_uncommitted[topic]
        ]
        assert got == expected


def test_producing_after_retention_continues_the_log(retention):
    broker = retention.broker
    for topic, n in RETAIN_PARTITIONS.items():
        sent = [SentRecord(b"again", b"after-retention", (), int(time.time() * 1000), p) for p in range(n)]
        delivered = produce(broker.bootstrap, topic, sent, idempotent=True)
        assert {d.partition: d.offset for d in delivered} == {
            p: retention.end_offsets[(topic, p)] for p in range(n)
        }
        assert earliest_offsets(broker.bootstrap, topic) == retention.earliest[topic]
