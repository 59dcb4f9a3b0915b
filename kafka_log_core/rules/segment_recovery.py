"""One segment recovered as the broker's ``LogSegment.recover`` does after an unclean shutdown.

The walk goes over the ``.log`` bytes as they were when the segment was opened, batch by batch, and stops
at the first batch that is not whole and valid. What stops it, in Kafka's order (FileLogInputStream,
``ensureValid``):

* fewer than 17 bytes left, or a batch whose declared size runs past the end: the walk ends quietly
  (a torn last batch);
* a declared size below 14 bytes (zero padding reads as size 0): corrupt;
* a v2 batch shorter than its 61-byte header, or whose CRC32C (attributes to end) does not match; a v0/v1
  entry whose CRC32 (magic to end) does not match: corrupt.

Nothing else is validated: records are not decoded (only the first record of a control batch that
carries a producer id, to read its COMMIT/ABORT marker), and the base offset, length, leader epoch and
magic byte lie outside the CRC. For each accepted batch, in this order: the offset index gets
``(last_offset, position)`` when more than ``index.interval.bytes`` bytes passed since the last entry
(the batch at position 0 never does), together with a time-index entry for the largest timestamp so far;
then -- v2 batches only -- the leader-epoch cache is assigned the batch's epoch when it is above the
latest one, and the producer state is updated (an ABORT marker of an open transaction adds an aborted
transaction to the ``.txnindex``, its last stable offset being the first offset of another producer's
open transaction, else the marker offset + 1). After the walk the time index gets its final entry (the
segment's largest timestamp) and everything after the last accepted batch is truncated.

What the broker does not survive, and this module refuses with :class:`RecoveryRefusedError` (the
broker's load would fail, or it would run a legacy repair this tool does not do): a batch whose last
offset does not fit the segment (Kafka splits the segment), a full index, a non-transactional batch
from a producer with an open transaction, a malformed control record the broker cannot parse, a magic
byte of 3..127 (the broker reads such a batch as v2 and keeps it; this tool cannot read it).

Offsets that do not increase are noticed only where an index entry is due; the caller then empties the
segment (:func:`empty_segment`), as ``LogLoader.recoverLog`` does.
"""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass, field
from typing import cast

import crc32c
import numpy as np

from kafka_log_core.errors import CompressionError, CorruptRecordError, RefusedError
from kafka_log_core.format import offset_index, time_index
from kafka_log_core.format.checkpoints import EpochEntry, assign
from kafka_log_core.format.index_base import MAX_RELATIVE_OFFSET
from kafka_log_core.format.legacy_records import MIN_ENTRY_SIZE
from kafka_log_core.format.log_file import FileBatch
from kafka_log_core.format.offset_index import OffsetIndex
from kafka_log_core.format.record_batch import (
    ATTRIBUTES_OFFSET,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_KEY,
    HEADER,
    HEADER_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    OFFSET_AND_SIZE,
    BatchHeader,
    Record,
)
from kafka_log_core.format.time_index import TimeIndex
from kafka_log_core.format.txn_index import AbortedTxn
from kafka_log_core.rules.producer_state import ProducerEntry, apply_batch

_HEAD = struct.Struct(">qiib")  # base offset, size, partition leader epoch (v2), magic: the first 17 bytes
_LEGACY = struct.Struct(">Ib")  # crc, magic (at the message start, after the 12-byte log overhead)
_V1_TIMESTAMP = struct.Struct(">q")  # at message byte 6
_MARKER_VERSION = struct.Struct(">h")


class RecoveryRefusedError(RefusedError):
    """The broker's recovery would fail on this segment, or repair it in a way this tool does not."""


class InvalidOffsetError(Exception):
    """Offsets that do not increase where an index entry is due (Kafka's InvalidOffsetException)."""


@dataclass(slots=True)
class RecoveryState:
    """What the walk updates besides the segment: the producer table (a throw-away one, as the broker's
    recovery uses) with its map end offset, and the leader-epoch cache."""

    producers: dict[int, ProducerEntry]
    epochs: list[EpochEntry]
    map_end_offset: int
    epochs_changed: bool = False

    def ongoing(self, producer_id: int) -> int | None:
        """First offset of the oldest open transaction of a producer other than ``producer_id``."""
        opens = [
            e.current_txn_first_offset
            for pid, e in self.producers.items()
            if pid != producer_id and e.current_txn_first_offset >= 0
        ]
        return min(opens) if opens else None


