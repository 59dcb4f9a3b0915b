"""Pass 2 of the log cleaner over a whole segment, compiled: per batch the tracker, the batch's
disposition (deleted whole, filtered, kept empty), the keep rule per record, and the batch written to
the output buffer unchanged, rebuilt, or as an empty header (Kafka's ``cleanInto`` and
``MemoryRecords.filterTo``). A compressed batch that loses records is rebuilt and compressed again here
(:mod:`codec_kernels`); only when the codec library is missing or refuses is it rebuilt uncompressed and
left as a hole for Python to compress. The same keep rule for one legacy batch (``decide_keep``)."""

from __future__ import annotations

import numpy as np
from numba import njit

from kafka_log_core.format.record_batch import (
    ATTRIBUTES_OFFSET,
    CODEC_MASK,
    CONTROL_MASK,
    CRC_OFFSET,
    DELETE_HORIZON_MASK,
    HEADER_SIZE,
    LOG_OVERHEAD,
    NO_TIMESTAMP,
    TIMESTAMP_TYPE_MASK,
    TRANSACTIONAL_MASK,
    BatchRetention,
)
from kafka_log_core.kernels.batch_header import (
    BASE_OFFSET_AT,
    BASE_TIMESTAMP_AT,
    BATCH_LENGTH_AT,
    MAX_TIMESTAMP_AT,
    RECORDS_COUNT_AT,
    batch_head,
    framing,
)
from kafka_log_core.kernels.chunk_walk import (
    AREA_KERNEL,
    B_AREA,
    B_FIRST,
    B_POS,
    B_WALKED,
    CHUNK_DONE,
    CHUNK_FULL,
    CHUNK_GROW,
    CHUNK_WALK_FAILED,
    control_type,
    new_chunk_state,
    prefetch_slots,
    walk_chunk,
)
from kafka_log_core.kernels.codec_kernels import compress_area, compress_bound
from kafka_log_core.kernels.crc32c import crc32c
from kafka_log_core.kernels.digest_store import S_BATCH, S_HI, S_LO, S_OFFSET, STORE_USE, stored_batch
from kafka_log_core.kernels.fields import (
    borrowed,
    copy_bytes,
    prefetch_row,
    read_i16,
    read_i32,
    read_i64,
    write_i16,
    write_i32,
    write_i64,
)
from kafka_log_core.kernels.header_scan import NOT_CONTROL, UNREADABLE_CONTROL
from kafka_log_core.kernels.key_digest import DIGEST_HI, DIGEST_LO
from kafka_log_core.kernels.offset_map import map_find, map_slot
from kafka_log_core.kernels.record_walk import (
    OK,
    R_BODY,
    R_KEEP,
    R_KEY_LEN,
    R_NEW_TS_DELTA,
    R_OFFSET,
    R_REC_END,
    R_TS_DELTA,
    R_VALUE_LEN,
    SOURCE_BUF,
    walk_into,
)
from kafka_log_core.kernels.statuses import (
    CONTINUE,
    DONE,
    ERR_CONTROL,
    ERR_RECORD,
    STOP_CHUNK_ROOM,
    STOP_OUTPUT,
    STOP_SCRATCH,
    STOP_TXN,
    STOP_TXN_TABLE,
)
from kafka_log_core.kernels.txn_table import track_control, track_data

# A rebuilt record may grow: a timestamp delta of up to 10 bytes instead of 1, a longer length varint.
REBUILD_GROWTH_PER_RECORD = 14
# The map slot of the stored digest this many rows ahead is fetched while a stored batch is cleaned.
PREFETCH_AHEAD = 16
# Where no stored batch is found, the chunks walked hold 1, 2, 4, ... up to 2**CHUNK_DOUBLINGS batches.
CHUNK_DOUBLINGS = 9


