"""Topic settings from the log dir itself, against a real Kafka 4.x broker (issue 12).

One scenario for the module:

1. A broker (its cleaner off, retention checks an hour apart, so it changes no data) gets topics created
   with configs, and enough metadata that its controller writes a snapshot (``metadata.log.max.record.
   bytes.between.snapshots`` lowered). Records are produced with explicit timestamps: a compacted topic
   with keyed updates, a topic whose old segments are 30 days old (far past retention) and whose new ones
   are fresh, a topic over its ``retention.bytes``. Then, after the snapshot: topic configs altered and
   deleted with the admin API, a cluster-wide dynamic broker default and a dynamic config of broker 1
   (Kafka's own ``kafka-configs``), and one topic deleted and re-created under the same name. Each
   topic's configs are described (``describe_configs``, what ``kafka-configs --describe --all``
   prints), and the broker is stopped.
2. Its log dir is copied twice; in both copies the re-created topic's directory is replaced by a copy of
   the deleted topic's (taken before the deletion): a stray replica with the old topic id.
3. A second broker with the cleaner on and retention every 500 ms (the reference) runs on one copy
   until its cleaner and retention are done, then stops.
4. ``report``, ``retain`` and ``compact`` run on the other copy with no config files and no flags but
   ``--config`` = the reference broker's own server.properties.

Compared: the effective settings and their sources with what the broker described; the files of every
partition (segment names and ``.log`` bytes), log start offsets and cleaner checkpoints with what the
reference broker's own cleaner and retention left; the stray directory left alone by both; and our
decoding of every metadata record with Kafka's DumpLogSegments ``--cluster-metadata-decoder``.

A copy without the metadata log shows the refusal: ``retain`` deletes nothing for a topic whose settings
are unknown, says so once per topic and exits 1; with a topic file for one topic, that one proceeds.
"""

from __future__ import annotations

import json
import re
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from jobs import compact, report, retain
from kafka_log_core.format.metadata_records import (
    ConfigRecord,
    FeatureLevelRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from kafka_log_core.settings.cluster_metadata import METADATA_LOG_DIR, iter_records, latest_snapshot
from kafka_log_core.settings.config import TOPIC_KEYS
from kafka_log_core.settings.log_dir_config import resolve_log_dir_configs
from tests.broker.test_broker_interop import report_timings, source_and_reference, start_with_spark
from tests.clirun import invoke
from tests.kafka_harness import (
    SentRecord,
    create_topic,
    describe_topic_configs,
    earliest_offsets,
    log_files,
    produce,
    read_offset_checkpoint,
    run_dump_log_segments,
    run_kafka_configs,
    segment_files,
    wait_for_broker_cleaning,
)

pytestmark = pytest.mark.broker

DAY = 86_400_000
CLUSTER_RETENTION_MS = 10 * DAY  # the cluster-wide dynamic default of log.retention.ms
BROKER_DELETE_RETENTION_MS = 2 * 3_600_000  # broker 1's dynamic log.cleaner.delete.retention.ms
SNAPSHOT_BYTES = 6144
#: Same on both brokers except what lets the reference clean and apply retention.
COMMON_PROPS = {
    "metadata.log.max.record.bytes.between.snapshots": SNAPSHOT_BYTES,
    "metadata.max.idle.interval.ms": 60_000,  # few no-op records: the snapshot comes from our traffic
    "log.segment.delete.delay.ms": 1000,  # a static broker setting (file.delete.delay.ms)
}
SOURCE_PROPS = {**COMMON_PROPS, "log.cleaner.enable": "false", "log.retention.check.interval.ms": 3_600_000}
REFERENCE_PROPS = {**COMMON_PROPS, "log.cleaner.backoff.ms": 100, "log.retention.check.interval.ms": 500}

TOPICS = {  # name -> (partitions, config at creation)
    "compacted": (2, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.5",
                      "delete.retention.ms": "3600000", "internal.segment.bytes": "4096"}),
    "events": (2, {"internal.segment.bytes": "4096"}),
    "sized": (1, {"retention.ms": "-1", "retention.bytes": "40000", "internal.segment.bytes": "4096"}),
    "recreated": (1, {"cleanup.policy": "compact", "internal.segment.bytes": "4096"}),
    # metadata for the snapshot: topics with many configs (Kafka topic settings the jobs ignore, too)
    **{f"filler-{i:02d}": (1, {"segment.ms": str(3_600_000 + i), "max.message.bytes": "100000",
                               "index.interval.bytes": "1024", "flush.messages": "100000", "flush.ms": "600000",
                               "min.insync.replicas": "1", "message.timestamp.type": "LogAppendTime",
                               "segment.jitter.ms": "1000", "preallocate": "false", "compression.type": "zstd",
                               "message.timestamp.before.max.ms": "86400000"}) for i in range(8)},
}  # fmt: skip
COMPARED = ("cleanup.policy", "retention.ms", "retention.bytes", "min.cleanable.dirty.ratio")
#: Our source names, as Kafka's DescribeConfigs classifies them.
SOURCE_KINDS = (
    ("metadata log: dynamic cluster-wide broker default", "DYNAMIC_DEFAULT_BROKER_CONFIG"),
    ("metadata log: dynamic config of broker 1", "DYNAMIC_BROKER_CONFIG"),
    ("metadata log", "DYNAMIC_TOPIC_CONFIG"),
    ("server.properties", "STATIC_BROKER_CONFIG"),
    ("Kafka default", "DEFAULT_CONFIG"),
)


