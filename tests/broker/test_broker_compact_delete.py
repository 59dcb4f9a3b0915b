"""``compact`` on a ``compact,delete`` topic against real brokers: cleaning, then the cleaner thread's
retention (issue 24, "Also" 1).

A broker's retention thread leaves every log whose policy includes ``compact`` to the cleaner thread, and
that thread, after each cleaning attempt, runs ``deleteOldSegments`` on every compacted log it may clean:
the log-start-offset rule, and on ``compact,delete`` logs the size and time rules too. One scenario per
release (4.4.0, and 3.9.1 from before the cleaner moved to Java):

1. A broker with its cleaner off gets a ``compact,delete`` topic (``retention.ms`` one day, a low
   ``min.cleanable.dirty.ratio``, small segments): keyed records stamped three days ago over several
   segments, each key twice in a row (cleaning halves those segments but empties none: an emptied
   segment is dated by its file's mtime, recent here, and would stop time retention at it, in the
   broker as in ours), then updates of 50 other keys stamped an hour ago, then one record stamped now. It is
   stopped cleanly; its log dir is copied twice.
2. A broker with its cleaner on starts on one copy: it cleans the partition up to the active segment and
   its cleaner thread then deletes the segments past ``retention.ms`` (the log start offset moves). It is
   stopped cleanly.
3. Our ``compact`` runs on the other copy with ``--config`` = that broker's server.properties and
   ``--now-ms`` = the moment the broker had finished: nothing else.

Compared: the segment files (names and ``.log`` bytes), the log start offsets and cleaner checkpoints.
Both rules fired: records were cleaned away and whole segments deleted by time.
"""

from __future__ import annotations

import json
import shutil
import time

import pytest

from jobs import compact
from tests.broker.test_broker_interop import report_timings, source_and_reference, start_with_spark
from tests.clirun import invoke
from tests.kafka_harness import (
    SentRecord,
    create_topic,
    earliest_offsets,
    log_files,
    produce,
    read_offset_checkpoint,
    segment_files,
    wait_for_broker_cleaning,
)

pytestmark = pytest.mark.broker

DAY = 86_400_000
HOUR = 3_600_000
TOPIC = "both"
PARTITION = f"{TOPIC}-0"
COMMON_PROPS = {"log.segment.delete.delay.ms": 0}
SOURCE_PROPS = {**COMMON_PROPS, "log.cleaner.enable": "false", "log.retention.check.interval.ms": HOUR}
REFERENCE_PROPS = {**COMMON_PROPS, "log.cleaner.backoff.ms": 100, "log.retention.check.interval.ms": 500}
TOPIC_CONFIG = {"cleanup.policy": "compact,delete", "retention.ms": DAY, "min.cleanable.dirty.ratio": "0.01"}
#: small segments: 4.x takes them from internal.segment.bytes only, 3.x from segment.bytes
SEGMENTS = {"4.4.0": {"internal.segment.bytes": 4096}, "3.9.1": {"segment.bytes": 16384}}


def _records(keys: str, count: int, key_of, at: int) -> list[SentRecord]:
    return [
        SentRecord(f"{keys}-{key_of(i):04d}".encode(), f"{keys}{i}:".encode() * 6, (), at + i, 0)
        for i in range(count)
    ]


