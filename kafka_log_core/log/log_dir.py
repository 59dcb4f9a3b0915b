"""The files at the top of a Kafka ``log.dirs`` entry, beside the partition directories.

    meta.properties                  node.id, cluster.id, directory.id (KRaft, version 1)
    .lock                            held by a running broker (see ``locks``)
    .kafka_cleanshutdown             present after a clean shutdown (JSON: version, brokerEpoch)
    recovery-point-offset-checkpoint, log-start-offset-checkpoint,
    replication-offset-checkpoint (high watermarks), cleaner-offset-checkpoint

:class:`LogDirState` reads them once per log dir; the driver's listing reads each partition's entries as
columns (:func:`checkpoint_columns`) and ships each partition its own (a job that writes reads its
partition's entries again under the partition's lock, :func:`read_partition_checkpoints`);
:func:`write_log_dir_checkpoints` makes a directory look like a cleanly stopped broker's (tests, sample,
benchmark).
"""

from __future__ import annotations

import json
import os
import random
import time
from array import array
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from kafka_log_core import fsutil, storage
from kafka_log_core.errors import UsageError
from kafka_log_core.format import checkpoints
from kafka_log_core.format.filenames import TopicPartition, list_partition_dirs, list_segment_bases
from kafka_log_core.log import checkpoint_files
from kafka_log_core.log.locks import LOCK_FILE, checkpoint_lock
from kafka_log_core.log.segment import Segment

RECOVERY_POINT_CHECKPOINT = checkpoints.RECOVERY_POINT_CHECKPOINT
LOG_START_OFFSET_CHECKPOINT = checkpoints.LOG_START_OFFSET_CHECKPOINT
REPLICATION_OFFSET_CHECKPOINT = checkpoints.REPLICATION_CHECKPOINT
CLEANER_OFFSET_CHECKPOINT = checkpoints.CLEANER_CHECKPOINT
CLEAN_SHUTDOWN_FILE = ".kafka_cleanshutdown"
_METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"  # Uuid.METADATA_TOPIC_ID, reserved


@dataclass(frozen=True, slots=True)
class PartitionCheckpoints:
    """This partition's entries of the log-dir checkpoints (None = no entry). Small and picklable:
    the driver reads the files once and ships these to the executors."""

    recovery_point: int | None = None
    log_start_offset: int | None = None
    high_watermark: int | None = None
    cleaner_offset: int | None = None
    clean_shutdown: bool = False


@dataclass(frozen=True)
class LogDirState:
    """The log-dir level files, read once: checkpoints and the clean-shutdown marker."""

    log_dir: Path
    recovery_points: dict[TopicPartition, int]
    log_start_offsets: dict[TopicPartition, int]
    high_watermarks: dict[TopicPartition, int]
    cleaner_offsets: dict[TopicPartition, int]
    clean_shutdown: bool

    @classmethod
    def read(cls, log_dir: str | os.PathLike[str]) -> LogDirState:
        """The log dir's files; a ``meta.properties`` the broker could not read (an unknown version, a
        node.id that is no int32: ``MetaProperties.Builder``) is refused as the checkpoints are: the broker
        takes such a log dir offline (``MetaPropertiesEnsemble.Loader`` puts it in its error log dirs)."""
        d = Path(log_dir)
        if (d / checkpoints.META_PROPERTIES).exists():
            checkpoints.read_meta_properties(d / checkpoints.META_PROPERTIES)
        return cls(
            d,
            checkpoints.read_offset_checkpoint(d / RECOVERY_POINT_CHECKPOINT),
            checkpoints.read_offset_checkpoint(d / LOG_START_OFFSET_CHECKPOINT),
            checkpoints.read_offset_checkpoint(d / REPLICATION_OFFSET_CHECKPOINT),
            checkpoints.read_offset_checkpoint(d / CLEANER_OFFSET_CHECKPOINT),
            storage.exists(d / CLEAN_SHUTDOWN_FILE),
        )

    def for_partition(self, tp: TopicPartition) -> PartitionCheckpoints:
        return PartitionCheckpoints(
            recovery_point=self.recovery_points.get(tp),
            log_start_offset=self.log_start_offsets.get(tp),
            high_watermark=self.high_watermarks.get(tp),
            cleaner_offset=self.cleaner_offsets.get(tp),
            clean_shutdown=self.clean_shutdown,
        )


#: The offset checkpoints in the order of :func:`checkpoint_columns`' columns (PartitionCheckpoints' fields).
OFFSET_CHECKPOINTS = (
    RECOVERY_POINT_CHECKPOINT, LOG_START_OFFSET_CHECKPOINT, REPLICATION_OFFSET_CHECKPOINT, CLEANER_OFFSET_CHECKPOINT,
)  # fmt: skip


