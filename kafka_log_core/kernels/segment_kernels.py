"""Compiled passes over whole segments: the batch-header scan, CRC validation, and both passes of the
log cleaner (pass 1 fills the offset map, pass 2 decides and writes what is kept). Python calls each of
them once per segment, not once per batch; the building blocks (CRC32C, record walk, MD5, map probes)
are in :mod:`kafka_log_core.kernels.primitives`.

v2 batch header (``record_batch.HEADER``), big-endian, byte offsets from the batch start::

    0  base_offset int64     8  batch_length int32    12 partition_leader_epoch int32   16 magic int8
    17 crc uint32 (CRC32C of [21, end))                21 attributes int16 (bits in the low byte, 22)
    23 last_offset_delta int32   27 base_timestamp int64   35 max_timestamp int64
    43 producer_id int64     51 producer_epoch int16  53 base_sequence int32           57 records_count int32
    61 records

Legacy entry (magic 0/1)::

    0 offset int64 | 8 message_size int32 | 12 crc uint32 | 16 magic int8 | 17 attributes int8 |
    18 timestamp int64 (v1 only) | key_length int32, key | value_length int32, value

How a pass talks to Python: a kernel runs from ``state.position`` to the end of its byte range and
returns ``DONE``, or a ``STOP_*`` / ``ERR_*`` status with ``state.position`` at the batch where Python
must act. It stops only there:

=================  ==============================================================================
STOP_LEGACY        a magic 0/1 entry: the readable legacy path handles it
STOP_COMPRESSED    a compressed batch: Python decompresses the run of compressed batches from there
                   with the codec libraries (one call each) and calls again with their records;
                   the kernel decides them like any other batch
STOP_TXN           the batch reaches the first offset of the next aborted transaction: Python moves
                   it from its heap into the tracker table, then resumes at the same batch
STOP_TXN_TABLE     the tracker's producer table needs more room (resumes at the same batch)
STOP_OUTPUT        pass 2: the output buffer cannot take the next batch: Python writes it out
STOP_SCRATCH       pass 2: the buffer a compressed batch would be rebuilt in is too small: Python
                   makes it larger (so is STOP_AREA_ROOM for the lz4 batches the kernel decompresses)
STOP_MAP_FULL      pass 1: the offset map holds its capacity and a keyed record comes: the round ends
ERR_*              corrupt data: Python re-reads the batch with the readable code, which raises the
                   error with the file, the position and the detail
=================  ==============================================================================

Transactions never send committed data back to Python: the tracker (Kafka's
CleanedTransactionMetadata) lives in a small open-addressing table of producer ids that the kernels
update (committed / aborted flags, last observed offset); only moving an aborted transaction from the
heap into the table is Python's, once per aborted transaction. An ABORT marker whose data was seen
leaves an *event* (the transaction's index in the tracker's list) for Python to write into the output
segment's ``.txnindex``.

Records are handled in chunks: the record walk and the MD5 digests of a run of batches are computed
first (keys go sixteen at a time through the MD5 lanes, whatever the batch sizes), then each batch is
decided in order.
"""

from __future__ import annotations

from collections import namedtuple

import numpy as np
from numba import njit

from kafka_log_core.constants import MAX_LONG
from kafka_log_core.format.compression import CompressionType
from kafka_log_core.format.record_batch import BatchRetention
from kafka_log_core.kernels.codec_kernels import LZ4_NEEDS_ROOM, LZ4_OK, lz4_frame
from kafka_log_core.kernels.primitives import (
    DIGEST_HI,
    DIGEST_LO,
    OK,
    R_BODY,
    R_KEEP,
    R_KEY_LEN,
    R_KEY_POS,
    R_NEW_TS_DELTA,
    R_OFFSET,
    R_REC_END,
    R_SOURCE,
    R_TS_DELTA,
    R_VALUE_LEN,
    R_WANT,
    RECORD_COLUMNS,
    SOURCE_AREAS,
    SOURCE_BUF,
    SOURCE_KAREA,
    WANT_HASH,
    WANT_NONE,
    WANT_STORED,
    copy_bytes,
    crc32c,
    hash_rows,
    map_find,
    map_put,
    map_slot,
    prefetch_row,
    read_i16,
    read_i32,
    read_i64,
    read_u32,
    read_varint,
    walk_record,
    write_i16,
    write_i32,
    write_i64,
)

# ---------------------------------------------------------------------------------------------- layout
BASE_OFFSET_AT = 0
BATCH_LENGTH_AT = 8
LEADER_EPOCH_AT = 12
MAGIC_AT = 16
CRC_AT = 17
ATTRIBUTES_AT = 21
LAST_OFFSET_DELTA_AT = 23
BASE_TIMESTAMP_AT = 27
MAX_TIMESTAMP_AT = 35
PRODUCER_ID_AT = 43
PRODUCER_EPOCH_AT = 51
BASE_SEQUENCE_AT = 53
RECORDS_COUNT_AT = 57
HEADER_SIZE = 61
LOG_OVERHEAD = 12
HEADER_SIZE_UP_TO_MAGIC = 17
MIN_ENTRY_SIZE = 14  # legacy v0 message overhead: the smallest size any entry may declare
LEGACY_ATTRIBUTES_AT = 17
LEGACY_TIMESTAMP_AT = 18
LEGACY_MIN_MESSAGE_SIZE_V0 = 14
LEGACY_MIN_MESSAGE_SIZE_V1 = 22

CODEC_MASK = 0x07
TIMESTAMP_TYPE_MASK = 0x08
TRANSACTIONAL_MASK = 0x10
CONTROL_MASK = 0x20
DELETE_HORIZON_MASK = 0x40
CONTROL_ABORT, CONTROL_COMMIT = 0, 1
NO_TIMESTAMP = -1
# A rebuilt record may grow: a timestamp delta of up to 10 bytes instead of 1, a longer length varint.
REBUILD_GROWTH_PER_RECORD = 14

# ---------------------------------------------------------------------------------------------- statuses
CONTINUE = -1  # internal: the batch is done, go on
DONE = 0
STOP_LEGACY = 1
STOP_COMPRESSED = 2
STOP_TXN = 3
STOP_TXN_TABLE = 4
STOP_OUTPUT = 5
STOP_MAP_FULL = 6
STOP_SCRATCH = 7  # pass 2: a compressed batch might be rebuilt and the scratch buffer is too small
STOP_CHUNK_ROOM = 14  # one batch holds more records than the chunk: Python makes the chunk larger
STOP_AREA_ROOM = 9  # one lz4 batch decompresses to more than ``karea`` holds: Python makes it larger
ERR_BATCH = 10  # framing: size, truncation, magic, v2 header fields
ERR_CRC = 11
ERR_RECORD = 12  # a record does not walk (state.error holds the kernels.ERR_* code)
ERR_CONTROL = 13  # a control record that is not a readable marker

STATUS_NAMES = {
    DONE: "done", STOP_LEGACY: "legacy entry", STOP_COMPRESSED: "compressed batch", STOP_TXN: "aborted transaction",
    STOP_TXN_TABLE: "tracker table full", STOP_AREA_ROOM: "decompression buffer too small", STOP_OUTPUT: "output buffer full", STOP_SCRATCH: "rebuild buffer too small", STOP_MAP_FULL: "offset map full",
    ERR_BATCH: "corrupt batch framing",
    ERR_CRC: "CRC mismatch", ERR_RECORD: "corrupt record", ERR_CONTROL: "unreadable control record",
}  # fmt: skip