# BatchRetention as plain ints for the compiled pass
RETENTION_DELETE = int(BatchRetention.DELETE)
RETENTION_DELETE_EMPTY = int(BatchRetention.DELETE_EMPTY)
RETENTION_RETAIN_EMPTY = int(BatchRetention.RETAIN_EMPTY)


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
        (
            "max_batch_bytes",
            np.int64,
        ),  # the most one batch's records may decompress to (compression.MAX_BATCH_BYTES)
        ("out_needed", np.int64),  # STOP_OUTPUT: the room the batch may take in the output buffer
        ("stored_batches", np.int64),  # batches cleaned from the digest store, their records not walked
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
    write_i16(out, w + ATTRIBUTES_OFFSET, attributes)
    write_i64(out, w + BASE_TIMESTAMP_AT, base_ts)
    write_i64(out, w + MAX_TIMESTAMP_AT, max_ts)
    write_i32(out, w + RECORDS_COUNT_AT, count)


@njit(cache=True, inline="always")
def _seal(out, w, length):
    write_i32(out, w + CRC_OFFSET, crc32c(out, w + ATTRIBUTES_OFFSET, length - ATTRIBUTES_OFFSET))


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
    buf, pos, h, area, rec, dig, r0, walked, slots, keep, producers, txn, tstate, events, out, outb, scratch,
    codecs, c, st,
):  # fmt: skip
    """One batch of pass 2 (spec R1-R5, X2-X4): tracker, disposition, the keep rule per record, and the
    batch written to ``out`` unchanged, rebuilt, or as an empty header -- or dropped."""
    s = st[0]
    if h.last_offset >= tstate[0].next_aborted_first:
        s.last_offset = h.last_offset
        return STOP_TXN
    # room for the batch as it is, or rebuilt in place (an uncompressed one whose records walked: their
    # count is checked; a compressed one is rebuilt in ``scratch``, then compressed into the output here
    # when the kernels have its codec)
    codec = h.attributes & CODEC_MASK
    need = h.size
    rebuilt = 0
    if walked and not codec:
        need += REBUILD_GROWTH_PER_RECORD * h.count
    elif walked and h.count > 0:
        rebuilt = rec[r0 + h.count - 1, R_REC_END] - rec[r0, R_BODY] + 5 + REBUILD_GROWTH_PER_RECORD * h.count
        need = max(need, HEADER_SIZE + compress_bound(codecs, codec, rebuilt))
    if out.shape[0] - s.out_used < need or s.out_batches >= outb.shape[0]:
        s.out_needed = need
        return STOP_OUTPUT
    if scratch.shape[0] - s.scratch_used < rebuilt:  # room to rebuild its records, if it comes to that
        s.scratch_needed = rebuilt
        return STOP_SCRATCH
    control = (h.attributes & CONTROL_MASK) != 0
    if control:
        ctype = NOT_CONTROL
        if not walked:  # also 0 records over bytes
            return ERR_RECORD
        if h.count > 0:
            ctype = control_type(area, rec, r0)
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
    if not walked:  # also 0 records over bytes: never dropped as an empty batch
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
        if codec:  # compressed here, else (no library) left as a hole for Python to compress
            start = s.scratch_used
            rebuilt_end = _write_rebuilt(area, rec, r0, n, scratch, start)
            body_end = -1
            if compress_bound(codecs, codec, rebuilt_end - start) >= 0:
                body_end = compress_area(
                    codecs, codec, scratch, start, rebuilt_end - start, out, w + HEADER_SIZE
                )
            if body_end >= 0:
                length = body_end - w
                _write_header(out, w, buf, pos, length, attributes, base_ts, max_ts, kept)
                _seal(out, w, length)
                _emit(outb, s, w, h.last_offset, max_ts, length)
                return CONTINUE
            s.scratch_used = rebuilt_end
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


