"""Kafka's log, cleaner and retention settings: names, types, defaults, validators and layering.

Kafka is the contract: the same names, defaults, validators and precedence, for the Kafka release whose
rules apply to the log dir (``kafka_version``: 3.6 to 4.4; what differs between them is listed there).
Everything is parsed and checked once, by ``load_config``, so a job fails before it touches a partition.
The result is a frozen, picklable ``ConfigSet`` that the driver ships to the executors.

Layers, lowest first; a later layer wins setting by setting (Kafka's precedence):

1. Kafka's defaults (``TOPIC_KEYS``, ``BROKER_KEYS``).
2. Broker properties: ``conf/*.properties`` in sorted file-name order, then each ``--config FILE`` in
   the order given; then the broker's dynamic configs from the cluster metadata log: the cluster-wide
   default (resource ""), then this broker's own (resource "<node.id>"); then ``--set`` with a
   broker-level name. The layers are merged name by name first and Kafka's synonym precedence is
   applied to the merged result, as the broker does with its static and dynamic configs:
   ``log.retention.ms`` > ``log.retention.minutes`` > ``log.retention.hours``, ``log.roll.ms`` >
   ``log.roll.hours``, ``log.roll.jitter.ms`` > ``log.roll.jitter.hours``. (So ``log.retention.hours``
   in a later file does not beat ``log.retention.ms`` in an earlier one; Kafka would not either.) Only
   the settings Kafka can change dynamically (``DYNAMIC_BROKER_NAMES``) are taken from the metadata log.
3. The topic's own settings (topic-level names), lowest first: what Kafka sets on its internal topics
   when it creates them (``__consumer_offsets`` and ``__transaction_state`` compacted, with their own
   ``segment.bytes``; ``__share_group_state`` from 4.0) -- used only when the metadata log is absent,
   since otherwise it holds them; the topic's configs from the cluster metadata log; then
   ``conf/topics/<topic>.properties``; then each ``--topic-config TOPIC:KEY=VALUE``.
4. ``--set KEY=VALUE`` with a topic-level name: an override of that setting for every topic.
   ``compression.type`` is both a broker-level and a topic-level name; ``--set`` applies it as both.

``internal.segment.bytes`` (4.1 and later): when a topic has it, it replaces ``segment.bytes`` as the
segment size, as in Kafka's ``LogConfig.segmentSize()``.

Known and unknown settings. A topic's settings are *known* when the cluster metadata log lists the topic,
or a topic file or ``--topic-config`` names it, or it is one of Kafka's internal topics, or
``--assume-broker-defaults`` was given. For any other topic (no metadata log, e.g. a ZooKeeper-era log
dir), a setting that comes from below the topic layers (Kafka defaults, broker files, dynamic broker
configs) is a guess: the topic may have had its own value. ``TopicSettings.unknown(name)`` says so, and
the jobs refuse to act on a guessed setting that decides what gets deleted. A ``--set`` with a
topic-level name is never a guess: it is the user's value for every topic.

Names (the rule for what is read, ignored or refused):

* Broker files: a name in ``BROKER_KEYS`` is used. A Kafka log setting the jobs do not need
  (``IGNORED_BROKER_NAMES``: log.dirs, log.flush.*, ...) is ignored. Any other name that looks like a
  log setting -- it starts with ``log.``, or with the stem of a topic-level name (``retention.``,
  ``segment.``, ``cleanup.``, ...) -- is a ConfigError naming file and line: a typo there would
  otherwise silently change what gets deleted. So is a topic-level name (``retention.ms``) in a broker
  file, which Kafka would ignore. Every other broker setting (node.id, listeners, ssl.*, ...) is
  ignored, so a broker's own server.properties can be used as it is.
* Topic files and ``--topic-config``: topic-level names only, as Kafka's own check of topic configs.
  Kafka topic settings the jobs do not need (``IGNORED_TOPIC_NAMES``) are ignored, except that
  ``remote.storage.enable=true`` is refused: tiered-storage topics need the remote copy state.
* ``--set``: only names the jobs use; anything else is a ConfigError.
* A name that the release of the log dir does not have yet (``kafka_version.SETTINGS_SINCE``:
  ``max.decompressed.message.bytes`` before 4.4, ...) is treated as any name that release does not know.
* The metadata log: Kafka accepted what is there, so names the jobs do not use are ignored; a value
  the jobs cannot accept (or a tiered-storage topic) makes that topic's rows fail, not the job.

Values are parsed as Kafka's ``ConfigDef`` does: surrounding whitespace trimmed; int and long are
decimal with an optional sign and must fit 32 / 64 bits; doubles in Java's decimal syntax; booleans
``true``/``false`` in any case; lists split on commas with the whitespace around them removed, an empty
value being the empty list. Properties files follow ``java.util.Properties`` (ISO-8859-1, ``#``/``!``
comments, ``=``, ``:`` or whitespace between key and value, backslash continuations and escapes).

Stricter than Kafka, on purpose: NaN (and Java's hexadecimal doubles) are refused;
``log.cleaner.threads=0`` is refused up front (Kafka's start-up check divides by it); with the cleaner
enabled, ``log.cleaner.io.buffer.load.factor`` above 1 is refused (Kafka's map would overflow mid-clean).
"""

from __future__ import annotations

import difflib
import math
import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from kafka_log_core import storage
from kafka_log_core.constants import MAX_INT, MAX_LONG, OFFSET_MAP_ENTRY_BYTES
from kafka_log_core.errors import ConfigError
from kafka_log_core.format import properties
from kafka_log_core.javacompat import parse_java_integer
from kafka_log_core.settings import kafka_version as kv
from kafka_log_core.settings.cluster_metadata import ClusterMetadata, ClusterView
from kafka_log_core.settings.kafka_version import KafkaVersion

Kind = Literal["int", "long", "double", "string", "list", "boolean"]

_BOUNDS = {"int": (-(2**31), MAX_INT), "long": (-(2**63), MAX_LONG)}
MINUTE_MS = 60 * 1000
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS
MiB = 1024 * 1024

CLEANUP_POLICIES = ("compact", "delete")
TIMESTAMP_TYPES = ("CreateTime", "LogAppendTime")
COMPRESSION_TYPES = ("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")  # BrokerCompressionType


# --- validators (Kafka's ConfigDef.Range, ValidString.in, ValidList.in) -------------------------------