def kind_of(source: str) -> str:
    return next(kind for prefix, kind in SOURCE_KINDS if source.startswith(prefix) or prefix in source)


@dataclass
class Outcome:
    described: dict[str, dict[str, tuple[str, str]]] = field(default_factory=dict)
    dirs: dict[str, Path] = field(default_factory=dict)
    source_dir: Path = Path()
    stash: Path = Path()
    reference_done_ms: int = 0
    rows: dict[str, list[dict]] = field(default_factory=dict)
    results: dict[str, object] = field(default_factory=dict)
    kafka_cleaned: dict[tuple[str, int], int] = field(default_factory=dict)
    no_metadata: dict[str, object] = field(default_factory=dict)


def _records(topic: str, partitions: int, now: int) -> list[SentRecord]:
    if topic == "compacted":
        return [
            SentRecord(
                f"key-{i % 29:02d}".encode(), f"{topic}.{i}.".encode() * 4, (), now - DAY + i, i % partitions
            )
            for i in range(1200)
        ]
    if topic == "events":  # 30 days old, then fresh: a time roll between them
        old = [
            SentRecord(None, f"old.{i}.".encode() * 8, (), now - 30 * DAY + i, i % partitions)
            for i in range(600)
        ]
        fresh = [
            SentRecord(None, f"new.{i}.".encode() * 8, (), now - 60_000 + i, i % partitions)
            for i in range(200)
        ]
        return old + fresh
    if topic == "sized":
        return [
            SentRecord(f"s{i}".encode(), f"sized.{i}.".encode() * 6, (), now - 60_000 + i, 0)
            for i in range(900)
        ]
    if topic == "recreated":
        return [
            SentRecord(f"r{i % 7}".encode(), f"old.{i}".encode() * 5, (), now - 3_600_000 + i, 0)
            for i in range(300)
        ]
    return []


def _alter_topic(bootstrap: str, topic: str, set_: dict[str, str], delete: tuple[str, ...] = ()) -> None:
    from confluent_kafka.admin import (
        AdminClient,
        AlterConfigOpType,
        ConfigEntry,
        ConfigResource,
        ResourceType,
    )

    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in set_.items()]
    entries += [ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in delete]
    resource = ConfigResource(ResourceType.TOPIC, topic, incremental_configs=entries)
    admin.incremental_alter_configs([resource])[resource].result(30)


def _delete_topic(bootstrap: str, topic: str) -> None:
    from confluent_kafka.admin import AdminClient

    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=30)[topic].result(30)
    deadline = time.monotonic() + 30
    while topic in admin.list_topics(timeout=5).topics:
        if time.monotonic() > deadline:
            raise AssertionError(f"topic {topic} still listed after deletion")
        time.sleep(0.2)


def _wait_for_snapshot(metadata_dir: Path, timeout: float = 30.0) -> int:
    deadline = time.monotonic() + timeout
    while True:
        found = latest_snapshot(metadata_dir)
        if found is not None and found[1] > 0:
            return found[1]
        if time.monotonic() > deadline:
            raise AssertionError(f"no metadata snapshot in {metadata_dir} after {timeout}s")
        time.sleep(0.2)


def _invoke(command, *args) -> tuple[int, list[dict], str]:
    result = invoke(command, *args)
    return result.exit_code, json.loads(result.stdout), result.stderr


