"""The cleaner rules new in Kafka 4.4, against a real 4.4 broker's cleaner (the 4.x pin of tests/broker/pom.xml).

1. A broker, its cleaner off, gets two topics:

   * ``roundend``: keyed updates, then a batch of unkeyed records (produced while the topic is still
     ``delete``; the policy is switched to ``compact`` afterwards), then one record stamped past
     ``segment.ms`` that rolls the segment: the unkeyed batch ends at the round's first uncleanable offset,
     one below the high watermark. 4.0 to 4.3 (KAFKA-17076, spec rule R2.2) keep it as an empty batch;
     4.4 keeps only a batch ending at the high watermark (KAFKA-20452), so it goes.
   * ``bounded``: gzip batches of 2 KB records, a record that rolls the segment, then
     ``max.decompressed.message.bytes`` lowered below those records (new in 4.4). Kafka's cleaner fails on
     the first of them and marks the partition uncleanable.

2. The log dir is copied; a second broker with its cleaner on runs on one copy until it has cleaned
   ``roundend`` and given up on ``bounded``; our ``compact`` job runs on the other with only ``--config``
   (that broker's server.properties): the release (4.4, from the metadata log's ``metadata.version``) and
   the topics' settings come from the log dir itself.

Compared: ``roundend``'s segment files and cleaner checkpoint with the broker's; ``bounded`` left as it
was by both, our row failed with the reason.
"""

from __future__ import annotations

import json
import shutil
import time

import pytest

from jobs import compact
from tests.broker.test_broker_interop import (
    alter_topic_config,
    report_timings,
    source_and_reference,
    start_with_spark,
)
from tests.broker.test_broker_kafka3 import dumped_batches
from tests.clirun import invoke
from tests.kafka_harness import (
    KAFKA_VERSION,
    BrokerHarnessError,
    KafkaBroker,
    SentRecord,
    create_topic,
    describe_topic_configs,
    log_files,
    produce,
    read_offset_checkpoint,
    segment_files,
    wait_for_broker_cleaning,
)

pytestmark = pytest.mark.broker

SEGMENT_MS = 600_000
SOURCE_PROPS = {"log.cleaner.enable": "false", "log.retention.check.interval.ms": 3_600_000}
REFERENCE_PROPS = {"log.cleaner.backoff.ms": 100, "log.retention.check.interval.ms": 3_600_000}
ROUND, BOUNDED = "roundend", "bounded"
LIMIT = 1500  # below the 2000-byte values of ``bounded``
VALUE_BYTES = 2000