def checkpoint_columns(
    log_dir: str, topics: Sequence[str], partitions: np.ndarray
) -> tuple[np.ndarray, np.ndarray, bool]:
    """The entries of the partitions (``topics[i]``, ``partitions[i]``) in the log dir's four offset
    checkpoints (:data:`OFFSET_CHECKPOINTS`), as :meth:`LogDirState.read` reads them (the same errors),
    without a dict per file: the offsets (an int64 array, a column per file), where each partition has
    an entry (a bool array alike), and the clean-shutdown marker. A broker's 50,000 partitions cost tens
    of bytes each here."""
    if storage.exists(os.path.join(log_dir, checkpoints.META_PROPERTIES)):
        checkpoints.read_meta_properties(os.path.join(log_dir, checkpoints.META_PROPERTIES))
    codes: dict[str, int] = {}
    wanted = _entry_keys(np.fromiter((codes.setdefault(t, len(codes)) for t in topics), np.int64, len(topics)),
                         np.asarray(partitions, np.int64))  # fmt: skip
    offsets = np.zeros((len(topics), len(OFFSET_CHECKPOINTS)), np.int64)
    present = np.zeros((len(topics), len(OFFSET_CHECKPOINTS)), bool)
    for column, name in enumerate(OFFSET_CHECKPOINTS):
        path = os.path.join(log_dir, name)
        if not storage.exists(path):
            continue
        keys, values = array("q"), array("q")
        for topic, partition, offset in checkpoints.iter_offset_checkpoint(storage.read_regular(path), path):
            code = codes.get(topic)
            if code is not None:  # a topic not listed has no directory to read this entry
                keys.append(code << 32 | (partition + 2**31))  # as _entry_keys
                values.append(offset)
        order = np.argsort(np.frombuffer(keys, np.int64), kind="stable")
        sorted_keys = np.frombuffer(keys, np.int64)[order]
        at = (
            np.searchsorted(sorted_keys, wanted, side="right") - 1
        )  # a partition listed twice: its last entry
        hit = (
            (at >= 0) & (sorted_keys[np.maximum(at, 0)] == wanted)
            if len(keys)
            else np.zeros(len(wanted), bool)
        )
        offsets[hit, column] = np.frombuffer(values, np.int64)[order][at[hit]]
        present[:, column] = hit
    return offsets, present, storage.exists(os.path.join(log_dir, CLEAN_SHUTDOWN_FILE))


def _entry_keys(codes: np.ndarray, partitions: np.ndarray) -> np.ndarray:
    """One int64 per (topic code, partition): a Java int partition shifted to be non-negative."""
    return codes << 32 | (partitions + 2**31)


def read_partition_checkpoints(log_dir: str | os.PathLike[str], tp: TopicPartition) -> PartitionCheckpoints:
    """``tp``'s entries as the log-dir files hold them now. A job that writes reads them again once it holds
    the partition: another job may have moved them since the driver's listing. The files are parsed once
    per process and again only where they change (:mod:`checkpoint_files`)."""
    d = os.fspath(log_dir)  # paths as strings: this runs once per partition of a job that writes
    return PartitionCheckpoints(
        recovery_point=checkpoint_files.entry(os.path.join(d, RECOVERY_POINT_CHECKPOINT), tp),
        log_start_offset=checkpoint_files.entry(os.path.join(d, LOG_START_OFFSET_CHECKPOINT), tp),
        high_watermark=checkpoint_files.entry(os.path.join(d, REPLICATION_OFFSET_CHECKPOINT), tp),
        cleaner_offset=checkpoint_files.entry(os.path.join(d, CLEANER_OFFSET_CHECKPOINT), tp),
        clean_shutdown=storage.exists(os.path.join(d, CLEAN_SHUTDOWN_FILE)),
    )


#: A new checkpoint entry: the offset, None for no entry, or a function of the entry there now.
EntryChange = int | None | Callable[[int | None], int | None]


def update_checkpoints(
    log_dir: str | os.PathLike[str], tp: TopicPartition, changes: Mapping[str, EntryChange], *,
    create_missing: bool = False,
) -> tuple[str, ...]:  # fmt: skip
    """``tp``'s entries of the log dir's checkpoint files (``changes``: file name -> change), each file
    read, changed and written back under the log dir's checkpoint lock, so that jobs writing other
    partitions at the same time lose nothing; entries are written sorted, so the bytes do not depend on
    which job came first. A file is written only when its entries change (or, with ``create_missing``,
    when it is not there). Returns the names of the files written."""
    d = Path(log_dir)
    written = []
    with checkpoint_lock(d):
        for name, change in changes.items():
            path = d / name
            offset = change(checkpoint_files.entry(path, tp)) if callable(change) else change
            if checkpoint_files.update(path, {tp: offset}, create=create_missing):
                written.append(name)
    return tuple(written)


def write_clean_shutdown(log_dir: str | os.PathLike[str], marker: bytes) -> None:
    """``.kafka_cleanshutdown`` with ``marker`` as its content, fsynced with its directory."""
    d = Path(log_dir)
    fsutil.write_bytes_fsync(d / CLEAN_SHUTDOWN_FILE, marker)
    fsutil.fsync_dir(d)