def _partition_dirs(log_dir: Path) -> dict[str, Path]:
    return {
        p.name: p
        for p in log_dir.iterdir()
        if p.is_dir() and re.fullmatch(r".+-\d+", p.name) and p.name != METADATA_LOG_DIR
    }


@pytest.fixture(scope="module")
def outcome(kafka_jars, tmp_path_factory, pytestconfig, request):
    started = time.monotonic()
    timings: dict[str, float] = {}
    work = tmp_path_factory.mktemp("cluster-metadata")
    result = Outcome()
    with source_and_reference(work, kafka_jars, SOURCE_PROPS, REFERENCE_PROPS) as (source, reference):
        t = time.monotonic()
        spark = start_with_spark(source, request)
        timings["broker start + Spark"] = time.monotonic() - t
        t = time.monotonic()
        boot = source.bootstrap
        for topic, (partitions, config) in TOPICS.items():
            create_topic(boot, topic, partitions, config)
        _wait_for_snapshot(source.log_dir / METADATA_LOG_DIR)
        now = int(time.time() * 1000)
        for topic, (partitions, _) in TOPICS.items():
            records = _records(topic, partitions, now)
            if records:
                produce(boot, topic, records)
        result.stash = work / "recreated-0.stale"
        shutil.copytree(source.log_dir / "recreated-0", result.stash)
        timings["topics, snapshot, produce"] = time.monotonic() - t

        t = time.monotonic()  # after the snapshot: these live in the metadata log only
        _alter_topic(
            boot, "compacted", {"min.cleanable.dirty.ratio": "0.01"}, delete=("delete.retention.ms",)
        )
        _alter_topic(boot, "sized", {"retention.bytes": "30000"}, delete=("retention.ms",))
        run_kafka_configs(boot, "--entity-type", "brokers", "--entity-default", "--alter", "--add-config",
                          f"log.retention.ms={CLUSTER_RETENTION_MS}", lib_dir=kafka_jars)  # fmt: skip
        run_kafka_configs(boot, "--entity-type", "brokers", "--entity-name", "1", "--alter", "--add-config",
                          f"log.cleaner.delete.retention.ms={BROKER_DELETE_RETENTION_MS}", lib_dir=kafka_jars)  # fmt: skip
        _delete_topic(boot, "recreated")
        create_topic(boot, "recreated", 1, {"cleanup.policy": "delete", "retention.ms": "7200000"})
        produce(boot, "recreated", [SentRecord(b"n", b"new", (), now, 0)])
        deadline = time.monotonic() + 30  # dynamic configs reach the broker's config cache asynchronously
        while True:
            result.described = {
                topic: describe_topic_configs(boot, topic)
                for topic in ("compacted", "events", "sized", "recreated", "filler-00")
            }
            events = result.described["events"]
            if events["retention.ms"][1] == "DYNAMIC_DEFAULT_BROKER_CONFIG" and (
                events["delete.retention.ms"][1] == "DYNAMIC_BROKER_CONFIG"
            ):
                break
            assert time.monotonic() < deadline, f"dynamic configs not applied: {events}"
            time.sleep(0.2)
        timings["configs altered and described"] = time.monotonic() - t
        source.stop()

        result.source_dir = source.log_dir
        for side in ("kafka", "ours", "no-metadata"):
            d = work / f"{side}-log-dir"
            if side != "kafka":
                shutil.copytree(source.log_dir, d)
            else:
                shutil.copytree(source.log_dir, reference.log_dir)
                d = reference.log_dir
            shutil.rmtree(d / "recreated-0")
            shutil.copytree(result.stash, d / "recreated-0")
            result.dirs[side] = d
        shutil.rmtree(result.dirs["no-metadata"] / METADATA_LOG_DIR)

        t = time.monotonic()
        reference.start()
        for topic in ("compacted",):
            for p in range(TOPICS[topic][0]):
                first_uncleanable = int(segment_files(source.log_dir / f"{topic}-{p}")[-1].name[:20])
                result.kafka_cleaned[(topic, p)] = wait_for_broker_cleaning(
                    reference.log_dir, topic, p, first_uncleanable, timeout=60
                )
        deadline = time.monotonic() + 60
        while not (
            all(o > 0 for o in earliest_offsets(reference.bootstrap, "events").values())
            and earliest_offsets(reference.bootstrap, "sized")[0] > 0
        ):
            assert time.monotonic() < deadline, "the reference broker applied no retention in 60 s"
            time.sleep(0.2)
        time.sleep(2.0)  # a few more retention checks (none may change anything) and the delayed deletes
        result.reference_done_ms = int(time.time() * 1000)
        reference.stop()
        timings["reference broker cleans and applies retention"] = time.monotonic() - t

        t = time.monotonic()
        ours = result.dirs["ours"]
        common = [
            "--log-dir",
            ours,
            "--config",
            reference.properties_path,
            "--now-ms",
            result.reference_done_ms,
        ]
        result.results["report"] = _invoke(report.command, *common, "--format", "json")
        result.results["retain"] = _invoke(retain.command, *common, "--output", "json")
        result.results["compact"] = _invoke(compact.command, *common, "--output", "json")
        result.results["configs"] = resolve_log_dir_configs([ours], config_files=[reference.properties_path])
        timings["our report, retain, compact"] = time.monotonic() - t

        t = time.monotonic()
        bare = result.dirs["no-metadata"]
        before = {name: log_files(p) for name, p in _partition_dirs(bare).items()}
        plain = [
            "--log-dir",
            bare,
            "--config",
            reference.properties_path,
            "--now-ms",
            result.reference_done_ms,
        ]
        result.no_metadata["refused"] = _invoke(retain.command, *plain, "--output", "json")
        result.no_metadata["after_refusal"] = {
            name: log_files(p) for name, p in _partition_dirs(bare).items()
        }
        result.no_metadata["before"] = before
        conf = work / "conf"
        (conf / "topics").mkdir(parents=True)
        (conf / "topics" / "events.properties").write_text(f"retention.ms={CLUSTER_RETENTION_MS}\n")
        result.no_metadata["with_file"] = _invoke(
            retain.command, *plain, "--conf-dir", conf, "--output", "json"
        )
        timings["retain without the metadata log"] = time.monotonic() - t
        del spark
        timings["total"] = time.monotonic() - started
        yield result
        report_timings(pytestconfig, "cluster metadata", timings)


