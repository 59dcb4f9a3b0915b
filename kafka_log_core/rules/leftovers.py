"""Bring a partition directory to the state Kafka's log loader would, before a job writes to it.

Rules (LogLoader, spec cleaner §9 L2–L7), planned first and applied as a separate step:

* L2 every ``*.deleted`` file is removed;
* L3 ``.swap`` files numbered at or above the smallest ``.cleaned`` number are an unfinished
  operation and are removed, then every ``.cleaned`` file;
* L4/L5 the remaining ``.log.swap`` segments cover ``[lo, hi)`` (min base, max next offset): every
  regular file numbered in that range (segment files and producer snapshots) is an old segment that
  was replaced but not yet renamed, and is removed;
* L6 ``.swap`` is stripped from what remains;
* L7 an index file without its ``.log`` is removed. (The rest of L7 -- a segment without ``.index`` or
  with a bad ``.txnindex`` is recovered, a missing ``.timeindex`` next to an ``.index`` becomes an empty
  file -- is the loader's recovery, :mod:`kafka_log_core.rules.recovery`.)

Applying is idempotent: a job killed half way and run again ends in the same state.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from kafka_log_core.format import log_file
from kafka_log_core.format.filenames import (
    CLEANED_MARKER,
    DELETED_MARKER,
    INDEX_SUFFIX,
    LOG_SUFFIX,
    SWAP_MARKER,
    TIME_INDEX_SUFFIX,
    TXN_INDEX_SUFFIX,
    DirFiles,
    segment_file,
)
from kafka_log_core.log.segment_files import delete_files, rename_files


@dataclass(frozen=True)
class LeftoverPlan:
    directory: Path
    delete: tuple[Path, ...] = ()
    rename: tuple[tuple[Path, Path], ...] = ()

    @property
    def empty(self) -> bool:
        return not (self.delete or self.rename)

    def describe(self) -> list[str]:
        lines = [f"delete {p.name}" for p in self.delete]
        lines += [f"rename {a.name} -> {b.name}" for a, b in self.rename]
        return lines


def _next_offset_of(log_path: Path, base: int) -> int:
    last = None
    for batch in log_file.iter_file_batches(log_path):
        last = batch
    return base if last is None else last.last_offset + 1


def plan_leftovers(directory: str | os.PathLike[str], files: DirFiles | None = None) -> LeftoverPlan:
    """What the loader resolves first in ``directory`` (``files``: its listing, when the caller has one)."""
    if files is None:
        files = DirFiles.scan(directory)
    d = Path(directory)
    parsed = dict(sorted(files.segment_files.items()))
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
    # L7 over the state after the renames: index files without their .log.
    live: dict[int, set[str]] = {}
    for name, p in parsed.items():
        if name in removed or p.marker is not None:
            continue
        live.setdefault(p.base_offset, set()).add(p.suffix)
    for name in swaps:
        p = parsed[name]
        live.setdefault(p.base_offset, set()).add(p.suffix)
    for base, suffixes in sorted(live.items()):
        if LOG_SUFFIX not in suffixes:
            for suffix in (INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX):
                if suffix in suffixes:
                    delete.append(segment_file(d, base, suffix))
    return LeftoverPlan(d, tuple(delete), rename)


def apply_leftovers(plan: LeftoverPlan) -> None:
    """Carry out a plan in the loader's order: deletions, then renames."""
    delete_files(plan.directory, plan.delete)
    rename_files(plan.directory, plan.rename)
