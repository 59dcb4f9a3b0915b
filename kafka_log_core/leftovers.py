"""Bring a partition directory to the state Kafka's log loader would, before a job writes to it.

Rules (LogLoader, spec cleaner §9 L2–L7), planned first and applied as a separate step:

* L2 every ``*.deleted`` file is removed;
* L3 ``.swap`` files numbered at or above the smallest ``.cleaned`` number are an unfinished
  operation and are removed, then every ``.cleaned`` file;
* L4/L5 the remaining ``.log.swap`` segments cover ``[lo, hi)`` (min base, max next offset): every
  regular file numbered in that range (segment files and producer snapshots) is an old segment that
  was replaced but not yet renamed, and is removed;
* L6 ``.swap`` is stripped from what remains;
* L7 an index file without its ``.log`` is removed; a ``.log`` without ``.index`` gets both indexes
  rebuilt from the log; a ``.log`` with an ``.index`` but no ``.timeindex`` gets an empty one (the
  broker does not rescan then, so retention of that segment falls back to the file's mtime).

Applying is idempotent: a job killed half way and run again ends in the same state.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from . import fsutil, log_file
from .filenames import (
    CLEANED_MARKER,
    DELETED_MARKER,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SNAPSHOT_SUFFIX,
    SWAP_MARKER,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    parse_segment_file,
    segment_file,
)
from .offset_index import IndexBuilder


@dataclass(frozen=True)
class LeftoverPlan:
    directory: Path
    delete: tuple[Path, ...] = ()
    rename: tuple[tuple[Path, Path], ...] = ()
    rebuild_indexes: tuple[int, ...] = ()  # bases whose .index is missing
    empty_time_indexes: tuple[int, ...] = ()  # bases whose .timeindex is missing

    @property
    def empty(self) -> bool:
        return not (self.delete or self.rename or self.rebuild_indexes or self.empty_time_indexes)

    def describe(self) -> list[str]:
        lines = [f"delete {p.name}" for p in self.delete]
        lines += [f"rename {a.name} -> {b.name}" for a, b in self.rename]
        lines += [f"rebuild indexes of segment {b}" for b in self.rebuild_indexes]
        lines += [f"create empty time index for segment {b}" for b in self.empty_time_indexes]
        return lines


def _next_offset_of(log_path: Path, base: int) -> int:
    last = None
    for batch in log_file.iter_file_batches(log_path):
        last = batch
    return base if last is None else last.last_offset + 1


def plan_leftovers(directory: str | os.PathLike[str]) -> LeftoverPlan:
    d = Path(directory)
    names = sorted(os.listdir(d))
    parsed = {n: p for n in names if (p := parse_segment_file(n)) is not None}
    delete: list[Path] = []
    swaps: list[str] = []
    cleaned: list[str] = []
    for name, p in parsed.items():
        if p.marker == DELETED_MARKER:
            delete.append(d / name)
        elif p.marker == CLEANED_MARKER:
            cleaned.append(name)
        elif p.marker == SWAP_MARKER:
            swaps.append(name)
    if cleaned:
        c_min = min(parsed[n].base_offset for n in cleaned)
        dropped = [n for n in swaps if parsed[n].base_offset >= c_min]
        delete += [d / n for n in dropped]
        swaps = [n for n in swaps if n not in dropped]
        delete += [d / n for n in cleaned]
    log_swaps = [n for n in swaps if parsed[n].suffix == LOG_SUFFIX]
    removed: set[str] = {p.name for p in delete}
    if log_swaps:
        lo = min(parsed[n].base_offset for n in log_swaps)
        hi = max(_next_offset_of(d / n, parsed[n].base_offset) for n in log_swaps)
        for name, p in parsed.items():
            if p.marker is None and lo <= p.base_offset < hi and name not in removed:
                delete.append(d / name)
                removed.add(name)
    rename = tuple((d / n, d / n[: -len(SWAP_MARKER)]) for n in swaps)
    # L7 over the state after the renames.
    live: dict[int, set[str]] = {}
    for name, p in parsed.items():
        if name in removed or p.marker is not None:
            continue
        live.setdefault(p.base_offset, set()).add(p.suffix)
    for name in swaps:
        p = parsed[name]
        live.setdefault(p.base_offset, set()).add(p.suffix)
    rebuild, empty_time = [], []
    for base, suffixes in sorted(live.items()):
        if LOG_SUFFIX not in suffixes:
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                if suffix in suffixes:
                    delete.append(segment_file(d, base, suffix))
            continue
        if INDEX_SUFFIX not in suffixes:
            rebuild.append(base)
        elif TIME_INDEX_SUFFIX not in suffixes:
            empty_time.append(base)
    return LeftoverPlan(d, tuple(delete), rename, tuple(rebuild), tuple(empty_time))


def apply_leftovers(
    plan: LeftoverPlan, *, index_interval_bytes: int = 4096, segment_index_bytes: int = 10485760
) -> None:
    """Carry out a plan in the loader's order: deletions, then renames, then index repairs."""
    d = plan.directory
    for path in plan.delete:
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
    if plan.delete:
        fsutil.fsync_dir(d)
    for src, dst in plan.rename:
        if src.exists():
            os.replace(src, dst)
    if plan.rename:
        fsutil.fsync_dir(d)
    for base in plan.rebuild_indexes:
        rebuild_indexes(
            d, base, index_interval_bytes=index_interval_bytes, segment_index_bytes=segment_index_bytes
        )
    for base in plan.empty_time_indexes:
        path = segment_file(d, base, TIME_INDEX_SUFFIX)
        if not path.exists():
            fsutil.atomic_write_bytes(path, b"")


def rebuild_indexes(
    directory: Path, base: int, *, index_interval_bytes: int = 4096, segment_index_bytes: int = 10485760
) -> None:
    """Rebuild ``.index`` and ``.timeindex`` of one segment from its ``.log`` (recovery's rule)."""
    log_path = segment_file(directory, base, LOG_SUFFIX)
    builder = IndexBuilder(
        base,
        index_interval_bytes=index_interval_bytes,
        segment_index_bytes=segment_index_bytes,
        path=log_path,
    )
    for batch in log_file.iter_file_batches(log_path, strict=True):
        builder.append(batch.position, batch.last_offset, batch.max_timestamp)
    offsets, times = builder.finish()
    fsutil.atomic_write_bytes(segment_file(directory, base, TIME_INDEX_SUFFIX), times.encode())
    fsutil.atomic_write_bytes(segment_file(directory, base, INDEX_SUFFIX), offsets.encode())


def is_snapshot(name: str) -> bool:
    p = parse_segment_file(name)
    return p is not None and p.suffix == SNAPSHOT_SUFFIX
