"""kafka_log_core.settings.config: Kafka 4.x defaults, layering, validation, properties parsing, pickling.

Expected defaults are written out from Kafka's documentation (topic and broker config tables),
not taken from the module's own table.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from kafka_log_core.errors import ConfigError
from kafka_log_core.settings.config import (
    BrokerConfig,
    ConfigSet,
    LogConfig,
    cleaner_io_buffer_size,
    dedupe_map_slots,
    dedupe_map_usable_entries,
    load_config,
    max_io_buffer_size,
    parse_properties,
)

REPO_CONF = Path(__file__).resolve().parents[2] / "conf"

KAFKA_TOPIC_DEFAULTS = {
    "cleanup_policy": frozenset({"delete"}),
    "segment_bytes": 1073741824,
    "segment_ms": 604800000,
    "segment_jitter_ms": 0,
    "segment_index_bytes": 10485760,
    "index_interval_bytes": 4096,
    "retention_ms": 604800000,
    "retention_bytes": -1,
    "delete_retention_ms": 86400000,
    "min_compaction_lag_ms": 0,
    "max_compaction_lag_ms": 9223372036854775807,
    "min_cleanable_dirty_ratio": 0.5,
    "file_delete_delay_ms": 60000,
    "max_message_bytes": 1048588,
    "preallocate": False,
    "message_timestamp_type": "CreateTime",
    "compression_type": "producer",
}
KAFKA_BROKER_ONLY_DEFAULTS = {
    "log_cleaner_enable": True,
    "log_cleaner_threads": 1,
    "log_cleaner_dedupe_buffer_size": 134217728,
    "log_cleaner_io_buffer_load_factor": 0.9,
    "log_cleaner_io_buffer_size": 524288,
    "log_cleaner_backoff_ms": 15000,
    "log_retention_check_interval_ms": 300000,
    "producer_id_expiration_ms": 86400000,
    "offsets_topic_segment_bytes": 104857600,
    "transaction_state_log_segment_bytes": 104857600,
}


def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="latin-1")
    return path


def conf_dir(tmp_path: Path, broker: str = "", **topics: str) -> Path:
    """A conf/ directory with broker.properties and conf/topics/<topic>.properties."""
    conf = tmp_path / "conf"
    write(conf / "broker.properties", broker)
    for topic, text in topics.items():
        write(conf / "topics" / f"{topic}.properties", text)
    return conf


# --- defaults ----------------------------------------------------------------------------------------


def as_dict(config: object, names: dict) -> dict:
    return {name: getattr(config, name) for name in names}


def test_log_config_defaults_are_kafkas():
    assert as_dict(LogConfig(), KAFKA_TOPIC_DEFAULTS) == KAFKA_TOPIC_DEFAULTS


def test_broker_defaults_are_kafkas():
    broker = load_config(None).broker
    assert as_dict(broker, KAFKA_BROKER_ONLY_DEFAULTS) == KAFKA_BROKER_ONLY_DEFAULTS
    assert broker.log_retention_ms == 168 * 3600 * 1000
    assert broker.log_roll_ms == 168 * 3600 * 1000
    assert broker.log_roll_jitter_ms == 0
    assert broker.message_max_bytes == 1048588
    assert broker.log_cleaner_min_cleanable_ratio == 0.5


def test_broker_settings_are_the_topic_defaults():
    broker = BrokerConfig(log_retention_ms=-1, log_cleanup_policy=frozenset({"compact"}), message_max_bytes=7)
    expected = KAFKA_TOPIC_DEFAULTS | {
        "retention_ms": -1,
        "cleanup_policy": {"compact"},
        "max_message_bytes": 7,
    }
    assert as_dict(broker.log_config(), KAFKA_TOPIC_DEFAULTS) == expected


def test_a_topic_without_overrides_gets_kafkas_defaults():
    config = load_config(None).for_topic("orders")
    assert as_dict(config, KAFKA_TOPIC_DEFAULTS) == KAFKA_TOPIC_DEFAULTS
    assert config.delete and not config.compact


def test_shipped_conf_directory_is_all_defaults():
    shipped = load_config(REPO_CONF)
    assert shipped.broker == BrokerConfig()
    assert as_dict(shipped.for_topic("orders"), KAFKA_TOPIC_DEFAULTS) == KAFKA_TOPIC_DEFAULTS
    assert shipped.ignored == ()


def test_internal_topics_are_compacted_as_kafka_creates_them(tmp_path):
    configs = load_config(conf_dir(tmp_path, "offsets.topic.segment.bytes=2097152\n"))
    offsets = configs.for_topic("__consumer_offsets")
    assert offsets.cleanup_policy == frozenset({"compact"})
    assert offsets.segment_bytes == 2097152
    assert configs.for_topic("__transaction_state").segment_bytes == 104857600
    assert configs.for_topic("__transaction_state").compression_type == "uncompressed"


def test_an_internal_topic_file_still_wins(tmp_path):
    conf = conf_dir(tmp_path, __consumer_offsets="cleanup.policy=compact,delete\n")
    assert load_config(conf).for_topic("__consumer_offsets").cleanup_policy == {"compact", "delete"}


# --- precedence ---------------------------------------------------------------------------------------


def test_topic_override_beats_broker_default(tmp_path):
    conf = conf_dir(tmp_path, "log.retention.ms=1000\n", orders="retention.ms=2000\n")
    configs = load_config(conf)
    assert configs.for_topic("orders").retention_ms == 2000
    assert configs.for_topic("payments").retention_ms == 1000
    assert configs.broker.log_retention_ms == 1000


def test_layers_in_order(tmp_path):
    conf = conf_dir(
        tmp_path, "log.segment.bytes=2097152\nlog.cleanup.policy=compact\n", orders="segment.bytes=3145728\n"
    )
    write(conf / "z-last.properties", "log.segment.bytes=4194304\n")  # sorted after broker.properties
    extra = write(tmp_path / "extra.properties", "log.segment.bytes=5242880\n")
    configs = load_config(conf, [extra])
    assert configs.broker.log_segment_bytes == 5242880
    assert configs.for_topic("payments").segment_bytes == 5242880
    assert configs.for_topic("orders").segment_bytes == 3145728
    configs = load_config(conf, [extra], ["orders:segment.bytes=6291456"])
    assert configs.for_topic("orders").segment_bytes == 6291456
    configs = load_config(conf, [extra], ["orders:segment.bytes=6291456"], ["segment.bytes=7340032"])
    assert configs.for_topic("orders").segment_bytes == 7340032
    assert configs.for_topic("payments").segment_bytes == 7340032
    assert configs.broker.log_segment_bytes == 5242880  # a topic-level --set leaves the broker default
    assert configs.for_topic("payments").cleanup_policy == frozenset({"compact"})


def test_set_with_a_broker_name_is_a_broker_default(tmp_path):
    conf = conf_dir(tmp_path, "log.retention.bytes=100\n", orders="retention.bytes=200\n")
    configs = load_config(conf, sets=["log.retention.bytes=300"])
    assert configs.broker.log_retention_bytes == 300
    assert configs.for_topic("payments").retention_bytes == 300
    assert configs.for_topic("orders").retention_bytes == 200  # the topic override still wins


def test_set_compression_type_is_both_levels(tmp_path):
    configs = load_config(conf_dir(tmp_path, orders="compression.type=gzip\n"), sets=["compression.type=lz4"])
    assert configs.broker.compression_type == "lz4"
    assert configs.for_topic("orders").compression_type == "lz4"


@pytest.mark.parametrize(
    ("settings", "retention_ms"),
    [
        ("log.retention.hours=1\nlog.retention.minutes=2\nlog.retention.ms=3\n", 3),
        ("log.retention.hours=1\nlog.retention.minutes=2\n", 2 * 60 * 1000),
        ("log.retention.hours=1\n", 3600 * 1000),
        ("log.retention.minutes=-1\n", -1),
        ("log.retention.hours=-5\n", -1),  # any negative time is unlimited
        ("log.retention.ms=-1\nlog.retention.hours=1\n", -1),
    ],
    ids=[
        "ms-minutes-hours",
        "minutes-hours",
        "hours-only",
        "minutes-unlimited",
        "negative-hours",
        "ms-unlimited",
    ],
)
def test_retention_ms_over_minutes_over_hours(tmp_path, settings, retention_ms):
    configs = load_config(conf_dir(tmp_path, settings))
    assert configs.broker.log_retention_ms == retention_ms
    assert configs.for_topic("orders").retention_ms == retention_ms


def test_synonym_precedence_holds_across_files(tmp_path):
    later = write(tmp_path / "later.properties", "log.retention.hours=1\nlog.roll.hours=2\n")
    configs = load_config(conf_dir(tmp_path, "log.retention.ms=5000\nlog.roll.ms=6000\n"), [later])
    assert configs.broker.log_retention_ms == 5000
    assert configs.broker.log_roll_ms == 6000


def test_roll_and_jitter_hours(tmp_path):
    configs = load_config(conf_dir(tmp_path, "log.roll.hours=2\nlog.roll.jitter.hours=1\n"))
    assert configs.for_topic("orders").segment_ms == 2 * 3600 * 1000
    assert configs.for_topic("orders").segment_jitter_ms == 3600 * 1000
    configs = load_config(conf_dir(tmp_path, "log.roll.hours=2\nlog.roll.ms=500\nlog.roll.jitter.ms=7\n"))
    assert configs.for_topic("orders").segment_ms == 500
    assert configs.for_topic("orders").segment_jitter_ms == 7


def test_a_real_server_properties_loads(tmp_path):
    server = write(
        tmp_path / "server.properties",
        """\
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=localhost:9093
listeners=PLAINTEXT://:9092,CONTROLLER://:9093
inter.broker.listener.name=PLAINTEXT
advertised.listeners=PLAINTEXT://localhost:9092,CONTROLLER://localhost:9093
controller.listener.names=CONTROLLER
listener.security.protocol.map=CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT,SSL:SSL
num.network.threads=3
num.io.threads=8
socket.send.buffer.bytes=102400
socket.request.max.bytes=104857600
log.dirs=/tmp/kraft-combined-logs
num.partitions=1
num.recovery.threads.per.data.dir=1
offsets.topic.replication.factor=1
share.coordinator.state.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
min.insync.replicas=1
#log.flush.interval.messages=10000
log.flush.interval.ms=1000
log.retention.hours=24
log.segment.bytes=536870912
log.retention.check.interval.ms=300000
""",
    )
    configs = load_config(None, [server])
    assert configs.broker.log_retention_ms == 24 * 3600 * 1000
    assert configs.for_topic("orders").segment_bytes == 536870912
    assert f"log.dirs ({server}:13)" in configs.ignored
    assert f"node.id ({server}:2)" in configs.ignored


# --- values -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "field", "expected"),
    [
        ("segment.bytes =  2097152  ", "segment_bytes", 2097152),
        ("retention.ms=+42", "retention_ms", 42),
        ("retention.bytes=-9223372036854775808", "retention_bytes", -(2**63)),
        ("preallocate=TRUE", "preallocate", True),
        ("preallocate= False ", "preallocate", False),
        ("min.cleanable.dirty.ratio=1e-1", "min_cleanable_dirty_ratio", 0.1),
        ("min.cleanable.dirty.ratio=.25d", "min_cleanable_dirty_ratio", 0.25),
        ("cleanup.policy= compact ,  delete ", "cleanup_policy", frozenset({"compact", "delete"})),
        ("cleanup.policy=delete,delete", "cleanup_policy", frozenset({"delete"})),
        ("message.timestamp.type=LogAppendTime", "message_timestamp_type", "LogAppendTime"),
        ("compression.type=zstd", "compression_type", "zstd"),
    ],
)
def test_values_are_parsed_as_kafka_parses_them(tmp_path, line, field, expected):
    assert getattr(load_config(conf_dir(tmp_path, orders=line)).for_topic("orders"), field) == expected


def test_an_empty_cleanup_policy_is_allowed(tmp_path):
    config = load_config(conf_dir(tmp_path, orders="cleanup.policy=\n")).for_topic("orders")
    assert config.cleanup_policy == frozenset()
    assert not config.compact and not config.delete


def test_roll_age_of_a_compacted_topic(tmp_path):
    conf = conf_dir(tmp_path, orders="cleanup.policy=compact\nmax.compaction.lag.ms=1000\n")
    configs = load_config(conf, sets=["segment.ms=5000"])
    assert configs.for_topic("orders").max_segment_ms == 1000
    assert configs.for_topic("payments").max_segment_ms == 5000
    assert (
        LogConfig(cleanup_policy=frozenset({"delete"}), max_compaction_lag_ms=1000).max_segment_ms
        == 604800000
    )


# --- validation errors ----------------------------------------------------------------------------------


def setting_id(value: str) -> str:
    """Test id: the last setting of a properties text (the match pattern gets no id)."""
    return value.strip().splitlines()[-1] if value.endswith("\n") else ""


@pytest.mark.parametrize(
    ("broker", "match"),
    [
        (
            "# a comment\nlog.retension.ms=5\n",
            r"log\.retension\.ms='5' from .*broker\.properties:2: .*did you mean log\.retention\.ms",
        ),
        (
            "retention.ms=5\n",
            r"retention\.ms='5' from .*broker\.properties:1: a topic-level name.*log\.retention\.ms",
        ),
        ("segment.bytez=5\n", r"segment\.bytez='5' from .*broker\.properties:1"),
        (
            "log.segment.bytes=abc\n",
            r"log\.segment\.bytes='abc' from .*broker\.properties:1: not a 32-bit integer",
        ),
        ("log.segment.bytes=2147483648\n", r"log\.segment\.bytes='2147483648' from .*: not a 32-bit integer"),
        ("log.segment.bytes=1048575\n", r"log\.segment\.bytes=1048575 from .*:1: must be at least 1048576"),
        ("log.retention.bytes=1.5\n", r"log\.retention\.bytes='1\.5' from .*: not a 64-bit integer"),
        (
            "log.cleaner.min.cleanable.ratio=1.01\n",
            r"log\.cleaner\.min\.cleanable\.ratio=1\.01 from .*: must be between 0 and 1",
        ),
        ("log.cleaner.enable=yes\n", r"log\.cleaner\.enable='yes' from .*: must be true or false"),
        (
            "log.cleanup.policy=compact,deleet\n",
            r"log\.cleanup\.policy='compact,deleet' from .*: must be a comma-separated list of compact, delete",
        ),
        ("log.cleanup.policy=Compact\n", r"log\.cleanup\.policy='Compact' from"),
        ("log.cleanup.policy=compact,\n", r"log\.cleanup\.policy='compact,' from"),
        (
            "log.message.timestamp.type=createtime\n",
            r"log\.message\.timestamp\.type=createtime from .*: must be one of CreateTime, LogAppendTime",
        ),
        (
            "compression.type=zip\n",
            r"compression\.type=zip from .*: must be one of uncompressed, zstd, lz4, snappy, gzip, producer",
        ),
        ("log.roll.hours=0\n", r"log\.roll\.hours=0 from .*: must be at least 1"),
        ("log.roll.ms=0\n", r"log\.roll\.ms=0 from .*broker\.properties:1: must be at least 1"),
        (
            "log.retention.ms=0\n",
            r"log\.retention\.ms=0 from .*broker\.properties:1: must be -1 or at least 1",
        ),
        (
            "log.retention.minutes=0\n",
            r"log\.retention\.ms=0 from .*broker\.properties:1 \(log\.retention\.minutes\)",
        ),
        (
            "log.cleaner.min.compaction.lag.ms=10\nlog.cleaner.max.compaction.lag.ms=5\n",
            r"log\.cleaner\.min\.compaction\.lag\.ms=10 from .*:1 is greater than log\.cleaner\.max\.compaction\.lag\.ms=5 from .*:2",
        ),
        ("log.cleaner.threads=0\n", r"log\.cleaner\.threads=0 from .*: must be at least 1"),
        (
            "log.cleaner.dedupe.buffer.size=2097152\nlog.cleaner.threads=2\n",
            r"log\.cleaner\.dedupe\.buffer\.size=2097152 from .*:1: must be more than 1048576 bytes per cleaner thread",
        ),
        (
            "log.cleaner.io.buffer.load.factor=1.5\n",
            r"log\.cleaner\.io\.buffer\.load\.factor=1\.5 from .*:1: must be at most 1",
        ),
        ("log.cleaner.io.buffer.load.factor=0\n", r"log\.cleaner\.io\.buffer\.load\.factor=0\.0 from .*:1"),
    ],
    ids=setting_id,
)
def test_bad_broker_settings(tmp_path, broker, match):
    with pytest.raises(ConfigError, match=match):
        load_config(conf_dir(tmp_path, broker))


def test_load_factor_is_not_checked_without_the_cleaner(tmp_path):
    conf = conf_dir(tmp_path, "log.cleaner.enable=false\nlog.cleaner.io.buffer.load.factor=1.5\n")
    assert load_config(conf).broker.log_cleaner_io_buffer_load_factor == 1.5


@pytest.mark.parametrize(
    ("topic_file", "match"),
    [
        (
            "retention.mss=5\n",
            r"retention\.mss='5' from .*orders\.properties:1: not a Kafka 4\.4 topic config; did you mean retention\.ms",
        ),
        (
            "log.retention.ms=5\n",
            r"log\.retention\.ms='5' from .*orders\.properties:1: a broker-level name.*retention\.ms",
        ),
        (
            "segment.bytes=1000\n",
            r"segment\.bytes=1000 from .*orders\.properties:1: must be at least 1048576",
        ),
        ("retention.ms=-2\n", r"retention\.ms=-2 from .*orders\.properties:1: must be at least -1"),
        ("max.compaction.lag.ms=0\n", r"max\.compaction\.lag\.ms=0 from .*: must be at least 1"),
        ("min.cleanable.dirty.ratio=NaN\n", r"min\.cleanable\.dirty\.ratio='NaN' from .*: not a number"),
        ("cleanup.policy=compact;delete\n", r"cleanup\.policy='compact;delete' from .*orders\.properties:1"),
        (
            "remote.storage.enable=true\n",
            r"remote\.storage\.enable='true' from .*orders\.properties:1: tiered-storage",
        ),
    ],
    ids=setting_id,
)
def test_bad_topic_settings(tmp_path, topic_file, match):
    with pytest.raises(ConfigError, match=match):
        load_config(conf_dir(tmp_path, orders=topic_file))


def test_min_lag_above_max_lag_names_both_sources(tmp_path):
    conf = conf_dir(tmp_path, orders="\nmin.compaction.lag.ms=10000\n")
    match = (
        r"min\.compaction\.lag\.ms=10000 from .*orders\.properties:2 is greater than "
        r"max\.compaction\.lag\.ms=5000 from --set max\.compaction\.lag\.ms=5000"
    )
    with pytest.raises(ConfigError, match=match):
        load_config(conf, sets=["max.compaction.lag.ms=5000"])


def test_every_topic_override_is_checked_at_load(tmp_path):
    # the bad topic is never asked for: the load itself fails
    with pytest.raises(ConfigError, match=r"never-used\.properties:1"):
        load_config(conf_dir(tmp_path, **{"never-used": "segment.ms=0\n"}))


@pytest.mark.parametrize(
    ("topic_configs", "sets", "match"),
    [
        ([], ["retention.ms"], r"--set 'retention\.ms': expected KEY=VALUE"),
        (
            [],
            ["retension.ms=5"],
            r"retension\.ms='5' from --set retension\.ms=5: .*did you mean retention\.ms",
        ),
        (
            [],
            ["min.insync.replicas=2"],
            r"min\.insync\.replicas='2' from --set .*: not used by kafka-log-jobs",
        ),
        ([], ["log.dirs=/data"], r"log\.dirs='/data' from --set .*: not used by kafka-log-jobs"),
        ([], ["segment.bytes=x"], r"segment\.bytes='x' from --set segment\.bytes=x: not a 32-bit integer"),
        (["orders=retention.ms=5"], [], r"--topic-config 'orders=retention\.ms=5': expected TOPIC:KEY=VALUE"),
        (["orders:retention.ms"], [], r"--topic-config 'orders:retention\.ms': expected TOPIC:KEY=VALUE"),
        (
            ["bad/topic:retention.ms=5"],
            [],
            r"--topic-config bad/topic:retention\.ms=5: 'bad/topic' is not a valid",
        ),
        (
            ["orders:log.retention.ms=5"],
            [],
            r"log\.retention\.ms='5' from --topic-config orders:log\.retention\.ms=5",
        ),
    ],
    ids=lambda value: ";".join(value) if isinstance(value, list) else "",
)
def test_bad_command_line_settings(topic_configs, sets, match):
    with pytest.raises(ConfigError, match=match):
        load_config(None, topic_configs=topic_configs, sets=sets)


def test_missing_files_are_errors(tmp_path):
    with pytest.raises(ConfigError, match=r"nowhere: configuration directory not found"):
        load_config(tmp_path / "nowhere")
    with pytest.raises(ConfigError, match=r"missing\.properties: cannot read configuration file"):
        load_config(None, [tmp_path / "missing.properties"])


def test_ignored_topic_settings(tmp_path):
    conf = conf_dir(tmp_path, orders="min.insync.replicas=2\nremote.storage.enable=false\nflush.ms=5\n")
    configs = load_config(conf)
    assert len(configs.ignored) == 3
    assert configs.for_topic("orders") == configs.for_topic("payments")


def test_direct_construction_is_validated():
    # A LogConfig admits what any covered release admits (segment.bytes >= 14 before 4.1); the loader
    # applies the bound of the release in use.
    with pytest.raises(ConfigError, match=r"segment\.bytes=10 from LogConfig\(\.\.\.\): must be at least 14"):
        LogConfig(segment_bytes=10)
    with pytest.raises(ConfigError, match=r"min\.compaction\.lag\.ms=10 from LogConfig.*greater than max"):
        LogConfig(min_compaction_lag_ms=10, max_compaction_lag_ms=5)
    with pytest.raises(ConfigError, match=r"cleanup\.policy=.* not a frozenset"):
        LogConfig(cleanup_policy="compact")
    with pytest.raises(ConfigError, match=r"segment\.bytes=true from LogConfig.*not a 32-bit integer"):
        LogConfig(segment_bytes=True)
    with pytest.raises(
        ConfigError, match=r"log\.retention\.ms=-5 from BrokerConfig\(\.\.\.\): must be -1 or at least 1"
    ):
        BrokerConfig(log_retention_ms=-5)


# --- java.util.Properties -----------------------------------------------------------------------------


def test_properties_separators_comments_and_whitespace():
    text = "# comment\n! also a comment\n\n   a=1\nb: 2\nc 3\nd   =   4  \ne\t:\tfive\nf==6\ng = = 7\nh\n"
    assert parse_properties(text) == [
        ("a", "1", 4),
        ("b", "2", 5),
        ("c", "3", 6),
        ("d", "4  ", 7),  # Java keeps trailing whitespace; Kafka trims when it parses the value
        ("e", "five", 8),
        ("f", "=6", 9),
        ("g", "= 7", 10),
        ("h", "", 11),
    ]


def test_properties_continuations():
    text = "log.cleanup.policy=compact,\\\n        delete\nnext=1\n# comment \\\nafter=2\nx=ends\\\\\ny=3\n"
    assert parse_properties(text) == [
        ("log.cleanup.policy", "compact,delete", 1),
        ("next", "1", 3),
        ("after", "2", 5),  # a comment line is never continued
        ("x", "ends\\", 6),  # an even number of backslashes is no continuation
        ("y", "3", 7),
    ]


def test_properties_line_endings_and_escapes():
    text = "a=1\r\nb=2\rkey\\ with\\ spaces=v\\tx\nc\\:d=e\\=f\n\\u0041=\\u00e9\nlast=\\\n"
    assert parse_properties(text) == [
        ("a", "1", 1),
        ("b", "2", 2),
        ("key with spaces", "v\tx", 3),
        ("c:d", "e=f", 4),
        ("A", "\u00e9", 5),
        ("last", "", 6),
    ]


def test_properties_malformed_unicode_escape():
    with pytest.raises(ConfigError, match=r"broker\.properties:2: malformed"):
        parse_properties("a=1\nb=\\u12G4\n", "broker.properties")


def test_a_continued_value_reports_its_first_line(tmp_path):
    conf = conf_dir(tmp_path, "log.cleanup.policy=compact,\\\n   deleted\n")
    with pytest.raises(
        ConfigError, match=r"log\.cleanup\.policy='compact,deleted' from .*broker\.properties:1"
    ):
        load_config(conf)


# --- derived values and pickling ------------------------------------------------------------------------


def test_dedupe_map_sizes():
    default = BrokerConfig()
    assert dedupe_map_slots(default) == 134217728 // 24
    assert dedupe_map_usable_entries(default) == 5033164  # floor(5592405 * 0.9)
    assert cleaner_io_buffer_size(default) == 262144
    two_threads = BrokerConfig(log_cleaner_threads=2)
    assert dedupe_map_slots(two_threads) == 67108864 // 24
    assert cleaner_io_buffer_size(two_threads) == 131072
    huge = BrokerConfig(log_cleaner_dedupe_buffer_size=2**40)
    assert dedupe_map_slots(huge) == (2**31 - 1) // 24  # at most 2 GiB - 1 per thread
    assert max_io_buffer_size(default, LogConfig(max_message_bytes=5_000_000)) == 5_000_000
    assert max_io_buffer_size(default, LogConfig(max_message_bytes=10)) == 1048588


def test_config_set_pickles(tmp_path):
    conf = conf_dir(tmp_path, "log.retention.hours=1\n", orders="cleanup.policy=compact\nsegment.ms=1000\n")
    configs = load_config(conf, sets=["delete.retention.ms=5"])
    copy = pickle.loads(pickle.dumps(configs))
    assert isinstance(copy, ConfigSet)
    assert copy == configs
    assert copy.for_topic("orders").cleanup_policy == frozenset({"compact"})
    assert copy.for_topic("orders").delete_retention_ms == 5
    assert copy.for_topic("payments").retention_ms == 3600000
    with pytest.raises(AttributeError):
        copy.broker.log_retention_ms = 5  # frozen
