"""The cluster metadata a KRaft broker keeps on disk, read back offline: topics, partitions, configs.

A KRaft broker keeps the whole cluster metadata in ``<metadata.log.dir>/__cluster_metadata-0``
(``metadata.log.dir`` defaults to the first ``log.dirs`` entry)::

    <20-digit end offset>-<10-digit epoch>.checkpoint   snapshots: record batches, the whole image up to
                                                        (excluding) the end offset, framed by a snapshot
                                                        header and footer control record
    <20-digit base offset>.log / .index / .timeindex    the metadata log: record batches
    *.checkpoint.part, *.checkpoint.deleted            snapshots being written or deleted: ignored
    quorum-state, partition.metadata                   Raft state: not read

The image is rebuilt as the broker's metadata loader does: the newest snapshot (greatest end offset,
then epoch), then every record of the log at or after its end offset, in offset order. Control batches
(snapshot header/footer, leader change, KRaft version and voters) carry no metadata and are skipped;
so are record types this tool does not read. Records between a BeginTransactionRecord and an
AbortTransactionRecord are dropped, and an unfinished transaction at the end is not applied (the broker
publishes a metadata transaction only once it ends). The log is read to its end: records not yet
committed by the quorum (possible only after a crash of a multi-controller cluster) are included.

Replay, per record (Kafka's MetadataDelta):

* TopicRecord adds a topic (name and id); PartitionRecord adds a partition (replicas, ISR, leader);
  PartitionChangeRecord changes the fields it carries (null / -2 = unchanged).
* RemoveTopicRecord removes the topic, its partitions and its configs.
* ConfigRecord sets (or with a null value removes) one setting of a topic (resource type 2) or of a
  broker (type 4; resource name "" = the cluster-wide default, "<node id>" = one broker).
* FeatureLevelRecord sets a feature level, among them ``metadata.version``.

Anything that cannot be read -- a bad CRC, a record that does not follow its schema, a record about a
topic that does not exist, a gap between the snapshot and the log -- is a :class:`CorruptMetadataError`
naming the file and byte position; the caller then treats every topic as one without known settings.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from kafka_log_core import storage
from kafka_log_core.errors import CorruptDataError
from kafka_log_core.format.checkpoints import PARTITION_METADATA, read_partition_metadata
from kafka_log_core.format.filenames import parse_segment_file
from kafka_log_core.format.log_file import iter_file_batches
from kafka_log_core.format.metadata_records import (
    RESOURCE_BROKER,
    RESOURCE_TOPIC,
    ConfigRecord,
    CorruptMetadataError,
    FeatureLevelRecord,
    MetadataRecord,
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
    TransactionRecord,
    decode_record,
)

METADATA_LOG_DIR = "__cluster_metadata-0"
METADATA_VERSION_FEATURE = "metadata.version"
_SNAPSHOT = re.compile(r"(?P<offset>\d{20})-(?P<epoch>\d{10})\.checkpoint")


@dataclass(frozen=True, slots=True)
class PartitionState:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    leader: int


@dataclass(frozen=True, slots=True)
class TopicState:
    name: str
    topic_id: str
    partitions: dict[int, PartitionState]


@dataclass(frozen=True)
class ClusterMetadata:
    """The metadata image at the end of the log (what a broker would load)."""

    directory: str
    snapshot: str | None  # file name of the snapshot the replay started from
    end_offset: int  # next offset after the last record read
    records_read: int  # metadata records replayed after the snapshot
    topics: dict[str, TopicState]
    removed_topics: tuple[tuple[str, str], ...]  # (name, topic id) removed in the replayed log
    topic_configs: dict[str, dict[str, str]]
    broker_configs: dict[str, dict[str, str]]  # "" = cluster-wide default, "<node id>" = one broker
    feature_levels: dict[str, int]
    unfinished_transaction: bool = False  # the log ends inside a metadata transaction (not applied)

    @property
    def metadata_version(self) -> int | None:
        return self.feature_levels.get(METADATA_VERSION_FEATURE)

    def describe(self) -> str:
        start = f"snapshot {self.snapshot} + " if self.snapshot else ""
        return f"{self.directory} ({start}{self.records_read} records up to offset {self.end_offset - 1})"

    def view(self, node_id: int | None) -> ClusterView:
        topics = tuple(
            (t.name, t.topic_id, tuple((p, s.replicas) for p, s in sorted(t.partitions.items())))
            for t in sorted(self.topics.values(), key=lambda t: t.name)
        )
        return ClusterView(self.describe(), node_id, topics, self.removed_topics)


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What the executors need from the metadata: each topic's id and replicas (small, picklable)."""

    description: str
    node_id: int | None  # the broker that owns the log dir (meta.properties), if known
    topics: tuple[tuple[str, str, tuple[tuple[int, tuple[int, ...]], ...]], ...]  # name, id, replicas
    removed: tuple[tuple[str, str], ...] = ()
    _index: dict[str, tuple[str, dict[int, tuple[int, ...]]]] = field(
        default_factory=dict, compare=False, repr=False
    )

    def __post_init__(self) -> None:
        object.__setattr__(self, "_index", {name: (tid, dict(parts)) for name, tid, parts in self.topics})

    @property
    def topic_names(self) -> list[str]:
        return [name for name, _, _ in self.topics]

    def topic_id(self, topic: str) -> str | None:
        found = self._index.get(topic)
        return None if found is None else found[0]

    def replicas(self, topic: str, partition: int) -> tuple[int, ...] | None:
        """The partition's replica broker ids, None when the metadata does not list it."""
        found = self._index.get(topic)
        return None if found is None else found[1].get(partition)

    def stray_reason(self, partition_dir: Path, topic: str, partition: int) -> str | None:
        """Why the broker would treat ``partition_dir`` as a stray log (Kafka's isStrayKraftReplica), or
        None when it belongs to the topic the metadata names. Reads ``partition.metadata``."""
        found = self._index.get(topic)
        ending = "the broker would treat it as a stray log; not touched"
        if found is None:
            removed = [tid for name, tid in self.removed if name == topic]
            why = f" (deleted: topic id {', '.join(removed)})" if removed else ""
            return f"topic {topic} is not in the cluster metadata{why}: {ending}"
        topic_id, partitions = found
        path = partition_dir / PARTITION_METADATA
        if not storage.exists(path):
            return f"{path} is missing, so its topic id is unknown: {ending}"
        on_disk = read_partition_metadata(path).topic_id
        if on_disk != topic_id:
            return (
                f"{path} has topic id {on_disk}, the cluster metadata's {topic} has id {topic_id} "
                f"(the topic was deleted and re-created, or this is a stray copy): {ending}"
            )
        replicas = partitions.get(partition)
        if replicas is None:
            return (
                f"{topic} has {len(partitions)} partitions in the cluster metadata, not {partition}: {ending}"
            )
        if self.node_id is not None and self.node_id not in replicas:
            return (
                f"broker {self.node_id} (meta.properties) is not a replica of {topic}-{partition} "
                f"(replicas {list(replicas)}): {ending}"
            )
        return None