@dataclass(frozen=True, slots=True)
class Range:
    """Inclusive numeric bounds; ``or_minus_one`` also admits -1 ("unlimited")."""

    min: float | None = None
    max: float | None = None
    or_minus_one: bool = False

    def admits(self, value: Any) -> bool:
        if self.or_minus_one and value == -1:
            return True
        return (self.min is None or value >= self.min) and (self.max is None or value <= self.max)

    def __str__(self) -> str:
        text = f"at least {self.min}" if self.max is None else f"between {self.min} and {self.max}"
        return f"-1 or {text}" if self.or_minus_one else text


@dataclass(frozen=True, slots=True)
class OneOf:
    """A string that is exactly one of ``values`` (case-sensitive, as Kafka)."""

    values: tuple[str, ...]

    def admits(self, value: Any) -> bool:
        return value in self.values

    def __str__(self) -> str:
        return "one of " + ", ".join(self.values)


@dataclass(frozen=True, slots=True)
class SubsetOf:
    """A list whose every element is one of ``values``; the empty list is admitted (3.6 to 4.4 alike)."""

    values: tuple[str, ...]

    def admits(self, value: Any) -> bool:
        return all(item in self.values for item in value)

    def __str__(self) -> str:
        return "a comma-separated list of " + ", ".join(self.values)


Validator = Range | OneOf | SubsetOf


@dataclass(frozen=True, slots=True)
class ConfigKey:
    """One Kafka setting: its name, type, Kafka's default (None = unset) and Kafka's validator."""

    name: str
    kind: Kind
    default: Any
    validator: Validator | None = None
    unit_ms: int = 1  # a .hours / .minutes synonym: milliseconds per unit


def _keys(*keys: ConfigKey) -> dict[str, ConfigKey]:
    return {key.name: key for key in keys}


# --- the table -----------------------------------------------------------------------------------------

# Topic-level settings (Kafka's LogConfig), in the order of LogConfig's fields.
TOPIC_KEYS = _keys(
    ConfigKey("cleanup.policy", "list", frozenset({"delete"}), SubsetOf(CLEANUP_POLICIES)),
    # at least 14 before 4.1, at least 1 MiB from 4.1 (KAFKA-19080): the loader applies the release's bound
    ConfigKey("segment.bytes", "int", 1024 * MiB, Range(kv.LEGACY_RECORD_OVERHEAD_V0)),
    ConfigKey("segment.ms", "long", 7 * DAY_MS, Range(1)),
    ConfigKey("segment.jitter.ms", "long", 0, Range(0)),
    ConfigKey("segment.index.bytes", "int", 10 * MiB, Range(4)),
    ConfigKey("index.interval.bytes", "int", 4096, Range(0)),
    ConfigKey("retention.ms", "long", 7 * DAY_MS, Range(-1)),
    ConfigKey("retention.bytes", "long", -1),  # no validator: any negative value means unlimited
    ConfigKey("delete.retention.ms", "long", DAY_MS, Range(0)),
    ConfigKey("min.compaction.lag.ms", "long", 0, Range(0)),
    ConfigKey("max.compaction.lag.ms", "long", MAX_LONG, Range(1)),
    ConfigKey("min.cleanable.dirty.ratio", "double", 0.5, Range(0, 1)),
    ConfigKey("file.delete.delay.ms", "long", 60_000, Range(0)),
    ConfigKey("max.message.bytes", "int", 1 * MiB + 12, Range(0)),  # 1 MiB + the 12-byte log overhead
    # from 4.4: the largest record body of a compressed batch the cleaner reads (MAX_INT - 8: no limit)
    ConfigKey("max.decompressed.message.bytes", "int", MAX_INT - 8, Range(1, MAX_INT - 8)),
    ConfigKey("preallocate", "boolean", False),
    ConfigKey("message.timestamp.type", "string", "CreateTime", OneOf(TIMESTAMP_TYPES)),
    ConfigKey("compression.type", "string", "producer", OneOf(COMPRESSION_TYPES)),
)

# The broker-level synonyms of each topic-level setting, highest precedence first (ServerTopicConfigSynonyms).
BROKER_SYNONYMS: dict[str, tuple[str, ...]] = {
    "cleanup.policy": ("log.cleanup.policy",),
    "segment.bytes": ("log.segment.bytes",),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
    "segment.index.bytes": ("log.index.size.max.bytes",),
    "index.interval.bytes": ("log.index.interval.bytes",),
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "retention.bytes": ("log.retention.bytes",),
    "delete.retention.ms": ("log.cleaner.delete.retention.ms",),
    "min.compaction.lag.ms": ("log.cleaner.min.compaction.lag.ms",),
    "max.compaction.lag.ms": ("log.cleaner.max.compaction.lag.ms",),
    "min.cleanable.dirty.ratio": ("log.cleaner.min.cleanable.ratio",),
    "file.delete.delay.ms": ("log.segment.delete.delay.ms",),
    "max.message.bytes": ("message.max.bytes",),
    "max.decompressed.message.bytes": ("max.decompressed.message.bytes",),
    "preallocate": ("log.preallocate",),
    "message.timestamp.type": ("log.message.timestamp.type",),
    "compression.type": ("compression.type",),
}

# Synonyms whose type, default or validator differ from the topic-level setting's (KafkaConfig).
_TIME_SYNONYM_KEYS = _keys(
    ConfigKey("log.roll.ms", "long", None),
    ConfigKey("log.roll.hours", "int", 168, Range(1), HOUR_MS),
    ConfigKey("log.roll.jitter.ms", "long", None),
    ConfigKey("log.roll.jitter.hours", "int", 0, Range(0), HOUR_MS),
    ConfigKey("log.retention.ms", "long", None),
    ConfigKey("log.retention.minutes", "int", None, None, MINUTE_MS),
    ConfigKey("log.retention.hours", "int", 168, None, HOUR_MS),
)

