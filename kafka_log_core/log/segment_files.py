"""Every change the jobs make to a partition directory's files, in one place -- as Kafka's
``LocalLog.replaceSegments``, ``LocalLog.deleteSegmentFiles`` and ``LogSegment.changeFileSuffixes``: the
rules (cleaner, retention, recovery) decide what changes, these carry it out.

Each step is crash-safe: a crash at any instant leaves files that the loader's leftover rules
(:mod:`kafka_log_core.rules.leftovers`: ``.deleted`` removed, ``.cleaned`` dropped, ``.swap`` completed)
and a rerun turn into the uninterrupted result. Offline nobody reads the ``.deleted`` files (the job holds
the partition lock and the broker is stopped), so they go at once: no ``file.delete.delay.ms`` wait.

The one exception: the cleaner streams a round's new segment into ``.cleaned`` files itself
(:mod:`kafka_log_core.rules.cleaner_segments`, and split cleaning drops its own stale ones); this module
takes them from there (:func:`replace_segments`).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from kafka_log_core import fsutil, storage
from kafka_log_core.format.checkpoints import LEADER_EPOCH_CHECKPOINT
from kafka_log_core.format.filenames import (
    CLEANED_MARKER,
    DELETED_MARKER,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SEGMENT_FILE_SUFFIXES,
    SNAPSHOT_SUFFIX,
    SWAP_MARKER,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    segment_file,
)
from kafka_log_core.format.producer_snapshot import ProducerSnapshotEntry, write_producer_snapshot
from kafka_log_core.log.segment import Segment


def mark_deleted(directory: Path, base: int, suffixes: Sequence[str] = SEGMENT_FILE_SUFFIXES) -> list[Path]:
    """``changeFileSuffixes("", ".deleted")`` for the files of the segment at ``base`` with these suffixes,
    renamed in this order; a file already gone (absent, or renamed by an earlier attempt) is passed over.
    Returns the ``.deleted`` paths, for :func:`remove_deleted`."""
    targets = []
    for suffix in suffixes:
        target = segment_file(directory, base, suffix, DELETED_MARKER)
        with contextlib.suppress(FileNotFoundError):
            os.replace(segment_file(directory, base, suffix), target)
        targets.append(target)
    return targets


def remove_deleted(directory: Path, paths: Sequence[Path], sync: bool = True) -> list[str]:
    """Delete ``.deleted`` files (those still there) and fsync the directory (unless ``sync`` is False);
    the names removed, without the marker."""
    return [path.name[: -len(DELETED_MARKER)] for path in delete_files(directory, paths, sync)]


def delete_files(directory: Path, paths: Sequence[Path], sync: bool = True) -> list[Path]:
    """Delete these files of ``directory`` (those still there), then fsync it (unless ``sync`` is False);
    the paths deleted."""
    removed = []
    for path in paths:
        try:
            os.unlink(path)
        except FileNotFoundError:
            continue
        removed.append(path)
    if paths and sync:
        fsutil.fsync_dir(directory)
    return removed


def rename_files(directory: Path, renames: Sequence[tuple[Path, Path]]) -> None:
    """Rename each source still there to its target (replacing it), in this order, then fsync the
    directory: the loader's completion of ``.swap`` files."""
    for source, target in renames:
        if storage.exists(source):
            os.replace(source, target)
    if renames:
        fsutil.fsync_dir(directory)


def create_empty_segment(directory: Path, base: int) -> None:
    """A new empty segment at ``base`` (a roll): empty ``.index`` and ``.timeindex``, then the ``.log`` --
    last, since an index without its ``.log`` is an orphan the loader removes. Files already there are
    kept (a rerun after a crash); the directory is fsynced."""
    for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, LOG_SUFFIX):
        path = segment_file(directory, base, suffix)
        if not storage.exists(path):
            fsutil.write_bytes_fsync(path, b"")
    fsutil.fsync_dir(directory)


def create_empty_time_index(directory: Path, base: int) -> None:
    """An empty ``.timeindex`` for the segment at ``base`` where it has none (the loader's rule for a
    missing one beside an ``.index``)."""
    path = segment_file(directory, base, TIME_INDEX_SUFFIX)
    if not storage.exists(path):
        fsutil.atomic_write_bytes(path, b"")