@dataclass(frozen=True)
class SegmentRecovery:
    """What recovering one segment found and rebuilt (nothing is written here)."""

    base_offset: int
    size: int  # bytes of the .log when opened
    valid_bytes: int  # bytes kept
    batches: int  # batches accepted
    next_offset: int  # last accepted batch's last offset + 1, or the base offset
    offset_index: OffsetIndex
    time_index: TimeIndex
    aborted: tuple[AbortedTxn, ...]
    stop: str | None = None  # why the walk stopped before the end of the file
    truncated_records: int = 0  # records announced by the batch headers found in the truncated bytes
    emptied: str | None = None  # non-increasing offsets: the segment is emptied (reason)
    epochs: tuple[EpochEntry, ...] = field(default=(), repr=False)  # cache after the walk

    @property
    def truncated_bytes(self) -> int:
        return self.size - self.valid_bytes


def recover_segment(
    data: bytes | memoryview,
    base_offset: int,
    path: str,
    state: RecoveryState,
    *,
    index_interval_bytes: int,
    segment_index_bytes: int,
) -> SegmentRecovery:
    """Walk ``data`` (the whole ``.log``) as ``LogSegment.recover``; updates ``state``. Raises
    InvalidOffsetError (the caller empties the segment) or RecoveryRefusedError."""
    view = memoryview(data)
    end = len(view)
    max_offset_entries = offset_index.max_entries(segment_index_bytes)
    max_time_entries = time_index.max_entries(segment_index_bytes)
    rel_offsets: list[int] = []
    positions: list[int] = []
    timestamps: list[int] = []
    time_offsets: list[int] = []
    aborted: list[AbortedTxn] = []
    last_indexed = 0
    max_ts, max_ts_offset = -1, base_offset  # the reset time index: last entry (-1, base)
    batches = 0
    next_offset = base_offset
    stop: str | None = None

    def time_entry(ts: int, offset: int, skip_full_check: bool) -> None:
        if not skip_full_check and len(timestamps) >= max_time_entries - 1:
            raise RecoveryRefusedError(
                f"{path}: the time index of segment {base_offset} fills up during recovery "
                f"({len(timestamps)} entries, segment.index.bytes={segment_index_bytes}): the broker fails to load it"
            )
        last_offset = base_offset + time_offsets[-1] if time_offsets else base_offset
        if timestamps and offset < last_offset:
            raise InvalidOffsetError(
                f"time index entry for offset {offset} after offset {last_offset} in {path}"
            )
        if ts > (timestamps[-1] if timestamps else -1):
            timestamps.append(ts)
            time_offsets.append(offset - base_offset)

    latest_epoch = state.epochs[-1].epoch if state.epochs else -1
    unpack_head, unpack_v2 = _HEAD.unpack_from, HEADER.unpack_from
    pos = 0  # = the valid bytes so far: every accepted batch starts where the previous one ended
    while True:
        if pos + HEADER_SIZE_UP_TO_MAGIC >= end:
            if pos < end:
                stop = f"{end - pos} bytes at position {pos} are too short for a batch header"
            break
        batch_base, size, leader_epoch, magic = unpack_head(view, pos)
        if size < MIN_ENTRY_SIZE:
            stop = f"batch size {size} at position {pos} is below the minimum of {MIN_ENTRY_SIZE}"
            break
        batch_end = pos + LOG_OVERHEAD + size
        if batch_end > end:
            stop = f"the batch at position {pos} declares {size} bytes, only {end - pos - LOG_OVERHEAD} are there"
            break
        producer_id = -1
        if magic > 1:
            if magic != 2:
                raise RecoveryRefusedError(
                    f"{path} at position {pos}: magic byte {magic} (outside the CRC); the broker reads the batch "
                    "as v2 and keeps it when its CRC matches, this tool cannot read it; not recovered"
                )
            if LOG_OVERHEAD + size < HEADER_SIZE:
                stop = (
                    f"the v2 batch at position {pos} is {LOG_OVERHEAD + size} bytes, below the 61-byte header"
                )
                break
            (_, _, _, _, crc, _, last_offset_delta, _, batch_max_ts, producer_id, _, _, _) = unpack_v2(
                view, pos
            )
            if crc32c.crc32c(view[pos + ATTRIBUTES_OFFSET : batch_end]) != crc:
                stop = f"CRC32C mismatch in the batch at position {pos} (offset {batch_base})"
                break
            last_offset = batch_base + last_offset_delta
        else:
            crc, _ = _LEGACY.unpack_from(view, pos + LOG_OVERHEAD)
            if zlib.crc32(view[pos + 16 : batch_end]) != crc:
                stop = (
                    f"CRC32 mismatch in the v{max(magic, 0)} message at position {pos} (offset {batch_base})"
                )
                break
            last_offset = batch_base
            batch_max_ts = -1
            if magic == 1:
                if size < 22:
                    stop = f"the v1 message at position {pos} is too short for its timestamp"
                    break
                batch_max_ts = _V1_TIMESTAMP.unpack_from(view, pos + LOG_OVERHEAD + 6)[0]
        relative = last_offset - base_offset
        if not 0 <= relative <= MAX_RELATIVE_OFFSET:
            raise RecoveryRefusedError(
                f"{path} at position {pos}: last offset {last_offset} does not fit segment {base_offset} "
                "(relative offset outside 0..2^31-1); the broker would split the segment (legacy offset "
                "overflow repair), which this tool does not do"
            )
        if batch_max_ts > max_ts:
            max_ts, max_ts_offset = batch_max_ts, last_offset
        if pos - last_indexed > index_interval_bytes:
            if len(rel_offsets) >= max_offset_entries:
                raise RecoveryRefusedError(
                    f"{path}: the offset index of segment {base_offset} fills up during recovery "
                    f"({len(rel_offsets)} entries, segment.index.bytes={segment_index_bytes}): the broker fails to load it"
                )
            if rel_offsets and relative <= rel_offsets[-1]:
                raise InvalidOffsetError(
                    f"offset {last_offset} at position {pos} of {path} is not above the last indexed offset "
                    f"{base_offset + rel_offsets[-1]}"
                )
            rel_offsets.append(relative)
            positions.append(pos)
            time_entry(max_ts, max_ts_offset, False)
            last_indexed = pos
        batches += 1
        next_offset = last_offset + 1
        if magic > 1:  # leader epoch and producer state: v2 batches only
            if leader_epoch > latest_epoch:  # a negative epoch (unknown) is never above the latest
                state.epochs[:] = assign(state.epochs, EpochEntry(leader_epoch, batch_base))
                state.epochs_changed = True
                latest_epoch = leader_epoch
            if producer_id >= 0:
                header = BatchHeader(*unpack_v2(view, pos))
                batch = FileBatch(pos, header, view[pos:batch_end], path)
                problem = _update_producer_state(state, batch, aborted)
                if problem is not None:
                    stop = problem  # Kafka counts this batch as valid, then stops
                    pos = batch_end
                    break
            state.map_end_offset = last_offset + 1
        pos = batch_end
    valid = pos
    time_entry(max_ts, max_ts_offset, True)
    return SegmentRecovery(
        base_offset,
        end,
        valid,
        batches,
        next_offset,
        OffsetIndex(base_offset, _offset_entries(rel_offsets, positions)),
        TimeIndex(base_offset, _time_entries(timestamps, time_offsets)),
        tuple(aborted),
        stop,
        count_records(view, valid, end) if valid < end else 0,
        None,
        tuple(state.epochs),
    )