# Internal chunk outcomes (why phase A stopped collecting batches).
_CHUNK_DONE = 100
_CHUNK_FULL = 101
_CHUNK_GROW = 102
_CHUNK_WALK_FAILED = 103

# ---------------------------------------------------------------------------------------------- records
# Header scan output, one row per batch, every field an int64 (the kernel fills a (rows, HEADER_FIELDS)
# array by these column numbers; Python reads it as HEADER_ROW records). Legacy entries: base_offset =
# offset for an uncompressed entry, -1 for a wrapper; records_count -1; no producer.
(H_POSITION, H_SIZE, H_MAGIC, H_ATTRIBUTES, H_BASE_OFFSET, H_LAST_OFFSET, H_MAX_TIMESTAMP, H_PRODUCER_ID,
 H_PRODUCER_EPOCH, H_BASE_SEQUENCE, H_LAST_OFFSET_DELTA, H_RECORDS_COUNT, H_CONTROL_TYPE,
 H_COORDINATOR_EPOCH) = range(14)  # fmt: skip
HEADER_ROW = np.dtype(
    [
        ("position", np.int64),
        ("size", np.int64),  # bytes of the whole batch, log overhead included
        ("magic", np.int64),
        ("attributes", np.int64),
        ("base_offset", np.int64),
        ("last_offset", np.int64),
        ("max_timestamp", np.int64),
        ("producer_id", np.int64),
        ("producer_epoch", np.int64),
        ("base_sequence", np.int64),
        ("last_offset_delta", np.int64),
        ("records_count", np.int64),
        ("control_type", np.int64),  # NOT_CONTROL, EMPTY_CONTROL, UNREADABLE_CONTROL or the marker type
        ("coordinator_epoch", np.int64),  # ABORT/COMMIT markers, else -1
    ]
)
HEADER_FIELDS = len(HEADER_ROW.names or ())
NOT_CONTROL = -1
EMPTY_CONTROL = -2  # a control batch without records (a cleaned marker)
UNREADABLE_CONTROL = -3  # compressed, or not a well-formed marker: the readable path decides

# The transaction tracker: producer id -> state, open addressing (power-of-two size, at most half full).
TXN_SLOT = np.dtype(
    [
        ("producer_id", np.int64),  # EMPTY_PID = free slot
        ("committed", np.bool_),  # in ongoingCommittedTxns
        ("aborted", np.bool_),  # in ongoingAbortedTxns
        ("aborted_index", np.int64),  # that aborted transaction, as an index into the tracker's list
        ("last_observed", np.int64),  # last offset of its data seen by this tracker, -1 none
    ]
)
EMPTY_PID = -1
TXN_STATE = np.dtype(
    [
        ("next_aborted_first", np.int64),  # first offset of the heap's next aborted txn (max int64: none)
        ("used", np.int64),  # producers in the table
        ("limit", np.int64),  # at most this many before the table grows
        ("events", np.int64),  # events written and not yet collected
        ("record_events", np.bool_),  # pass 2 records them; pass 1 only tracks
    ]
)
MAP_STATE = np.dtype(
    [
        ("position", np.int64),  # in: where to start; out: where the kernel stopped
        ("area_next", np.int64),  # the next decompressed batch to use (index into the run's bounds)
        ("start_offset", np.int64),  # first dirty offset: records below it are not put
        ("latest_offset", np.int64),  # Kafka's L: the last offset the map accounts for
        ("keys", np.int64),  # keys in the map
        ("capacity", np.int64),  # floor(configured slots * load factor)
        ("puts", np.int64),  # keyed records put (a repeated key counts each time)
        ("scanned", np.int64),  # records walked
        ("last_offset", np.int64),  # last offset of the batch at ``position`` (STOP_TXN)
        # 1: nothing goes into the map, the caller's digest store (STORE_FILL) takes every keyed record
        # instead (split cleaning, a segment without transactions: the keys are deduplicated afterwards)
        ("rows_only", np.int64),
    ]
)
CLEAN_STATE = np.dtype(
    [
        ("position", np.int64),
        ("area_next", np.int64),
        ("now_ms", np.int64),
        ("delete_retention_ms", np.int64),
        ("upper_bound", np.int64),  # rule R2.2: the batch ending just below it is kept (-1: no such rule)
        ("latest_offset", np.int64),  # L from pass 1: records above it are kept untouched
        ("last_offset", np.int64),  # last offset of the batch at ``position`` (STOP_TXN)
        ("out_used", np.int64),  # bytes in the output buffer
        ("out_file_position", np.int64),  # position in the .cleaned file of the buffer's first byte
        ("out_batches", np.int64),  # rows written to the output batch table
        ("records_read", np.int64),
        ("records_retained", np.int64),
        ("bytes_read", np.int64),
        ("bytes_written", np.int64),
        ("tombstones_read", np.int64),
        ("tombstones_retained", np.int64),
        ("batches_emptied", np.int64),
        ("scratch_used", np.int64),  # bytes of rebuilt records of the holes in the output buffer
        ("scratch_needed", np.int64),  # STOP_SCRATCH: the scratch buffer this batch may need
        ("holes", np.int64),  # rows of the output batch table that are holes
        # 1: the keyed records up to ``latest_offset`` are kept when their offset is in the keep list (the
        # ascending offsets that are their key's latest; split cleaning), no digest computed; 0: the map
        ("keep_list", np.int64),
        ("keep_next", np.int64),  # cursor into the keep list
    ]
)
# One row per batch written to the output buffer: what the offset and time indexes are built from.
OUT_BATCH = np.dtype(
    [
        ("position", np.int64),  # in the .cleaned file (holes: where the batch goes, before the holes' bytes)
        ("last_offset", np.int64),
        ("max_timestamp", np.int64),
        # A hole: a compressed batch that lost records, rebuilt (uncompressed) in the scratch buffer, for
        # Python to compress and frame when it writes the buffer out. hole_length -1: a batch in ``out``.
        ("hole_start", np.int64),
        ("hole_length", np.int64),
        ("source_position", np.int64),  # the original batch, for its header fields
        ("attributes", np.int64),
        ("base_timestamp", np.int64),
        ("count", np.int64),
    ]
)
# Active producers for the "last batch of a producer" rule, sorted by producer id.
PRODUCER = np.dtype([("producer_id", np.int64), ("last_data_offset", np.int64), ("producer_epoch", np.int64)])


BatchHead = namedtuple(
    "BatchHead",
    [
        "base_offset", "size", "attributes", "last_offset", "base_timestamp", "max_timestamp", "producer_id",
        "producer_epoch", "count",
    ],
)  # fmt: skip

# A chunk: the record table (one int64 row per record, kernels.R_* columns), the key digests, and one
# int64 row per batch: its position, its first record row, whether its records walked, and which
# decompressed area holds them (-1: the segment's own bytes).
B_POS, B_FIRST, B_WALKED, B_AREA = range(4)
AREA_SEGMENT, AREA_KERNEL = -1, -2  # B_AREA: the segment's own bytes, karea; >= 0: a Python-decompressed one
NONE_CODEC, LZ4_CODEC = int(CompressionType.NONE), int(CompressionType.LZ4)
# BatchRetention as plain ints for the compiled pass
RETENTION_DELETE = int(BatchRetention.DELETE)
RETENTION_DELETE_EMPTY = int(BatchRetention.DELETE_EMPTY)
RETENTION_RETAIN_EMPTY = int(BatchRetention.RETAIN_EMPTY)
BATCH_COLUMNS = 4

