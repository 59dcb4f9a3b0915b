"""Text checkpoint files: offset checkpoints, leader-epoch-checkpoint, partition.metadata, meta.properties.

Offset checkpoints (log-dir root: ``recovery-point-offset-checkpoint``, ``log-start-offset-checkpoint``,
``replication-offset-checkpoint``, ``cleaner-offset-checkpoint``) and ``leader-epoch-checkpoint``
(partition dir) share one grammar, UTF-8, lines ending in ``\\n`` (``\\r`` and ``\\r\\n`` also end a line
when reading)::

    0                               version, must be exactly 0
    <N>                             number of entry lines
    <topic> <partition> <offset>    x N, split on runs of whitespace, exactly 3 fields
    <epoch> <start_offset>          x N in leader-epoch-checkpoint, exactly 2 fields

An empty file, or a version line without a count line, holds no entries. Numbers follow Java's
``Integer.parseInt`` / ``Long.parseLong`` (optional sign, no surrounding blanks, no ``_``). A line
starting with whitespace has an empty first field and is malformed, like in the broker.

``partition.metadata``: ``version: 0\\ntopic_id: <22-char base64url uuid>`` (no trailing newline); each
line splits at the first ``:`` followed by whitespace. ``meta.properties``: Java properties (ISO-8859-1).

Every write goes through ``<name>.tmp`` + fsync + rename + directory fsync (:mod:`fsutil`).
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from kafka_log_core import fsutil, storage
from kafka_log_core.errors import CorruptCheckpointError
from kafka_log_core.format.filenames import TopicPartition
from kafka_log_core.format.properties import MalformedEscapeError, parse_java_properties
from kafka_log_core.javacompat import parse_java_integer

RECOVERY_POINT_CHECKPOINT = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT = "log-start-offset-checkpoint"
REPLICATION_CHECKPOINT = "replication-offset-checkpoint"
CLEANER_CHECKPOINT = "cleaner-offset-checkpoint"
LEADER_EPOCH_CHECKPOINT = "leader-epoch-checkpoint"
PARTITION_METADATA = "partition.metadata"
META_PROPERTIES = "meta.properties"
CHECKPOINT_VERSION = 0

StrPath = str | os.PathLike[str]
_EOL = re.compile(rb"\r\n|\r|\n")
_JAVA_WS = "[ \t\n\x0b\f\r]"  # Java regex \s
_FIELDS = re.compile(_JAVA_WS + "+")
_META_SPLIT = re.compile(":" + _JAVA_WS + "+")
_BASE64URL = re.compile(r"[A-Za-z0-9_-]*")
_INT = (-(2**31), 2**31 - 1)
_LONG = (-(2**63), 2**63 - 1)


@dataclass(frozen=True, slots=True)
class EpochEntry:
    epoch: int
    start_offset: int


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    version: int
    topic_id: str  # 22-char unpadded base64url of the 16-byte uuid


@dataclass(frozen=True, slots=True)
class MetaProperties:
    version: int
    cluster_id: str | None
    node_id: int | None  # broker.id in v0 (optional), node.id in v1
    directory_id: str | None


# ---------------------------------------------------------------- shared grammar


def _lines(data: bytes, path: StrPath | None) -> list[tuple[int, str]]:
    """(byte position, text) of each line, split like Java's BufferedReader.readLine."""
    raw: list[tuple[int, bytes]] = []
    start = 0
    for match in _EOL.finditer(data):
        raw.append((start, data[start : match.start()]))
        start = match.end()
    if start < len(data):
        raw.append((start, data[start:]))
    lines = []
    for number, (position, line) in enumerate(raw, 1):
        try:
            lines.append((position, line.decode("utf-8")))
        except UnicodeDecodeError as err:
            raise CorruptCheckpointError(
                f"line {number}: expected UTF-8 text, found byte {line[err.start]:#04x}",
                path,
                position + err.start,
            ) from err
    return lines


def _java_number(text: str, bounds: tuple[int, int]) -> int | None:
    return parse_java_integer(text, *bounds)


def _java_split(line: str) -> list[str]:
    fields = _FIELDS.split(line)
    while fields and fields[-1] == "":
        fields.pop()
    return fields


