"""Listing partition directories: what every job and the ``kafka-log`` data source start from.

A :class:`PartitionTask` is one partition directory of one log dir with that log dir's checkpoint entries
for it: small and picklable, the driver lists and reads the checkpoint files once and ships these.

One listing, two callers that read a path differently, each as its users expect:

* the jobs (:func:`list_log_dirs`): every path is a log dir. A mistake is said at once, in one line
  (:class:`UsageError`): a path that is not a directory, a ``--topic`` that selects nothing, a path
  holding no partition directory (a partition directory itself, the parent of log dirs, an empty one),
  with what the user probably meant. A job that writes gets a failed entry for a log dir it cannot write
  (a read-only backup) or that a running broker holds, and a :class:`ReadOnlyLogDirError` when that
  leaves it nothing to do; dry runs and the report only read.
* the data source (:func:`log_dir_partitions` with ``alone=True``): a path may also be a single
  partition directory, read as that partition of its parent log dir.
"""

from __future__ import annotations

import bisect
import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from kafka_log_core import storage
from kafka_log_core.errors import KafkaLogError, ReadOnlyLogDirError, UsageError, describe_os_error
from kafka_log_core.format.checkpoints import LEADER_EPOCH_CHECKPOINT, PARTITION_METADATA
from kafka_log_core.format.filenames import (
    PartitionDirs,
    TopicPartition,
    list_partition_dirs,
    parse_partition_dir,
    parse_segment_file,
    scan_partition_dirs,
)
from kafka_log_core.log import locks
from kafka_log_core.log.log_dir import PartitionCheckpoints, checkpoint_columns
from kafka_log_core.status import Status


@dataclass(frozen=True, slots=True)
class PartitionTask:
    """One partition directory to work on or read, with its entries of its log dir's checkpoints."""

    log_dir: str
    topic: str
    partition: int
    checkpoints: PartitionCheckpoints

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def directory(self) -> Path:
        return Path(self.log_dir) / self.tp.dir_name


def log_dir_partitions(path: Path, *, alone: bool = False) -> tuple[Path, list[TopicPartition]]:
    """``path`` as (log dir, its partitions, sorted). With ``alone``, a partition directory holding no
    partition directory of its own is read as itself: that partition of its parent log dir."""
    listed = [tp for tp, _ in list_partition_dirs(path)]
    single = parse_partition_dir(path.name)
    if alone and not listed and single is not None:
        return path.parent, [single]
    return path, listed


@dataclass(frozen=True, slots=True)
class Unlisted:
    """A log dir (``partition`` -1) or a partition a job does not work on, and why in one line: ``failed``
    (it cannot), or ``skipped`` (an alias of a directory worked on under another name, a name Kafka would
    not create)."""

    log_dir: str
    reason: str
    topic: str = ""
    partition: int = -1
    status: Status = Status.FAILED


class TaskTable(Sequence[PartitionTask]):
    """The listing's tasks kept as columns, each :class:`PartitionTask` made when it is read (a bin's
    payload, a progress line): a broker's 50,000 partitions cost the driver tens of bytes each, not the
    hundreds of an object each with its checkpoint entries."""

    def __init__(self) -> None:
        self._starts: list[int] = []  # the first task of each log dir's block
        self._blocks: list[tuple[str, bool, list[str], np.ndarray, np.ndarray, np.ndarray]] = []
        self._count = 0

    def add(self, log_dir: str, clean_shutdown: bool, topics: list[str], partitions: np.ndarray,
            offsets: np.ndarray, present: np.ndarray) -> None:  # fmt: skip
        """A log dir's tasks: ``topics[i]``, ``partitions[i]`` and their checkpoint entries
        (:func:`~kafka_log_core.log.log_dir.checkpoint_columns`)."""
        if not topics:
            return
        self._starts.append(self._count)
        self._blocks.append((log_dir, clean_shutdown, topics, partitions, offsets, present))
        self._count += len(topics)

    def __len__(self) -> int:
        return self._count

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += self._count
        if not 0 <= i < self._count:
            raise IndexError(f"task {i} of {self._count}")
        b = bisect.bisect_right(self._starts, i) - 1
        log_dir, clean_shutdown, topics, partitions, offsets, present = self._blocks[b]
        j = i - self._starts[b]
        entries = [v if p else None for v, p in zip(offsets[j].tolist(), present[j].tolist(), strict=True)]
        return PartitionTask(
            log_dir, topics[j], int(partitions[j]), PartitionCheckpoints(*entries, clean_shutdown)
        )