# Broker-only settings the jobs use.
BROKER_ONLY_KEYS = _keys(
    ConfigKey("log.cleaner.enable", "boolean", True),  # deprecated in 4.1, to go in 5.0
    ConfigKey("log.cleaner.threads", "int", 1, Range(0)),
    ConfigKey("log.cleaner.dedupe.buffer.size", "long", 128 * MiB),
    ConfigKey("log.cleaner.io.buffer.load.factor", "double", 0.9),  # the dedupe map's load factor
    ConfigKey("log.cleaner.io.buffer.size", "int", 512 * 1024, Range(0)),
    ConfigKey("log.cleaner.backoff.ms", "long", 15_000, Range(0)),
    ConfigKey("log.retention.check.interval.ms", "long", 300_000, Range(1)),
    ConfigKey("producer.id.expiration.ms", "int", DAY_MS, Range(1)),
    ConfigKey("offsets.topic.segment.bytes", "int", 100 * MiB, Range(1)),
    ConfigKey("transaction.state.log.segment.bytes", "int", 100 * MiB, Range(1)),
    ConfigKey("share.coordinator.state.topic.segment.bytes", "int", 100 * MiB, Range(1)),  # 4.0+
)

# Undocumented topic setting of Kafka 4.1 and later (no bounds): when set, the segment size.
INTERNAL_SEGMENT_BYTES = ConfigKey("internal.segment.bytes", "int", None)

# The broker settings Kafka lets one change at runtime (DynamicBrokerConfig.AllDynamicConfigs, the same
# in 3.6 to 4.4): the only ones the metadata log's dynamic broker configs can set.
_STATIC_ONLY = frozenset({
    "log.roll.hours", "log.roll.jitter.hours", "log.retention.minutes", "log.retention.hours",
    "log.cleaner.enable", "log.retention.check.interval.ms", "offsets.topic.segment.bytes",
    "transaction.state.log.segment.bytes", "share.coordinator.state.topic.segment.bytes",
})  # fmt: skip


def _broker_keys() -> dict[str, ConfigKey]:
    keys = dict(_TIME_SYNONYM_KEYS)
    for topic_name, names in BROKER_SYNONYMS.items():
        for name in names:
            keys.setdefault(name, replace(TOPIC_KEYS[topic_name], name=name))
    return keys | BROKER_ONLY_KEYS


BROKER_KEYS = _broker_keys()  # every broker-level name the jobs read
DYNAMIC_BROKER_NAMES = frozenset(BROKER_KEYS) - _STATIC_ONLY


def topic_key(name: str, version: KafkaVersion) -> ConfigKey | None:
    """The topic-level setting ``name`` with the validator of ``version`` (None: not a topic setting there)."""
    if not kv.has_setting(name, version):
        return None
    if name == "segment.bytes":
        return replace(TOPIC_KEYS[name], validator=Range(kv.topic_segment_bytes_min(version)))
    if name == INTERNAL_SEGMENT_BYTES.name:
        return INTERNAL_SEGMENT_BYTES
    return TOPIC_KEYS.get(name)


def broker_key(name: str, version: KafkaVersion) -> ConfigKey | None:
    """The broker-level setting ``name`` with the validator of ``version`` (None: not one the jobs read there)."""
    key = BROKER_KEYS.get(name) if kv.has_setting(name, version) else None
    if name == "log.segment.bytes" and key is not None:
        return replace(key, validator=Range(kv.broker_segment_bytes_min(version)))
    return key


# Kafka 4.x settings that look like log settings but that the jobs do not need (accepted, ignored).
IGNORED_BROKER_NAMES = frozenset({
    "log.dir", "log.dirs", "log.dir.failure.timeout.ms", "log.initial.task.delay.ms",
    "log.flush.interval.messages", "log.flush.interval.ms", "log.flush.scheduler.interval.ms",
    "log.flush.offset.checkpoint.interval.ms", "log.flush.start.offset.checkpoint.interval.ms",
    "log.cleaner.io.max.bytes.per.second", "log.local.retention.ms", "log.local.retention.bytes",
    "log.message.timestamp.before.max.ms", "log.message.timestamp.after.max.ms",
    "log.remote.copy.lag.ms", "log.remote.copy.lag.bytes",  # 4.4
    # broker settings with the same name as a topic setting
    "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
    "min.insync.replicas", "unclean.leader.election.enable",
    # removed in 4.0, still found in older server.properties
    "log.message.format.version", "log.message.timestamp.difference.max.ms",
    "log.message.downconversion.enable",
})  # fmt: skip
IGNORED_TOPIC_NAMES = frozenset({
    "flush.messages", "flush.ms", "unclean.leader.election.enable", "min.insync.replicas",
    "compression.gzip.level", "compression.lz4.level", "compression.zstd.level",
    "message.timestamp.before.max.ms", "message.timestamp.after.max.ms",
    "leader.replication.throttled.replicas", "follower.replication.throttled.replicas",
    "remote.storage.enable", "local.retention.ms", "local.retention.bytes",
    "remote.log.copy.disable", "remote.log.delete.on.disable",
    "remote.copy.lag.ms", "remote.copy.lag.bytes", "errors.deadletterqueue.group.enable",  # 4.4
    # removed in 4.0, still found in older topic descriptions
    "message.format.version", "message.timestamp.difference.max.ms", "message.downconversion.enable",
})  # fmt: skip
_LOG_LIKE_PREFIXES = (
    "log.", "cleanup.", "segment.", "retention.", "delete.retention", "min.compaction", "max.compaction",
    "min.cleanable", "file.delete", "max.message", "message.timestamp", "compression.", "index.interval",
    "preallocate",
)  # fmt: skip

# Kafka's internal topics: what Kafka sets on them at creation (topic name -> setting -> value or the
# broker setting that supplies it), and from which release.
INTERNAL_TOPIC_OVERRIDES: dict[str, dict[str, str | frozenset[str]]] = {
    "__consumer_offsets": {
        "cleanup.policy": frozenset({"compact"}),
        "compression.type": "producer",
        "segment.bytes": "offsets.topic.segment.bytes",
    },
    "__transaction_state": {
        "cleanup.policy": frozenset({"compact"}),
        "compression.type": "uncompressed",
        "segment.bytes": "transaction.state.log.segment.bytes",
    },
    "__share_group_state": {
        "cleanup.policy": frozenset({"delete"}),
        "compression.type": "producer",
        "segment.bytes": "share.coordinator.state.topic.segment.bytes",
        "retention.ms": "-1",  # from 4.1; 4.0 left the broker default
    },
}


