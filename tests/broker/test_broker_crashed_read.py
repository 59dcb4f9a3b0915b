"""Issue 24 ("Also" 2) against a real broker: the ``kafka-log`` source and ``export`` read a log dir left
by a broker killed with SIGKILL as a broker restarted on it serves it.

1. A broker (cleaner off, the high watermark checkpointed every 10 s) gets a one-partition topic (so it is
   the only replica) and keyed updates; once ``replication-offset-checkpoint`` holds the first phase's
   end, a second phase of updates to the same keys goes in and the broker is SIGKILLed before the next
   checkpoint: the checkpoint is stale, the log ends later.
2. A copy is given to a broker started on it: what it serves to a consumer is the reference.
3. On the killed dir itself (nothing may change there): our source's records equal what the restarted
   broker served (offsets, keys, values), the ``latest`` view equals the state a consumer rebuilds from
   them, and ``export`` writes those latest values, its row saying why it reads past the checkpoint.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import spark_udfs
from jobs.cli import main
from tests.broker.test_broker_interop import report_timings, start_with_spark
from tests.clirun import invoke
from tests.kafka_harness import (
    KafkaBroker,
    SentRecord,
    consume_all,
    create_topic,
    produce,
    read_offset_checkpoint,
)

pytestmark = pytest.mark.broker

TOPIC = "crashed"
KEYS = 40
PROPS = {"log.cleaner.enable": "false", "replica.high.watermark.checkpoint.interval.ms": 10_000}


@dataclass
class Crash:
    killed: Path = Path()
    checkpoint_hw: int = -1  # in the killed dir's replication-offset-checkpoint
    served: list[tuple[int, bytes | None, bytes | None]] = field(
        default_factory=list
    )  # by the restarted broker
    hashes_before: dict[str, str] = field(default_factory=dict)


def _updates(n: int, phase: int, now: int) -> list[SentRecord]:
    return [SentRecord(b"k%02d" % (i % KEYS), b"phase%d-%05d" % (phase, i), (), now + i) for i in range(n)]


def _hashes(log_dir: Path) -> dict[str, str]:
    return {
        str(p.relative_to(log_dir)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(log_dir.rglob("*"))
        if p.is_file() and p.name != ".lock"
    }


def _hw(log_dir: Path) -> int:
    return read_offset_checkpoint(log_dir / "replication-offset-checkpoint").get((TOPIC, 0), -1)


@pytest.fixture(scope="module")
def crash(kafka_jars, tmp_path_factory, pytestconfig, request):
    started = time.monotonic()
    work = tmp_path_factory.mktemp("crashed-read")
    source = KafkaBroker(work / "source-log-dir", work / "source", PROPS, lib_dir=kafka_jars)
    restarted = KafkaBroker(work / "restarted-log-dir", work / "restarted", PROPS, lib_dir=kafka_jars)
    result = Crash()
    try:
        start_with_spark(source, request)
        create_topic(source.bootstrap, TOPIC, 1, {"cleanup.policy": "compact"})
        now = int(time.time() * 1000)
        first = produce(source.bootstrap, TOPIC, _updates(300, 1, now), idempotent=True)
        end_of_first = first[-1].offset + 1
        deadline = time.monotonic() + 40
        while _hw(source.log_dir) < end_of_first:  # the checkpoint caught up with phase 1
            assert time.monotonic() < deadline, "the high watermark checkpoint was never written"
            time.sleep(0.05)
        produce(source.bootstrap, TOPIC, _updates(200, 2, now + 1000), idempotent=True)
        source.kill()
        result.killed = source.log_dir
        result.checkpoint_hw = _hw(source.log_dir)
        result.hashes_before = _hashes(source.log_dir)
        shutil.copytree(source.log_dir, restarted.log_dir)
        restarted.start()
        result.served = [(r.offset, r.key, r.value) for r in consume_all(restarted.bootstrap, TOPIC)]
        restarted.stop()
        yield result
        report_timings(pytestconfig, "crashed read", {"total": time.monotonic() - started})
    finally:
        restarted.stop()
        source.kill()


def test_the_kill_left_a_stale_high_watermark(crash):
    assert not (crash.killed / ".kafka_cleanshutdown").exists()
    assert 0 < crash.checkpoint_hw < len(crash.served) == crash.served[-1][0] + 1


def test_the_source_reads_what_the_restarted_broker_serves(crash, spark):
    spark_udfs.register(spark)
    df = spark.read.format("kafka-log").option("subscribe", TOPIC).load(str(crash.killed))
    ours = sorted((r.offset, r.key, r.value) for r in df.select("offset", "key", "value").collect())
    assert ours == crash.served
    latest = (
        spark.read.format("kafka-log")
        .option("subscribe", TOPIC)
        .option("level", "latest")
        .load(str(crash.killed))
    )
    state: dict[bytes | None, tuple[int, bytes | None]] = {}
    for offset, key, value in crash.served:
        state[key] = (offset, value)
    expected = sorted((o, k, v) for k, (o, v) in state.items() if v is not None)
    assert sorted((r.offset, r.key, r.value) for r in latest.collect()) == expected
    assert _hashes(crash.killed) == crash.hashes_before


def test_export_writes_the_latest_values_and_says_why_it_reads_past_the_checkpoint(crash, spark, tmp_path):
    out = tmp_path / "table"
    result = invoke(
        main, "export", "--log-dir", crash.killed, "--topic", TOPIC, "--out", out, "--output", "json"
    )
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    assert (row["status"], row["rows"]) == ("exported", KEYS)
    last = len(crash.served)
    assert f"high watermark {crash.checkpoint_hw} -> {last}, the recovered log end offset" in row["reason"]
    values = {r.key: r.value for r in spark.read.parquet(str(out)).collect()}
    assert all(
        v.startswith(b"phase2-") for v in values.values()
    )  # every key's latest update, not a stale one
    assert _hashes(crash.killed) == crash.hashes_before