def find_metadata_log(log_dir: str | os.PathLike[str]) -> Path | None:
    """``<log_dir>/__cluster_metadata-0`` when it is a directory."""
    path = Path(log_dir) / METADATA_LOG_DIR
    return path if storage.is_dir(path) else None


@dataclass
class _Image:
    topics_by_id: dict[str, TopicState] = field(default_factory=dict)
    ids_by_name: dict[str, str] = field(default_factory=dict)
    topic_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    broker_configs: dict[str, dict[str, str]] = field(default_factory=dict)
    feature_levels: dict[str, int] = field(default_factory=dict)
    removed: list[tuple[str, str]] = field(default_factory=list)

    def topic(self, topic_id: str, what: str) -> TopicState:
        topic = self.topics_by_id.get(topic_id)
        if topic is None:
            raise ValueError(f"{what} for topic id {topic_id}, which no TopicRecord created")
        return topic

    def apply(self, record: MetadataRecord) -> None:
        if isinstance(record, TopicRecord):
            if self.ids_by_name.get(record.name, record.topic_id) != record.topic_id:
                raise ValueError(f"TopicRecord for {record.name!r} while a topic of that name exists")
            self.topics_by_id[record.topic_id] = TopicState(record.name, record.topic_id, {})
            self.ids_by_name[record.name] = record.topic_id
        elif isinstance(record, PartitionRecord):
            topic = self.topic(record.topic_id, f"PartitionRecord {record.partition_id}")
            topic.partitions[record.partition_id] = PartitionState(record.replicas, record.isr, record.leader)
        elif isinstance(record, PartitionChangeRecord):
            topic = self.topic(record.topic_id, f"PartitionChangeRecord {record.partition_id}")
            old = topic.partitions.get(record.partition_id)
            if old is None:
                raise ValueError(
                    f"PartitionChangeRecord for {topic.name}-{record.partition_id}, which does not exist"
                )
            topic.partitions[record.partition_id] = PartitionState(
                old.replicas if record.replicas is None else record.replicas,
                old.isr if record.isr is None else record.isr,
                old.leader if record.leader == -2 else record.leader,
            )
        elif isinstance(record, RemoveTopicRecord):
            topic = self.topic(record.topic_id, "RemoveTopicRecord")
            del self.topics_by_id[record.topic_id]
            del self.ids_by_name[topic.name]
            self.topic_configs.pop(topic.name, None)
            self.removed.append((topic.name, topic.topic_id))
        elif isinstance(record, ConfigRecord):
            if record.resource_type == RESOURCE_TOPIC:
                target = self.topic_configs.setdefault(record.resource_name, {})
            elif record.resource_type == RESOURCE_BROKER:
                target = self.broker_configs.setdefault(record.resource_name, {})
            else:
                return  # client metrics, groups, loggers: not log settings
            if record.value is None:
                target.pop(record.name, None)
            else:
                target[record.name] = record.value
        elif isinstance(record, FeatureLevelRecord):
            if record.feature_level == 0 and record.name != METADATA_VERSION_FEATURE:
                self.feature_levels.pop(record.name, None)
            else:
                self.feature_levels[record.name] = record.feature_level