@njit(cache=True, inline="always")
def _stored_batches(
    buf, end, slots, keep, producers, txn, tstate, events, out, outb, scratch, store, sst, codecs, rec, dig, c,
    st,
):  # fmt: skip
    """The run of uncompressed one-record batches from ``st.position`` whose (keyed) record pass 1 walked
    and stored (``digest_store.stored_batch``), cleaned without the chunk: the offset and digest come
    from the store, and a kept batch is copied unchanged or written empty, which reads nothing else of
    the record; only a tombstone's record is walked (kept, it may be rebuilt with a delete horizon).
    Stops at the first other batch. Returns (status, batches cleaned)."""
    s = sst[0]
    rows = store.shape[0]
    n_slots = slots.shape[0]
    taken = 0
    while s.used < rows:
        row = s.used
        pos = st[0].position
        at, tombstone = stored_batch(store, row)
        if at != pos:
            break
        status, total, magic = framing(buf, pos, end)
        if status != CONTINUE or magic != 2 or read_i32(buf, pos + RECORDS_COUNT_AT) != 1:
            break
        if read_i16(buf, pos + ATTRIBUTES_OFFSET) & (CODEC_MASK | CONTROL_MASK):
            break
        if row + PREFETCH_AHEAD < rows:
            prefetch_row(slots, map_slot(store[row + PREFETCH_AHEAD, S_HI], n_slots))
        offset = np.int64(store[row, S_OFFSET])
        if tombstone:  # a kept one may be rebuilt (a delete horizon set): its record's fields are needed
            err, _ = walk_into(buf, pos + HEADER_SIZE, pos + total, 1, read_i64(buf, pos + BASE_OFFSET_AT), rec, 0,
                               False, -1, -2, SOURCE_BUF)  # fmt: skip
            if err != OK or rec[0, R_OFFSET] != offset:
                break
        else:
            rec[0, R_OFFSET] = offset
            rec[0, R_KEY_LEN] = 0
            rec[0, R_VALUE_LEN] = 0
        dig[0, DIGEST_HI] = store[row, S_HI]
        dig[0, DIGEST_LO] = store[row, S_LO]
        status = _clean_batch(buf, pos, batch_head(buf, pos), buf, rec, dig, 0, True, slots, keep, producers, txn,
                              tstate, events, out, outb, scratch, codecs, c, st)  # fmt: skip
        if status != CONTINUE:
            st[0].stored_batches += taken
            return status, taken
        s.used = row + 1
        st[0].position = pos + total
        taken += 1
    st[0].stored_batches += taken
    return CONTINUE, taken