def delete_snapshots(directory: Path, offsets: Sequence[int]) -> None:
    """Delete the producer snapshots at these offsets (those still there), then fsync the directory."""
    for offset in offsets:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(segment_file(directory, offset, SNAPSHOT_SUFFIX))
    fsutil.fsync_dir(directory)


def write_snapshot(directory: Path, offset: int, entries: Sequence[ProducerSnapshotEntry]) -> None:
    """The producer snapshot at ``offset`` (``ProducerStateManager.takeSnapshot``), written whole."""
    write_producer_snapshot(segment_file(directory, offset, SNAPSHOT_SUFFIX), entries)


def write_leader_epochs(directory: Path, data: bytes) -> None:
    """The partition's ``leader-epoch-checkpoint`` replaced whole (``LeaderEpochFileCache`` writing its
    checkpoint after a truncation): a temporary file renamed over it."""
    fsutil.atomic_write_bytes(directory / LEADER_EPOCH_CHECKPOINT, data)


def replace_segments(
    directory: Path, cleaned: Sequence[Path], base: int, old: Sequence[Segment], last: bool = True
) -> None:
    """``LocalLog.replaceSegments`` for one new segment at ``base`` written as ``.cleaned`` files (``.log``
    first, then its indexes), in place of ``old`` (ascending base offsets): the new files renamed
    ``.swap``, the old ones (and the producer snapshots at their bases, but at ``base``) ``.deleted``,
    the swap files given their names, the old files deleted (loader rules L2-L6).

    The directory is fsynced after the ``.swap`` renames (a ``.deleted`` file without its ``.swap`` would
    be lost), after the ``.deleted`` ones (a new segment named finally beside an old segment not yet
    ``.deleted`` would overlap it) and once at the end, for the cleaner checkpoint written next. Not
    between the last two steps: whichever of the final names and the deletions a crash keeps, the loader
    completes the ``.swap`` files and removes the ``.deleted`` ones. ``last`` False (a round's group before
    its last one): not at the end either, for the same reason -- and the next group's first fsync, before
    anything of that group is ``.deleted``, makes them durable too. (Kafka's ``replaceSegments`` fsyncs
    the directory once, at the end: it relies on the file system keeping the renames in order.)"""
    swaps = []
    for path in cleaned:
        target = Path(str(path)[: -len(CLEANED_MARKER)] + SWAP_MARKER)
        os.replace(path, target)
        swaps.append(target)
    fsutil.fsync_dir(directory)
    deleted = []
    for segment in old:
        deleted += mark_deleted(directory, segment.base_offset)
        if segment.base_offset != base:
            deleted += mark_deleted(directory, segment.base_offset, (SNAPSHOT_SUFFIX,))
    fsutil.fsync_dir(directory)
    for swap in swaps:
        os.replace(swap, Path(str(swap)[: -len(SWAP_MARKER)]))
    remove_deleted(directory, deleted, sync=last)  # fsyncs the directory


def rewrite_segment(
    directory: Path, base: int, index: bytes, time_index: bytes, txn_index: bytes | None, valid_bytes: int
) -> None:
    """A recovered segment in place: its indexes written whole (trimmed, as after a clean shutdown; no
    ``.txnindex`` when ``txn_index`` is None), then the ``.log`` cut at ``valid_bytes``, its last valid
    batch."""
    fsutil.atomic_write_bytes(segment_file(directory, base, INDEX_SUFFIX), index)
    fsutil.atomic_write_bytes(segment_file(directory, base, TIME_INDEX_SUFFIX), time_index)
    txn = segment_file(directory, base, TXN_INDEX_SUFFIX)
    if txn_index is None:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(txn)
    elif not storage.exists(txn) or storage.read_regular(txn) != txn_index:
        fsutil.atomic_write_bytes(txn, txn_index)
    log = segment_file(directory, base, LOG_SUFFIX)
    if storage.stat(log).st_size > valid_bytes:
        fd = os.open(log, os.O_WRONLY)
        try:
            os.ftruncate(fd, valid_bytes)
            os.fsync(fd)
        finally:
            os.close(fd)