@dataclass(frozen=True)
class Listing:
    """A job's partitions: the tasks, what could not be listed or written, what is not worked on (and
    why), and notes for the user."""

    tasks: Sequence[PartitionTask]
    failed: list[Unlisted]
    notes: list[str]
    skipped: list[Unlisted] = field(default_factory=list)


def list_log_dirs(log_dirs: Sequence[str], pattern: re.Pattern | None, *, writing: bool) -> Listing:
    """One task per selected partition directory of the log dirs (``pattern``: topics, full match).

    A :class:`UsageError` when nothing is selected, saying why; a :class:`ReadOnlyLogDirError` when a job
    that writes can do nothing because no log dir can be written. The tasks' log dirs are absolute: an
    executor resolves a relative path against its own working directory."""
    tasks = TaskTable()
    failed: list[Unlisted] = []
    notes: list[str] = []
    empty: list[str] = []  # why a log dir holds no partition directory
    missed: list[str] = []  # why the pattern selects nothing in a log dir
    refused: list[str] = []  # log dirs a writing job cannot write
    skipped: list[Unlisted] = []  # aliases and names Kafka would not create
    seen_dirs: dict[tuple[int, int], str] = {}  # log dirs by identity: one given twice is listed once
    scans: list[PartitionDirs] = []  # the partition directories of the log dirs so far: aliases across them
    wanted_topics: dict[str, bool] = {}

    def wanted(topic: str) -> bool:
        if pattern is None:
            return True
        if topic not in wanted_topics:
            wanted_topics[topic] = bool(pattern.fullmatch(topic))
        return wanted_topics[topic]

    for log_dir in log_dirs:
        d = Path(log_dir)
        if not storage.is_dir(d):
            raise UsageError(f"--log-dir {log_dir}: not a directory")
        st = storage.stat(d)
        if (st.st_dev, st.st_ino) in seen_dirs:
            notes.append(f"--log-dir {log_dir} is the same directory as --log-dir {seen_dirs[st.st_dev, st.st_ino]}: "
                         "listed once")  # fmt: skip
            continue
        seen_dirs[st.st_dev, st.st_ino] = log_dir
        try:
            scanned = scan_partition_dirs(d)
        except OSError as err:
            failed.append(Unlisted(log_dir, f"cannot list {log_dir}: {describe_os_error(err)}"))
            continue
        listed = np.ones(len(scanned), bool)  # not an alias of a directory of an earlier log dir
        for i, first in _listed_before(scanned, scans):
            listed[i] = False
            if wanted(scanned.topics[i]):
                reason = f"{scanned.path(i)}: the same directory as {first}: an alias, skipped (worked on as {first})"
                skipped.append(
                    Unlisted(log_dir, reason, scanned.topics[i], scanned.partitions[i], Status.SKIPPED)
                )
        scans.append(scanned)
        skipped += [Unlisted(log_dir, s.reason, s.tp.topic, s.tp.partition, Status.SKIPPED)
                    for s in scanned.skipped if wanted(s.tp.topic)]  # fmt: skip
        if not listed.any():
            empty.append(no_partitions_hint(d))
            continue
        chosen = [i for i in np.nonzero(listed)[0].tolist() if wanted(scanned.topics[i])]
        if not chosen:
            missed.append(
                no_topic_hint(pattern, d, [scanned.topics[i] for i in np.nonzero(listed)[0].tolist()])
            )
            continue
        problem = locks.not_writable(d) if writing else None
        if problem:
            refused.append(problem)
            failed.append(Unlisted(log_dir, problem))
            continue
        held = locks.broker_holds(d)
        if held and writing:
            msg = f"{d / '.lock'} is held by a running Kafka broker: stop it before running a job that writes"
            failed += [Unlisted(log_dir, msg, scanned.topics[i], scanned.partitions[i]) for i in chosen]
            continue
        if held:
            notes.append(f"{log_dir}: a running broker holds this log dir; figures may change under us")
        topics = [scanned.topics[i] for i in chosen]
        partitions = np.frombuffer(scanned.partitions, np.int64)[chosen]
        try:
            offsets, present, clean_shutdown = checkpoint_columns(os.fspath(d), topics, partitions)
        except KafkaLogError as err:
            msg = f"log-dir file unreadable (the broker would take this log dir offline): {err}"
            failed += [Unlisted(log_dir, msg, scanned.topics[i], scanned.partitions[i]) for i in chosen]
            continue
        tasks.add(os.path.abspath(log_dir), clean_shutdown, topics, partitions, offsets, present)
    if not tasks and not failed and not skipped:
        raise UsageError("\n".join(empty + missed))
    if not tasks and len(refused) == len(failed):
        raise ReadOnlyLogDirError("\n".join(refused))
    # Among log dirs that have work: one without partitions is said; one without the topic is usual (JBOD).
    return Listing(tasks, failed, notes + empty, skipped)


