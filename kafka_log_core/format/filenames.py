"""Names of partition directories and segment files, as the broker writes and loads them.

Log dir layout::

    <log.dir>/
        meta.properties, .lock, *-checkpoint                     log-dir level files (checkpoints module)
        <topic>-<partition>/                                     one directory per partition
            <20-digit base offset>.log | .index | .timeindex | .txnindex
            <20-digit offset>.snapshot                           producer state (offset = exclusive end)
            <any of the above>.deleted | .cleaned | .swap        markers of an unfinished operation
            leader-epoch-checkpoint, partition.metadata
        <topic>-<p>.<32 hex>-delete | -future | -stray           not live partitions: skipped
        remote-log-index-cache/, __cluster_metadata-0/            not partition logs: skipped

The partition directory name splits at the **last** ``-``, so topics may contain dashes. Segment file
names carry the offset as exactly 20 zero-padded digits; when loading, the broker parses whatever text
precedes the first ``.`` as a long, so shorter digit runs are accepted here too.
"""

from __future__ import annotations

import os
import re
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from kafka_log_core import storage
from kafka_log_core.constants import MAX_INT, MAX_LONG
from kafka_log_core.errors import UsageError
from kafka_log_core.javacompat import parse_java_integer

LOG_SUFFIX = ".log"
INDEX_SUFFIX = ".index"
TIME_INDEX_SUFFIX = ".timeindex"
TXN_INDEX_SUFFIX = ".txnindex"
SNAPSHOT_SUFFIX = ".snapshot"
SEGMENT_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX, SNAPSHOT_SUFFIX)
#: A segment's own files, ``.log`` first (a ``.snapshot`` belongs to the producer state).
SEGMENT_FILE_SUFFIXES = (LOG_SUFFIX, INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)

DELETED_MARKER = ".deleted"
CLEANED_MARKER = ".cleaned"
SWAP_MARKER = ".swap"
MARKERS = (DELETED_MARKER, CLEANED_MARKER, SWAP_MARKER)

# Split cleaning's exchange between its tasks, inside the partition directory it holds. The broker's loader
# reads only the files of a partition directory, never a directory in it; the next job holding the
# partition removes one an interrupted run left.
SPLIT_SCRATCH_DIR = ".kafka-log-jobs-split"

DELETE_DIR_SUFFIX = "-delete"
FUTURE_DIR_SUFFIX = "-future"
STRAY_DIR_SUFFIX = "-stray"
REMOTE_LOG_INDEX_CACHE_DIR = "remote-log-index-cache"
METADATA_TOPIC = "__cluster_metadata"

OFFSET_DIGITS = 20

MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_TOPIC = re.compile(r"[a-zA-Z0-9._-]+")
_SEGMENT_NAME = re.compile(
    r"(?P<digits>[0-9]+)"
    r"(?P<suffix>\.log|\.index|\.timeindex|\.txnindex|\.snapshot)"
    r"(?P<marker>\.deleted|\.cleaned|\.swap)?"
)

_PARTITION = re.compile(r"[0-9]+")
# What may follow the 20 digits of a segment file's name: (suffix, marker) by the text.
_ENDINGS = {
    suffix + (marker or ""): (suffix, marker) for suffix in SEGMENT_SUFFIXES for marker in (None, *MARKERS)
}


@dataclass(frozen=True, slots=True, order=True)
class TopicPartition:
    topic: str
    partition: int

    @property
    def dir_name(self) -> str:
        """The partition directory name the broker uses: ``<topic>-<partition>``."""
        return f"{self.topic}-{self.partition}"

    def __str__(self) -> str:
        return self.dir_name


class SegmentFileName(NamedTuple):
    base_offset: int
    suffix: str  # one of SEGMENT_SUFFIXES
    marker: str | None  # one of MARKERS, or None for a live file


def topic_name_problem(topic: str) -> str | None:
    """Why Kafka would refuse ``topic`` as a topic name, or None when it is legal."""
    if not topic:
        return "a topic name cannot be empty"
    if topic in (".", ".."):
        return f"{topic!r} is not a legal topic name"
    if len(topic) > MAX_TOPIC_NAME_LENGTH:
        return f"topic name has {len(topic)} characters, the maximum is {MAX_TOPIC_NAME_LENGTH}"
    if not _LEGAL_TOPIC.fullmatch(topic):
        bad = sorted({ch for ch in topic if not _LEGAL_TOPIC.fullmatch(ch)})
        return f"topic name {topic!r} contains {bad!r}; legal characters are ASCII letters, digits, '.', '_', '-'"
    return None


