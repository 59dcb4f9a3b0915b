"""A log dir's configuration: Kafka's precedence with the metadata log's layers, the release's rules,
known and unknown settings, and the choice of metadata log and release per log dir.

Expected values are Kafka's (precedence from KafkaConfig/DynamicBrokerConfig and LogConfig; the
validators of each release read from its jars on Maven Central, as listed in kafka_version's docstring);
the end-to-end comparison with a real broker's describe_configs is test_broker_cluster_metadata.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from kafka_log_core.errors import ConfigError, UsageError
from kafka_log_core.format.checkpoints import MetaProperties
from kafka_log_core.settings import kafka_version as kv
from kafka_log_core.settings.cluster_metadata import ClusterMetadata, TopicState
from kafka_log_core.settings.config import load_config
from kafka_log_core.settings.kafka_version import KafkaVersion
from kafka_log_core.settings.log_dir_config import decide_version, resolve_log_dir_configs
from tests.metadata_build import (
    config_record,
    feature_level,
    partition_record,
    topic_record,
    write_meta_properties,
    write_metadata_log,
)

A, B = "KB9btG56TIKDzbjC1Rj0pA", "6ey3bQ6uQmisysFLQnVpYA"
V39, V40, V41, V43, V44 = (KafkaVersion(3, 9), KafkaVersion(4, 0), KafkaVersion(4, 1), KafkaVersion(4, 3),
                           KafkaVersion(4, 4))  # fmt: skip


def metadata(topic_configs=None, broker_configs=None, topics=("orders",), level=21) -> ClusterMetadata:
    """A metadata image as read_cluster_metadata returns it (topic ids made up)."""
    return ClusterMetadata(
        directory="/x/__cluster_metadata-0", snapshot=None, end_offset=10, records_read=10,
        topics={t: TopicState(t, A, {}) for t in topics}, removed_topics=(), topic_configs=topic_configs or {},
        broker_configs=broker_configs or {}, feature_levels={"metadata.version": level},
    )  # fmt: skip


def load(tmp_path: Path, *, server: str = "", topic_file: str | None = None, metadata=None, **kw):
    files = []
    if server:
        path = tmp_path / "server.properties"
        path.write_text(server)
        files.append(path)
    conf = None
    if topic_file is not None:
        conf = tmp_path / "conf"
        (conf / "topics").mkdir(parents=True, exist_ok=True)
        (conf / "topics" / "orders.properties").write_text(topic_file)
    if metadata is not None:
        kw.setdefault("node_id", 1)
    return load_config(conf, files, kw.pop("topic_configs", ()), kw.pop("sets", ()), metadata=metadata, **kw)


# --- precedence --------------------------------------------------------------------------------------------


def test_each_layer_beats_the_one_below(tmp_path):
    """Kafka default < server.properties < dynamic cluster default < dynamic broker 1 < the topic's config in
    the metadata log < conf/topics < --topic-config < --set, one setting decided by each layer."""
    server = "log.retention.bytes=1\nlog.segment.delete.delay.ms=2\nlog.cleaner.delete.retention.ms=3\n"
    server += "log.cleaner.min.compaction.lag.ms=4\nmessage.max.bytes=5\nlog.index.interval.bytes=6\n"
    m = metadata(
        broker_configs={
            "": {"log.segment.delete.delay.ms": "20", "log.cleaner.delete.retention.ms": "30",
                 "log.cleaner.min.compaction.lag.ms": "40", "message.max.bytes": "50", "log.index.interval.bytes": "60",
                 "log.retention.bytes": "10"},
            "1": {"log.cleaner.delete.retention.ms": "300", "log.cleaner.min.compaction.lag.ms": "400",
                  "message.max.bytes": "500", "log.index.interval.bytes": "600", "log.retention.bytes": "100"},
            "2": {"log.retention.bytes": "999"},  # another broker's
        },
        topic_configs={"orders": {"min.compaction.lag.ms": "4000", "max.message.bytes": "5000",
                                  "index.interval.bytes": "6000", "retention.bytes": "1000"}},
    )  # fmt: skip
    configs = load(
        tmp_path, server=server, metadata=m, topic_file="max.message.bytes=50000\nindex.interval.bytes=60000\n",
        topic_configs=["orders:index.interval.bytes=600000", "orders:retention.bytes=7"],
        sets=["retention.bytes=8"],
    )  # fmt: skip
    s = configs.settings("orders")
    assert (s.value("file.delete.delay.ms"), s.source("file.delete.delay.ms")) == (
        20,
        "metadata log: dynamic cluster-wide broker default",
    )
    assert (s.value("delete.retention.ms"), s.source("delete.retention.ms")) == (
        300,
        "metadata log: dynamic config of broker 1",
    )
    assert (s.value("min.compaction.lag.ms"), s.source("min.compaction.lag.ms")) == (4000, "metadata log")
    assert s.value("max.message.bytes") == 50000 and s.source("max.message.bytes").endswith(
        "orders.properties:1"
    )
    assert s.value("index.interval.bytes") == 600000
    assert (s.value("retention.bytes"), s.source("retention.bytes")) == (8, "--set retention.bytes=8")
    assert (
        s.value("segment.ms") == 7 * 86_400_000 and s.source("segment.ms") == "Kafka default (log.roll.hours)"
    )
    other = configs.settings("payments")  # no settings of its own: the broker level
    assert (other.value("retention.bytes"), other.value("max.message.bytes")) == (8, 500)
    assert configs.broker.log_cleaner_min_compaction_lag_ms == 400


def test_synonyms_are_decided_on_the_merged_static_and_dynamic_configs(tmp_path):
    """As KafkaConfig on static ++ dynamic props: a static log.retention.ms beats a dynamic .hours... which
    Kafka does not even let one set dynamically; a dynamic log.retention.ms beats a static .hours."""
    m = metadata(broker_configs={"": {"log.retention.ms": "5000", "log.retention.hours": "1"}})
    configs = load(tmp_path, server="log.retention.hours=2\n", metadata=m)
    assert configs.broker.log_retention_ms == 5000
    assert "log.retention.hours (metadata log: dynamic cluster-wide broker default)" in configs.ignored
    static_ms = load(tmp_path, server="log.retention.ms=7\n", metadata=metadata())
    assert static_ms.broker.log_retention_ms == 7


def test_only_settings_kafka_changes_at_runtime_come_from_dynamic_configs(tmp_path):
    m = metadata(broker_configs={"": {"log.cleaner.enable": "false", "offsets.topic.segment.bytes": "5",
                                      "log.cleaner.threads": "2", "num.io.threads": "16"}})  # fmt: skip
    configs = load(tmp_path, metadata=m)
    assert (
        configs.broker.log_cleaner_enable is True and configs.broker.offsets_topic_segment_bytes == 104857600
    )
    assert configs.broker.log_cleaner_threads == 2


def test_metadata_topic_configs_kafka_accepted_are_read_leniently(tmp_path):
    m = metadata(
        topics=("orders", "tiered", "broken"),
        topic_configs={
            "orders": {"cleanup.policy": "compact", "min.insync.replicas": "2", "some.future.setting": "x"},
            "tiered": {"remote.storage.enable": "true"},
            "broken": {"retention.ms": "-5"},
        },
    )
    configs = load(tmp_path, metadata=m)
    assert configs.settings("orders").config.compact and configs.settings("orders").error is None
    assert "tiered-storage topics are not supported" in configs.settings("tiered").error
    assert "retention.ms=-5 from metadata log: must be at least -1" in configs.settings("broken").error
    assert "some.future.setting (metadata log, topic orders)" in configs.ignored


# --- known and unknown ---------------------------------------------------------------------------------------


def test_which_settings_are_known(tmp_path):
    m = metadata(topics=("orders",))
    configs = load(tmp_path, metadata=m, sets=["cleanup.policy=delete"])
    assert configs.settings("orders").known  # listed by the metadata log, even without configs
    plain = load(tmp_path, sets=["cleanup.policy=compact"])
    unknown = plain.settings("clicks")
    assert not unknown.known and unknown.unknown("retention.ms") and not unknown.unknown("cleanup.policy")
    assert unknown.show("retention.ms") == "retention.ms=unknown"
    assert unknown.show("cleanup.policy") == "cleanup.policy=compact (--set cleanup.policy=compact)"
    assert plain.settings("__consumer_offsets").known  # Kafka's creation settings
    assert load(tmp_path, topic_file="retention.ms=5\n").settings("orders").known
    assumed = load(tmp_path, assume_broker_defaults=True).settings("clicks")
    assert assumed.known and assumed.assumed
    assert assumed.source("retention.ms") == "Kafka default (log.retention.hours), --assume-broker-defaults"


# --- release rules -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "topic_16k", "broker_16k", "internal"),
    [
        (V39, True, True, False),
        (V40, True, False, False),
        (V41, False, False, True),
        (V43, False, False, True),
        (V44, False, False, True),
    ],
    ids=str,
)
def test_segment_size_rules_follow_the_release(tmp_path, version, topic_16k, broker_16k, internal):
    def attempt(**kw):
        try:
            return load(tmp_path, version=version, **kw)
        except ConfigError as err:
            return err

    topic = attempt(topic_file="segment.bytes=16384\n")
    assert (not isinstance(topic, ConfigError)) == topic_16k, topic
    if isinstance(topic, ConfigError):
        assert "must be at least 1048576" in str(topic)
    broker = attempt(server="log.segment.bytes=16384\n")
    assert (not isinstance(broker, ConfigError)) == broker_16k, broker
    small = attempt(topic_file="internal.segment.bytes=4096\n")
    assert (not isinstance(small, ConfigError)) == internal, small
    if internal:
        s = small.settings("orders")
        assert s.value("segment.bytes") == 4096 and "(internal.segment.bytes)" in s.source("segment.bytes")
    else:
        assert f"not a Kafka {version} topic config" in str(small)


@pytest.mark.parametrize("version", [V43, V44], ids=str)
def test_settings_new_in_4_4_follow_the_release(tmp_path, version):
    # The ConfigDefs of 4.4.0 (LogConfig, KafkaConfig) against 4.3.1's: max.decompressed.message.bytes
    # (topic, and broker under the same name, dynamic; INT in [1, 2147483639], default 2147483639),
    # remote.copy.lag.ms/bytes (broker log.remote.copy.lag.*), errors.deadletterqueue.group.enable.
    def attempt(**kw):
        place = tmp_path / str(len(list(tmp_path.iterdir())))  # a directory of its own for each attempt
        place.mkdir()
        try:
            return load(place, version=version, **kw)
        except ConfigError as err:
            return err

    known = version == V44
    topic = attempt(topic_file="max.decompressed.message.bytes=1000\n")
    broker = attempt(server="max.decompressed.message.bytes=2000\n")
    dynamic = attempt(metadata=metadata(broker_configs={"": {"max.decompressed.message.bytes": "3000"}}))
    if known:
        assert topic.for_topic("orders").max_decompressed_message_bytes == 1000
        assert broker.default.max_decompressed_message_bytes == 2000
        assert dynamic.default.max_decompressed_message_bytes == 3000
        assert "must be between 1 and 2147483639" in str(
            attempt(topic_file="max.decompressed.message.bytes=0\n")
        )
    else:
        assert "not a Kafka 4.3 topic config" in str(topic)
        # an unknown broker setting to Kafka 4.3: ignored
        assert broker.default.max_decompressed_message_bytes == 2147483639
        assert any(i.startswith("max.decompressed.message.bytes") for i in broker.ignored)
        assert dynamic.default.max_decompressed_message_bytes == 2147483639
    lags = "remote.copy.lag.ms=5\nremote.copy.lag.bytes=5\nerrors.deadletterqueue.group.enable=true\n"
    topic, broker = attempt(topic_file=lags), attempt(server="log.remote.copy.lag.ms=5\n")
    if known:
        assert len(topic.ignored) == 3 and len(broker.ignored) == 1
    else:
        assert "remote.copy.lag.ms='5' from" in str(topic) and "not a Kafka 4.3 topic config" in str(topic)
        assert "not a Kafka 4.3 log setting" in str(broker)


def test_internal_topics_by_release(tmp_path):
    c39 = load(tmp_path, version=V39, server="offsets.topic.segment.bytes=16384\n")
    assert c39.for_topic("__consumer_offsets").segment_bytes == 16384
    assert not c39.settings("__share_group_state").known
    c40, c41 = load(tmp_path, version=V40), load(tmp_path, version=V41)
    assert c40.for_topic("__share_group_state").retention_ms == 604800000  # 4.0: the broker default
    assert c41.for_topic("__share_group_state").retention_ms == -1
    assert c41.for_topic("__share_group_state").cleanup_policy == {"delete"}
    # 4.1 refuses segment.bytes below 1 MiB, so Kafka could not create __consumer_offsets that way
    c43 = load(tmp_path, version=V43, server="offsets.topic.segment.bytes=16384\n")
    assert "segment.bytes=16384" in c43.settings("__consumer_offsets").error
    # with a metadata log, what Kafka set at creation is there: no synthetic layer
    m = metadata(topics=("__consumer_offsets",))
    assert not load(tmp_path, metadata=m).for_topic("__consumer_offsets").compact


@pytest.mark.parametrize(
    ("version", "keeps"),
    [("3.6", False), ("3.9", False), ("3.9.1", False), ("3.9.2", True), ("4.0", True), ("4.3.1", True)],
)
def test_the_round_end_rule_r2_2_by_release(version, keeps):
    assert kv.keeps_last_batch_of_round(KafkaVersion.parse(version)) is keeps


@pytest.mark.parametrize(
    ("version", "kept_end"),
    [("3.9.1", -1), ("3.9.2", 30), ("4.0", 30), ("4.3.1", 30), ("4.4", 45), ("4.4.0", 45)],
)
def test_r2_2_keeps_the_batch_ending_at_the_round_bound_then_from_4_4_at_the_high_watermark(
    version, kept_end
):
    # Cleaner.cleanInto's bound: 4.3.1 passes the round's upper bound, 4.4.0 log.highWatermark() (KAFKA-20452)
    assert kv.kept_batch_end(KafkaVersion.parse(version), 30, 45) == kept_end


def test_metadata_version_levels_name_releases():
    assert kv.release_of_metadata_version(21) == V39
    assert kv.release_of_metadata_version(30) == V43
    # MetadataVersion of 4.4.0: IBP_4_4_IV0..IV2 = 31..33 (the latest production level), IBP_4_5_IV0 = 34
    assert [kv.release_of_metadata_version(level) for level in (31, 32, 33)] == [V44] * 3
    assert kv.metadata_version_name(33) == "4.4-IV2 (level 33)"
    assert kv.metadata_version_name(34) == "4.5-IV0 (level 34)"
    assert kv.release_of_metadata_version(7) == KafkaVersion(3, 3)
    assert kv.metadata_version_name(25) == "4.0-IV3 (level 25)"
    assert kv.release_of_metadata_version(99) is None


@pytest.mark.parametrize(
    ("level", "meta_version", "flag", "expected", "why"),
    [
        (21, 1, None, "3.9", "metadata.version 3.9-IV0"),
        (21, 1, "3.9.2", "3.9.2", "--kafka-version"),
        (21, 1, "4.3", "4.3", "--kafka-version"),  # brokers may run an older metadata.version
        (28, 1, None, "4.2", "metadata.version 4.2-IV0"),
        (30, 1, None, "4.3", "metadata.version 4.3-IV0"),
        (33, 1, None, "4.4", "metadata.version 4.4-IV2"),
        (34, 1, None, "4.4", "a testing level of Kafka 4.4"),  # 4.5-IV0: unstable.feature.versions.enable
        (34, 1, "4.4.0", "4.4.0", "--kafka-version"),
        (99, 1, None, "4.4", "does not know"),
        (None, 0, None, "3.9", "ZooKeeper-era"),
        (None, 0, "3.6", "3.6", "ZooKeeper-era"),
        (None, 1, None, "4.4", "no metadata.version"),
        (None, 1, "4.0", "4.0", "--kafka-version"),
    ],
)
def test_the_release_comes_from_the_log_dir_then_the_flag(level, meta_version, flag, expected, why):
    m = None if level is None else metadata(level=level)
    meta = MetaProperties(meta_version, "c", 1, None)
    version, reason = decide_version(m, meta, None if flag is None else KafkaVersion.parse(flag))
    assert str(version) == expected and why in reason


@pytest.mark.parametrize(
    ("level", "meta_version", "flag", "match"),
    [
        (21, 1, "3.8", r"metadata\.version 3\.9-IV0.*Kafka 3\.8 cannot run"),
        (33, 1, "4.3.1", r"metadata\.version 4\.4-IV2.*Kafka 4\.3\.1 cannot run"),
        (34, 1, "4.3", r"metadata\.version 4\.5-IV0.*Kafka 4\.3 cannot run"),
        (None, 0, "4.0", r"ZooKeeper-mode"),
    ],
)
def test_a_flag_that_contradicts_the_log_dir_is_refused(level, meta_version, flag, match):
    m = None if level is None else metadata(level=level)
    with pytest.raises(UsageError, match=match):
        decide_version(m, MetaProperties(meta_version, "c", 1, None), KafkaVersion.parse(flag))


# --- per log dir ---------------------------------------------------------------------------------------------


def _metadata_dir(log_dir: Path, records: list[bytes]) -> None:
    write_metadata_log(log_dir / "__cluster_metadata-0", {0: [records]})


def test_log_dirs_of_one_cluster_share_its_metadata_log(tmp_path):
    first, second, other = (tmp_path / n for n in ("first", "second", "other"))
    write_meta_properties(first)
    write_meta_properties(second)
    write_meta_properties(other, cluster_id="OtherClusterIdOtherClu")
    _metadata_dir(first, [feature_level("metadata.version", 21), topic_record("orders", A),
                          partition_record(A, 0, [1], [1], 1), config_record(2, "orders", "cleanup.policy", "compact")])  # fmt: skip
    resolved = resolve_log_dir_configs([first, second, other])
    assert resolved[str(first)].configs.for_topic("orders").compact
    assert resolved[str(second)].configs.for_topic("orders").compact
    assert resolved[str(second)].version == V39
    assert resolved[str(other)].metadata is None
    assert not resolved[str(other)].configs.settings("orders").known


def test_an_unreadable_metadata_log_leaves_every_topic_unknown(tmp_path):
    log_dir = tmp_path / "logs"
    write_meta_properties(log_dir)
    _metadata_dir(log_dir, [topic_record("orders", A)])
    segment = log_dir / "__cluster_metadata-0" / "00000000000000000000.log"
    data = bytearray(segment.read_bytes())
    data[-4] ^= 0xFF  # a bit flip: the CRC no longer matches
    segment.write_bytes(bytes(data))
    (resolved,) = resolve_log_dir_configs([log_dir]).values()
    assert resolved.metadata is None
    assert "00000000000000000000.log at position 0" in resolved.metadata_error
    assert not resolved.configs.settings("orders").known
    assert resolved.configs.settings("__consumer_offsets").known
    assert resolved.configs.metadata_problem.startswith("the cluster metadata log is unreadable (")


def test_a_zookeeper_era_log_dir_takes_3x_segment_sizes(tmp_path):
    log_dir = tmp_path / "logs"
    write_meta_properties(log_dir, version=0)
    conf = tmp_path / "conf"
    (conf / "topics").mkdir(parents=True)
    (conf / "topics" / "orders.properties").write_text("segment.bytes=16384\ncleanup.policy=compact\n")
    (resolved,) = resolve_log_dir_configs([log_dir], conf_dir=conf).values()
    assert resolved.version == V39 and resolved.configs.for_topic("orders").segment_bytes == 16384
    kraft = tmp_path / "kraft"
    write_meta_properties(kraft)
    with pytest.raises(
        ConfigError, match=r"segment\.bytes=16384 from .*orders\.properties:1: must be at least"
    ):
        resolve_log_dir_configs([kraft], conf_dir=conf)
    (flagged,) = resolve_log_dir_configs([kraft], conf_dir=conf, kafka_version="3.8").values()
    assert flagged.configs.for_topic("orders").segment_bytes == 16384


HUGE = "9" * 5000  # more digits than Python converts to an int by default (4,300), far beyond a long


def test_a_metadata_value_beyond_a_java_long_fails_only_that_topic(tmp_path):
    m = metadata(topics=("orders", "huge"), topic_configs={"orders": {"cleanup.policy": "compact"},
                                                           "huge": {"retention.ms": HUGE}})  # fmt: skip
    configs = load(tmp_path, metadata=m)
    assert configs.settings("orders").error is None
    error = configs.settings("huge").error
    assert "retention.ms=" in error and "from metadata log: not a 64-bit integer" in error
    assert len(error) < 300  # the value is cut, the line stays a line


@pytest.mark.parametrize("where", ["--set", "topic file", "--topic-config"])
def test_a_value_beyond_a_java_long_from_a_file_or_flag_is_a_config_error_naming_where(tmp_path, where):
    kw = {"--set": {"sets": [f"retention.ms={HUGE}"]}, "topic file": {"topic_file": f"retention.ms={HUGE}\n"},
          "--topic-config": {"topic_configs": [f"orders:retention.ms={HUGE}"]}}[where]  # fmt: skip
    with pytest.raises(ConfigError) as raised:
        load(tmp_path, **kw)
    shown = {"--set": "from --set retention.ms=", "topic file": "orders.properties:1: not a 64-bit integer",
             "--topic-config": "from --topic-config orders:retention.ms="}[where]  # fmt: skip
    assert shown in str(raised.value) and "(a Java long" in str(raised.value)
    assert len(str(raised.value)) < 400


@pytest.mark.parametrize("text,expected", [("9223372036854775807", 9223372036854775807),
                                           ("-9223372036854775808", -9223372036854775808),
                                           ("000000000000000000000000042", 42), ("9223372036854775808", None),
                                           (HUGE, None), ("-" + HUGE, None), ("1e3", None)])  # fmt: skip
def test_java_integers_are_parsed_as_long_parse_long_does_and_never_past_its_digits(text, expected):
    from kafka_log_core.javacompat import parse_java_integer

    assert parse_java_integer(text) == expected