# Key digests kept from pass 1 for pass 2 (one uint64 row per keyed record: digest hi, lo, offset): the
# same records of the same segment come in the same order, so pass 2 takes them instead of hashing
# again. The offset in each row is checked; out of step, pass 2 hashes the rest itself.
STORE_NONE, STORE_FILL, STORE_USE = 0, 1, 2
STORE_STATE = np.dtype([("mode", np.int64), ("used", np.int64), ("valid", np.bool_)])
NO_STORE = np.zeros((0, 3), dtype=np.uint64)

# The chunk between kernel calls: which batches it holds and how far phase B got (a stop resumes there).
CHUNK_STATE = np.dtype(
    [
        ("batches", np.int64),  # batches walked into the chunk
        ("next", np.int64),  # the next one to decide
        ("stop", np.int64),  # position after the chunk
        ("outcome", np.int64),  # why phase A stopped there
        ("area_next", np.int64),  # the next Python-decompressed batch after the chunk
        ("error", np.int64),  # kernels.ERR_* of a batch that did not walk (the chunk's last)
        ("error_position", np.int64),
        ("records_needed", np.int64),  # STOP_CHUNK_ROOM
    ]
)
CHUNK_RECORDS = 2048
CHUNK_BATCHES = 512


def new_state(dtype: np.dtype, **fields) -> np.ndarray:
    """A one-row state record with ``fields`` set (the rest zero)."""
    state = np.zeros(1, dtype=dtype)
    for name, value in fields.items():
        state[name] = value
    return state


# ---------------------------------------------------------------------------------------------- helpers
@njit(cache=True, inline="always")
def _head(buf, pos):
    """The v2 header fields the passes decide on (framing checked by the caller)."""
    base = read_i64(buf, pos + BASE_OFFSET_AT)
    return BatchHead(
        base,
        LOG_OVERHEAD + read_i32(buf, pos + BATCH_LENGTH_AT),
        read_i16(buf, pos + ATTRIBUTES_AT),
        base + read_i32(buf, pos + LAST_OFFSET_DELTA_AT),
        read_i64(buf, pos + BASE_TIMESTAMP_AT),
        read_i64(buf, pos + MAX_TIMESTAMP_AT),
        read_i64(buf, pos + PRODUCER_ID_AT),
        read_i16(buf, pos + PRODUCER_EPOCH_AT),
        read_i32(buf, pos + RECORDS_COUNT_AT),
    )


@njit(cache=True, inline="always")
def _framing(buf, pos, end):
    """Checks of ``log_file.iter_batches(strict=True)`` and ``record_batch.decode_header``. Returns
    (status, size, magic): status DONE (nothing left), CONTINUE (a batch at ``pos``), ERR_BATCH."""
    if end - pos <= HEADER_SIZE_UP_TO_MAGIC:
        return (DONE if pos >= end else ERR_BATCH), np.int64(0), np.int64(0)
    size = read_i32(buf, pos + BATCH_LENGTH_AT)
    if size < MIN_ENTRY_SIZE or pos + LOG_OVERHEAD + size > end:
        return ERR_BATCH, np.int64(0), np.int64(0)
    magic = np.int64(buf[pos + MAGIC_AT])
    total = LOG_OVERHEAD + size
    if magic == 2 and (total < HEADER_SIZE or read_i32(buf, pos + RECORDS_COUNT_AT) < 0):
        return ERR_BATCH, total, magic
    if magic > 2:
        return ERR_BATCH, total, magic
    return CONTINUE, total, magic


@njit(cache=True)
def new_chunk(records, batches):
    """The record table (``kernels.R_*`` columns), its key digests, and the batch table (B_* columns)."""
    return (
        np.zeros((records, RECORD_COLUMNS), dtype=np.int64),
        np.zeros((records, 2), dtype=np.uint64),
        np.zeros((batches + 1, BATCH_COLUMNS), dtype=np.int64),
    )


@njit(cache=True, inline="always")
def _walk_into(area, start, end, count, base_offset, rec, r0, control, hash_from, hash_upto, source):
    """Walk ``count`` records of one batch into rows ``r0..`` of the chunk; mark the keys to hash.
    Returns (err, err_pos)."""
    p = start
    for i in range(count):
        err, err_pos, rec_end, body, tsd, od, kpos, klen, vlen = walk_record(area, p, end)
        if err != OK:
            return err, err_pos
        r = r0 + i
        offset = base_offset + od
        rec[r, R_OFFSET] = offset
        rec[r, R_REC_END] = rec_end
        rec[r, R_BODY] = body
        rec[r, R_TS_DELTA] = tsd
        rec[r, R_KEY_POS] = kpos
        rec[r, R_KEY_LEN] = klen
        rec[r, R_VALUE_LEN] = vlen
        rec[r, R_WANT] = (
            WANT_HASH if (not control) and klen >= 0 and hash_from <= offset <= hash_upto else WANT_NONE
        )
        rec[r, R_SOURCE] = source
        p = rec_end
    if p != end:
        return 5, p  # kernels.ERR_LEFTOVER
    return OK, np.int64(0)


@njit(cache=True)
def _walk_chunk(
    buf, pos, end, rec, dig, bat, check_crc, hash_from, hash_upto, areas, bounds, area_next, store, sst, karea_w,
    karea_r,
):  # fmt: skip
    """Phase A: walk the records of consecutive v2 batches from ``pos`` into the chunk and hash their
    keys. The first ``bounds.shape[0] - area_next`` batches are compressed ones Python decompressed:
    their records are ``areas[bounds[i, 0]:bounds[i, 1]]`` (a failed decompression: -1). Returns
    (outcome, stop_pos, batches, records, err, err_pos); ``outcome`` says why the chunk ends at
    ``stop_pos`` (a STOP_*/ERR_* status or _CHUNK_*). A batch whose records do not walk is the chunk's
    last, marked unwalked (phase B decides whether that matters)."""
    nb = 0
    nr = 0
    kused = 0  # bytes of ``karea`` holding this chunk's lz4 batches, decompressed here
    outcome = _CHUNK_DONE
    err = np.int64(0)
    err_pos = np.int64(0)
    n_records = rec.shape[0]
    n_batches = bat.shape[0] - 1
    while True:
        status, total, magic = _framing(buf, pos, end)
        if status != CONTINUE:
            outcome = _CHUNK_DONE if status == DONE else status
            break
        if magic != 2:
            outcome = STOP_LEGACY
            break
        count = read_i32(buf, pos + RECORDS_COUNT_AT)
        if nb == n_batches or nr + count > n_records:
            outcome = _CHUNK_GROW if nb == 0 else _CHUNK_FULL
            break
        if check_crc and crc32c(buf, pos + ATTRIBUTES_AT, total - ATTRIBUTES_AT) != read_u32(
            buf, pos + CRC_AT
        ):
            outcome = ERR_CRC
            break
        attributes = np.int64(buf[pos + ATTRIBUTES_AT + 1])
        base = read_i64(buf, pos + BASE_OFFSET_AT)
        control = (attributes & CONTROL_MASK) != 0
        codec = attributes & CODEC_MASK
        if codec and area_next < bounds.shape[0]:  # decompressed by Python
            a0 = bounds[area_next, 0]
            bat[nb, B_AREA] = area_next
            area_next += 1
            if a0 >= 0:
                err, err_pos = _walk_into(areas, a0, bounds[area_next - 1, 1], count, base, rec, nr, control,
                                          hash_from, hash_upto, SOURCE_AREAS)  # fmt: skip
            else:
                err = 1  # not decompressed: Python raises the codec's error if the records are needed
        elif codec == LZ4_CODEC:  # decompressed here, into karea
            found, kend = lz4_frame(buf, pos + HEADER_SIZE, pos + total, karea_w, kused)
            if found == LZ4_NEEDS_ROOM:
                outcome = _CHUNK_FULL if nb else STOP_AREA_ROOM
                break
            if found != LZ4_OK:
                outcome = STOP_COMPRESSED  # not a frame the kernel takes: Python's codec library decides
                break
            bat[nb, B_AREA] = AREA_KERNEL
            err, err_pos = _walk_into(karea_r, kused, kend, count, base, rec, nr, control, hash_from, hash_upto,
                                      SOURCE_KAREA)  # fmt: skip
            kused = kend
        elif codec:
            outcome = STOP_COMPRESSED  # Python decompresses the run of compressed batches from here
            break
        else:
            bat[nb, B_AREA] = AREA_SEGMENT
            err, err_pos = _walk_into(buf, pos + HEADER_SIZE, pos + total, count, base, rec, nr, control, hash_from,
                                      hash_upto, SOURCE_BUF)  # fmt: skip
        bat[nb, B_POS] = pos
        bat[nb, B_FIRST] = nr
        bat[nb, B_WALKED] = err == OK
        nb += 1
        pos += total
        if err != OK:
            outcome = _CHUNK_WALK_FAILED
            break
        nr += count
    bat[nb, B_FIRST] = nr
    if sst[0].mode == STORE_USE:
        _store_take(store, sst, rec, dig, bat, nb)
    hash_rows(buf, areas, karea_r, rec, dig, 0, nr)
    return outcome, pos, nb, nr, err, err_pos, area_next