def is_valid_topic_name(topic: str) -> bool:
    return topic_name_problem(topic) is None


def validate_topic_name(topic: str) -> None:
    """Raise UsageError naming the problem when Kafka would refuse ``topic``."""
    problem = topic_name_problem(topic)
    if problem is not None:
        raise UsageError(problem)


def filename_prefix(offset: int) -> str:
    """The 20-digit zero-padded prefix of segment and snapshot file names."""
    if not 0 <= offset <= MAX_LONG:
        raise UsageError(f"offset {offset} cannot name a segment file: expected 0..{MAX_LONG}")
    return f"{offset:0{OFFSET_DIGITS}d}"


def segment_file(
    directory: str | os.PathLike[str], base_offset: int, suffix: str, marker: str | None = None
) -> Path:
    """Path of a segment (or snapshot) file, e.g. ``segment_file(d, 1234, ".log", ".cleaned")``."""
    if suffix not in SEGMENT_SUFFIXES:
        raise UsageError(f"unknown segment file suffix {suffix!r}: expected one of {SEGMENT_SUFFIXES}")
    if marker is not None and marker not in MARKERS:
        raise UsageError(f"unknown file marker {marker!r}: expected one of {MARKERS} or None")
    directory = directory if isinstance(directory, Path) else Path(directory)
    return directory / (filename_prefix(base_offset) + suffix + (marker or ""))


def parse_segment_file(name: str) -> SegmentFileName | None:
    """Split a file name into (base offset, suffix, marker), or None for files that are not segment files."""
    ending = _ENDINGS.get(name[OFFSET_DIGITS:])
    if ending is not None and name[:OFFSET_DIGITS].isascii() and name[:OFFSET_DIGITS].isdigit():
        base = int(name[:OFFSET_DIGITS])  # the broker's own names: 20 digits, a suffix, maybe a marker
        return SegmentFileName(base, *ending) if base <= MAX_LONG else None
    match = _SEGMENT_NAME.fullmatch(name)
    if match is None:
        return None
    offset = parse_java_integer(match["digits"])
    if offset is None:
        return None
    return SegmentFileName(offset, match["suffix"], match["marker"])


def base_offset_of(path: str | os.PathLike[str]) -> int:
    """The offset in a segment or snapshot file's name; UsageError for any other file name."""
    parsed = parse_segment_file(Path(path).name)
    if parsed is None:
        raise UsageError(
            f"{os.fspath(path)}: the file name carries no base offset (expected <digits>{SEGMENT_SUFFIXES})"
        )
    return parsed.base_offset


def parse_partition_dir(name: str) -> TopicPartition | None:
    """The partition a directory name belongs to, or None when the broker would not load it as a live log.

    Skipped: ``-delete`` / ``-future`` / ``-stray`` directories, ``remote-log-index-cache``, every
    ``__cluster_metadata`` partition (KRaft metadata log, different files) and names that do not have the
    ``<topic>-<partition>`` form (the broker refuses to start on those; an offline tool just leaves them).
    """
    if name == REMOTE_LOG_INDEX_CACHE_DIR or name.endswith(
        (DELETE_DIR_SUFFIX, FUTURE_DIR_SUFFIX, STRAY_DIR_SUFFIX)
    ):
        return None
    topic, dash, partition = name.rpartition("-")
    if not dash or not topic or not _PARTITION.fullmatch(partition):
        return None
    number = parse_java_integer(partition, 0, MAX_INT)
    if number is None or topic == METADATA_TOPIC:
        return None
    return TopicPartition(topic, number)


@dataclass(frozen=True, slots=True)
class SkippedDir:
    """A directory named like a partition that is not one to work on, and why (one line)."""

    tp: TopicPartition
    path: Path
    reason: str


@dataclass(frozen=True, slots=True)
class PartitionDirs:
    """A log dir's partition directories as columns (a broker's 50,000 without objects of their own): one
    entry per directory on disk, sorted by topic and partition, each with its topic (each name one object),
    partition and identity (device and inode); and what was skipped, with the reason."""

    log_dir: str
    topics: list[str]
    partitions: array  # of int64
    devices: array  # of uint64
    inodes: array  # of uint64
    odd_names: dict[
        int, str
    ]  # entry -> its directory name, where not ``<topic>-<partition>`` (leading zeros)
    skipped: list[SkippedDir]

    def __len__(self) -> int:
        return len(self.topics)

    def name(self, i: int) -> str:
        return self.odd_names.get(i) or f"{self.topics[i]}-{self.partitions[i]}"

    def path(self, i: int) -> Path:
        return Path(os.path.join(self.log_dir, self.name(i)))

    def tp(self, i: int) -> TopicPartition:
        return TopicPartition(self.topics[i], self.partitions[i])

    @property
    def found(self) -> list[tuple[TopicPartition, Path]]:
        """Each directory's partition and path, in order."""
        return [(self.tp(i), self.path(i)) for i in range(len(self))]


