"""The reading options of the ``kafka-log`` data source, parsed once into a frozen :class:`ReadOptions`.

Spark's Kafka source options, where they make sense offline (same names, same value formats)::

    assign                   {"orders":[0,1],"payments":[3]}        exactly one of these three, or none:
    subscribe                orders,payments                        none reads every partition directory
    subscribePattern         orders-.*   (full match; internal topics only with kafka.exclude.internal.topics=false)
    startingOffsets          earliest | {"orders":{"0":23,"1":-2}}  -2 = earliest; latest is refused (a batch read)
    endingOffsets            latest | {"orders":{"0":50,"1":-1}}    -1 = latest; earliest is refused
    startingTimestamp        ms, every partition                    beats startingOffsetsByTimestamp,
    startingOffsetsByTimestamp {"orders":{"0":1700000000000}}          which beats startingOffsets
    endingTimestamp / endingOffsetsByTimestamp                       the same for the end
    startingOffsetsByTimestampStrategy  error | latest               no record at or after the timestamp
    kafka.isolation.level    read_uncommitted | read_committed
    includeHeaders           false | true
    failOnDataLoss           true | false                          a starting offset below the log start
    minPartitions            at least about this many Spark partitions (smaller splits)

and ours: ``level`` (records | latest | batches | segments), ``end`` (high_watermark | log_end: what
"latest" is), ``includeBatchColumns``, ``maxBytesPerSplit``, ``maxDecompressedBatchBytes`` (the most one
batch's records may decompress to, default 64 MiB: the jobs' ``--max-decompressed-batch-bytes``; a larger
batch fails the read of its partition), ``includeTombstones`` (latest: a key whose
last record is a tombstone keeps that row, value null), ``schemas`` (none | log | a .json file | a registry
URL: typed keys and values from the Schema Registry's schemas, :mod:`spark_udfs.decoded`) and
``schemasTopic`` (default ``_schemas``). Other ``kafka.*`` options (a bootstrap
server, ...) and options Spark's Kafka source ignores in batch reads are ignored here too.

Unlike Spark, a per-partition JSON need not name every partition read: the partitions it leaves out start
at earliest and end at latest. A partition it names must be one that is read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field

from kafka_log_core.errors import UsageError
from kafka_log_core.format import compression
from kafka_log_core.format.filenames import TopicPartition

LEVELS = ("records", "latest", "batches", "segments")
ISOLATION_LEVELS = ("read_uncommitted", "read_committed")
ENDS = ("high_watermark", "log_end")
EARLIEST, LATEST = -2, -1  # Spark's (and Kafka's ListOffsets') special offsets
DEFAULT_MAX_BYTES_PER_SPLIT = 128 * 1024 * 1024  # as spark.sql.files.maxPartitionBytes
#: Kafka's Topic.isInternal: a pattern subscription leaves these out unless told otherwise.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})
STRATEGIES = ("assign", "subscribe", "subscribepattern")


@dataclass(frozen=True)
class Selection:
    """Which partitions to read: ``kind`` is all | assign | subscribe | pattern."""

    kind: str = "all"
    topics: frozenset[str] = frozenset()
    partitions: frozenset[TopicPartition] = frozenset()
    pattern: str | None = None
    include_internal: bool = False

    def admits(self, tp: TopicPartition) -> bool:
        if self.kind == "assign":
            return tp in self.partitions
        if self.kind == "subscribe":
            return tp.topic in self.topics
        if self.kind == "pattern":
            if tp.topic in INTERNAL_TOPICS and not self.include_internal:
                return False
            return re.fullmatch(self.pattern or "", tp.topic) is not None
        return True


@dataclass(frozen=True)
class Bound:
    """Where a read starts or ends. Resolved per partition at planning: a global timestamp beats
    per-partition timestamps, which beat per-partition offsets, which beat ``default``."""

    default: int  # EARLIEST or LATEST
    offsets: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamps: Mapping[TopicPartition, int] = field(default_factory=dict)
    timestamp: int | None = None

    def named(self) -> set[TopicPartition]:
        return set(self.offsets) | set(self.timestamps)

    def for_partition(self, tp: TopicPartition) -> tuple[str, int]:
        """("offset", n) with n possibly EARLIEST/LATEST, or ("timestamp", ms)."""
        if self.timestamp is not None:
            return "timestamp", self.timestamp
        if tp in self.timestamps:
            return "timestamp", self.timestamps[tp]
        return "offset", self.offsets.get(tp, self.default)


@dataclass(frozen=True)
class ReadOptions:
    paths: tuple[str, ...]
    level: str = "records"
    selection: Selection = Selection()
    starting: Bound = Bound(EARLIEST)
    ending: Bound = Bound(LATEST)
    isolation: str = "read_uncommitted"
    include_headers: bool = False
    include_batch_columns: bool = False
    fail_on_data_loss: bool = True
    latest_when_no_match: bool = False  # startingOffsetsByTimestampStrategy=latest
    end: str = "high_watermark"
    max_bytes_per_split: int = DEFAULT_MAX_BYTES_PER_SPLIT
    max_batch_bytes: int = compression.MAX_BATCH_BYTES  # maxDecompressedBatchBytes
    min_partitions: int | None = None
    include_tombstones: bool = False
    schemas: str = "none"
    schemas_topic: str = "_schemas"

    @property
    def read_committed(self) -> bool:
        return self.isolation == "read_committed"

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> ReadOptions:
        """Parse Spark's option map (keys in any case); a bad option raises UsageError naming it."""
        opts = {str(k).lower(): str(v) for k, v in options.items() if v is not None}
        level = _choice(opts, "level", LEVELS)
        # A consumer rebuilding its state from a topic ignores aborted transactions: latest reads committed.
        isolation = _choice(
            opts, "kafka.isolation.level", ISOLATION_LEVELS, ISOLATION_LEVELS[1 if level == "latest" else 0]
        )
        return cls(
            paths=_paths(opts),
            level=level,
            selection=_selection(opts),
            starting=_bound(opts, "starting", EARLIEST),
            ending=_bound(opts, "ending", LATEST),
            isolation=isolation,
            include_headers=_boolean(opts, "includeheaders", False),
            include_batch_columns=_boolean(opts, "includebatchcolumns", False),
            fail_on_data_loss=_boolean(opts, "failondataloss", True),
            latest_when_no_match=_choice(opts, "startingoffsetsbytimestampstrategy", ("error", "latest"))
            == "latest",
            end=_choice(opts, "end", ENDS),
            max_bytes_per_split=_positive(opts, "maxbytespersplit", DEFAULT_MAX_BYTES_PER_SPLIT),
            max_batch_bytes=_positive(
                opts, compression.LIMIT_SOURCE_OPTION.lower(), compression.MAX_BATCH_BYTES
            ),
            min_partitions=_positive(opts, "minpartitions", None),
            include_tombstones=_boolean(opts, "includetombstones", False),
            schemas=opts.get("schemas", "none").strip() or "none",
            schemas_topic=opts.get("schemastopic", "_schemas").strip() or "_schemas",
        )

    def decoded_topic(self) -> str:
        """The one topic a read with ``schemas`` decodes (each topic has its own schema)."""
        s = self.selection
        topics = s.topics if s.kind == "subscribe" else {tp.topic for tp in s.partitions}
        if s.kind not in ("subscribe", "assign") or len(topics) != 1:
            raise _fail(
                f"option schemas={self.schemas}: subscribe to (or assign partitions of) exactly one topic; "
                "each topic has its own schemas"
            )
        return next(iter(topics))