@njit(cache=True, inline="always")
def _store_take(store, sst, rec, dig, bat, nb):
    """Digests of the chunk's keys from the store, while the offsets agree."""
    s = sst[0]
    for k in range(nb):
        for r in range(bat[k, B_FIRST], bat[k + 1, B_FIRST]):
            if rec[r, R_WANT] == WANT_HASH and s.mode == STORE_USE:
                c = s.used
                if c < store.shape[0] and np.int64(store[c, 2]) == rec[r, R_OFFSET]:
                    dig[r, DIGEST_HI] = store[c, 0]
                    dig[r, DIGEST_LO] = store[c, 1]
                    rec[r, R_WANT] = WANT_STORED
                    s.used = c + 1
                else:
                    s.mode = STORE_NONE  # out of step: hash from here on


@njit(cache=True, inline="always")
def _store_put(store, sst, rec, dig, r0, r1):
    """The digests of one completed batch of pass 1, appended to the store (until it is full)."""
    s = sst[0]
    for r in range(r0, r1):
        if rec[r, R_WANT] != WANT_NONE and s.mode == STORE_FILL:
            c = s.used
            if c == store.shape[0]:
                s.mode = STORE_NONE
                s.valid = False
                return
            store[c, 0] = dig[r, DIGEST_HI]
            store[c, 1] = dig[r, DIGEST_LO]
            store[c, 2] = np.uint64(rec[r, R_OFFSET])
            s.used = c + 1


@njit(cache=True, inline="always")
def _control_type(area, rec, r):
    """The marker type of a control batch's first record, or UNREADABLE_CONTROL (what
    ``record_batch.decode_control_record`` would refuse)."""
    klen = rec[r, R_KEY_LEN]
    if klen < 4:
        return UNREADABLE_CONTROL
    kpos = rec[r, R_KEY_POS]
    if read_i16(area, kpos) < 0:
        return UNREADABLE_CONTROL
    ctype = read_i16(area, kpos + 2)
    if (ctype == CONTROL_ABORT or ctype == CONTROL_COMMIT) and rec[r, R_VALUE_LEN] < 6:
        return UNREADABLE_CONTROL
    return ctype


# ---------------------------------------------------------------------------------------------- tracker
@njit(cache=True, inline="always")
def _txn_find(table, pid):
    """Slot holding ``pid``, or the free slot where it would go."""
    mask = table.shape[0] - 1
    s = np.int64((np.uint64(pid) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)) & mask
    while True:
        p = table[s].producer_id
        if p == pid or p == EMPTY_PID:
            return s
        s = (s + 1) & mask


@njit(cache=True)
def txn_mark_aborted(table, tstate, pid, index):
    """An aborted transaction leaves the heap (its first offset reached): the producer joins
    ongoingAbortedTxns unless it is there already. Returns False when the table must grow first."""
    s = _txn_find(table, pid)
    slot = table[s]
    if slot.producer_id == EMPTY_PID:
        if tstate[0].used >= tstate[0].limit:
            return False
        slot.producer_id = pid
        slot.committed = False
        slot.aborted = False
        slot.last_observed = -1
        tstate[0].used += 1
    if not slot.aborted:
        slot.aborted = True
        slot.aborted_index = index
        slot.last_observed = -1
    return True


@njit(cache=True)
def txn_rehash(old, new):
    """Copy every producer of ``old`` into the (larger, empty) table ``new``."""
    for i in range(old.shape[0]):
        if old[i].producer_id != EMPTY_PID:
            new[_txn_find(new, old[i].producer_id)] = old[i]


@njit(cache=True, inline="always")
def track_data(table, tstate, pid, transactional, last_offset):
    """A data batch through the tracker. Returns (grow, can_discard); ``grow`` before any change."""
    if not transactional:
        return False, False
    s = _txn_find(table, pid)
    slot = table[s]
    if slot.producer_id == EMPTY_PID:
        if tstate[0].used >= tstate[0].limit:
            return True, False
        slot.producer_id = pid
        slot.committed = False
        slot.aborted = False
        slot.last_observed = -1
        tstate[0].used += 1
    if slot.aborted:
        slot.last_observed = last_offset
        return False, True
    slot.committed = True
    return False, False


@njit(cache=True, inline="always")
def track_control(table, tstate, events, pid, count, ctype):
    """A control batch through the tracker; returns can_discard. An ABORT marker whose transaction's
    data was seen is kept and leaves an event (its transaction goes into the output's .txnindex)."""
    if count == 0:
        return True  # an empty control batch: its transaction was cleaned away already
    if ctype == CONTROL_ABORT:
        s = _txn_find(table, pid)
        slot = table[s]
        if slot.producer_id == pid and slot.aborted:
            slot.aborted = False
            observed = slot.last_observed
            slot.last_observed = -1
            if observed >= 0:
                if tstate[0].record_events:
                    events[tstate[0].events] = slot.aborted_index
                    tstate[0].events += 1
                return False
        return True
    if ctype == CONTROL_COMMIT:
        s = _txn_find(table, pid)
        slot = table[s]
        if slot.producer_id == pid and slot.committed:
            slot.committed = False
            return False
        return True
    return False  # other control records are kept forever


# ---------------------------------------------------------------------------------------------- scan
@njit(cache=True)
def _grow_rows(rows):
    bigger = np.empty((2 * rows.shape[0], HEADER_FIELDS), dtype=np.int64)
    bigger[: rows.shape[0]] = rows
    return bigger