def _wait_for_log_line(broker: KafkaBroker, text: str, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while text not in (broker.log_path.read_text(errors="replace") if broker.log_path.is_file() else ""):
        if time.monotonic() > deadline:
            raise BrokerHarnessError(f"{text!r} not in the broker log after {timeout}s:\n{broker.log_tail()}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def kafka44(kafka_jars, tmp_path_factory, pytestconfig, request):
    if not KAFKA_VERSION.startswith("4.4."):
        pytest.skip(f"the 4.x pin is Kafka {KAFKA_VERSION}: these are Kafka 4.4's rules")
    started = time.monotonic()
    timings: dict[str, float] = {}
    work = tmp_path_factory.mktemp("kafka44")
    out: dict = {"lib": kafka_jars}
    with source_and_reference(work, kafka_jars, SOURCE_PROPS, REFERENCE_PROPS) as (source, reference):
        t = time.monotonic()
        spark = start_with_spark(source, request)
        timings["broker start + Spark"] = time.monotonic() - t
        t = time.monotonic()
        boot = source.bootstrap
        common = {"segment.ms": SEGMENT_MS, "min.cleanable.dirty.ratio": "0.01"}
        create_topic(boot, ROUND, 1, {"cleanup.policy": "delete", **common})
        create_topic(boot, BOUNDED, 1, {"cleanup.policy": "compact", **common})
        now = int(time.time() * 1000)
        updates = [
            SentRecord(f"key-{i % 30:02d}".encode(), f"v{i}".encode(), (), now + i, 0) for i in range(300)
        ]
        produce(boot, ROUND, updates)
        unkeyed = [SentRecord(None, f"unkeyed-{i}".encode(), (), now + 1000 + i, 0) for i in range(5)]
        produce(boot, ROUND, unkeyed, linger_ms=50)
        alter_topic_config(boot, ROUND, {"cleanup.policy": "compact"})
        big = [
            SentRecord(f"big-{i % 5}".encode(), bytes([65 + i % 26]) * VALUE_BYTES, (), now + i, 0)
            for i in range(50)
        ]
        produce(boot, BOUNDED, big, compression="gzip")
        for topic in (ROUND, BOUNDED):
            produce(boot, topic, [SentRecord(b"roll", b"past segment.ms", (), now + 2 * SEGMENT_MS, 0)])
        alter_topic_config(boot, BOUNDED, {"max.decompressed.message.bytes": str(LIMIT)})
        out["described"] = describe_topic_configs(boot, BOUNDED)
        timings["produce"] = time.monotonic() - t
        source.stop()

        out["ours"] = work / "ours-log-dir"
        shutil.copytree(source.log_dir, out["ours"])
        shutil.copytree(source.log_dir, reference.log_dir)
        out["kafka"], out["source"] = reference.log_dir, source.log_dir
        out["bound"] = int(segment_files(source.log_dir / f"{ROUND}-0")[-1].name[:20])

        t = time.monotonic()
        reference.start()
        wait_for_broker_cleaning(reference.log_dir, ROUND, 0, out["bound"])
        _wait_for_log_line(reference, f"Marking its partition ({BOUNDED}-0) as uncleanable")
        done_ms = int(time.time() * 1000)
        reference.stop()
        timings["reference broker cleans"] = time.monotonic() - t

        t = time.monotonic()
        args = ["--log-dir", out["ours"], "--config", reference.properties_path, "--now-ms", done_ms]
        result = invoke(compact.command, *[str(a) for a in args], "--output", "json")
        out["job"] = (result.exit_code, json.loads(result.stdout), result.stderr)
        timings["our compact"] = time.monotonic() - t
        del spark
        timings["total"] = time.monotonic() - started
        yield out
        report_timings(pytestconfig, f"kafka {KAFKA_VERSION}", timings)


def _rows(kafka44) -> dict[str, dict]:
    return {f"{r['topic']}-{r['partition']}": r for r in kafka44["job"][1]}


def test_the_release_is_4_4_from_the_metadata_log(kafka44):
    stderr = kafka44["job"][2]
    assert "Kafka 4.4 rules (the cluster metadata says metadata.version 4.4-IV2 (level 33))" in stderr
    assert kafka44["described"]["max.decompressed.message.bytes"] == (str(LIMIT), "DYNAMIC_TOPIC_CONFIG")


def test_no_empty_batch_is_kept_at_a_round_bound_below_the_high_watermark(kafka44):
    """Kafka 4.4.0 drops the emptied unkeyed batch at the round's end; so do we, byte for byte."""
    name, bound = f"{ROUND}-0", kafka44["bound"]
    assert _rows(kafka44)[name]["status"] == "cleaned", _rows(kafka44)[name]
    before = dumped_batches(kafka44["source"] / name, kafka44["lib"])
    assert [b for b in before if b[1] + 1 == bound][0][2] == 5  # the unkeyed batch ended at the bound
    kafka = dumped_batches(kafka44["kafka"] / name, kafka44["lib"])
    assert not [b for b in kafka if b[1] + 1 == bound]  # 4.3 would have kept it, empty
    assert log_files(kafka44["ours"] / name) == log_files(kafka44["kafka"] / name)
    checkpoints = [
        read_offset_checkpoint(kafka44[side] / "cleaner-offset-checkpoint") for side in ("ours", "kafka")
    ]
    assert checkpoints[0][(ROUND, 0)] == checkpoints[1][(ROUND, 0)] == bound


def test_a_record_above_max_decompressed_message_bytes_stops_the_cleaner_and_us(kafka44):
    name = f"{BOUNDED}-0"
    row = _rows(kafka44)[name]
    assert row["status"] == "failed" and f"more than max.decompressed.message.bytes={LIMIT}" in row["reason"]
    # the v2 record body of key "big-0" and a 2000-byte value: attributes, timestamp delta, offset delta and
    # key length 1 byte each, key 5, value length 2 (zigzag 4000), value 2000, header count 1
    assert f"the record at offset 0 is {1 + 1 + 1 + 1 + 5 + 2 + VALUE_BYTES + 1} bytes" in row["reason"]
    untouched = log_files(kafka44["source"] / name)
    assert log_files(kafka44["kafka"] / name) == untouched
    assert log_files(kafka44["ours"] / name) == untouched
    assert (BOUNDED, 0) not in read_offset_checkpoint(kafka44["ours"] / "cleaner-offset-checkpoint")
    assert kafka44["job"][0] == 1  # a failed partition
