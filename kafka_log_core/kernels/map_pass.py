"""Pass 1 of the log cleaner over a whole segment, compiled: the transaction tracker, then every keyed
record at or above the first dirty offset into the offset map (Kafka's ``buildOffsetMap``). Python
calls it once per segment and again only where it stops (:mod:`statuses`). On the way every batch's
offsets are checked as a broker appends them (``offset_order.batch_offsets``, within the segment: Python
checks the boundaries between segments from ``offsets_first``/``offsets_last``)."""

from __future__ import annotations

import numpy as np
from numba import njit

from kafka_log_core.constants import MAX_LONG
from kafka_log_core.format.record_batch import CONTROL_MASK, TRANSACTIONAL_MASK
from kafka_log_core.kernels.batch_header import RECORDS_COUNT_AT, batch_head
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
from kafka_log_core.kernels.digest_store import STORE_FILL, store_put
from kafka_log_core.kernels.fields import borrowed, read_i32
from kafka_log_core.kernels.header_scan import NOT_CONTROL, UNREADABLE_CONTROL
from kafka_log_core.kernels.key_digest import DIGEST_HI, DIGEST_LO
from kafka_log_core.kernels.offset_map import map_put
from kafka_log_core.kernels.offset_order import OFFSETS_OK, batch_offsets
from kafka_log_core.kernels.record_walk import R_KEY_LEN, R_OFFSET
from kafka_log_core.kernels.statuses import (
    CONTINUE,
    DONE,
    ERR_CONTROL,
    ERR_OFFSETS,
    ERR_RECORD,
    STOP_CHUNK_ROOM,
    STOP_MAP_FULL,
    STOP_TXN,
    STOP_TXN_TABLE,
)
from kafka_log_core.kernels.txn_table import track_control, track_data

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
        (
            "max_batch_bytes",
            np.int64,
        ),  # the most one batch's records may decompress to (compression.MAX_BATCH_BYTES)
        ("segment_base", np.int64),  # the base offset of the segment walked
        # the batches at or after this position have their offsets checked (Python: where the walk
        # starts; moved past each batch checked, so a batch decided again after a stop is not)
        ("offsets_from", np.int64),
        ("offsets_batches", np.int64),  # batches checked since the walk started
        ("offsets_first", np.int64),  # the first offset of the first of them
        ("offsets_last", np.int64),  # the last offset of the last of them
    ]
)


# ---------------------------------------------------------------------------------------------- pass 1
@njit(cache=True, inline="always")
def _map_batch(buf, pos, h, area, rec, dig, r0, walked, slots, txn, tstate, events, c, st):
    """One batch of pass 1 (spec M2-M4): its offsets checked, the tracker, then every keyed record at or
    above the first dirty offset goes into the map. ``walked``: its records are in the chunk from row
    ``r0`` (they did not walk, or were not decompressed: an error only if they are needed)."""
    s = st[0]
    if pos >= s.offsets_from:
        seen = s.offsets_batches > 0
        finding = batch_offsets(h.base_offset, h.last_offset, h.count, s.segment_base, s.offsets_last, seen)
        if finding != OFFSETS_OK:
            return ERR_OFFSETS
        if not seen:
            s.offsets_first = h.base_offset
        s.offsets_last = h.last_offset
        s.offsets_batches += 1
        s.offsets_from = pos + 1
    if h.last_offset >= tstate[0].next_aborted_first:
        s.last_offset = h.last_offset
        return STOP_TXN
    if h.attributes & CONTROL_MASK:
        ctype = NOT_CONTROL
        if not walked:  # also 0 records over bytes
            return ERR_RECORD
        if h.count > 0:
            ctype = control_type(area, rec, r0)
            if ctype == UNREADABLE_CONTROL:
                return ERR_CONTROL
        track_control(txn, tstate, events, h.producer_id, h.count, ctype)
    else:
        grow, discard = track_data(txn, tstate, h.producer_id, (h.attributes & TRANSACTIONAL_MASK) != 0,
                                    h.last_offset)  # fmt: skip
        if grow:
            return STOP_TXN_TABLE
        if not discard and not walked:  # also 0 records over bytes
            return ERR_RECORD
        if not discard and h.count > 0:
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
    buf,
    end,
    areas,
    bounds,
    slots,
    txn,
    tstate,
    events,
    store,
    sst,
    karea_w,
    karea_r,
    codecs,
    rec,
    dig,
    bat,
    cst,
    st,
):
    """Pass 1 over ``buf[st.position:end]``, CRC32C checked on the way. ``areas``/``bounds``: the
    records of the run of compressed batches at ``st.position``, from ``st.area_next`` on (see
    ``walk_chunk``); ``rec``/``dig``/``bat``/``cst``: the chunk, kept between calls (a stop resumes
    the chunk it stopped in). See the module docstring for the statuses."""
    buf, areas, bounds, slots, txn, tstate, events = (
        borrowed(buf), borrowed(areas), borrowed(bounds), borrowed(slots), borrowed(txn), borrowed(tstate),
        borrowed(events),
    )  # fmt: skip
    store, sst, karea_w, karea_r, codecs = (
        borrowed(store), borrowed(sst), borrowed(karea_w), borrowed(karea_r), borrowed(codecs)
    )  # fmt: skip
    rec, dig, bat, cst, st = borrowed(rec), borrowed(dig), borrowed(bat), borrowed(cst), borrowed(st)
    c = cst[0]
    while True:
        if not (c.next < c.batches and bat[c.next, B_POS] == st[0].position):
            outcome, stop, nb, nr, err, err_pos, next_area = walk_chunk(
                buf, st[0].position, end, rec, dig, bat, True, st[0].start_offset, MAX_LONG, areas, bounds,
                st[0].area_next, store, sst, karea_w, karea_r, codecs, st[0].max_batch_bytes,
            )  # fmt: skip
            if outcome == CHUNK_GROW:
                c.records_needed = max(2 * rec.shape[0], read_i32(buf, st[0].position + RECORDS_COUNT_AT))
                return STOP_CHUNK_ROOM
            new_chunk_state(c, nb, stop, outcome, next_area, err, err_pos)
            if not st[0].rows_only:
                prefetch_slots(slots, rec, dig, nr)
        for k in range(c.next, c.batches):
            bpos = bat[k, B_POS]
            area = areas if bat[k, B_AREA] >= 0 else (karea_r if bat[k, B_AREA] == AREA_KERNEL else buf)
            status = _map_batch(buf, bpos, batch_head(buf, bpos), area, rec, dig, bat[k, B_FIRST], bat[k, B_WALKED], slots,
                                txn, tstate, events, c, st)  # fmt: skip
            if status != CONTINUE:
                c.next = k
                st[0].position = bpos
                st[0].area_next = bat[k, B_AREA] if bat[k, B_AREA] >= 0 else c.area_next
                return status
            if sst[0].mode == STORE_FILL:
                store_put(store, sst, rec, dig, bat[k, B_FIRST], bat[k + 1, B_FIRST], bpos)
        c.next = c.batches
        st[0].position = c.stop
        st[0].area_next = c.area_next
        if c.outcome != CHUNK_FULL and c.outcome != CHUNK_WALK_FAILED:
            return DONE if c.outcome == CHUNK_DONE else c.outcome