def scan_partition_dirs(log_dir: str | os.PathLike[str]) -> PartitionDirs:
    """Every live partition directory of a log dir, identified by what it is on disk, not by its name.

    Skipped, with the reason: a name whose topic Kafka would not create (``Topic.validate``: ``.``, ``..``,
    a character outside ``[a-zA-Z0-9._-]``, more than 249 characters: no topic can hold data there), and
    an alias -- a second name for a directory already listed (a symlink such as ``x-0 -> orders-0``, a
    bind mount): one directory, one partition, worked on once, under the name that is not a symlink
    (else the first)."""
    root = os.fspath(log_dir)
    topics: list[str] = []
    partitions, devices, inodes, links = array("q"), array("Q"), array("Q"), bytearray()
    odd: dict[int, str] = {}
    names: dict[str, str] = {}  # each topic name once
    skipped: list[SkippedDir] = []
    with storage.scandir(log_dir) as entries:
        for entry in entries:
            if not entry.is_dir():
                continue
            tp = parse_partition_dir(entry.name)
            if tp is None:
                continue
            problem = topic_name_problem(tp.topic)
            if problem is not None:
                reason = f"{entry.path}: not a partition of a topic Kafka could create ({problem}): skipped"
                skipped.append(SkippedDir(tp, Path(entry.path), reason))
                continue
            st = entry.stat()  # the directory itself, symlinks followed
            if entry.name != tp.dir_name:
                odd[len(topics)] = entry.name
            topics.append(names.setdefault(tp.topic, tp.topic))
            partitions.append(tp.partition)
            devices.append(st.st_dev)
            inodes.append(st.st_ino)
            links.append(entry.is_symlink())
    scanned = PartitionDirs(root, topics, partitions, devices, inodes, odd, skipped)
    aliases = _aliases(scanned, links)
    skipped += [s for _, s in aliases]
    # Sorted by (topic, partition); of two directories of one partition (a name with leading zeros), the
    # one named as the broker names it is the one worked on, and the other is skipped: Kafka refuses to
    # load both (LogManager: "Duplicate log directories found").
    rank = {topic: r for r, topic in enumerate(sorted(names))}
    extra_zeros = np.zeros(len(topics), np.int64)
    for i, name in odd.items():
        extra_zeros[i] = len(name) - len(f"{topics[i]}-{partitions[i]}")
    order = np.lexsort((
        extra_zeros, np.frombuffer(bytes(links), np.uint8), np.frombuffer(partitions, np.int64),
        np.fromiter((rank[t] for t in topics), np.int64, len(topics)),
    ))  # fmt: skip
    kept = np.ones(len(topics), bool)
    kept[[i for i, _ in aliases]] = False
    order = order[kept[order]]
    twice = [
        k
        for k in range(1, len(order))
        if extra_zeros[order[k]] and scanned.tp(int(order[k])) == scanned.tp(int(order[k - 1]))
    ]
    for k in twice:
        i = int(order[k])
        reason = (f"{scanned.path(i)}: a second directory of partition {scanned.tp(i)}: skipped (Kafka refuses "
                  "to load two directories of one partition)")  # fmt: skip
        skipped.append(SkippedDir(scanned.tp(i), scanned.path(i), reason))
    order = np.delete(order, twice)
    # A directory named otherwise than the broker names its partition (``orders-08``, ``orders-+8``), with no
    # twin named as it should be: the broker would read it as that partition, but every step here finds a
    # partition's files at ``<log dir>/<topic>-<partition>``. Skipped, saying how to work on it, rather
    # than worked on under a name that is not there.
    renamed = [k for k in range(len(order)) if int(order[k]) in odd]
    for k in renamed:
        i = int(order[k])
        tp = scanned.tp(i)
        reason = (f"{scanned.path(i)}: the directory of partition {tp}, not named as the broker names it "
                  f"({tp.dir_name}): skipped (rename it to {tp.dir_name} to work on it)")  # fmt: skip
        skipped.append(SkippedDir(tp, scanned.path(i), reason))
    order = np.delete(order, renamed)
    skipped.sort(key=lambda s: s.tp)
    at = order.tolist()
    return PartitionDirs(
        root, [topics[i] for i in at], _taken(partitions, order), _taken(devices, order), _taken(inodes, order),
        {}, skipped,  # every entry left is named <topic>-<partition>: the others are skipped above
    )  # fmt: skip