# --------------------------------------------------------------------------------------------- settings


def test_the_scenario_has_a_snapshot_and_changes_after_it(outcome):
    """The image needs both: a snapshot (not the bootstrap one) and config records after it, as Kafka's
    own decoder reads them."""
    metadata = outcome.source_dir / METADATA_LOG_DIR
    snapshot, end = latest_snapshot(metadata)
    assert end > 0
    later = []
    for segment in segment_files(metadata):
        dumped = run_dump_log_segments(segment, "--cluster-metadata-decoder")
        assert dumped.returncode == 0, dumped.stderr
        for line in dumped.stdout.splitlines():
            match = re.search(r"offset: (\d+) .*payload: (\{.*\})$", line)
            if match and int(match[1]) >= end and json.loads(match[2])["type"] == "CONFIG_RECORD":
                later.append(json.loads(match[2])["data"])
    assert {
        "resourceType": 4,
        "resourceName": "",
        "name": "log.retention.ms",
        "value": str(CLUSTER_RETENTION_MS),
    } in later
    assert any(r["name"] == "delete.retention.ms" and r["value"] is None for r in later)


def test_effective_settings_are_what_the_broker_described(outcome):
    """All of our topic settings, value and kind of source, equal the broker's description, for topics
    with configs from creation, altered and deleted configs, a cluster-wide and a per-broker dynamic
    default, and a re-created topic. (``segment.bytes`` is described as Kafka's public value; the broker
    rolls by the internal.segment.bytes these topics have, as we do.)"""
    configs = outcome.results["configs"][str(outcome.dirs["ours"])].configs
    checked = 0
    for topic, described in outcome.described.items():
        settings = configs.settings(topic)
        assert settings.known and settings.error is None, topic
        for name in TOPIC_KEYS:
            if name == "segment.bytes" and "internal.segment.bytes" in str(settings.source(name)):
                continue
            value, kind = described[name]
            ours = settings.value(name)
            shown = (
                ",".join(sorted(ours))
                if isinstance(ours, frozenset)
                else str(ours).lower()
                if isinstance(ours, bool)
                else str(ours)
            )
            if name == "cleanup.policy":
                value = ",".join(sorted(value.split(",")))
            assert (shown, kind_of(settings.source(name))) == (value, kind), (
                topic,
                name,
                settings.source(name),
            )
            checked += 1
    assert checked > 60
    kinds = {kind for described in outcome.described.values() for _, kind in described.values()}
    assert {"DYNAMIC_TOPIC_CONFIG", "DYNAMIC_BROKER_CONFIG", "DYNAMIC_DEFAULT_BROKER_CONFIG",
            "STATIC_BROKER_CONFIG", "DEFAULT_CONFIG"} <= kinds  # fmt: skip