@njit(cache=True, inline="always")
def _marker(buf, pos, total):
    """(control type, coordinator epoch) of a control batch with records, read from its first record."""
    count = read_i32(buf, pos + RECORDS_COUNT_AT)
    if count != 1 or buf[pos + ATTRIBUTES_AT + 1] & CODEC_MASK:
        return UNREADABLE_CONTROL, -1
    end = pos + total
    err, err_pos, rec_end, body, tsd, od, kpos, klen, vlen = walk_record(buf, pos + HEADER_SIZE, end)
    if err != OK or rec_end != end or klen < 4 or read_i16(buf, kpos) < 0:
        return UNREADABLE_CONTROL, -1
    ctype = read_i16(buf, kpos + 2)
    if ctype != CONTROL_ABORT and ctype != CONTROL_COMMIT:
        return ctype, -1
    if vlen < 6:
        return UNREADABLE_CONTROL, -1
    length, vpos, ok = read_varint(buf, kpos + klen, end, 5)  # the value follows the key and its length
    return ctype, read_i32(buf, vpos + 2)  # value: version int16, coordinator_epoch int32


@njit(cache=True, inline="always")
def _legacy_ok(buf, pos, total, magic):
    """The checks ``legacy_records.decode_message(check_crc=False)`` makes on one shallow entry."""
    size = total - LOG_OVERHEAD
    if size < (LEGACY_MIN_MESSAGE_SIZE_V1 if magic == 1 else LEGACY_MIN_MESSAGE_SIZE_V0):
        return False
    end = pos + total
    p = pos + LEGACY_TIMESTAMP_AT + (8 if magic == 1 else 0)
    for _ in range(2):  # key, then value
        if p + 4 > end:
            return False
        n = read_i32(buf, p)
        p += 4
        if n >= 0:
            if p + n > end:
                return False
            p += n
    return p == end


@njit(cache=True)
def scan_headers(buf, pos, end):
    """Every batch header from ``pos``, as ``log_file.iter_batches`` (not strict: a partial batch at the
    end stops the scan silently). Returns (status, position, rows) with rows (n, HEADER_FIELDS) int64:
    DONE, or ERR_BATCH at the position of a malformed entry (rows hold the batches before it)."""
    rows = np.empty((1024, HEADER_FIELDS), dtype=np.int64)
    n = 0
    status = DONE
    while end - pos > HEADER_SIZE_UP_TO_MAGIC:
        size = read_i32(buf, pos + BATCH_LENGTH_AT)
        if size < MIN_ENTRY_SIZE:
            status = ERR_BATCH
            break
        if pos + LOG_OVERHEAD + size > end:
            break  # a partial trailing batch is invisible to readers
        total = LOG_OVERHEAD + size
        magic = np.int64(buf[pos + MAGIC_AT])
        if n == rows.shape[0]:
            rows = _grow_rows(rows)
        rows[n, H_POSITION] = pos
        rows[n, H_SIZE] = total
        rows[n, H_MAGIC] = magic
        rows[n, H_COORDINATOR_EPOCH] = -1
        if magic == 2:
            count = read_i32(buf, pos + RECORDS_COUNT_AT)
            if total < HEADER_SIZE or count < 0:
                status = ERR_BATCH
                break
            h = _head(buf, pos)
            rows[n, H_ATTRIBUTES] = h.attributes
            rows[n, H_BASE_OFFSET] = h.base_offset
            rows[n, H_LAST_OFFSET] = h.last_offset
            rows[n, H_MAX_TIMESTAMP] = h.max_timestamp
            rows[n, H_PRODUCER_ID] = h.producer_id
            rows[n, H_PRODUCER_EPOCH] = h.producer_epoch
            rows[n, H_BASE_SEQUENCE] = read_i32(buf, pos + BASE_SEQUENCE_AT)
            rows[n, H_LAST_OFFSET_DELTA] = read_i32(buf, pos + LAST_OFFSET_DELTA_AT)
            rows[n, H_RECORDS_COUNT] = count
            rows[n, H_CONTROL_TYPE] = NOT_CONTROL
            if h.attributes & CONTROL_MASK:
                if count == 0:
                    rows[n, H_CONTROL_TYPE] = EMPTY_CONTROL
                else:
                    ctype, coordinator_epoch = _marker(buf, pos, total)
                    rows[n, H_CONTROL_TYPE] = ctype
                    rows[n, H_COORDINATOR_EPOCH] = coordinator_epoch
        elif magic == 0 or magic == 1:
            if not _legacy_ok(buf, pos, total, magic):
                status = ERR_BATCH
                break
            offset = read_i64(buf, pos)
            attributes = np.int64(buf[pos + LEGACY_ATTRIBUTES_AT])
            rows[n, H_ATTRIBUTES] = attributes
            rows[n, H_BASE_OFFSET] = -1 if attributes & CODEC_MASK else offset
            rows[n, H_LAST_OFFSET] = offset
            rows[n, H_MAX_TIMESTAMP] = (
                read_i64(buf, pos + LEGACY_TIMESTAMP_AT) if magic == 1 else NO_TIMESTAMP
            )
            rows[n, H_PRODUCER_ID] = -1
            rows[n, H_PRODUCER_EPOCH] = -1
            rows[n, H_BASE_SEQUENCE] = -1
            rows[n, H_LAST_OFFSET_DELTA] = 0
            rows[n, H_RECORDS_COUNT] = -1
            rows[n, H_CONTROL_TYPE] = NOT_CONTROL
        else:
            status = ERR_BATCH
            break
        n += 1
        pos += total
    return status, pos, rows[:n].copy()


def header_rows(rows: np.ndarray) -> np.ndarray:
    """The (n, HEADER_FIELDS) int64 array of :func:`scan_headers` as HEADER_ROW records (no copy)."""
    return rows.view(HEADER_ROW)[:, 0] if rows.shape[0] else np.zeros(0, dtype=HEADER_ROW)


@njit(cache=True)
def verify_batches(buf, pos, end):
    """Framing and CRC32C of every v2 batch from ``pos`` (strict: a partial batch at the end is an
    error). Returns (status, position): DONE, STOP_LEGACY (Python checks that entry's CRC32) or ERR_*."""
    while True:
        status, total, magic = _framing(buf, pos, end)
        if status != CONTINUE:
            return status, pos
        if magic != 2:
            return STOP_LEGACY, pos
        if crc32c(buf, pos + ATTRIBUTES_AT, total - ATTRIBUTES_AT) != read_u32(buf, pos + CRC_AT):
            return ERR_CRC, pos
        pos += total


@njit(cache=True, inline="always")
def _prefetch_slots(slots, rec, dig, nr):
    """Start fetching the map slot of every key of the chunk before the decisions need them: the
    misses overlap instead of coming one after another."""
    n_slots = slots.shape[0]
    for r in range(nr):
        if rec[r, R_WANT]:
            prefetch_row(slots, map_slot(dig[r, DIGEST_HI], n_slots))


@njit(cache=True)
def walk_segment(buf, pos, end, karea_w, karea_r):
    """The scan every pass makes, on its own: framing, CRC32C, every record walked and every key hashed,
    from ``pos``. Returns (status, position, batches, records); stops like the passes (STOP_LEGACY,
    STOP_COMPRESSED, ERR_*). For measuring and for readers that only need the counts."""
    rec, dig, bat = new_chunk(CHUNK_RECORDS, CHUNK_BATCHES)
    batches = 0
    records = 0
    bounds = np.zeros((0, 2), dtype=np.int64)
    store = np.zeros((0, 3), dtype=np.uint64)
    sst = np.zeros(1, dtype=STORE_STATE)  # STORE_NONE
    while True:
        outcome, stop, nb, nr, err, err_pos, _ = _walk_chunk(
            buf, pos, end, rec, dig, bat, True, -1, MAX_LONG, buf[:0], bounds, 0, store, sst, karea_w, karea_r
        )
        if outcome == _CHUNK_GROW:
            rec, dig, bat = new_chunk(
                max(2 * rec.shape[0], read_i32(buf, pos + RECORDS_COUNT_AT)), CHUNK_BATCHES
            )
            continue
        batches += nb
        records += nr
        pos = stop
        if outcome != _CHUNK_FULL:
            status = (
                DONE if outcome == _CHUNK_DONE else (ERR_RECORD if outcome == _CHUNK_WALK_FAILED else outcome)
            )
            return status, pos, batches, records


