"""The log dir's offset checkpoint files as this process last read or wrote them.

A job that writes reads its partition's entries again once it holds the partition (another job may have
moved them since the driver's listing), and changes one entry at a time under the checkpoint lock, as the
broker's cleaner does. Each file holds a line per partition of the log dir: 50,000 lines (about 1 MB) on a
big broker, 0.1-0.2 s to parse. Parsed again for every partition, the files cost more than the work.

So this process keeps every offset checkpoint file it reads or writes, with what ``os.stat`` said of it
then (device, inode, size, modification and change times in nanoseconds; every writer replaces the file
by a rename, so a new version is a new inode):

* while ``stat`` says the same, the kept entries are the file's entries;
* a file another process changed is read again, and only the lines where its bytes differ from the kept
  copy are parsed (another job or Spark worker changed a few entries), when both versions are in the
  canonical form our writers and the broker's give a file we rewrote: ``0``, the count, and one
  ``<topic> <partition> <offset>`` line per partition, sorted, no duplicates. Anything else is parsed
  whole by :func:`checkpoints.parse_offset_checkpoint`, which also names the file and position of what
  is wrong;
* a file this process writes (:func:`update`) is written as ``checkpoints.format_offset_checkpoint``
  writes the sorted entries -- byte for byte -- by replacing, adding or removing the one line in the kept
  bytes, and kept as written.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property

import numpy as np

from kafka_log_core import fsutil, storage
from kafka_log_core.errors import CorruptCheckpointError
from kafka_log_core.format import checkpoints
from kafka_log_core.format.filenames import TopicPartition

StrPath = str | os.PathLike[str]
_MISSING: tuple = ()  # the signature of a file that does not exist
_NL = 0x0A


@dataclass(frozen=True)
class _Kept:
    """One file as this process last saw it."""

    signature: tuple
    data: bytes
    entries: dict[TopicPartition, int]
    known_canonical: bool | None = None  # None: not looked at yet (only a change needs to know)

    @cached_property
    def canonical(self) -> bool:
        """Whether data is the sorted entries as format_offset_checkpoint writes them: lines can be patched."""
        if self.known_canonical is not None:
            return self.known_canonical
        return checkpoints.format_offset_checkpoint(_sorted(self.entries)) == self.data


_NOTHING = _Kept(_MISSING, b"", {}, False)
_kept: dict[str, _Kept] = {}
_guard = threading.RLock()


def entries(path: StrPath) -> Mapping[TopicPartition, int]:
    """The file's entries (none for a missing file) as on disk now. Read-only: do not change it."""
    return _current(os.fspath(path)).entries


def entry(path: StrPath, tp: TopicPartition) -> int | None:
    return _current(os.fspath(path)).entries.get(tp)


def update(path: StrPath, changes: Mapping[TopicPartition, int | None], *, create: bool = False) -> bool:
    """Set (an offset) or remove (None) the entries ``changes`` names, and write the file when that changes
    it (or, with ``create``, when it does not exist), its entries sorted. The caller holds the log dir's
    checkpoint lock. Returns whether the file was written."""
    key = os.fspath(path)
    with _guard:
        kept = _current(key)
        wanted = dict(kept.entries)
        for tp, offset in changes.items():
            if offset is None:
                wanted.pop(tp, None)
            else:
                wanted[tp] = offset
        if wanted == kept.entries and not (create and kept.signature == _MISSING):
            return False
        data = _patched(kept, changes, wanted) if kept.canonical else None
        if data is None:
            data = checkpoints.format_offset_checkpoint(_sorted(wanted))
        fsutil.atomic_write_bytes(key, data)
        _kept[key] = _Kept(_signature(key), data, wanted, True)
        return True


def forget(path: StrPath | None = None) -> None:
    """Drop what is kept of ``path`` (of every file when None): the next read parses it whole."""
    with _guard:
        if path is None:
            _kept.clear()
        else:
            _kept.pop(os.fspath(path), None)


def _signature(path: str, fd: int | None = None) -> tuple:
    try:
        st = storage.stat(path) if fd is None else os.fstat(fd)
    except FileNotFoundError:
        return _MISSING
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)


def _sorted(found: Mapping[TopicPartition, int]) -> dict[TopicPartition, int]:
    return dict(sorted(found.items(), key=lambda item: (item[0].topic, item[0].partition)))


# ------------------------------------------------------------------------------------------ reading
def _current(key: str) -> _Kept:
    with _guard:
        kept = _kept.get(key)
        if kept is not None and kept.signature == _signature(key):
            return kept
        try:
            fd = storage.open_regular(key)  # a FIFO or directory of that name: refused, never blocks
        except FileNotFoundError:
            _kept[key] = _NOTHING
            return _NOTHING
        try:  # the signature of the version read (a writer replaces the file, never changes it)
            signature = _signature(key, fd)
            with os.fdopen(os.dup(fd), "rb") as f:
                data = f.read()
        finally:
            os.close(fd)
        fresh = _reparsed(kept, data) if kept is not None and kept.canonical else None
        if fresh is None:
            fresh = _Kept(signature, data, checkpoints.parse_offset_checkpoint(data, key))
        else:
            fresh = _Kept(signature, data, fresh.entries, True)
        _kept[key] = fresh
        return fresh