def random_uuid(rng: random.Random) -> str:
    """Kafka's Uuid.randomUuid: a version-4 UUID, redrawn while reserved or its text starts with '-'."""
    while True:
        raw = bytearray(rng.getrandbits(128).to_bytes(16, "big"))
        raw[6] = (raw[6] & 0x0F) | 0x40
        raw[8] = (raw[8] & 0x3F) | 0x80
        text = checkpoints.encode_uuid(bytes(raw))
        if not text.startswith("-") and text != _METADATA_TOPIC_ID:
            return text


def write_log_dir_checkpoints(
    log_dir: str | os.PathLike[str],
    *,
    recovery_points: Mapping[TopicPartition, int] | None = None,
    log_start_offsets: Mapping[TopicPartition, int] | None = None,
    high_watermarks: Mapping[TopicPartition, int] | None = None,
    clean_shutdown: bool = True,
    node_id: int = 1,
    cluster_id: str | None = None,
    directory_id: str | None = None,
    broker_epoch: int = 1,
    now_ms: int | None = None,
    random_seed: int | None = None,
) -> dict[TopicPartition, int]:
    """Make ``log_dir`` look like the log dir of a broker that stopped cleanly; returns each partition's LEO.

    Writes ``recovery-point-offset-checkpoint`` and ``replication-offset-checkpoint`` (default: every
    partition at its LEO, as after a clean shutdown with all replicas in sync) and
    ``log-start-offset-checkpoint`` (default: no entries, i.e. every log starts at its first segment),
    entries sorted by topic and partition. Creates an empty ``cleaner-offset-checkpoint`` and ``.lock``
    when missing (the broker creates both at start-up) and ``meta.properties`` (KRaft, version 1) when
    missing; an existing one is kept. With ``clean_shutdown`` writes ``.kafka_cleanshutdown``, otherwise
    removes it (the next load then recovers from the recovery points).
    """
    root = Path(log_dir)
    root.mkdir(parents=True, exist_ok=True)
    leos = {tp: _read_log_end_offset(path) for tp, path in list_partition_dirs(root)}
    for name, offsets in (
        (checkpoints.RECOVERY_POINT_CHECKPOINT, leos if recovery_points is None else recovery_points),
        (checkpoints.LOG_START_OFFSET_CHECKPOINT, {} if log_start_offsets is None else log_start_offsets),
        (checkpoints.REPLICATION_CHECKPOINT, leos if high_watermarks is None else high_watermarks),
    ):
        ordered = dict(sorted(offsets.items(), key=lambda item: (item[0].topic, item[0].partition)))
        checkpoints.write_offset_checkpoint(root / name, ordered)
    for name in (checkpoints.CLEANER_CHECKPOINT, LOCK_FILE):
        (root / name).touch(exist_ok=True)
    meta = root / checkpoints.META_PROPERTIES
    if not storage.exists(meta):
        rng = random.Random(random_seed)
        text = format_meta_properties(
            node_id=node_id,
            cluster_id=cluster_id if cluster_id is not None else random_uuid(rng),
            directory_id=directory_id if directory_id is not None else random_uuid(rng),
            now_ms=int(time.time() * 1000) if now_ms is None else now_ms,
        )
        fsutil.atomic_write_bytes(meta, text.encode("utf-8"))
    clean = root / CLEAN_SHUTDOWN_FILE
    if clean_shutdown:
        body = json.dumps({"version": 0, "brokerEpoch": broker_epoch}, separators=(",", ":"))
        fsutil.write_bytes_fsync(clean, body.encode("utf-8"))
    else:
        clean.unlink(missing_ok=True)
    fsutil.fsync_dir(root)
    return leos


def format_meta_properties(*, node_id: int, cluster_id: str, directory_id: str, now_ms: int) -> str:
    """meta.properties as ``Properties.store`` writes it for a KRaft broker (keys in its hash order)."""
    for name, value in (("cluster.id", cluster_id), ("directory.id", directory_id)):
        try:
            checkpoints.decode_uuid(value)
        except ValueError as err:
            raise UsageError(f"{name}={value!r}: expected a Kafka Uuid (22 base64url characters)") from err
    stamp = time.strftime("%a %b %d %H:%M:%S UTC %Y", time.gmtime(now_ms // 1000))
    lines = [
        "#",
        f"#{stamp}",
        f"node.id={node_id}",
        f"directory.id={directory_id}",
        "version=1",
        f"cluster.id={cluster_id}",
    ]
    return "\n".join(lines) + "\n"


def _read_log_end_offset(directory: Path) -> int:
    """readNextOffset of the last segment (the partition model's log end offset)."""
    bases = list_segment_bases(directory)
    return Segment.open(directory, bases[-1]).read_next_offset if bases else 0