def test_report_shows_the_settings_and_their_sources(outcome):
    code, rows, _ = outcome.results["report"]
    assert code == 0, rows
    by_topic = {r["topic"]: r for r in rows}
    for topic, described in outcome.described.items():
        row = by_topic[topic]
        assert row["cleanup_policy"] == ",".join(sorted(described["cleanup.policy"][0].split(",")))
        assert str(row["retention_ms"]) == described["retention.ms"][0]
        assert str(row["retention_bytes_setting"]) == described["retention.bytes"][0]
        assert float(described["min.cleanable.dirty.ratio"][0]) == row["min_cleanable_dirty_ratio"]
        for name, column in zip(
            COMPARED,
            ("cleanup_policy", "retention_ms", "retention_bytes", "min_cleanable_dirty_ratio"),
            strict=True,
        ):
            assert kind_of(row[f"{column}_source"]) == described[name][1], (topic, name)
    assert by_topic["events"]["retention_ms_source"] == "metadata log: dynamic cluster-wide broker default"
    assert by_topic["compacted"]["cleanup_policy_source"] == "metadata log"


# ------------------------------------------------------------------------------------ results vs Kafka


def test_jobs_ran_with_no_files_or_flags(outcome):
    for job in ("report", "retain", "compact"):
        code, rows, _ = outcome.results[job]
        assert code == 0, (job, [r for r in rows if r["status"] == "failed"])
    retained = {(r["topic"], r["partition"]): r for r in outcome.results["retain"][1]}
    assert retained[("events", 0)]["settings"].startswith("cleanup.policy=delete (Kafka default)")
    assert (
        f"retention.ms={CLUSTER_RETENTION_MS} (metadata log: dynamic cluster-wide"
        in retained[("events", 0)]["settings"]
    )
    compacted = {(r["topic"], r["partition"]): r for r in outcome.results["compact"][1]}
    assert compacted[("compacted", 0)]["status"] == "cleaned"
    assert compacted[("compacted", 0)]["settings"] == (
        "cleanup.policy=compact (metadata log); min.cleanable.dirty.ratio=0.01 (metadata log)"
    )


def test_segment_files_equal_what_kafkas_cleaner_and_retention_left(outcome):
    kafka, ours = _partition_dirs(outcome.dirs["kafka"]), _partition_dirs(outcome.dirs["ours"])
    live = sorted(name for name in ours if not name.startswith("recreated-"))
    assert {n for n in kafka if ".stray" not in n and "-stray" not in n} >= set(live)
    changed = 0
    for name in live:
        theirs, mine = log_files(kafka[name]), log_files(ours[name])
        assert sorted(mine) == sorted(theirs), name
        for file_name, data in theirs.items():
            assert mine[file_name] == data, f"{name}/{file_name} differs from Kafka's"
        changed += log_files(outcome.source_dir / name) != theirs
    assert changed >= 5  # compacted x2, events x2, sized: each was cleaned or trimmed


def test_log_start_offsets_and_cleaner_checkpoints_equal_kafkas(outcome):
    for name in ("log-start-offset-checkpoint", "cleaner-offset-checkpoint"):
        kafka = read_offset_checkpoint(outcome.dirs["kafka"] / name)
        ours = read_offset_checkpoint(outcome.dirs["ours"] / name)
        kafka = {tp: o for tp, o in kafka.items() if tp[0] != "recreated"}
        assert {tp: o for tp, o in ours.items() if tp[0] != "recreated"} == kafka, name
    # retention moved them (the checkpoint lists a start only above the first segment's base)
    for name in ("events-0", "events-1", "sized-0"):
        assert int(segment_files(outcome.dirs["ours"] / name)[0].name[:20]) > 0, name


def test_a_stray_directory_with_the_old_topic_id_is_left_alone(outcome):
    stale = log_files(outcome.stash)
    for job in ("retain", "compact", "report"):
        (row,) = [r for r in outcome.results[job][1] if r["topic"] == "recreated"]
        assert row["status"] == "skipped" and "topic id" in row["reason"] and "stray" in row["reason"], row
    assert log_files(outcome.dirs["ours"] / "recreated-0") == stale
    # Kafka agrees: it set the directory aside as a stray log, its data untouched
    (stray,) = [
        p
        for p in outcome.dirs["kafka"].iterdir()
        if p.name.startswith("recreated-0.") and p.name.endswith("-stray")
    ]
    assert log_files(stray) == stale