# ------------------------------------------------------------------------------------------ helpers
def _fail(message: str) -> UsageError:
    return UsageError(f"kafka-log: {message}")


def _choice(opts: Mapping[str, str], key: str, allowed: tuple[str, ...], default: str | None = None) -> str:
    value = opts.get(key, default if default is not None else allowed[0]).strip().lower()
    if value not in allowed:
        raise _fail(f"option {key}={value!r}: expected one of {', '.join(allowed)}")
    return value


def _boolean(opts: Mapping[str, str], key: str, default: bool) -> bool:
    value = opts.get(key)
    if value is None:
        return default
    if value.strip().lower() not in ("true", "false"):
        raise _fail(f"option {key}={value!r}: expected true or false")
    return value.strip().lower() == "true"


def _positive(opts: Mapping[str, str], key: str, default):
    value = opts.get(key)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise _fail(f"option {key}={value!r}: expected a whole number") from None
    if number <= 0:
        raise _fail(f"option {key}={value!r}: must be positive")
    return number


def _paths(opts: Mapping[str, str]) -> tuple[str, ...]:
    if "paths" in opts:
        try:
            paths = json.loads(opts["paths"])
        except json.JSONDecodeError:
            raise _fail(f"option paths={opts['paths']!r} is not a JSON list") from None
        if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
            raise _fail(f"option paths={opts['paths']!r} is not a JSON list of strings")
        return tuple(paths)
    if opts.get("path"):
        return (opts["path"],)
    raise _fail("give one or more log dirs or partition directories: .load(path), .load([path, ...])")