def internal_topic_settings(topic: str, version: KafkaVersion) -> dict[str, str | frozenset[str]] | None:
    """What Kafka ``version`` sets on internal topic ``topic`` when it creates it (None: not one)."""
    settings = INTERNAL_TOPIC_OVERRIDES.get(topic)
    if settings is None or (topic == "__share_group_state" and not kv.has_share_groups(version)):
        return None
    if topic == "__share_group_state" and not version.at_least(4, 1):
        settings = {k: v for k, v in settings.items() if k != "retention.ms"}
    return settings


KAFKA_DEFAULT = "Kafka default"
METADATA_LOG = "metadata log"  # a topic's config in the cluster metadata log
METADATA_CLUSTER_DEFAULT = "metadata log: dynamic cluster-wide broker default"


def metadata_broker_source(node_id: int | str) -> str:
    return f"metadata log: dynamic config of broker {node_id}"


def _snake(name: str) -> str:
    return name.replace(".", "_")


def _default(topic_name: str) -> Any:
    return TOPIC_KEYS[topic_name].default


# --- value parsing and checking --------------------------------------------------------------------------

_JAVA_TRIM = "".join(map(chr, range(33)))  # String.trim() removes every char <= U+0020
_INTEGER = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?)[fFdD]?")
_COMMA = re.compile(r"\s*,\s*", re.ASCII)


def _show(value: Any) -> str:
    if isinstance(value, frozenset):
        return ",".join(sorted(value))
    return str(value).lower() if isinstance(value, bool) else str(value)


def _flag_source(flag: str, arg: str, keep: int = 48) -> str:
    """Where a value came from: the flag as given, its middle cut when it is long."""
    if len(arg) <= 2 * keep:
        return f"{flag} {arg}"
    return f"{flag} {arg[:keep]}...{arg[-keep:]} ({len(arg)} characters)"


def _shown_raw(raw: str, keep: int = 24) -> str:
    """``raw`` quoted, cut to its first and last characters when it is long (a line stays a line)."""
    if len(raw) <= 2 * keep:
        return repr(raw)
    return f"{raw[:keep]!r}...{raw[-keep:]!r} ({len(raw)} characters)"


def parse_value(key: ConfigKey, raw: str, source: str) -> Any:
    """``raw`` parsed as Kafka parses a value of ``key``'s type, then checked by ``key``'s validator."""
    text = raw.strip(_JAVA_TRIM)
    value: Any
    if key.kind in ("int", "long"):
        low, high = _BOUNDS[key.kind]
        number = parse_java_integer(text, low, high) if _INTEGER.fullmatch(text) else None
        if number is None:
            bits = 32 if key.kind == "int" else 64
            raise ConfigError(
                f"{key.name}={_shown_raw(raw)} from {source}: not a {bits}-bit integer (a Java {key.kind}: "
                f"{low}..{high})"
            )
        value = number
    elif key.kind == "double":
        if not _DOUBLE.fullmatch(text) or "NaN" in text:
            raise ConfigError(f"{key.name}={_shown_raw(raw)} from {source}: not a number")
        value = float(text.rstrip("fFdD").replace("Infinity", "inf"))
    elif key.kind == "boolean":
        if text.lower() not in ("true", "false"):
            raise ConfigError(f"{key.name}={_shown_raw(raw)} from {source}: must be true or false")
        value = text.lower() == "true"
    elif key.kind == "list":
        items = _COMMA.split(text) if text else []
        if key.validator is not None and not key.validator.admits(items):
            raise ConfigError(f"{key.name}={_shown_raw(raw)} from {source}: must be {key.validator}")
        return frozenset(items)
    else:
        value = text
    _check_value(key, value, lambda _: source)
    return value


def _type_problem(kind: Kind, value: Any) -> str | None:
    if kind in ("int", "long"):
        low, high = _BOUNDS[kind]
        ok = type(value) is int and low <= value <= high
        return None if ok else f"not a {32 if kind == 'int' else 64}-bit integer"
    if kind == "double":
        ok = isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)
        return None if ok else "not a number"
    expected = {"boolean": bool, "string": str, "list": frozenset}[kind]
    items: Iterable[Any] = value if kind == "list" and isinstance(value, frozenset) else ()
    if not isinstance(value, expected) or not all(isinstance(v, str) for v in items):
        return f"not a {kind}" if kind != "list" else "not a frozenset of strings"
    return None


def _check_value(key: ConfigKey, value: Any, source_of: Callable[[str], str]) -> None:
    problem = _type_problem(key.kind, value)
    if problem is None and key.validator is not None and not key.validator.admits(value):
        problem = f"must be {key.validator}"
    if problem is not None:
        raise ConfigError(f"{key.name}={_show(value)} from {source_of(key.name)}: {problem}")


def _check_lags(
    values: Mapping[str, Any], min_name: str, max_name: str, source_of: Callable[[str], str]
) -> None:
    # Kafka's LogConfig.validateValues, applied to topic configs and to the broker defaults.
    if values[min_name] > values[max_name]:
        raise ConfigError(
            f"{min_name}={values[min_name]} from {source_of(min_name)} is greater than "
            f"{max_name}={values[max_name]} from {source_of(max_name)}; it must be at most {max_name}"
        )


# --- the typed configurations ----------------------------------------------------------------------------