def _body_start(data: bytes) -> int:
    """Where the entry lines of a canonical file start, after ``0`` and the count; -1 when the two
    header lines are not in the canonical form."""
    second = data.find(b"\n", 2)
    if not data.startswith(b"0\n") or second < 0:
        return -1
    count = data[2:second]
    return second + 1 if count.isdigit() and count == b"%d" % int(count) else -1


def _reparsed(kept: _Kept, data: bytes) -> _Kept | None:
    """``data`` parsed only where it differs from the canonical ``kept.data``, when ``data`` is canonical
    too; None otherwise (the caller parses it whole)."""
    old_start, new_start = _body_start(kept.data), _body_start(data)
    if old_start < 0 or new_start < 0:
        return None
    old = np.frombuffer(kept.data, dtype=np.uint8, offset=old_start)
    new = np.frombuffer(data, dtype=np.uint8, offset=new_start)
    prefix = _common_prefix(old, new)
    suffix = _common_prefix(old[prefix:][::-1], new[prefix:][::-1])
    start = kept.data.rfind(b"\n", old_start, old_start + prefix) + 1  # the first line that differs
    start = max(start, old_start) - old_start
    old_end, new_end = len(old) - suffix, len(new) - suffix
    if old_end > start and old[old_end - 1] != _NL:  # to the end of the last line that differs
        step = kept.data.find(b"\n", old_start + old_end) + 1 - (old_start + old_end)
        old_end, new_end = old_end + step, new_end + step
    if any(end > start and buf[base + end - 1] != _NL for buf, base, end in
           ((kept.data, old_start, old_end), (data, new_start, new_end))):  # fmt: skip
        return None  # not whole lines
    removed_lines = kept.data[old_start + start : old_start + old_end]
    added_lines = data[new_start + start : new_start + new_end]
    try:
        removed = checkpoints.parse_offset_checkpoint(_as_file(removed_lines))
        added = checkpoints.parse_offset_checkpoint(_as_file(added_lines))
    except CorruptCheckpointError:
        return None
    found = dict(kept.entries)
    for tp in removed:
        del found[tp]
    if any(tp in found for tp in added) or _format_lines(added) != added_lines:
        return None  # a partition listed twice, or a line not as our writers write it
    found.update(added)
    if len(found) != int(data[2 : new_start - 1]):
        return None
    body = data[new_start:]
    order = [_key_before(body, start), *added, _key_at(body, new_end)]
    known = [(tp.topic, tp.partition) for tp in order if tp is not None]
    if any(a >= b for a, b in zip(known, known[1:], strict=False)):
        return None
    return _Kept(_MISSING, data, found, True)


def _as_file(lines: bytes) -> bytes:
    """Entry lines as a checkpoint file of their own, for the strict parser."""
    return b"0\n%d\n" % lines.count(b"\n") + lines


def _common_prefix(a: np.ndarray, b: np.ndarray) -> int:
    n = min(len(a), len(b))
    differ = a[:n] != b[:n]
    first = int(differ.argmax()) if n else 0
    return first if n and differ[first] else n


def _key_before(body: bytes, at: int) -> TopicPartition | None:
    """The key of the line that ends at ``at`` (None at the start)."""
    if at == 0:
        return None
    return _key(body[body.rfind(b"\n", 0, at - 1) + 1 : at - 1])


def _key_at(body: bytes, at: int) -> TopicPartition | None:
    """The key of the line that starts at ``at`` (None at the end)."""
    if at >= len(body):
        return None
    return _key(body[at : body.find(b"\n", at)])


def _key(line: bytes) -> TopicPartition:
    topic, partition, _ = line.split(b" ")
    return TopicPartition(topic.decode(), int(partition))


def _format_lines(found: Mapping[TopicPartition, int]) -> bytes:
    return "".join(f"{tp.topic} {tp.partition} {offset}\n" for tp, offset in found.items()).encode()


# ------------------------------------------------------------------------------------------ writing
def _patched(
    kept: _Kept, changes: Mapping[TopicPartition, int | None], wanted: Mapping[TopicPartition, int]
) -> bytes | None:
    """The sorted ``wanted`` as ``format_offset_checkpoint`` writes it, made from the canonical
    ``kept.data`` by changing only the lines ``changes`` names; None when a change is not a plain line
    (the caller formats the file whole, which says what is wrong)."""
    body = kept.data[_body_start(kept.data) :]
    for tp in changes:
        if not tp.topic or any(c.isspace() for c in tp.topic) or not 0 <= tp.partition < 2**31:
            return None
        if tp in wanted and not 0 <= wanted[tp] < 2**63:
            return None
        start, end = _find_line(body, tp)
        line = _format_lines({tp: wanted[tp]}) if tp in wanted else b""
        body = body[:start] + line + body[end:]
    return b"0\n%d\n" % len(wanted) + body


def _find_line(body: bytes, tp: TopicPartition) -> tuple[int, int]:
    """Where ``tp``'s line is in the sorted ``body`` (start, end), or where it belongs (start, start)."""
    wanted = (tp.topic, tp.partition)
    lo, hi = 0, len(body)  # lines starting before lo are below tp, lines starting at or after hi above
    while lo < hi:
        start = body.rfind(b"\n", lo, (lo + hi) // 2) + 1
        start = max(start, lo)
        end = body.find(b"\n", start) + 1
        key = _key(body[start : end - 1])
        if (key.topic, key.partition) < wanted:
            lo = end
        elif (key.topic, key.partition) == wanted:
            return start, end
        else:
            hi = start
    return lo, lo