# ---------------------------------------------------------------------------------------------- pass 1
@njit(cache=True, inline="always")
def _map_batch(buf, pos, h, area, rec, dig, r0, walked, slots, txn, tstate, events, c, st):
    """One batch of pass 1 (spec M2-M4): the tracker, then every keyed record at or above the first
    dirty offset goes into the map. ``walked``: its records are in the chunk from row ``r0`` (they
    did not walk, or were not decompressed: an error only if they are needed)."""
    s = st[0]
    if h.last_offset >= tstate[0].next_aborted_first:
        s.last_offset = h.last_offset
        return STOP_TXN
    if h.attributes & CONTROL_MASK:
        ctype = NOT_CONTROL
        if h.count > 0:
            if not walked:
                return ERR_RECORD
            ctype = _control_type(area, rec, r0)
            if ctype == UNREADABLE_CONTROL:
                return ERR_CONTROL
        track_control(txn, tstate, events, h.producer_id, h.count, ctype)
    else:
        grow, discard = track_data(txn, tstate, h.producer_id, (h.attributes & TRANSACTIONAL_MASK) != 0,
                                    h.last_offset)  # fmt: skip
        if grow:
            return STOP_TXN_TABLE
        if not discard and h.count > 0:
            if not walked:
                return ERR_RECORD
            s.scanned += h.count
            rows_only = s.rows_only != 0
            for r in range(r0, r0 + h.count):
                if rec[r, R_KEY_LEN] >= 0 and rec[r, R_OFFSET] >= s.start_offset:
                    if not rows_only:
                        if s.keys >= s.capacity:
                            return STOP_MAP_FULL
                        s.keys += map_put(slots, dig[r, DIGEST_HI], dig[r, DIGEST_LO], rec[r, R_OFFSET])
                    s.puts += 1
                    s.latest_offset = rec[r, R_OFFSET]
    if h.last_offset >= s.start_offset:
        s.latest_offset = h.last_offset
    return CONTINUE


@njit(cache=True)
def build_map(
    buf, end, areas, bounds, slots, txn, tstate, events, store, sst, karea_w, karea_r, rec, dig, bat, cst, st
):
    """Pass 1 over ``buf[st.position:end]``, CRC32C checked on the way. ``areas``/``bounds``: the
    records of the run of compressed batches at ``st.position``, from ``st.area_next`` on (see
    ``_walk_chunk``); ``rec``/``dig``/``bat``/``cst``: the chunk, kept between calls (a stop resumes
    the chunk it stopped in). See the module docstring for the statuses."""
    c = cst[0]
    while True:
        if not (c.next < c.batches and bat[c.next, B_POS] == st[0].position):
            outcome, stop, nb, nr, err, err_pos, next_area = _walk_chunk(
                buf, st[0].position, end, rec, dig, bat, True, st[0].start_offset, MAX_LONG, areas, bounds,
                st[0].area_next, store, sst, karea_w, karea_r,
            )  # fmt: skip
            if outcome == _CHUNK_GROW:
                c.records_needed = max(2 * rec.shape[0], read_i32(buf, st[0].position + RECORDS_COUNT_AT))
                return STOP_CHUNK_ROOM
            _new_chunk_state(c, nb, stop, outcome, next_area, err, err_pos)
            if not st[0].rows_only:
                _prefetch_slots(slots, rec, dig, nr)
        for k in range(c.next, c.batches):
            bpos = bat[k, B_POS]
            area = areas if bat[k, B_AREA] >= 0 else (karea_r if bat[k, B_AREA] == AREA_KERNEL else buf)
            status = _map_batch(buf, bpos, _head(buf, bpos), area, rec, dig, bat[k, B_FIRST], bat[k, B_WALKED], slots,
                                txn, tstate, events, c, st)  # fmt: skip
            if status != CONTINUE:
                c.next = k
                st[0].position = bpos
                st[0].area_next = bat[k, B_AREA] if bat[k, B_AREA] >= 0 else c.area_next
                return status
            if sst[0].mode == STORE_FILL:
                _store_put(store, sst, rec, dig, bat[k, B_FIRST], bat[k + 1, B_FIRST])
        c.next = c.batches
        st[0].position = c.stop
        st[0].area_next = c.area_next
        if c.outcome != _CHUNK_FULL and c.outcome != _CHUNK_WALK_FAILED:
            return DONE if c.outcome == _CHUNK_DONE else c.outcome


@njit(cache=True, inline="always")
def _new_chunk_state(c, nb, stop, outcome, area_next, err, err_pos):
    c.batches = nb
    c.next = 0
    c.stop = stop
    c.outcome = outcome
    c.area_next = area_next
    c.error = err
    c.error_position = err_pos


@njit(cache=True)
def compressed_run(buf, pos, end, limit):
    """The run of consecutive compressed v2 batches from ``pos`` (at most ``limit``): (n, positions,
    sizes, codecs) for Python to decompress."""
    positions = np.empty(limit, dtype=np.int64)
    sizes = np.empty(limit, dtype=np.int64)
    codecs = np.empty(limit, dtype=np.int64)
    n = 0
    while n < limit:
        status, total, magic = _framing(buf, pos, end)
        if status != CONTINUE or magic != 2:
            break
        codec = np.int64(buf[pos + ATTRIBUTES_AT + 1]) & CODEC_MASK
        if codec == NONE_CODEC:
            break
        positions[n] = pos
        sizes[n] = total
        codecs[n] = codec
        n += 1
        pos += total
    return n, positions[:n], sizes[:n], codecs[:n]


# ---------------------------------------------------------------------------------------------- pass 2
@njit(cache=True, inline="always")
def _is_last_of_producer(producers, pid, last_offset, control, epoch):
    """Spec R2.1: the batch is its active producer's last (data batch by offset; with no data batch in
    the current epoch, a marker of that epoch)."""
    lo = 0
    hi = producers.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if producers[mid].producer_id < pid:
            lo = mid + 1
        else:
            hi = mid
    if lo == producers.shape[0] or producers[lo].producer_id != pid:
        return False
    last = producers[lo].last_data_offset
    if last >= 0:
        return last_offset == last
    return control and epoch == producers[lo].producer_epoch


@njit(cache=True, inline="always")
def _varlong_size(v):
    u = np.uint64((v << 1) ^ (v >> 63))
    n = 1
    while u >= np.uint64(0x80):
        u >>= np.uint64(7)
        n += 1
    return n


@njit(cache=True, inline="always")
def _put_varlong(out, w, v):
    u = np.uint64((v << 1) ^ (v >> 63))
    while u >= np.uint64(0x80):
        out[w] = np.uint8((u & np.uint64(0x7F)) | np.uint64(0x80))
        u >>= np.uint64(7)
        w += 1
    out[w] = np.uint8(u)
    return w + 1


@njit(cache=True, inline="always")
def _write_header(out, w, src, src_pos, length, attributes, base_ts, max_ts, count):
    """A v2 header at ``out[w]`` taking base offset, leader epoch, last offset delta and producer fields
    from the original header at ``src[src_pos]``; the CRC is written by ``_seal``."""
    copy_bytes(out, w, src, src_pos, HEADER_SIZE)  # then the fields that change
    write_i32(out, w + BATCH_LENGTH_AT, length - LOG_OVERHEAD)
    write_i16(out, w + ATTRIBUTES_AT, attributes)
    write_i64(out, w + BASE_TIMESTAMP_AT, base_ts)
    write_i64(out, w + MAX_TIMESTAMP_AT, max_ts)
    write_i32(out, w + RECORDS_COUNT_AT, count)