def latest_snapshot(directory: Path) -> tuple[Path, int] | None:
    """The newest complete snapshot and its end offset (greatest offset, then epoch)."""
    found = []
    for name in storage.listdir(directory):
        match = _SNAPSHOT.fullmatch(name)
        if match:
            found.append((int(match["offset"]), int(match["epoch"]), directory / name))
    if not found:
        return None
    offset, _, path = max(found)
    return path, offset


def _segments(directory: Path) -> list[tuple[int, Path]]:
    segments = []
    for name in storage.listdir(directory):
        parsed = parse_segment_file(name)
        if parsed is not None and parsed.suffix == ".log" and parsed.marker is None:
            segments.append((parsed.base_offset, directory / name))
    return sorted(segments)


class _Replay:
    """Feeds records to the image, holding back those of an open metadata transaction."""

    def __init__(self, image: _Image) -> None:
        self.image = image
        self.pending: list[MetadataRecord] | None = None
        self.count = 0

    def feed(self, record: MetadataRecord) -> None:
        if isinstance(record, TransactionRecord):
            if record.kind == "begin":
                if self.pending is not None:
                    raise ValueError("BeginTransactionRecord inside a metadata transaction")
                self.pending = []
            elif self.pending is None:
                raise ValueError(
                    f"{record.kind.capitalize()}TransactionRecord without a BeginTransactionRecord"
                )
            else:
                pending, self.pending = self.pending, None
                if record.kind == "end":
                    for held in pending:
                        self.image.apply(held)
            return
        if self.pending is not None:
            self.pending.append(record)
        else:
            self.image.apply(record)


def iter_records(
    path: str | os.PathLike[str], start: int = 0, *, strict: bool = True
) -> Iterator[tuple[int, MetadataRecord]]:
    """(offset, record) of every metadata record at offset >= ``start`` in one snapshot or log segment,
    control batches skipped; each batch's CRC is checked. ``strict=False`` ignores a partial last batch."""
    for batch in iter_file_batches(path, strict=strict):
        if batch.last_offset < start or batch.is_control:
            continue
        batch.verify()
        for rec in batch.records():
            if rec.offset < start:
                continue
            where = f"metadata record at offset {rec.offset}"
            if rec.value is None:
                raise CorruptMetadataError(f"{where}: null value", path, batch.position)
            try:
                yield rec.offset, decode_record(rec.value)
            except CorruptDataError as err:
                raise CorruptMetadataError(f"{where}: {err.detail}", path, batch.position) from err


def _read_file(path: Path, replay: _Replay, start: int, *, strict: bool) -> int:
    """Replay the records at offsets >= ``start`` of one file; returns the next offset after its last batch."""
    next_offset = start
    for batch in iter_file_batches(path, strict=strict):
        next_offset = max(next_offset, batch.next_offset)
    for offset, record in iter_records(path, start, strict=strict):
        try:
            replay.feed(record)
        except ValueError as err:
            raise CorruptMetadataError(f"metadata record at offset {offset}: {err}", path) from err
        replay.count += 1
    return next_offset


def read_cluster_metadata(directory: str | os.PathLike[str]) -> ClusterMetadata:
    """Rebuild the metadata image of a ``__cluster_metadata-0`` directory (newest snapshot + the log)."""
    root = Path(directory)
    image = _Image()
    replay = _Replay(image)
    try:
        snapshot = latest_snapshot(root)
        start = 0
        if snapshot is not None:
            _read_file(snapshot[0], replay, 0, strict=True)
            start = snapshot[1]
            if replay.pending is not None:
                raise CorruptMetadataError("the snapshot ends inside a metadata transaction", snapshot[0])
            replay.count = 0
        segments = _segments(root)
        position = start
        for index, (base, path) in enumerate(segments):
            following = segments[index + 1][0] if index + 1 < len(segments) else None
            if following is not None and following <= start:
                continue  # entirely before the snapshot
            if base > position:
                raise CorruptMetadataError(
                    f"records {position} to {base - 1} are in neither a snapshot nor the log", path
                )
            position = max(position, _read_file(path, replay, start, strict=following is not None))
    except OSError as err:
        raise CorruptMetadataError(f"cannot read the metadata log: {err}", root) from err
    return ClusterMetadata(
        directory=os.fspath(root),
        snapshot=None if snapshot is None else snapshot[0].name,
        end_offset=position,
        records_read=replay.count,
        topics={t.name: t for t in image.topics_by_id.values()},
        removed_topics=tuple(image.removed),
        topic_configs={t: dict(c) for t, c in image.topic_configs.items() if c},
        broker_configs={b: dict(c) for b, c in image.broker_configs.items() if c},
        feature_levels=dict(image.feature_levels),
        unfinished_transaction=replay.pending is not None,
    )