def _entry_lines(data: bytes, path: StrPath | None, what: str) -> list[tuple[int, int, list[str]]]:
    """Check the version/count header; return (line number, byte position, fields) per entry line."""
    lines = _lines(data, path)
    if not lines:
        return []
    position, text = lines[0]
    version = _java_number(text, _INT)
    if version is None:
        raise CorruptCheckpointError(f"line 1: expected the version number, found {text!r}", path, position)
    if version != CHECKPOINT_VERSION:
        raise CorruptCheckpointError(
            f"line 1: expected version {CHECKPOINT_VERSION}, found version {version}", path, position
        )
    if len(lines) == 1:
        return []
    position, text = lines[1]
    expected = _java_number(text, _INT)
    if expected is None or expected < 0:
        raise CorruptCheckpointError(f"line 2: expected the entry count, found {text!r}", path, position)
    entries = [(number, pos, _java_split(line)) for number, (pos, line) in enumerate(lines[2:], 3)]
    if len(entries) != expected:
        raise CorruptCheckpointError(
            f"expected {expected} {what} lines after the count line, found {len(entries)}",
            path,
            lines[-1][0] if len(entries) > expected else len(data),
        )
    return entries


def _malformed(
    number: int, position: int, fields: list[str], expected: str, path: StrPath | None
) -> Exception:
    return CorruptCheckpointError(
        f"line {number}: expected {expected}, found {' '.join(fields)!r}", path, position
    )


# ---------------------------------------------------------------- offset checkpoints


def parse_offset_checkpoint(data: bytes, path: StrPath | None = None) -> dict[TopicPartition, int]:
    """Entries of an offset checkpoint; a partition listed twice keeps its last offset, as in the broker."""
    offsets: dict[TopicPartition, int] = {}
    for number, position, fields in _entry_lines(data, path, "'<topic> <partition> <offset>'"):
        partition = _java_number(fields[1], _INT) if len(fields) == 3 else None
        offset = _java_number(fields[2], _LONG) if len(fields) == 3 else None
        if partition is None or offset is None:
            raise _malformed(number, position, fields, "'<topic> <partition:int32> <offset:int64>'", path)
        offsets[TopicPartition(fields[0], partition)] = offset
    return offsets


# A checkpoint as the broker writes it: version 0, the count, then "<topic> <partition> <offset>" lines, each
# ending in "\n", in ASCII, the numbers in ranges no conversion needs to check (at most 9 and 18 digits).
_BROKER_HEADER = re.compile(rb"0\n(0|[1-9][0-9]{0,8})\n")
_BROKER_ENTRY = re.compile(rb"([A-Za-z0-9._-]+) ([0-9]{1,9}) (-?[0-9]{1,18})\n")


def iter_offset_checkpoint(data: bytes, path: StrPath | None = None) -> Iterator[tuple[str, int, int]]:
    """The entries of an offset checkpoint as (topic, partition, offset), without a dict or an object per
    line: for a broker's 50,000 partitions. Where a partition is listed twice the last entry is the one
    that counts (as in :func:`parse_offset_checkpoint`, the same entries and the same errors: a file not
    written as the broker writes it is read by that function)."""
    header = _BROKER_HEADER.match(data)
    if header is None or not _broker_written(data, header.end(), int(header[1])):
        for tp, offset in parse_offset_checkpoint(data, path).items():
            yield tp.topic, tp.partition, offset
        return
    for m in _BROKER_ENTRY.finditer(data, header.end()):
        yield m[1].decode("ascii"), int(m[2]), int(m[3])


def _broker_written(data: bytes, position: int, count: int) -> bool:
    """Every line after the header is one entry, back to back to the end, and there are ``count``."""
    found = 0
    for m in _BROKER_ENTRY.finditer(data, position):
        if m.start() != position:
            return False
        position = m.end()
        found += 1
    return position == len(data) and found == count


def read_offset_checkpoint(path: StrPath) -> dict[TopicPartition, int]:
    """Read an offset checkpoint file; a missing file has no entries (the broker creates it empty)."""
    target = Path(path)
    return parse_offset_checkpoint(storage.read_regular(target), path) if storage.exists(target) else {}


def format_offset_checkpoint(offsets: Mapping[TopicPartition, int]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(offsets))]
    for tp, offset in offsets.items():
        if not tp.topic or re.search(_JAVA_WS, tp.topic):
            raise CorruptCheckpointError(
                f"topic {tp.topic!r} cannot be written: it is empty or holds whitespace"
            )
        _check_range("partition", tp.partition, _INT, tp)
        _check_range("offset", offset, _LONG, tp)
        lines.append(f"{tp.topic} {tp.partition} {offset}")
    return ("\n".join(lines) + "\n").encode("utf-8")