@njit(cache=True)
def clean(
    buf, end, areas, bounds, slots, keep, producers, txn, tstate, events, out, outb, scratch, store, sst, karea_w,
    karea_r, codecs, rec, dig, bat, cst, st,
):  # fmt: skip
    """Pass 2 over ``buf[st.position:end]`` into the output buffer; the other arguments as for
    :func:`build_map`. A compressed batch that loses records is rebuilt into ``scratch``, then compressed
    into the output, or (no library for its codec) left as a hole in it (``OUT_BATCH``) for Python to
    compress when it writes the buffer out. ``keep``:
    the keep list, read when ``st.keep_list`` (then no key is hashed). A one-record batch the store
    (``STORE_WORDS`` of them) knows is cleaned without walking its record (:func:`_stored_batches`);
    where none is, the batches are walked in a chunk of one batch, then of two, four, ... while none is
    found after each."""
    buf, areas, bounds, slots, keep, producers = (
        borrowed(buf), borrowed(areas), borrowed(bounds), borrowed(slots), borrowed(keep), borrowed(producers)
    )  # fmt: skip
    txn, tstate, events, out, outb, scratch = (
        borrowed(txn), borrowed(tstate), borrowed(events), borrowed(out), borrowed(outb), borrowed(scratch)
    )  # fmt: skip
    store, sst, karea_w, karea_r, codecs = (
        borrowed(store), borrowed(sst), borrowed(karea_w), borrowed(karea_r), borrowed(codecs)
    )  # fmt: skip
    rec, dig, bat, cst, st = borrowed(rec), borrowed(dig), borrowed(bat), borrowed(cst), borrowed(st)
    c = cst[0]
    hash_upto = np.int64(-2) if st[0].keep_list else st[0].latest_offset
    stored = store.shape[1] > S_BATCH
    misses = 0  # runs of stored batches looked for in vain, one after another
    while True:
        if not (c.next < c.batches and bat[c.next, B_POS] == st[0].position):
            limit = bat.shape[0]
            if stored and sst[0].mode == STORE_USE:
                status, taken = _stored_batches(buf, end, slots, keep, producers, txn, tstate, events, out, outb,
                                                scratch, store, sst, codecs, rec, dig, c, st)  # fmt: skip
                if status != CONTINUE:
                    return status
                if taken:
                    misses = 0
                limit = min(limit, (1 << misses) + 1)
                if not taken:
                    misses = min(misses + 1, CHUNK_DOUBLINGS)
            outcome, stop, nb, nr, err, err_pos, next_area = walk_chunk(
                buf, st[0].position, end, rec, dig, bat[:limit], False, -1, hash_upto, areas, bounds,
                st[0].area_next, store, sst, karea_w, karea_r, codecs, st[0].max_batch_bytes,
            )  # fmt: skip
            if outcome == CHUNK_GROW:
                c.records_needed = max(2 * rec.shape[0], read_i32(buf, st[0].position + RECORDS_COUNT_AT))
                return STOP_CHUNK_ROOM
            new_chunk_state(c, nb, stop, outcome, next_area, err, err_pos)
            prefetch_slots(slots, rec, dig, nr)
        for k in range(c.next, c.batches):
            bpos = bat[k, B_POS]
            area = areas if bat[k, B_AREA] >= 0 else (karea_r if bat[k, B_AREA] == AREA_KERNEL else buf)
            status = _clean_batch(buf, bpos, batch_head(buf, bpos), area, rec, dig, bat[k, B_FIRST], bat[k, B_WALKED],
                                  slots, keep, producers, txn, tstate, events, out, outb, scratch, codecs, c,
                                  st)  # fmt: skip
            if status != CONTINUE:
                c.next = k
                st[0].position = bpos
                st[0].area_next = bat[k, B_AREA] if bat[k, B_AREA] >= 0 else c.area_next
                return status
        c.next = c.batches
        st[0].position = c.stop
        st[0].area_next = c.area_next
        if c.outcome != CHUNK_FULL and c.outcome != CHUNK_WALK_FAILED:
            return DONE if c.outcome == CHUNK_DONE else c.outcome


@njit(cache=True)
def append_output(out, outb, st, data, last_offset, max_ts):
    """Append a batch framed by Python (a recompressed or legacy one) to the output buffer."""
    s = st[0]
    w = s.out_used
    n = data.shape[0]
    copy_bytes(out, w, data, 0, n)
    _emit(outb, s, w, last_offset, max_ts, n)


KEEP_BY_RULES, KEEP_ALL, KEEP_NONE = 0, 1, 2


@njit(cache=True)
def decide_keep(offsets, key_len, value_null, hi, lo, table, latest, retain_deletes, mode):
    """The cleaner's per-record rule (spec R3) over one legacy batch (v2 batches are decided inside the
    segment passes). ``mode``: KEEP_BY_RULES, KEEP_ALL or KEEP_NONE. Returns (keep, kept, tombstones,
    kept_tombstones)."""
    n = offsets.shape[0]
    keep = np.zeros(n, dtype=np.bool_)
    kept = tombs = kept_tombs = 0
    for i in range(n):
        tomb = value_null[i]
        if tomb:
            tombs += 1
        if mode == KEEP_NONE:
            k = False
        elif mode == KEEP_ALL or offsets[i] > latest:
            k = True
        elif key_len[i] < 0:
            k = False
        else:
            k = offsets[i] >= map_find(table, hi[i], lo[i]) and (not tomb or retain_deletes)
        if k:
            keep[i] = True
            kept += 1
            if tomb:
                kept_tombs += 1
    return keep, kept, tombs, kept_tombs