@pytest.fixture(scope="module", params=["4.4.0", "3.9.1"])
def outcome(request, tmp_path_factory, pytestconfig):
    release = request.param
    jars = request.getfixturevalue("kafka_jars" if release == "4.4.0" else "kafka3_jars")
    started = time.monotonic()
    timings: dict[str, float] = {}
    work = tmp_path_factory.mktemp(f"compact-delete-{release}")
    out: dict = {"release": release}
    with source_and_reference(work, jars, SOURCE_PROPS, REFERENCE_PROPS) as (source, reference):
        assert source.release.version == release
        t = time.monotonic()
        start_with_spark(source, request)
        timings["broker start + Spark"] = time.monotonic() - t
        t = time.monotonic()
        boot = source.bootstrap
        create_topic(boot, TOPIC, 1, {**TOPIC_CONFIG, **SEGMENTS[release]})
        now = int(time.time() * 1000)
        # each old key twice in a row: cleaning halves the old segments, never empties one (an emptied
        # segment is dated by its file's mtime, recent here, and would stop time retention there)
        produce(boot, TOPIC, _records("old", 1200, lambda i: i // 2, now - 3 * DAY))
        produce(boot, TOPIC, _records("new", 1200, lambda i: i % 50, now - HOUR))
        produce(boot, TOPIC, [SentRecord(b"last", b"now", (), now, 0)])
        timings["produce"] = time.monotonic() - t
        source.stop()

        out["source"], out["ours"] = source.log_dir, work / "ours-log-dir"
        shutil.copytree(source.log_dir, out["ours"])
        shutil.copytree(source.log_dir, reference.log_dir)
        out["kafka"] = reference.log_dir
        out["segments_before"] = [int(p.name[:20]) for p in segment_files(source.log_dir / PARTITION)]
        active = out["segments_before"][-1]

        t = time.monotonic()
        reference.start()
        wait_for_broker_cleaning(reference.log_dir, TOPIC, 0, active, timeout=60)
        deadline = time.monotonic() + 60
        while earliest_offsets(reference.bootstrap, TOPIC)[0] == 0:
            assert time.monotonic() < deadline, (
                "the reference broker's cleaner thread deleted nothing in 60 s"
            )
            time.sleep(0.2)
        time.sleep(1.0)  # a few more cleaner passes, none of which may change anything
        out["earliest"] = earliest_offsets(reference.bootstrap, TOPIC)[0]
        out["done_ms"] = int(time.time() * 1000)
        reference.stop()
        timings[f"reference broker {release} cleans and deletes"] = time.monotonic() - t

        t = time.monotonic()
        args = ["--log-dir", out["ours"], "--config", reference.properties_path, "--now-ms", out["done_ms"]]
        result = invoke(compact.command, *args, "--output", "json")
        out["exit"], out["rows"], out["stderr"] = result.exit_code, json.loads(result.stdout), result.stderr
        timings["our compact"] = time.monotonic() - t
        timings["total"] = time.monotonic() - started
        yield out
        report_timings(
            pytestconfig, f"compact,delete on {release} (log start offset {out['earliest']})", timings
        )


def _row(outcome) -> dict:
    return next(r for r in outcome["rows"] if r["topic"] == TOPIC)


def test_the_broker_cleaned_and_then_deleted_by_time(outcome):
    assert outcome["earliest"] > 0  # old segments gone by retention.ms (with what cleaning left in them)
    kept = log_files(outcome["kafka"] / PARTITION)
    same_range = [
        p for p in segment_files(outcome["source"] / PARTITION) if int(p.name[:20]) >= outcome["earliest"]
    ]
    assert sum(map(len, kept.values())) < sum(p.stat().st_size for p in same_range)  # and cleaned


def test_compact_runs_the_cleaner_threads_retention_after_cleaning(outcome):
    row = _row(outcome)
    assert outcome["exit"] == 0, outcome["stderr"]
    assert row["status"] == "cleaned", row
    assert row["segments_deleted"] > 0 and row["log_start_offset_after"] == outcome["earliest"], row
    assert "by retention.ms" in row["reason"] and "cleaner thread" in row["reason"], row["reason"]


def test_segment_files_equal_what_the_brokers_cleaner_thread_left(outcome):
    assert log_files(outcome["ours"] / PARTITION) == log_files(outcome["kafka"] / PARTITION)


def test_log_start_offsets_and_cleaner_checkpoints_equal_the_brokers(outcome):
    for name in ("log-start-offset-checkpoint", "cleaner-offset-checkpoint"):
        ours = read_offset_checkpoint(outcome["ours"] / name).get((TOPIC, 0))
        kafka = read_offset_checkpoint(outcome["kafka"] / name).get((TOPIC, 0))
        assert ours == kafka, name
    assert int(segment_files(outcome["kafka"] / PARTITION)[0].name[:20]) == outcome["earliest"]