def _selection(opts: Mapping[str, str]) -> Selection:
    given = [key for key in STRATEGIES if key in opts]
    if len(given) > 1:
        raise _fail("only one of the options assign, subscribe, subscribePattern can be given")
    if not given:
        return Selection()
    key = given[0]
    value = opts[key].strip()
    if key == "assign":
        parsed = _json_object(key, value)
        partitions = set()
        for topic, numbers in parsed.items():
            if not isinstance(numbers, list) or not all(_is_int(n) for n in numbers):
                raise _fail(f'option assign: expected {{"topic":[0,1],...}}, found {value!r}')
            partitions |= {TopicPartition(topic, n) for n in numbers}
        if not partitions:
            raise _fail(f"option assign={value!r} names no partition")
        return Selection("assign", partitions=frozenset(partitions))
    if key == "subscribe":
        topics = frozenset(t.strip() for t in value.split(",") if t.strip())
        if not topics:
            raise _fail(f"option subscribe={value!r} names no topic")
        return Selection("subscribe", topics=topics)
    if not value:
        raise _fail("option subscribePattern is empty")
    try:
        re.compile(value)
    except re.error as err:
        raise _fail(f"option subscribePattern={value!r} is not a regular expression: {err}") from None
    include = not _boolean(opts, "kafka.exclude.internal.topics", True)
    return Selection("pattern", pattern=value, include_internal=include)


def _bound(opts: Mapping[str, str], side: str, default: int) -> Bound:
    """startingOffsets/endingOffsets, ...ByTimestamp and the global ...Timestamp of one side."""
    refused = LATEST if side == "starting" else EARLIEST
    refused_word = "latest" if side == "starting" else "earliest"
    timestamp = None
    if f"{side}timestamp" in opts:
        text = opts[f"{side}timestamp"].strip()
        if not _is_int_text(text):
            raise _fail(f"option {side}Timestamp={text!r}: expected a timestamp in ms")
        timestamp = int(text)
    timestamps = {}
    if f"{side}offsetsbytimestamp" in opts:
        timestamps = _per_partition(opts, f"{side}offsetsbytimestamp")
    offsets: dict[TopicPartition, int] = {}
    key = f"{side}offsets"
    text = opts.get(key, "").strip()
    if text.lower() == refused_word:
        raise _fail(f"option {side}Offsets={text}: a batch read cannot {side[:-3]} at {refused_word}")
    if text and text.lower() not in ("earliest", "latest"):
        offsets = _per_partition(opts, key)
        for tp, offset in offsets.items():
            if offset == refused:
                raise _fail(
                    f"option {side}Offsets: {tp} cannot be {refused} ({refused_word}) in a batch read"
                )
            if offset < EARLIEST:
                raise _fail(f"option {side}Offsets: {tp} has offset {offset}")
    return Bound(default, offsets, timestamps, timestamp)


def _per_partition(opts: Mapping[str, str], key: str) -> dict[TopicPartition, int]:
    """Spark's {"topic":{"0":23,"1":-1}} format."""
    value = opts[key].strip()
    parsed = _json_object(key, value)
    out = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise _fail(f'option {key}: expected {{"topic":{{"0":23}}}}, found {value!r}')
        for partition, number in partitions.items():
            if not _is_int_text(partition) or not _is_int(number):
                raise _fail(f'option {key}: expected {{"topic":{{"0":23}}}}, found {value!r}')
            out[TopicPartition(topic, int(partition))] = number
    return out


def _json_object(key: str, value: str) -> dict:
    try:
        parsed = json.loads(value)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise _fail(f"option {key}={value!r} is not a JSON object")
    return parsed


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_int_text(text: str) -> bool:
    return re.fullmatch(r"-?[0-9]+", text) is not None