@njit(cache=True, inline="always")
def _seal(out, w, length):
    write_i32(out, w + CRC_AT, crc32c(out, w + ATTRIBUTES_AT, length - ATTRIBUTES_AT))


@njit(cache=True, inline="always")
def _emit(outb, s, w, last_offset, max_ts, length):
    row = outb[s.out_batches]
    row.position = s.out_file_position + w
    row.last_offset = last_offset
    row.max_timestamp = max_ts
    row.hole_length = -1
    s.out_batches += 1
    s.out_used = w + length
    s.bytes_written += length


@njit(cache=True, inline="always")
def _clean_batch(
    buf, pos, h, area, rec, dig, r0, walked, slots, keep, producers, txn, tstate, events, out, outb, scratch, c,
    st,
):  # fmt: skip
    """One batch of pass 2 (spec R1-R5, X2-X4): tracker, disposition, the keep rule per record, and the
    batch written to ``out`` unchanged, rebuilt, or as an empty header -- or dropped."""
    s = st[0]
    if h.last_offset >= tstate[0].next_aborted_first:
        s.last_offset = h.last_offset
        return STOP_TXN
    if (
        out.shape[0] - s.out_used < h.size + REBUILD_GROWTH_PER_RECORD * h.count
        or s.out_batches >= outb.shape[0]
    ):
        return STOP_OUTPUT
    if (
        h.attributes & CODEC_MASK and walked and h.count > 0
    ):  # room to rebuild its records, if it comes to that
        need = rec[r0 + h.count - 1, R_REC_END] - rec[r0, R_BODY] + 5 + REBUILD_GROWTH_PER_RECORD * h.count
        if scratch.shape[0] - s.scratch_used < need:
            s.scratch_needed = need
            return STOP_SCRATCH
    control = (h.attributes & CONTROL_MASK) != 0
    if control:
        ctype = NOT_CONTROL
        if h.count > 0:
            if not walked:
                return ERR_RECORD
            ctype = _control_type(area, rec, r0)
            if ctype == UNREADABLE_CONTROL:
                return ERR_CONTROL
        can_discard = track_control(txn, tstate, events, h.producer_id, h.count, ctype)
        has_horizon = (h.attributes & DELETE_HORIZON_MASK) != 0
        discard_records = can_discard and has_horizon and h.base_timestamp <= s.now_ms
    else:
        grow, can_discard = track_data(txn, tstate, h.producer_id, (h.attributes & TRANSACTIONAL_MASK) != 0,
                                        h.last_offset)  # fmt: skip
        if grow:
            return STOP_TXN_TABLE
        discard_records = can_discard
    if (
        h.producer_id >= 0
        and _is_last_of_producer(producers, h.producer_id, h.last_offset, control, h.producer_epoch)
    ) or h.last_offset + 1 == s.upper_bound:
        retention = RETENTION_RETAIN_EMPTY  # a producer's (or the round's) last batch
    elif discard_records:
        retention = RETENTION_DELETE
    else:
        retention = RETENTION_DELETE_EMPTY
    if retention == RETENTION_DELETE:  # the whole batch goes, unread
        s.records_read += h.count
        s.bytes_read += h.size
        return CONTINUE
    if not walked and h.count > 0:
        return ERR_RECORD
    has_horizon = (h.attributes & DELETE_HORIZON_MASK) != 0
    retain_deletes = (not has_horizon) or s.now_ms < h.base_timestamp
    log_append = (h.attributes & TIMESTAMP_TYPE_MASK) != 0
    n = h.count
    kept = 0
    tombs = 0
    kept_tombs = 0
    first_ts = np.int64(-1)
    max_kept_ts = np.int64(-1)
    latest = s.latest_offset
    keep_list = s.keep_list != 0
    for r in range(r0, r0 + n):
        tomb = rec[r, R_VALUE_LEN] < 0
        if tomb:
            tombs += 1
        offset = rec[r, R_OFFSET]
        if discard_records:
            k = False
        elif control or offset > latest:
            k = True
        elif rec[r, R_KEY_LEN] < 0:
            k = False
        elif keep_list:
            k = _in_keep_list(keep, s, offset) and (not tomb or retain_deletes)
        else:
            k = offset >= map_find(slots, dig[r, DIGEST_HI], dig[r, DIGEST_LO]) and (
                not tomb or retain_deletes
            )
        rec[r, R_KEEP] = k
        if k:
            ts = h.max_timestamp if log_append else h.base_timestamp + rec[r, R_TS_DELTA]
            if kept == 0:
                first_ts = ts
                max_kept_ts = ts
            elif ts > max_kept_ts:
                max_kept_ts = ts
            kept += 1
            if tomb:
                kept_tombs += 1
    s.records_read += n
    s.bytes_read += h.size
    s.tombstones_read += tombs
    s.records_retained += kept
    s.tombstones_retained += kept_tombs
    w = s.out_used
    if kept:
        need_horizon = (kept_tombs > 0 or (can_discard and control)) and not has_horizon
        if kept == n and not need_horizon:  # every record kept: the original bytes, unchanged
            copy_bytes(out, w, buf, pos, h.size)
            _emit(outb, s, w, h.last_offset, h.max_timestamp, h.size)
            return CONTINUE
        if need_horizon:
            horizon = s.now_ms + s.delete_retention_ms
        else:
            horizon = h.base_timestamp if has_horizon else NO_TIMESTAMP
        if horizon >= 0:
            base_ts = horizon
        else:
            base_ts = h.max_timestamp if log_append else first_ts
        max_ts = h.max_timestamp if log_append else max_kept_ts
        attributes = h.attributes & ~DELETE_HORIZON_MASK
        if horizon >= 0:
            attributes |= DELETE_HORIZON_MASK
        for r in range(r0, r0 + n):  # record timestamps stay; their deltas follow the new base
            if rec[r, R_KEEP]:
                ts = h.max_timestamp if log_append else h.base_timestamp + rec[r, R_TS_DELTA]
                rec[r, R_NEW_TS_DELTA] = ts - base_ts
        if h.attributes & CODEC_MASK:  # Python compresses the records and frames the batch
            start = s.scratch_used
            s.scratch_used = _write_rebuilt(area, rec, r0, n, scratch, start)
            row = outb[s.out_batches]
            row.position = s.out_file_position + w
            row.last_offset = h.last_offset
            row.max_timestamp = max_ts
            row.hole_start = start
            row.hole_length = s.scratch_used - start
            row.source_position = pos
            row.attributes = attributes
            row.base_timestamp = base_ts
            row.count = kept
            s.out_batches += 1
            s.holes += 1
            return CONTINUE
        end = _write_rebuilt(area, rec, r0, n, out, w + HEADER_SIZE)
        length = end - w
        _write_header(out, w, buf, pos, length, attributes, base_ts, max_ts, kept)
        _seal(out, w, length)
        _emit(outb, s, w, h.last_offset, max_ts, length)
        return CONTINUE
    if retention == RETENTION_RETAIN_EMPTY:  # a header-only batch keeps the producer's (or the round's) end
        s.batches_emptied += 1
        attributes = h.attributes & (TIMESTAMP_TYPE_MASK | TRANSACTIONAL_MASK | CONTROL_MASK)
        _write_header(out, w, buf, pos, HEADER_SIZE, attributes, NO_TIMESTAMP, h.max_timestamp, 0)
        _seal(out, w, HEADER_SIZE)
        _emit(outb, s, w, h.last_offset, h.max_timestamp, HEADER_SIZE)
    return CONTINUE