def _update_producer_state(state: RecoveryState, batch: FileBatch, aborted: list[AbortedTxn]) -> str | None:
    """LogSegment.updateProducerState for one v2 batch; a reason when the marker record is malformed in a
    way the broker catches (it then stops recovering after this batch)."""
    header = cast(BatchHeader, batch.header)
    pid = header.producer_id
    if pid < 0:
        return None
    entry = state.producers.get(pid)
    open_txn = entry is not None and entry.current_txn_first_offset >= 0
    where = f"{batch.path} at position {batch.position}"
    if not header.is_control:
        if open_txn and not header.is_transactional:
            raise RecoveryRefusedError(
                f"{where}: a non-transactional batch from producer {pid}, which has an open transaction; "
                "the broker fails to load this log (InvalidTxnStateException)"
            )
        apply_batch(state.producers, batch)
        return None
    if header.records_count != 0:
        problem = _check_marker(batch, where)
        if problem is not None:
            return problem
    first = entry.current_txn_first_offset if entry is not None else -1
    apply_batch(state.producers, batch)
    if header.records_count != 0 and open_txn and _marker_type(batch) == CONTROL_ABORT:
        other = state.ongoing(pid)
        lso = other if other is not None else header.base_offset + 1
        aborted.append(AbortedTxn(pid, first, header.base_offset, lso))
    return None


def _marker_type(batch: FileBatch) -> int:
    return CONTROL_KEY.unpack_from(cast(Record, batch.records()[0]).key or b"")[1]