def _listed_before(scanned: PartitionDirs, scans: Sequence[PartitionDirs]) -> list[tuple[int, Path]]:
    """The entries of ``scanned`` that are a directory an earlier log dir's scan listed (a symlink or bind
    mount across log dirs), each with that first path."""
    if not scans or not len(scanned):
        return []
    mine = _identities(scanned)
    earlier = np.concatenate([_identities(s) for s in scans])
    out = []
    for i in np.nonzero(np.isin(mine, earlier))[0].tolist():
        for before in scans:
            at = np.nonzero(_identities(before) == mine[i])[0]
            if len(at):
                out.append((i, before.path(int(at[0]))))
                break
    return out


_IDENTITY = np.dtype([("device", np.uint64), ("inode", np.uint64)])


def _identities(scanned: PartitionDirs) -> np.ndarray:
    """Each entry's (device, inode) as one value."""
    out = np.empty(len(scanned), _IDENTITY)
    out["device"] = np.frombuffer(scanned.devices, np.uint64)
    out["inode"] = np.frombuffer(scanned.inodes, np.uint64)
    return out


_SHOWN = 20  # topic names listed in a hint


def no_partitions_hint(d: Path) -> str:
    """Why ``d`` holds no partition directory, and what the user probably meant."""
    said = f"no partition directories (<topic>-<partition>) under {d}"
    try:
        names = sorted(storage.listdir(d))
    except OSError as err:
        return f"{said}: {err.strerror}"
    if not names:
        return f"{said}: it is empty"
    if any(parse_segment_file(n) for n in names) or {PARTITION_METADATA, LEADER_EPOCH_CHECKPOINT} & set(
        names
    ):
        return f"{said}; it looks like a partition directory: pass its parent, --log-dir {d.parent}"
    below = []
    for name in names[:200]:
        sub = d / name
        try:
            if storage.is_dir(sub) and list_partition_dirs(sub):
                below.append(sub)
        except OSError:
            continue
    if below:
        shown = " ".join(f"--log-dir {b}" for b in below[:5]) + (" …" if len(below) > 5 else "")
        return f"{said}; it looks like a directory of log dirs: pass them, {shown}"
    if all(n.startswith("__cluster_metadata-") or n.startswith(".") or storage.is_file(d / n) for n in names):
        return f"{said}: only log-dir files and the cluster metadata log"
    return f"{said} (none of its {len(names)} entries is named <topic>-<partition>)"


def no_topic_hint(pattern: re.Pattern | None, d: Path, topics: Sequence[str]) -> str:
    """Why ``--topic`` selects nothing in ``d``: the topics there, and one it matches only in part."""
    names = sorted(set(topics))
    listed = ", ".join(names[:_SHOWN]) + (f" … ({len(names)} topics)" if len(names) > _SHOWN else "")
    regex = pattern.pattern if pattern is not None else ""
    hint = (
        f"no topic under {d} matches --topic {regex!r}: the regex must match the whole topic name; "
        f"topics here: {listed}"
    )
    partly = [t for t in names if pattern is not None and pattern.search(t)]
    if partly:
        hint += f" (it matches only part of {partly[0]}: add .* for the rest)"
    return hint