@njit(cache=True)
def _write_rebuilt(area, rec, r0, n, out, w):
    """The kept records of one batch, re-encoded as Kafka's builder writes them: attributes 0 and the
    new timestamp deltas; offset deltas, keys, values and headers byte for byte. Returns the position
    after the last record."""
    for r in range(r0, r0 + n):
        if not rec[r, R_KEEP]:
            continue
        rest = rec[r, R_BODY] + 1 + _varlong_size(rec[r, R_TS_DELTA])
        rest_len = rec[r, R_REC_END] - rest
        new_tsd = rec[r, R_NEW_TS_DELTA]
        w = _put_varlong(out, w, np.int64(1 + _varlong_size(new_tsd) + rest_len))  # zig-zag of a length >= 0
        out[w] = 0
        w += 1
        w = _put_varlong(out, w, new_tsd)
        copy_bytes(out, w, area, rest, rest_len)
        w += rest_len
    return w


@njit(cache=True, inline="always")
def _in_keep_list(keep, s, offset):
    """Whether ``offset`` is in the ascending ``keep`` list; the cursor ``s.keep_next`` follows the
    offsets (forward as they grow, back when a batch is decided again after a stop)."""
    i = s.keep_next
    while i > 0 and keep[i - 1] >= offset:
        i -= 1
    while i < keep.shape[0] and keep[i] < offset:
        i += 1
    s.keep_next = i
    return i < keep.shape[0] and keep[i] == offset


@njit(cache=True)
def clean(
    buf, end, areas, bounds, slots, keep, producers, txn, tstate, events, out, outb, scratch, store, sst, karea_w,
    karea_r, rec, dig, bat, cst, st,
):  # fmt: skip
    """Pass 2 over ``buf[st.position:end]`` into the output buffer; the other arguments as for
    :func:`build_map`. A compressed batch that loses records is rebuilt into ``scratch`` and left as a
    hole in the output (``OUT_BATCH``) for Python to compress when it writes the buffer out. ``keep``:
    the keep list, read when ``st.keep_list`` (then no key is hashed)."""
    c = cst[0]
    hash_upto = np.int64(-2) if st[0].keep_list else st[0].latest_offset
    while True:
        if not (c.next < c.batches and bat[c.next, B_POS] == st[0].position):
            outcome, stop, nb, nr, err, err_pos, next_area = _walk_chunk(
                buf, st[0].position, end, rec, dig, bat, False, -1, hash_upto, areas, bounds,
                st[0].area_next, store, sst, karea_w, karea_r,
            )  # fmt: skip
            if outcome == _CHUNK_GROW:
                c.records_needed = max(2 * rec.shape[0], read_i32(buf, st[0].position + RECORDS_COUNT_AT))
                return STOP_CHUNK_ROOM
            _new_chunk_state(c, nb, stop, outcome, next_area, err, err_pos)
            _prefetch_slots(slots, rec, dig, nr)
        for k in range(c.next, c.batches):
            bpos = bat[k, B_POS]
            area = areas if bat[k, B_AREA] >= 0 else (karea_r if bat[k, B_AREA] == AREA_KERNEL else buf)
            status = _clean_batch(buf, bpos, _head(buf, bpos), area, rec, dig, bat[k, B_FIRST], bat[k, B_WALKED],
                                  slots, keep, producers, txn, tstate, events, out, outb, scratch, c, st)  # fmt: skip
            if status != CONTINUE:
                c.next = k
                st[0].position = bpos
                st[0].area_next = bat[k, B_AREA] if bat[k, B_AREA] >= 0 else c.area_next
                return status
        c.next = c.batches
        st[0].position = c.stop
        st[0].area_next = c.area_next
        if c.outcome != _CHUNK_FULL and c.outcome != _CHUNK_WALK_FAILED:
            return DONE if c.outcome == _CHUNK_DONE else c.outcome


@njit(cache=True)
def append_output(out, outb, st, data, last_offset, max_ts):
    """Append a batch framed by Python (a recompressed or legacy one) to the output buffer."""
    s = st[0]
    w = s.out_used
    n = data.shape[0]
    copy_bytes(out, w, data, 0, n)
    _emit(outb, s, w, last_offset, max_ts, n)


# ---------------------------------------------------------------------------------------------- indexes
INDEX_STATE = np.dtype(
    [
        ("base_offset", np.int64),
        ("index_interval_bytes", np.int64),
        ("max_offset_entries", np.int64),
        ("max_time_entries", np.int64),
        ("last_indexed_position", np.int64),
        ("last_position", np.int64),
        ("max_timestamp", np.int64),  # largest batch max timestamp so far
        ("offset_of_max_timestamp", np.int64),
        ("offset_entries", np.int64),
        ("last_indexed_relative", np.int64),
        ("time_entries", np.int64),
        ("last_time_timestamp", np.int64),
    ]
)
INDEX_OK, INDEX_OFFSET_RANGE, INDEX_POSITION_ORDER, INDEX_OFFSET_FULL, INDEX_TIME_FULL, INDEX_NOT_ABOVE = (
    range(6)
)
MAX_RELATIVE_OFFSET = 2**31 - 1
MAX_POSITION = 2**31 - 1


@njit(cache=True)
def index_entries(positions, last_offsets, max_timestamps, st, rel, pos, time_ts, time_rel):
    """``index_builder.IndexBuilder.append`` over many batches: the broker's recovery rule (format spec
    §9-§10). New entries go to ``rel``/``pos`` and ``time_ts``/``time_rel`` from index 0; ``st`` counts
    every entry so far. Returns (INDEX_*, index of the batch that failed)."""
    s = st[0]
    new_offsets = 0
    new_times = 0
    for i in range(positions.shape[0]):
        position = positions[i]
        relative = last_offsets[i] - s.base_offset
        if relative < 0 or relative > MAX_RELATIVE_OFFSET:
            return INDEX_OFFSET_RANGE, i
        if not (s.last_position < position <= MAX_POSITION):
            return INDEX_POSITION_ORDER, i
        ts = max_timestamps[i]
        new_max = ts > s.max_timestamp
        if position - s.last_indexed_position > s.index_interval_bytes:
            if s.offset_entries >= s.max_offset_entries:
                return INDEX_OFFSET_FULL, i
            if s.time_entries >= s.max_time_entries - 1:
                return INDEX_TIME_FULL, i
            if s.offset_entries > 0 and relative <= s.last_indexed_relative:
                return INDEX_NOT_ABOVE, i
            rel[new_offsets] = relative
            pos[new_offsets] = position
            new_offsets += 1
            s.offset_entries += 1
            s.last_indexed_relative = relative
            s.last_indexed_position = position
            entry_ts = ts if new_max else s.max_timestamp
            entry_offset = last_offsets[i] if new_max else s.offset_of_max_timestamp
            if entry_ts > (s.last_time_timestamp if s.time_entries > 0 else NO_TIMESTAMP):
                time_ts[new_times] = entry_ts
                time_rel[new_times] = entry_offset - s.base_offset
                new_times += 1
                s.time_entries += 1
                s.last_time_timestamp = entry_ts
        if new_max:
            s.max_timestamp = ts
            s.offset_of_max_timestamp = last_offsets[i]
        s.last_position = position
    return INDEX_OK, -1