def write_offset_checkpoint(path: StrPath, offsets: Mapping[TopicPartition, int]) -> None:
    """Replace the whole checkpoint atomically (entries in the mapping's order)."""
    fsutil.atomic_write_bytes(path, format_offset_checkpoint(offsets))


def _check_range(name: str, value: int, bounds: tuple[int, int], owner: object) -> None:
    if not bounds[0] <= value <= bounds[1]:
        raise CorruptCheckpointError(f"{owner}: {name} {value} is outside {bounds[0]}..{bounds[1]}")


# ---------------------------------------------------------------- leader-epoch-checkpoint


def parse_leader_epoch_checkpoint(data: bytes, path: StrPath | None = None) -> list[EpochEntry]:
    """The epoch cache the broker builds from this file: every line assigned in order (see :func:`assign`)."""
    cache: list[EpochEntry] = []
    for number, position, fields in _entry_lines(data, path, "'<epoch> <start_offset>'"):
        epoch = _java_number(fields[0], _INT) if len(fields) == 2 else None
        start = _java_number(fields[1], _LONG) if len(fields) == 2 else None
        if epoch is None or start is None:
            raise _malformed(number, position, fields, "'<epoch:int32> <start_offset:int64>'", path)
        if epoch < 0 or start < 0:
            raise CorruptCheckpointError(
                f"line {number}: expected a non-negative epoch and start offset, found {epoch} {start}",
                path,
                position,
            )
        cache = assign(cache, EpochEntry(epoch, start))
    return cache


def read_leader_epoch_checkpoint(path: StrPath) -> list[EpochEntry]:
    target = Path(path)
    return parse_leader_epoch_checkpoint(storage.read_regular(target), path) if storage.exists(target) else []


def assign(cache: Sequence[EpochEntry], entry: EpochEntry) -> list[EpochEntry]:
    """LeaderEpochFileCache.assign: add ``entry``, dropping latest entries that would break monotonicity.

    Nothing changes when the latest entry has the same epoch and a start offset <= the new one. Otherwise
    the latest entries whose epoch >= or start offset >= the new entry's are dropped, then it is appended.
    """
    if entry.epoch < 0 or entry.start_offset < 0:
        raise CorruptCheckpointError(f"leader epoch entry {entry} has a negative epoch or start offset")
    result = list(cache)
    if result and result[-1].epoch == entry.epoch and entry.start_offset >= result[-1].start_offset:
        return result
    while result and (result[-1].epoch >= entry.epoch or result[-1].start_offset >= entry.start_offset):
        result.pop()
    result.append(entry)
    return result


def truncate_from_start(entries: Sequence[EpochEntry], new_log_start_offset: int) -> list[EpochEntry]:
    """Drop entries starting at or below the new log start offset; the last dropped epoch is re-inserted
    starting exactly at it (cleaner-and-retention D7)."""
    result = list(entries)
    dropped: EpochEntry | None = None
    while result and result[0].start_offset <= new_log_start_offset:
        dropped = result.pop(0)
    if dropped is not None:
        result.insert(0, EpochEntry(dropped.epoch, new_log_start_offset))
    return result


def truncate_from_end(entries: Sequence[EpochEntry], end_offset: int) -> list[EpochEntry]:
    """Drop the latest entries whose start offset is >= ``end_offset`` (nothing when ``end_offset`` < 0)."""
    result = list(entries)
    while end_offset >= 0 and result and result[-1].start_offset >= end_offset:
        result.pop()
    return result


def format_leader_epoch_checkpoint(entries: Sequence[EpochEntry]) -> bytes:
    lines = [str(CHECKPOINT_VERSION), str(len(entries))]
    previous: EpochEntry | None = None
    for entry in entries:
        _check_range("epoch", entry.epoch, (0, _INT[1]), entry)
        _check_range("start offset", entry.start_offset, (0, _LONG[1]), entry)
        if previous is not None and (
            entry.epoch <= previous.epoch or entry.start_offset <= previous.start_offset
        ):
            raise CorruptCheckpointError(
                f"leader epoch entries must strictly increase in epoch and start offset: {entry} follows {previous}"
            )
        lines.append(f"{entry.epoch} {entry.start_offset}")
        previous = entry
    return ("\n".join(lines) + "\n").encode("utf-8")