def _constructed_by(obj: object) -> Callable[[str], str]:
    return lambda _: f"{type(obj).__name__}(...)"


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The effective configuration of one topic (Kafka's ``LogConfig``); fields named as topic configs."""

    cleanup_policy: frozenset[str] = _default("cleanup.policy")
    segment_bytes: int = _default("segment.bytes")
    segment_ms: int = _default("segment.ms")
    segment_jitter_ms: int = _default("segment.jitter.ms")
    segment_index_bytes: int = _default("segment.index.bytes")
    index_interval_bytes: int = _default("index.interval.bytes")
    retention_ms: int = _default("retention.ms")
    retention_bytes: int = _default("retention.bytes")
    delete_retention_ms: int = _default("delete.retention.ms")
    min_compaction_lag_ms: int = _default("min.compaction.lag.ms")
    max_compaction_lag_ms: int = _default("max.compaction.lag.ms")
    min_cleanable_dirty_ratio: float = _default("min.cleanable.dirty.ratio")
    file_delete_delay_ms: int = _default("file.delete.delay.ms")
    max_message_bytes: int = _default("max.message.bytes")
    max_decompressed_message_bytes: int = _default("max.decompressed.message.bytes")
    preallocate: bool = _default("preallocate")
    message_timestamp_type: str = _default("message.timestamp.type")
    compression_type: str = _default("compression.type")

    def __post_init__(self) -> None:
        values = {name: getattr(self, _snake(name)) for name in TOPIC_KEYS}
        _check_topic_values(values, _constructed_by(self))

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    def not_compacted_reason(self) -> str | None:
        """Why the cleaner never looks at this log (None when cleanup.policy includes compact): the one
        wording of the compact job, the report and the cleaner's plan."""
        if self.compact:
            return None
        return f"cleanup.policy={','.join(sorted(self.cleanup_policy)) or '(empty)'} does not include compact"

    @property
    def max_segment_ms(self) -> int:
        """The roll age: for compacted topics also bounded by max.compaction.lag.ms (Kafka's maxSegmentMs)."""
        if self.compact and self.max_compaction_lag_ms > 0:
            return min(self.max_compaction_lag_ms, self.segment_ms)
        return self.segment_ms


def _check_topic_values(values: Mapping[str, Any], source_of: Callable[[str], str]) -> None:
    for name, key in TOPIC_KEYS.items():
        _check_value(key, values[name], source_of)
    _check_lags(values, "min.compaction.lag.ms", "max.compaction.lag.ms", source_of)


# BrokerConfig's fields: each topic setting under its first broker synonym (holding the effective value,
# e.g. log.roll.ms computed from log.roll.hours), then the broker-only settings.
_BROKER_FIELD_KEYS = _keys(
    *(replace(TOPIC_KEYS[topic], name=names[0]) for topic, names in BROKER_SYNONYMS.items()),
    *BROKER_ONLY_KEYS.values(),
)
# KafkaConfig: the effective log.retention.ms must be -1 (negative values become -1) or at least 1.
_BROKER_FIELD_KEYS["log.retention.ms"] = replace(
    _BROKER_FIELD_KEYS["log.retention.ms"], validator=Range(1, or_minus_one=True)
)


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """Broker-level values: the defaults of every topic setting and the broker-only cleaner settings."""

    log_cleanup_policy: frozenset[str] = _default("cleanup.policy")
    log_segment_bytes: int = _default("segment.bytes")
    log_roll_ms: int = _default("segment.ms")
    log_roll_jitter_ms: int = _default("segment.jitter.ms")
    log_index_size_max_bytes: int = _default("segment.index.bytes")
    log_index_interval_bytes: int = _default("index.interval.bytes")
    log_retention_ms: int = _default("retention.ms")
    log_retention_bytes: int = _default("retention.bytes")
    log_cleaner_delete_retention_ms: int = _default("delete.retention.ms")
    log_cleaner_min_compaction_lag_ms: int = _default("min.compaction.lag.ms")
    log_cleaner_max_compaction_lag_ms: int = _default("max.compaction.lag.ms")
    log_cleaner_min_cleanable_ratio: float = _default("min.cleanable.dirty.ratio")
    log_segment_delete_delay_ms: int = _default("file.delete.delay.ms")
    message_max_bytes: int = _default("max.message.bytes")
    max_decompressed_message_bytes: int = _default("max.decompressed.message.bytes")
    log_preallocate: bool = _default("preallocate")
    log_message_timestamp_type: str = _default("message.timestamp.type")
    compression_type: str = _default("compression.type")
    log_cleaner_enable: bool = BROKER_ONLY_KEYS["log.cleaner.enable"].default
    log_cleaner_threads: int = BROKER_ONLY_KEYS["log.cleaner.threads"].default
    log_cleaner_dedupe_buffer_size: int = BROKER_ONLY_KEYS["log.cleaner.dedupe.buffer.size"].default
    log_cleaner_io_buffer_load_factor: float = BROKER_ONLY_KEYS["log.cleaner.io.buffer.load.factor"].default
    log_cleaner_io_buffer_size: int = BROKER_ONLY_KEYS["log.cleaner.io.buffer.size"].default
    log_cleaner_backoff_ms: int = BROKER_ONLY_KEYS["log.cleaner.backoff.ms"].default
    log_retention_check_interval_ms: int = BROKER_ONLY_KEYS["log.retention.check.interval.ms"].default
    producer_id_expiration_ms: int = BROKER_ONLY_KEYS["producer.id.expiration.ms"].default
    offsets_topic_segment_bytes: int = BROKER_ONLY_KEYS["offsets.topic.segment.bytes"].default
    transaction_state_log_segment_bytes: int = BROKER_ONLY_KEYS["transaction.state.log.segment.bytes"].default
    share_coordinator_state_topic_segment_bytes: int = BROKER_ONLY_KEYS[
        "share.coordinator.state.topic.segment.bytes"
    ].default
    # The release whose rules apply (not a Kafka setting): validators, internal topics, cleaner rule R2.2.
    kafka_version: KafkaVersion = kv.LATEST

    def __post_init__(self) -> None:
        values = {name: getattr(self, _snake(name)) for name in _BROKER_FIELD_KEYS}
        _check_broker_values(values, _constructed_by(self))

    def log_config(self) -> LogConfig:
        """The configuration of a topic without overrides (Kafka's default LogConfig of this broker)."""
        return LogConfig(**{_snake(t): getattr(self, _snake(n[0])) for t, n in BROKER_SYNONYMS.items()})


def _check_broker_values(values: Mapping[str, Any], source_of: Callable[[str], str]) -> None:
    for key in _BROKER_FIELD_KEYS.values():
        _check_value(key, values[key.name], source_of)
    _check_lags(values, "log.cleaner.min.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms", source_of)
    threads, dedupe = values["log.cleaner.threads"], values["log.cleaner.dedupe.buffer.size"]
    if threads < 1:  # Kafka's validator admits 0, but its start-up check then divides by zero
        raise ConfigError(
            f"log.cleaner.threads={threads} from {source_of('log.cleaner.threads')}: must be at least 1"
        )
    if dedupe // threads <= MiB:  # KafkaConfig's start-up check
        raise ConfigError(
            f"log.cleaner.dedupe.buffer.size={dedupe} from {source_of('log.cleaner.dedupe.buffer.size')}: "
            f"must be more than 1048576 bytes per cleaner thread (log.cleaner.threads={threads})"
        )
    if values["log.cleaner.enable"]:
        factor = values["log.cleaner.io.buffer.load.factor"]
        slots = min(dedupe // threads, MAX_INT) // OFFSET_MAP_ENTRY_BYTES
        # Kafka's cleaner refuses to start unless slots * factor > 1; above 1 its map overflows mid-clean,
        # so the tool refuses that too.
        if not (slots * factor > 1 and factor <= 1):
            raise ConfigError(
                f"log.cleaner.io.buffer.load.factor={factor} from "
                f"{source_of('log.cleaner.io.buffer.load.factor')}: must be at most 1 and leave room for more "
                f"than one key in the dedupe map ({slots} slots per cleaner thread)"
            )


# --- derived values (spec section 1, "Derived") --------------------------------------------------------------


def dedupe_buffer_per_thread(broker: BrokerConfig) -> int:
    """Bytes of dedupe map per cleaner thread: the buffer split between threads, at most 2^31-1."""
    return min(broker.log_cleaner_dedupe_buffer_size // broker.log_cleaner_threads, MAX_INT)


def dedupe_map_slots(broker: BrokerConfig) -> int:
    return dedupe_buffer_per_thread(broker) // OFFSET_MAP_ENTRY_BYTES


def dedupe_map_usable_entries(broker: BrokerConfig) -> int:
    """Keys a cleaning round can hold before the map counts as full: floor(slots * load factor)."""
    return int(dedupe_map_slots(broker) * broker.log_cleaner_io_buffer_load_factor)


def cleaner_io_buffer_size(broker: BrokerConfig) -> int:
    """Initial size of each of the cleaner's read and write buffers."""
    return broker.log_cleaner_io_buffer_size // broker.log_cleaner_threads // 2


def max_io_buffer_size(broker: BrokerConfig, log: LogConfig) -> int:
    """The size the cleaner's buffers may grow to for a batch that does not fit."""
    return max(broker.message_max_bytes, log.max_message_bytes)


# --- java.util.Properties (the syntax: format.properties) --------------------------------------------------


def parse_properties(text: str, source: str = "<text>") -> list[tuple[str, str, int]]:
    """(key, value, line number) of each entry of a properties text; a ConfigError naming ``source`` and the
    line when it cannot be read."""
    try:
        return properties.parse_properties(text)
    except properties.MalformedEscapeError as err:
        raise ConfigError(f"{source}:{err.line}: {err}") from err


def read_properties(path: str | os.PathLike[str]) -> list[tuple[str, str, int]]:
    """Entries of a properties file; ISO-8859-1 as ``Properties.load(InputStream)``."""
    try:
        text = storage.read_regular(path).decode("latin-1")
    except OSError as err:
        raise ConfigError(f"{os.fspath(path)}: cannot read configuration file: {err.strerror}") from err
    return parse_properties(text, os.fspath(path))


# --- layering ----------------------------------------------------------------------------------------------------

_TOPIC_NAMES = tuple(TOPIC_KEYS)
_TOPIC_INDEX = {name: i for i, name in enumerate(_TOPIC_NAMES)}
ASSUMED = "--assume-broker-defaults"


@dataclass(frozen=True, slots=True)
class TopicSettings:
    """One topic's effective configuration, where each setting came from, and whether it is known."""

    config: LogConfig
    sources: tuple[str, ...]  # one per TOPIC_KEYS name, in that order
    explicit: frozenset[str] = frozenset()  # names set at topic level or by --set (never guesses)
    known: bool = True  # the topic's own settings are known (see the module docstring)
    assumed: bool = False  # known only because of --assume-broker-defaults
    error: str | None = None  # the topic's settings in the metadata log cannot be used

    def source(self, name: str) -> str:
        source = self.sources[_TOPIC_INDEX[name]]
        return f"{source}, {ASSUMED}" if self.assumed and name not in self.explicit else source

    def unknown(self, name: str) -> bool:
        """Whether ``name``'s value would be a guess: the topic's own settings are unknown and nothing
        at topic level or on the command line set it."""
        return not self.known and name not in self.explicit

    def value(self, name: str) -> Any:
        return getattr(self.config, _snake(name))

    def show(self, name: str) -> str:
        """``name=value (source)``, or ``name=unknown`` when the value would be a guess."""
        if self.unknown(name):
            return f"{name}=unknown"
        return f"{name}={_show(self.value(name))} ({self.source(name)})"

    def describe(self, *names: str) -> str:
        return "; ".join(self.show(name) for name in names)


@dataclass(frozen=True, slots=True)
class ConfigSet:
    """Everything the jobs were configured with, validated; picklable for the executors."""

    broker: BrokerConfig
    default: LogConfig  # the configuration of a topic without settings of its own
    topics: tuple[tuple[str, TopicSettings], ...] = ()  # topics with settings of their own, by name
    ignored: tuple[str, ...] = ()  # "name (source)" of each Kafka setting read and not used
    default_sources: tuple[str, ...] = tuple(KAFKA_DEFAULT for _ in TOPIC_KEYS)
    set_for_all: frozenset[str] = frozenset()  # topic-level names given with --set
    known_topics: frozenset[str] | None = None  # topics whose settings are known; None: every topic
    assume_broker_defaults: bool = False  # the others get the broker defaults as if known
    cluster: ClusterView | None = None  # the cluster metadata's topics, for the partition-directory check
    metadata_problem: str | None = None  # why the log dir's metadata log could not be read
    _index: dict[str, TopicSettings] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", dict(self.topics))

    @property
    def version(self) -> KafkaVersion:
        return self.broker.kafka_version

    def settings(self, topic: str) -> TopicSettings:
        found = self._index.get(topic)
        if found is not None:
            return found
        known = self.known_topics is None or topic in self.known_topics
        assumed = not known and self.assume_broker_defaults
        return TopicSettings(self.default, self.default_sources, self.set_for_all, known or assumed, assumed)

    def for_topic(self, topic: str) -> LogConfig:
        return self.settings(topic).config


_TOPIC_NAME = re.compile(r"[a-zA-Z0-9._-]{1,249}")
Setting = tuple[Any, str]  # parsed value, source


def _unknown(name: str, raw: str, source: str, what: str, candidates: Iterable[str]) -> ConfigError:
    close = difflib.get_close_matches(name, list(candidates), n=1)
    hint = f"; did you mean {close[0]}?" if close else ""
    return ConfigError(f"{name}={_shown_raw(raw)} from {source}: {what}{hint}")


def _topic_level_name_of(broker_name: str) -> str | None:
    return next((t for t, names in BROKER_SYNONYMS.items() if broker_name in names), None)


class _Loader:
    def __init__(self, version: KafkaVersion) -> None:
        self.version = version
        self.broker: dict[str, Setting] = {}
        self.topics: dict[str, dict[str, Setting]] = {}  # topic files and --topic-config
        self.metadata_topics: dict[str, dict[str, Setting]] = {}
        self.topic_errors: dict[str, str] = {}
        self.all_topics: dict[str, Setting] = {}
        self.ignored: list[str] = []

    def broker_entry(self, name: str, raw: str, source: str) -> None:
        key = broker_key(name, self.version)
        known = kv.has_setting(name, self.version)
        if key is not None:
            self.broker[name] = (parse_value(key, raw, source), source)
        elif name in IGNORED_BROKER_NAMES and known:
            self.ignored.append(f"{name} ({source})")
        elif (name in TOPIC_KEYS or name in IGNORED_TOPIC_NAMES) and known:
            synonym = BROKER_SYNONYMS.get(name, ("",))[0]
            raise ConfigError(
                f"{name}={_shown_raw(raw)} from {source}: a topic-level name in a broker file"
                + (f"; the broker-level name is {synonym}" if synonym else "")
                + "; per-topic values go in conf/topics/<topic>.properties, or --set for every topic"
            )
        elif name.startswith(_LOG_LIKE_PREFIXES):
            raise _unknown(name, raw, source, f"not a Kafka {self.version} log setting", BROKER_KEYS)
        else:
            self.ignored.append(f"{name} ({source})")

    def dynamic_entry(self, name: str, raw: str, source: str) -> None:
        """A dynamic broker config from the metadata log: Kafka accepted it, so other names are ignored."""
        key = broker_key(name, self.version) if name in DYNAMIC_BROKER_NAMES else None
        if key is None:
            self.ignored.append(f"{name} ({source})")
        else:
            self.broker[name] = (parse_value(key, raw, source), source)

    def topic_entry(self, topic: str, name: str, raw: str, source: str) -> None:
        if not _TOPIC_NAME.fullmatch(topic) or topic in (".", ".."):
            raise ConfigError(f"{source}: {topic!r} is not a valid Kafka topic name")
        key = topic_key(name, self.version)
        if key is not None:
            self.topics.setdefault(topic, {})[name] = (parse_value(key, raw, source), source)
        elif name == "remote.storage.enable" and parse_value(ConfigKey(name, "boolean", False), raw, source):
            raise ConfigError(
                f"{name}={_shown_raw(raw)} from {source}: tiered-storage topics are not supported"
            )
        elif name in IGNORED_TOPIC_NAMES and kv.has_setting(name, self.version):
            self.ignored.append(f"{name} ({source})")
        elif (name in BROKER_KEYS or name in IGNORED_BROKER_NAMES) and kv.has_setting(name, self.version):
            topic_name = _topic_level_name_of(name)
            raise ConfigError(
                f"{name}={_shown_raw(raw)} from {source}: a broker-level name in a topic override"
                + (f"; the topic-level name is {topic_name}" if topic_name else "")
            )
        else:
            candidates = [n for n in (*TOPIC_KEYS, INTERNAL_SEGMENT_BYTES.name) if topic_key(n, self.version)]
            raise _unknown(name, raw, source, f"not a Kafka {self.version} topic config", candidates)

    def metadata_topic_entry(self, topic: str, name: str, raw: str) -> None:
        """A topic config from the metadata log: other names are ignored, a bad value fails the topic."""
        key = topic_key(name, self.version)
        try:
            if key is not None:
                value = parse_value(key, raw, METADATA_LOG)
                self.metadata_topics.setdefault(topic, {})[name] = (value, METADATA_LOG)
            elif name == "remote.storage.enable" and parse_value(
                ConfigKey(name, "boolean", False), raw, METADATA_LOG
            ):
                raise ConfigError(
                    f"{name}={_shown_raw(raw)} from {METADATA_LOG}: tiered-storage topics are not supported"
                )
            else:
                self.ignored.append(f"{name} ({METADATA_LOG}, topic {topic})")
        except ConfigError as err:
            self.topic_errors.setdefault(topic, str(err))

    def set_entry(self, name: str, raw: str, source: str) -> None:
        key, topic_level = broker_key(name, self.version), topic_key(name, self.version)
        if name == INTERNAL_SEGMENT_BYTES.name:
            topic_level = None  # per topic only, as in Kafka (no broker-level synonym)
        if key is None and topic_level is None:
            known = (name in IGNORED_BROKER_NAMES or name in IGNORED_TOPIC_NAMES) and kv.has_setting(
                name, self.version
            )
            what = "not used by kafka-log-jobs" if known else f"not a Kafka {self.version} log setting"
            raise _unknown(name, raw, source, what, [*BROKER_KEYS, *TOPIC_KEYS])
        if key is not None:
            self.broker[name] = (parse_value(key, raw, source), source)
        if topic_level is not None:
            self.all_topics[name] = (parse_value(topic_level, raw, source), source)

    def broker_settings(self) -> dict[str, Setting]:
        """Each BrokerConfig field's value and source, Kafka's synonym precedence applied."""
        settings: dict[str, Setting] = {}
        for names in BROKER_SYNONYMS.values():
            for name in names:  # the first synonym that is set (or has a default) wins
                key = BROKER_KEYS[name]
                value, source = self.broker.get(name, (key.default, KAFKA_DEFAULT))
                if value is not None:
                    break
            if key.unit_ms != 1:
                value, source = value * key.unit_ms, f"{source} ({name})"
            if names[0] == "log.retention.ms" and value < 0:
                value = -1  # KafkaConfig: any negative retention time is unlimited
            settings[names[0]] = (value, source)
        for name, key in BROKER_ONLY_KEYS.items():
            settings[name] = self.broker.get(name, (key.default, KAFKA_DEFAULT))
        return settings

    def build(self, cluster: ClusterView | None, assume_broker_defaults: bool) -> ConfigSet:
        settings = self.broker_settings()
        _check_broker_values({n: v for n, (v, _) in settings.items()}, lambda n: settings[n][1])
        fields = {_snake(name): value for name, (value, _) in settings.items()}
        broker = BrokerConfig(**fields, kafka_version=self.version)
        base = {t: settings[names[0]] for t, names in BROKER_SYNONYMS.items()}
        in_metadata = frozenset() if cluster is None else frozenset(cluster.topic_names)
        layers: dict[str, dict[str, Setting]] = {}
        for topic in INTERNAL_TOPIC_OVERRIDES:
            internal = internal_topic_settings(topic, self.version)
            if internal is None or topic in in_metadata:
                continue  # the metadata log holds what Kafka set at creation
            source = f"Kafka's setting for {topic}"
            created: dict[str, Setting] = {}
            for name, value in internal.items():
                if name == "segment.bytes":
                    created[name] = settings[str(value)]  # from the broker setting
                elif name == "retention.ms":
                    created[name] = (int(str(value)), source)
                else:
                    created[name] = (value, source)
            layers[topic] = created
        for source_layers in (self.metadata_topics, self.topics):
            for topic, values in source_layers.items():
                layers[topic] = layers.get(topic, {}) | values
        known = in_metadata | frozenset(self.topics) | frozenset(layers)
        default_settings = base | self.all_topics
        default = _log_config(default_settings)
        topics = []
        for topic in sorted({*layers, *self.topic_errors}):
            own = layers.get(topic, {}) | self.all_topics
            assumed = topic not in known and assume_broker_defaults
            try:
                # this release's bounds for every topic-level value, Kafka's internal topics' included
                for name, (value, source) in own.items():
                    key = topic_key(name, self.version)
                    if key is not None:
                        _check_value(key, value, _fixed(source))
                merged = base | own
                config = _log_config(merged)
                error = self.topic_errors.get(topic)
            except ConfigError as err:
                if topic in self.topics:
                    raise  # a user's file or flag: the job stops here, as for any bad option
                merged, config, error = default_settings, default, str(err)
            sources = _sources(merged)
            settings_of = TopicSettings(
                config, sources, frozenset(own), topic in known or assumed, assumed, error
            )
            topics.append((topic, settings_of))
        return ConfigSet(
            broker, default, tuple(topics), tuple(self.ignored), _sources(default_settings),
            frozenset(self.all_topics), known, assume_broker_defaults, cluster,
        )  # fmt: skip


def _fixed(source: str) -> Callable[[str], str]:
    return lambda _: source


def _effective(settings: Mapping[str, Setting]) -> dict[str, Setting]:
    """``internal.segment.bytes``, when set, is the segment size (Kafka's LogConfig.segmentSize())."""
    out = dict(settings)
    internal = out.pop(INTERNAL_SEGMENT_BYTES.name, None)
    if internal is not None and internal[0] is not None:
        out["segment.bytes"] = (internal[0], f"{internal[1]} ({INTERNAL_SEGMENT_BYTES.name})")
    return out


def _sources(settings: Mapping[str, Setting]) -> tuple[str, ...]:
    effective = _effective(settings)
    return tuple(effective[name][1] for name in _TOPIC_NAMES)


def _log_config(settings: Mapping[str, Setting]) -> LogConfig:
    effective = _effective(settings)
    _check_topic_values({n: v for n, (v, _) in effective.items()}, lambda n: effective[n][1])
    return LogConfig(**{_snake(name): value for name, (value, _) in effective.items()})


def _split(text: str, separator: str, option: str, arg: str, form: str) -> tuple[str, str]:
    head, sep, tail = text.partition(separator)
    if not sep or not head.strip():
        raise ConfigError(f"{option} {arg!r}: expected {form}")
    return head.strip(), tail


def load_config(
    conf_dir: str | os.PathLike[str] | None = None,
    config_files: Sequence[str | os.PathLike[str]] = (),
    topic_configs: Sequence[str] = (),
    sets: Sequence[str] = (),
    *,
    version: KafkaVersion = kv.LATEST,
    metadata: ClusterMetadata | None = None,
    node_id: int | None = None,
    assume_broker_defaults: bool = False,
) -> ConfigSet:
    """Kafka's defaults < conf/*.properties < each --config FILE < the metadata log's dynamic broker
    configs (cluster-wide, then broker ``node_id``'s) < the topic's configs in the metadata log <
    conf/topics/<topic>.properties < --topic-config TOPIC:KEY=VALUE < --set KEY=VALUE, with the
    validators of Kafka ``version``; every value and every topic checked here."""
    loader = _Loader(version)
    conf = None if conf_dir is None else Path(conf_dir)
    if conf is not None and not conf.is_dir():
        raise ConfigError(f"{conf}: configuration directory not found")
    broker_files = [*(sorted(conf.glob("*.properties")) if conf else []), *map(Path, config_files)]
    for path in broker_files:
        for name, raw, line in read_properties(path):
            loader.broker_entry(name, raw, f"{path}:{line}")
    if metadata is not None:
        dynamic = [("", METADATA_CLUSTER_DEFAULT)]
        if node_id is not None:
            dynamic.append((str(node_id), metadata_broker_source(node_id)))
        for resource, source in dynamic:
            for name, raw in sorted(metadata.broker_configs.get(resource, {}).items()):
                loader.dynamic_entry(name, raw, source)
        for topic, values in metadata.topic_configs.items():
            for name, raw in sorted(values.items()):
                loader.metadata_topic_entry(topic, name, raw)
    for path in sorted(conf.glob("topics/*.properties")) if conf else []:
        topic = path.name.removesuffix(".properties")
        for name, raw, line in read_properties(path):
            loader.topic_entry(topic, name, raw, f"{path}:{line}")
    for arg in topic_configs:
        topic, setting = _split(arg, ":", "--topic-config", arg, "TOPIC:KEY=VALUE")
        name, raw = _split(setting, "=", "--topic-config", arg, "TOPIC:KEY=VALUE")
        loader.topic_entry(topic, name, raw, _flag_source("--topic-config", arg))
    for arg in sets:
        name, raw = _split(arg, "=", "--set", arg, "KEY=VALUE")
        loader.set_entry(name, raw, _flag_source("--set", arg))
    cluster = None if metadata is None else metadata.view(node_id)
    return loader.build(cluster, assume_broker_defaults)