def _taken(column: array, order: np.ndarray) -> array:
    """``column``'s values in ``order`` (an array of the same type)."""
    out = array(column.typecode)
    out.frombytes(np.frombuffer(column, np.dtype(column.typecode))[order].tobytes())
    return out


def _aliases(scanned: PartitionDirs, links: bytearray) -> list[tuple[int, SkippedDir]]:
    """The entries that are a second name of a directory listed under another (sharing its device and
    inode), each with its skip: of each directory, the name that is not a symlink is kept, else the first
    by name."""
    if len(scanned) < 2:
        return []
    devices, inodes = np.frombuffer(scanned.devices, np.uint64), np.frombuffer(scanned.inodes, np.uint64)
    order = np.lexsort((inodes, devices))
    same = (devices[order][1:] == devices[order][:-1]) & (inodes[order][1:] == inodes[order][:-1])
    if not same.any():
        return []
    groups: dict[tuple[int, int], list[int]] = {}
    for k in np.nonzero(same)[0]:
        for i in (int(order[k]), int(order[k + 1])):
            group = groups.setdefault((scanned.devices[i], scanned.inodes[i]), [])
            if i not in group:
                group.append(i)
    out = []
    for group in groups.values():
        first, *others = sorted(group, key=lambda i: (links[i], scanned.name(i)))
        for i in others:
            path = scanned.path(i)
            how = f"a symlink to {storage.readlink(path)}" if links[i] else "a second name (a bind mount)"
            kept = scanned.name(first)
            reason = f"{path}: {how}, the same directory as {kept}: an alias, skipped (worked on as {kept})"
            out.append((i, SkippedDir(scanned.tp(i), path, reason)))
    return sorted(out, key=lambda item: (links[item[0]], scanned.name(item[0])))


def list_partition_dirs(log_dir: str | os.PathLike[str]) -> list[tuple[TopicPartition, Path]]:
    """Every live partition directory of a log dir, sorted by (topic, partition); what
    :func:`scan_partition_dirs` skips is left out."""
    return scan_partition_dirs(log_dir).found


@dataclass(frozen=True, slots=True)
class DirFiles:
    """One listing of a partition directory (one ``scandir``), for every check that reads its names: the
    leftovers' plan, the loader's recovery check, opening the log and its indexes. A directory entry knows
    its type from the listing and keeps its ``stat`` once asked, so each name is parsed once and no file
    is looked up again by path. Valid until something changes the directory: list it again then."""

    path: str
    entries: dict[str, os.DirEntry]  # every entry, by name
    segment_files: dict[str, SegmentFileName]  # the entries named like segment (or snapshot) files

    @classmethod
    def scan(cls, directory: str | os.PathLike[str]) -> DirFiles:
        entries: dict[str, os.DirEntry] = {}
        segment_files: dict[str, SegmentFileName] = {}
        with storage.scandir(directory) as listed:
            for entry in listed:
                entries[entry.name] = entry
                parsed = parse_segment_file(entry.name)
                if parsed is not None:
                    segment_files[entry.name] = parsed
        return cls(os.fspath(directory), entries, segment_files)

    def segment_entry(self, base_offset: int, suffix: str) -> os.DirEntry | None:
        """The entry of a live segment file, named as the broker names it (None when not listed)."""
        return self.entries.get(filename_prefix(base_offset) + suffix)

    def segment_bases(self) -> list[int]:
        """:func:`list_segment_bases` of the listed directory."""
        bases = []
        for name, parsed in self.segment_files.items():
            entry = self.entries[name]
            if not entry.is_file():
                storage.check_regular(entry.path, _stat_or_lstat(entry))
            if parsed.suffix == LOG_SUFFIX and parsed.marker is None:
                bases.append(parsed.base_offset)
        return sorted(bases)


def list_segment_bases(directory: str | os.PathLike[str]) -> list[int]:
    """Base offsets of the live ``.log`` files of a partition directory (no marker suffix), sorted.

    Every entry named like a segment file (live or marked) must be a regular file (symlinks followed):
    a FIFO, socket, device or directory with such a name is refused here, before anything opens it."""
    return DirFiles.scan(directory).segment_bases()


def _stat_or_lstat(entry: os.DirEntry) -> os.stat_result:
    try:
        return entry.stat()
    except OSError:  # a dangling symlink: refused as what it is
        return entry.stat(follow_symlinks=False)