def write_leader_epoch_checkpoint(path: StrPath, entries: Sequence[EpochEntry]) -> None:
    fsutil.atomic_write_bytes(path, format_leader_epoch_checkpoint(entries))


# ---------------------------------------------------------------- partition.metadata


def decode_uuid(text: str) -> bytes:
    """Kafka's Uuid.fromString: base64url, padding optional, at most 24 characters, 16 bytes."""
    body = text.rstrip("=")
    padding = len(text) - len(body)
    if len(text) > 24 or padding > 2 or not _BASE64URL.fullmatch(body) or (padding and len(text) % 4):
        raise ValueError(f"{text!r} is not a base64url uuid")
    try:
        raw = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except binascii.Error as err:
        raise ValueError(f"{text!r} is not a base64url uuid: {err}") from err
    if len(raw) != 16:
        raise ValueError(f"{text!r} decodes to {len(raw)} bytes, expected 16")
    return raw


def encode_uuid(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def parse_partition_metadata(data: bytes, path: StrPath | None = None) -> PartitionMetadata:
    lines = _lines(data, path)
    values = []
    for number, key in ((1, "version"), (2, "topic_id")):
        position, text = lines[number - 1] if len(lines) >= number else (len(data), None)
        parts = _META_SPLIT.split(text, maxsplit=1) if text is not None else []
        if len(parts) != 2 or parts[0] != key:
            raise CorruptCheckpointError(
                f"line {number}: expected '{key}: <value>', found {text!r}", path, position
            )
        values.append((number, position, parts[1]))
    (_, position, version_text), (_, id_position, topic_id) = values
    version = _java_number(version_text, _INT)
    if version is None or version < 0:
        raise CorruptCheckpointError(
            f"line 1: expected a version >= 0, found {version_text!r}", path, position
        )
    try:
        raw = decode_uuid(topic_id)
    except ValueError as err:
        raise CorruptCheckpointError(
            f"line 2: expected a topic id, found {topic_id!r} ({err})", path, id_position
        ) from err
    if raw == bytes(16):
        raise CorruptCheckpointError("line 2: the all-zero topic id is not valid", path, id_position)
    return PartitionMetadata(version, encode_uuid(raw))


def read_partition_metadata(path: StrPath) -> PartitionMetadata:
    return parse_partition_metadata(storage.read_regular(path), path)


def format_partition_metadata(topic_id: str, version: int = 0) -> bytes:
    raw = decode_uuid(topic_id)
    if raw == bytes(16):
        raise CorruptCheckpointError("the all-zero topic id cannot be written")
    return f"version: {version}\ntopic_id: {encode_uuid(raw)}".encode()


def write_partition_metadata(path: StrPath, topic_id: str) -> None:
    fsutil.atomic_write_bytes(path, format_partition_metadata(topic_id))


# ---------------------------------------------------------------- meta.properties (read only)


def parse_meta_properties(data: bytes, path: StrPath | None = None) -> MetaProperties:
    """MetaProperties.Builder(Properties): version 0 (default) or 1; v1 needs node.id and cluster.id."""
    try:
        props = parse_java_properties(data.decode("latin-1"))
    except MalformedEscapeError as err:
        raise CorruptCheckpointError(str(err), path) from err
    version_text = props.get("version", "0")
    version = _java_number(version_text.strip("".join(map(chr, range(33)))), _INT)
    if version not in (0, 1):
        raise CorruptCheckpointError(f"version: expected 0 or 1, found {version_text!r}", path)
    id_key = "broker.id" if version == 0 else "node.id"
    node_id = None
    if id_key in props or version == 1:
        node_id = _java_number(props.get(id_key, ""), _INT)
        if node_id is None:
            raise CorruptCheckpointError(f"{id_key}: expected an int32, found {props.get(id_key)!r}", path)
    cluster_id = props.get("cluster.id")
    if version == 1 and cluster_id is None:
        raise CorruptCheckpointError("cluster.id: required in version 1, found none", path)
    directory_id = props.get("directory.id")
    if directory_id is not None:
        try:
            directory_id = encode_uuid(decode_uuid(directory_id))
        except ValueError as err:
            raise CorruptCheckpointError(
                f"directory.id: expected a uuid, found {directory_id!r}", path
            ) from err
    return MetaProperties(version, cluster_id, node_id, directory_id)


def read_meta_properties(path: StrPath) -> MetaProperties:
    return parse_meta_properties(storage.read_regular(path), path)