# ------------------------------------------------------------------------------------ metadata decoding


def _dumped_records(path: Path) -> dict[int, dict]:
    dumped = run_dump_log_segments(path, "--cluster-metadata-decoder")
    assert dumped.returncode == 0, dumped.stderr
    out = {}
    for line in dumped.stdout.splitlines():
        match = re.search(r"\| offset: (\d+) .*payload: (\{.*\})$", line)
        if match:
            out[int(match[1])] = json.loads(match[2])
    return out


def _as_kafka_json(record) -> tuple[str, dict] | None:
    if isinstance(record, TopicRecord):
        return "TOPIC_RECORD", {"name": record.name, "topicId": record.topic_id}
    if isinstance(record, PartitionRecord):
        return "PARTITION_RECORD", {"partitionId": record.partition_id, "topicId": record.topic_id,
                                    "replicas": list(record.replicas), "isr": list(record.isr), "leader": record.leader}  # fmt: skip
    if isinstance(record, PartitionChangeRecord):
        data = {"partitionId": record.partition_id, "topicId": record.topic_id}
        if record.isr is not None:
            data["isr"] = list(record.isr)
        if record.leader != -2:
            data["leader"] = record.leader
        if record.replicas is not None:
            data["replicas"] = list(record.replicas)
        return "PARTITION_CHANGE_RECORD", data
    if isinstance(record, RemoveTopicRecord):
        return "REMOVE_TOPIC_RECORD", {"topicId": record.topic_id}
    if isinstance(record, ConfigRecord):
        return "CONFIG_RECORD", {"resourceType": record.resource_type, "resourceName": record.resource_name,
                                 "name": record.name, "value": record.value}  # fmt: skip
    if isinstance(record, FeatureLevelRecord):
        return "FEATURE_LEVEL_RECORD", {"name": record.name, "featureLevel": record.feature_level}
    return None


def test_metadata_records_decode_as_kafkas_decoder_reads_them(outcome):
    metadata = outcome.source_dir / METADATA_LOG_DIR
    files = [latest_snapshot(metadata)[0], *segment_files(metadata)]
    seen: dict[str, int] = {}
    for path in files:
        kafka = _dumped_records(path)
        for offset, record in iter_records(path, strict=False):
            ours = _as_kafka_json(record)
            if ours is None:
                continue
            kind, data = ours
            assert kafka[offset]["type"] == kind, (path.name, offset)
            theirs = kafka[offset]["data"]
            assert {k: theirs.get(k) for k in data} == data, (path.name, offset, theirs)
            seen[kind] = seen.get(kind, 0) + 1
    assert set(seen) >= {"TOPIC_RECORD", "PARTITION_RECORD", "PARTITION_CHANGE_RECORD", "REMOVE_TOPIC_RECORD",
                         "CONFIG_RECORD", "FEATURE_LEVEL_RECORD"}  # fmt: skip


# ------------------------------------------------------------------------------------ no metadata log


def test_without_the_metadata_log_retain_deletes_nothing_by_guess(outcome):
    code, rows, stderr = outcome.no_metadata["refused"]
    assert code == 1
    assert outcome.no_metadata["after_refusal"] == outcome.no_metadata["before"]
    refused = {r["topic"] for r in rows if r["status"] == "failed"}
    assert {"compacted", "events", "sized", "recreated"} <= refused
    for topic in refused:
        lines = [line for line in stderr.splitlines() if f"no configuration known for topic {topic} " in line]
        assert len(lines) == 1, (topic, stderr)
        assert "--topic-config" in lines[0] and "--assume-broker-defaults" in lines[0]


def test_without_the_metadata_log_a_topic_file_lets_retention_proceed(outcome):
    code, rows, _ = outcome.no_metadata["with_file"]
    assert code == 1  # the other topics are still unknown
    events = [r for r in rows if r["topic"] == "events"]
    assert {r["status"] for r in events} == {"deleted"}
    kafka_starts = {  # the first segment Kafka's retention left
        p: int(segment_files(outcome.dirs["kafka"] / f"events-{p}")[0].name[:20])
        for p in range(TOPICS["events"][0])
    }
    assert {r["partition"]: r["log_start_offset_after"] for r in events} == kafka_starts
    sized = [r for r in rows if r["topic"] == "sized"]
    assert sized[0]["status"] == "failed"
