"""Time rules of retention and cleaning, and the offsets they leave, against a real 4.4 broker.

What the other broker modules do not reach: time retention stopped by a segment stamped in the future,
a LogAppendTime topic whose every segment expires (the active one included: the broker rolls an empty
segment at the log end first), DeleteRecords issued to the live broker in the middle of a segment,
``min.compaction.lag.ms`` holding the cleaner back, ``max.compaction.lag.ms`` forcing a clean below
``min.cleanable.dirty.ratio``, cleaning a compressed LogAppendTime topic (its time index), a topic written
with ``cleanup.policy=delete`` then altered to ``compact``, and ``local.retention.*`` on a topic without
tiered storage (ignored).

1. A broker with its cleaner off and retention checks an hour apart writes the topics below (small
   segments) and, for ``trimmed``, takes DeleteRecords; once the short ``retention.ms`` of ``appended``
   has passed it is stopped cleanly. Its log dir is copied twice.
2. A broker with its cleaner on and retention every 500 ms starts on one copy, cleans and deletes; it is
   asked kafka-get-offsets' questions (GetOffsetShell) and stopped.
3. On the other copy ``retain`` and ``compact`` run with ``--config`` = that broker's server.properties
   and ``--now-ms`` = the moment it had finished (``--force`` for ``appended``'s seconds of retention).

Compared: every segment, index and producer snapshot file (names and bytes), the log start offsets,
cleaner checkpoints and recovery points, the leader epochs (but the reference broker's new leadership),
and our ``offsets`` lines with kafka-get-offsets' answers from the reference broker.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from jobs import compact, retain
from jobs.cli import main
from tests.broker.test_broker_interop import report_timings, source_and_reference, start_with_spark
from tests.clirun import invoke
from tests.kafka_harness import (
    SentRecord,
    create_topic,
    earliest_offsets,
    produce,
    read_offset_checkpoint,
    run_get_offsets,
    segment_files,
)

pytestmark = pytest.mark.broker

DAY = 86_400_000
HOUR = 3_600_000
SHORT_RETENTION_MS = 4000
SEGMENT = {"internal.segment.bytes": "4096", "index.interval.bytes": "512"}
AHEAD = {"message.timestamp.after.max.ms": 7 * DAY}  # 4.x refuses records an hour ahead by default
COMPACT = {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01", **SEGMENT}
TOPICS = {
    "future": {"cleanup.policy": "delete", "retention.ms": DAY, **AHEAD, **SEGMENT},
    "appended": {
        "cleanup.policy": "delete", "retention.ms": SHORT_RETENTION_MS,
        "message.timestamp.type": "LogAppendTime", **SEGMENT,
    },
    "trimmed": {"cleanup.policy": "delete", "retention.ms": -1, **AHEAD, **SEGMENT},
    "lagged": {**COMPACT, "min.compaction.lag.ms": DAY},
    "overdue": {**COMPACT, "min.cleanable.dirty.ratio": "0.99", "max.compaction.lag.ms": DAY},
    "stamped": {**COMPACT, "message.timestamp.type": "LogAppendTime"},
    # local.retention.* apply to tiered topics only: on this one retention.ms=-1 keeps everything
    "local": {"cleanup.policy": "delete", "retention.ms": -1, "local.retention.ms": 1000,
              "local.retention.bytes": 100, **SEGMENT},
    "switched": {**COMPACT, "cleanup.policy": "delete", "retention.ms": -1},  # compact once written
}  # fmt: skip
PARTITIONS = {"trimmed": 2}
COMMON_PROPS = {"log.segment.delete.delay.ms": 0}
SOURCE_PROPS = {**COMMON_PROPS, "log.cleaner.enable": "false", "log.retention.check.interval.ms": HOUR}
REFERENCE_PROPS = {**COMMON_PROPS, "log.cleaner.backoff.ms": 100, "log.retention.check.interval.ms": 500}
COMPARED_SUFFIXES = (".log", ".index", ".timeindex", ".txnindex", ".snapshot")
CHECKPOINTS = ("log-start-offset-checkpoint", "cleaner-offset-checkpoint", "recovery-point-offset-checkpoint")


def _value(tag: str, i: int) -> bytes:
    return f"{tag}-{i:05d}:".encode() * 5


def _partitions() -> list[tuple[str, int]]:
    return [(t, p) for t in TOPICS for p in range(PARTITIONS.get(t, 1))]


@dataclass
class Outcome:
    now: int = 0
    source: Path = Path()
    dirs: dict[str, Path] = field(default_factory=dict)  # kafka, ours
    trimmed_to: dict[int, int] = field(default_factory=dict)  # DeleteRecords offsets of ``trimmed``
    segments_before: dict[tuple[str, int], list[int]] = field(default_factory=dict)
    questions: list[list[str]] = field(default_factory=list)
    kafka_answers: dict[str, str] = field(default_factory=dict)
    our_answers: dict[str, tuple[int, str]] = field(default_factory=dict)
    rows: dict[str, list[dict]] = field(default_factory=dict)
    stderr: dict[str, str] = field(default_factory=dict)
    done_ms: int = 0


def _produce(boot: str, now: int, out: Outcome) -> None:
    old, recent = now - 3 * DAY, now - HOUR
    for topic, config in TOPICS.items():
        create_topic(boot, topic, PARTITIONS.get(topic, 1), config)
    # future: old segments, then a few records stamped two days ahead (time retention stops there),
    # more old ones, then fresh ones
    produce(boot, "future", [SentRecord(b"f", _value("old", i), (), old + i) for i in range(120)])
    produce(boot, "future", [SentRecord(b"f", _value("ahead", i), (), now + 2 * DAY + i) for i in range(3)])
    produce(boot, "future", [SentRecord(b"f", _value("old2", i), (), old + 500 + i) for i in range(120)])
    produce(boot, "future", [SentRecord(b"f", _value("new", i), (), now + i) for i in range(10)])
    # appended: the broker stamps these (LogAppendTime); an idempotent producer, so the snapshot the roll
    # writes holds a producer
    produce(
        boot, "appended", [SentRecord(b"a", _value("a", i), (), old + i) for i in range(150)], idempotent=True
    )
    # trimmed: its largest timestamp early in the first segment, DeleteRecords past it in partition 0 and
    # into the third segment in partition 1
    for p in range(2):
        stamps = [now - 10_000 + i for i in range(400)]
        stamps[2] = now + HOUR
        produce(boot, "trimmed", [SentRecord(b"t", _value("t", i), (), stamps[i], p) for i in range(400)])
    # lagged: 60 keys updated three days ago, then again an hour ago (inside min.compaction.lag.ms)
    for at, tag in ((old, "old"), (recent, "new")):
        produce(
            boot,
            "lagged",
            [SentRecord(f"k{i % 60}".encode(), _value(tag, i), (), at + i) for i in range(240)],
        )
    # overdue: each of 60 keys written 4 times, three days ago: dirty, but below a 0.99 ratio
    produce(
        boot, "overdue", [SentRecord(f"k{i % 60}".encode(), _value("o", i), (), old + i) for i in range(240)]
    )
    produce(boot, "overdue", [SentRecord(b"last", b"now", (), now)])
    # stamped: compressed batches of several records, headers and keys repeated, LogAppendTime
    for codec in ("lz4", "zstd"):
        produce(
            boot, "stamped",
            [SentRecord(f"k{i % 40}".encode(), _value(codec, i), (("h", codec.encode()),), old + i) for i in range(200)],
            compression=codec, linger_ms=20,
        )  # fmt: skip
    produce(boot, "stamped", [SentRecord(b"last", b"now", ())])
    produce(boot, "local", [SentRecord(b"l", _value("l", i), (), old + i) for i in range(200)])
    # switched: written as a delete topic (keys updated three times), then its policy altered to compact
    produce(
        boot, "switched", [SentRecord(f"k{i % 50}".encode(), _value("s", i), (), old + i) for i in range(200)]
    )
    produce(boot, "switched", [SentRecord(b"last", b"now", (), now)])
    _set_topic_config(boot, "switched", "cleanup.policy", "compact")


def _set_topic_config(boot: str, topic: str, name: str, value: str) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=[entry])
    admin = AdminClient({"bootstrap.servers": boot})  # kept: its futures never complete once it is gone
    admin.incremental_alter_configs([resource])[resource].result(30)


def _delete_records(boot: str, log_dir: Path, out: Outcome) -> None:
    from confluent_kafka import TopicPartition as CTP
    from confluent_kafka.admin import AdminClient

    third = int(segment_files(log_dir / "trimmed-1")[2].name[:20])
    out.trimmed_to = {0: 5, 1: third + 3}
    admin = AdminClient({"bootstrap.servers": boot})
    futures = admin.delete_records(
        [CTP("trimmed", p, o) for p, o in out.trimmed_to.items()], request_timeout=30
    )
    for f in futures.values():
        f.result(30)


def _questions(now: int) -> list[list[str]]:
    times = ["-1", "-2", "-3", str(now - 4 * DAY), str(now - 3 * DAY + 60), str(now - 5000), str(now + 1)]
    times += [str(now + HOUR), str(now + 3 * DAY)]
    return [["--topic", ",".join(TOPICS), "--time", t] for t in times]


def _invoke(command, *args) -> tuple[list[dict], str]:
    result = invoke(command, *args, "--output", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout), result.stderr


@pytest.fixture(scope="module")
def outcome(kafka_jars, tmp_path_factory, pytestconfig, request):
    from click.testing import CliRunner

    started = time.monotonic()
    timings: dict[str, float] = {}
    work = tmp_path_factory.mktemp("time-rules")
    out = Outcome()
    with source_and_reference(work, kafka_jars, SOURCE_PROPS, REFERENCE_PROPS) as (source, reference):
        t = time.monotonic()
        start_with_spark(source, request)
        timings["broker start + Spark"] = time.monotonic() - t
        t = time.monotonic()
        out.now = now = int(time.time() * 1000)
        _produce(source.bootstrap, now, out)
        appended_at = time.monotonic()
        _delete_records(source.bootstrap, source.log_dir, out)
        assert earliest_offsets(source.bootstrap, "trimmed") == out.trimmed_to
        time.sleep(max(0.0, SHORT_RETENTION_MS / 1000 + 1 - (time.monotonic() - appended_at)))
        timings["produce"] = time.monotonic() - t
        source.stop()

        out.source = source.log_dir
        out.segments_before = {
            tp: [int(p.name[:20]) for p in segment_files(source.log_dir / f"{tp[0]}-{tp[1]}")]
            for tp in _partitions()
        }
        shutil.copytree(source.log_dir, reference.log_dir)
        out.dirs = {"kafka": reference.log_dir, "ours": work / "ours-log-dir"}
        shutil.copytree(source.log_dir, out.dirs["ours"])

        t = time.monotonic()
        reference.start()
        cleaned = {"lagged": 1, "overdue": out.segments_before[("overdue", 0)][-1]}
        cleaned["stamped"] = out.segments_before[("stamped", 0)][-1]
        cleaned["switched"] = out.segments_before[("switched", 0)][-1]
        deadline = time.monotonic() + 60
        while True:
            checkpoint = read_offset_checkpoint(reference.log_dir / "cleaner-offset-checkpoint")
            starts = {t: earliest_offsets(reference.bootstrap, t) for t in ("future", "appended", "trimmed")}
            if (
                all(checkpoint.get((t, 0), -1) >= o for t, o in cleaned.items())
                and starts["future"][0] > 0
                and starts["appended"][0] > 0
                and len(segment_files(reference.log_dir / "trimmed-1"))
                < len(out.segments_before[("trimmed", 1)])
            ):
                break
            assert time.monotonic() < deadline, (checkpoint, starts)
            time.sleep(0.2)
        time.sleep(2.0)  # a few more cleaner and retention passes, none of which may change anything
        out.questions = _questions(now)
        for args in out.questions:
            proc = run_get_offsets(reference.bootstrap, *args, lib_dir=kafka_jars)
            assert proc.returncode == 0, proc.stderr
            out.kafka_answers[" ".join(args)] = proc.stdout
        out.done_ms = int(time.time() * 1000)
        reference.stop()
        timings["reference broker cleans, deletes, answers"] = time.monotonic() - t

        t = time.monotonic()
        ours = out.dirs["ours"]
        common = ["--log-dir", ours, "--config", reference.properties_path, "--now-ms", out.done_ms]
        out.rows["retain"], out.stderr["retain"] = _invoke(retain.command, *common, "--force")
        out.rows["compact"], out.stderr["compact"] = _invoke(compact.command, *common)
        for args in out.questions:
            result = CliRunner().invoke(main, ["offsets", "--log-dir", str(ours), *args])
            out.our_answers[" ".join(args)] = (result.exit_code, result.output)
        timings["our retain, compact, offsets"] = time.monotonic() - t
        timings["total"] = time.monotonic() - started
        yield out
        report_timings(pytestconfig, "time rules", timings)


def _files(partition_dir: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(partition_dir.iterdir()) if p.suffix in COMPARED_SUFFIXES}


def _entries(log_dir: Path, name: str) -> dict[tuple[str, int], int]:
    return {tp: o for tp, o in read_offset_checkpoint(log_dir / name).items() if tp[0] in TOPICS}


def test_the_scenario_exercises_each_rule(outcome):
    kafka = outcome.dirs["kafka"]
    bases = {
        tp: [int(p.name[:20]) for p in segment_files(kafka / f"{tp[0]}-{tp[1]}")] for tp in _partitions()
    }
    before = outcome.segments_before
    # future: some old segments went, the one stamped ahead and the old ones after it stayed
    assert 0 < len(bases[("future", 0)]) < len(before[("future", 0)])
    assert len(bases[("future", 0)]) > 2
    # appended: every segment expired; one empty segment rolled at the log end
    assert len(bases[("appended", 0)]) == 1 and bases[("appended", 0)][0] > before[("appended", 0)][-1]
    # local: local.retention.* do not apply without tiered storage
    assert bases[("local", 0)] == before[("local", 0)] and len(before[("local", 0)]) > 2
    # trimmed: partition 0 keeps its first segment (the log start is inside it), partition 1 loses two
    assert bases[("trimmed", 0)] == before[("trimmed", 0)]
    assert bases[("trimmed", 1)] == before[("trimmed", 1)][2:]


@pytest.mark.parametrize("tp", _partitions(), ids=lambda tp: f"{tp[0]}-{tp[1]}")
def test_partition_files_equal_what_the_broker_left(outcome, tp):
    name = f"{tp[0]}-{tp[1]}"
    kafka, ours = (_files(outcome.dirs[side] / name) for side in ("kafka", "ours"))
    assert sorted(ours) == sorted(kafka)
    different = [n for n in kafka if kafka[n] != ours[n]]
    assert different == [], different


def test_checkpoints_equal_the_brokers(outcome):
    for name in CHECKPOINTS:
        kafka, ours = (_entries(outcome.dirs[side], name) for side in ("kafka", "ours"))
        assert ours == kafka, name


def _epochs(partition_dir: Path) -> list[tuple[int, int]]:
    lines = (partition_dir / "leader-epoch-checkpoint").read_text().splitlines()
    return [(int(epoch), int(start)) for epoch, start in (line.split() for line in lines[2:])]


@pytest.mark.parametrize("tp", _partitions(), ids=lambda tp: f"{tp[0]}-{tp[1]}")
def test_leader_epochs_equal_but_the_reference_brokers_new_leadership(outcome, tp):
    name = f"{tp[0]}-{tp[1]}"
    kafka, ours = (_epochs(outcome.dirs[side] / name) for side in ("kafka", "ours"))
    source = _epochs(outcome.source / name)
    newest = max(e[0] for e in source)
    kept = [e for e in kafka if e[0] <= newest]
    if not kept:  # appended: the new leadership starts at the log end, where retention put the log start,
        # so truncating from the log start kept only it; ours keeps the last epoch of the source there
        assert len(kafka) == 1 and kafka[0][0] > newest, kafka
        kept = [(newest, kafka[0][1])]
    assert ours == kept, (kafka, ours, source)


def test_offsets_print_what_kafka_get_offsets_prints_after_retention_and_cleaning(outcome):
    for question, answer in outcome.kafka_answers.items():
        assert outcome.our_answers[question] == (0, answer), question