def _check_marker(batch: FileBatch, where: str) -> str | None:
    """EndTransactionMarker.deserialize on the first record: None when it parses; a reason when it fails
    with an exception the broker's recovery catches; RecoveryRefusedError for the ones it does not."""
    try:
        record = cast(Record, batch.records()[0])
    except CompressionError as err:
        raise RecoveryRefusedError(f"{where}: control batch cannot be decompressed ({err.detail})") from err
    except CorruptRecordError as err:
        return f"malformed control record in the batch at position {batch.position}: {err.detail}"
    key, value = record.key, record.value
    if key is None or value is None:
        raise RecoveryRefusedError(
            f"{where}: control record without a key or value; the broker fails to load it"
        )
    if len(key) < CONTROL_KEY.size:
        return f"control record key of {len(key)} bytes in the batch at position {batch.position}"
    version, ctype = CONTROL_KEY.unpack_from(key)
    if version < 0:
        return f"control record key version {version} in the batch at position {batch.position}"
    if ctype not in (CONTROL_ABORT, CONTROL_COMMIT):
        raise RecoveryRefusedError(
            f"{where}: control record type {ctype} is not a transaction marker; the broker fails to load it"
        )
    if len(value) < 2:
        raise RecoveryRefusedError(
            f"{where}: transaction marker value of {len(value)} bytes; the broker fails"
        )
    if _MARKER_VERSION.unpack_from(value)[0] < 0:
        return f"transaction marker version below 0 in the batch at position {batch.position}"
    if len(value) < 6:
        raise RecoveryRefusedError(
            f"{where}: transaction marker value of {len(value)} bytes; the broker fails"
        )
    return None


def count_records(data: bytes | memoryview, start: int, end: int | None = None) -> int:
    """Records announced by the batch headers from ``start`` on, while the batches can be framed (a v2
    batch counts its header's record count -- a torn one too, when its header is whole; a legacy entry
    counts one)."""
    view = memoryview(data)
    end = len(view) if end is None else end
    count = 0
    pos = start
    while pos + HEADER_SIZE_UP_TO_MAGIC < end:
        _, size = OFFSET_AND_SIZE.unpack_from(view, pos)
        if size < MIN_ENTRY_SIZE:
            break
        if view[pos + 16] == 2:
            if pos + HEADER_SIZE <= end:
                count += max(BatchHeader(*HEADER.unpack_from(view, pos)).records_count, 0)
        else:
            count += 1
        pos += LOG_OVERHEAD + size
    return count


def empty_segment(data: bytes | memoryview, base_offset: int, path: str, reason: str) -> SegmentRecovery:
    """``LogSegment.truncateTo(base)`` after non-increasing offsets: the log is cut at the first batch whose
    last offset is at or above the base (normally position 0, i.e. everything); the indexes are emptied."""
    view = memoryview(data)
    end = len(view)
    cut = end  # no batch reaches the base offset: nothing is cut
    pos = 0
    while pos + HEADER_SIZE_UP_TO_MAGIC < end:
        batch_base, size = OFFSET_AND_SIZE.unpack_from(view, pos)
        if pos + LOG_OVERHEAD + size > end:
            break
        v2 = view[pos + 16] == 2
        if size < MIN_ENTRY_SIZE or (v2 and LOG_OVERHEAD + size < HEADER_SIZE):
            raise RecoveryRefusedError(
                f"{path} at position {pos}: a malformed batch while emptying segment {base_offset} ({reason}); "
                "the broker fails to load this log"
            )
        last = BatchHeader(*HEADER.unpack_from(view, pos)).last_offset if v2 else batch_base
        if last >= base_offset:
            cut = pos
            break
        pos += LOG_OVERHEAD + size
    return SegmentRecovery(
        base_offset, end, cut, 0, base_offset, OffsetIndex(base_offset, _offset_entries([], [])),
        TimeIndex(base_offset, _time_entries([], [])), (), None, count_records(view, cut, end), reason,
    )  # fmt: skip


def _offset_entries(relatives: list[int], positions: list[int]) -> np.ndarray:
    array = np.empty(len(relatives), dtype=offset_index.ENTRY_DTYPE)
    array["relative_offset"] = relatives
    array["position"] = positions
    array.setflags(write=False)
    return array


def _time_entries(timestamps: list[int], relatives: list[int]) -> np.ndarray:
    array = np.empty(len(timestamps), dtype=time_index.ENTRY_DTYPE)
    array["timestamp"] = timestamps
    array["relative_offset"] = relatives
    array.setflags(write=False)
    return array
