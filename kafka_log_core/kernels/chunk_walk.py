"""Phase A of every pass: records are handled in chunks. The record walk and the MD5 digests of a run of
batches are computed first (keys go sixteen at a time through the MD5 lanes, whatever the batch sizes),
then each batch is decided in order by the pass (:mod:`map_pass`, :mod:`clean_pass`).

A chunk is the record table (one int64 row per record, ``record_walk.R_*`` columns), the key digests,
and one int64 row per batch (``B_*``); its state (``CHUNK_STATE``) is kept between kernel calls, so a
stop resumes the chunk it stopped in. Compressed batches are decompressed here (:mod:`codec_kernels`,
into ``karea``); data a codec library refuses (and every batch of a codec whose library is missing)
stops the walk (``STOP_COMPRESSED``) and Python hands back their records decompressed, or the reader's
error (``areas``/``bounds``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kafka_log_core.constants import MAX_LONG
from kafka_log_core.format.compression import CompressionType
from kafka_log_core.format.record_batch import (
    ATTRIBUTES_OFFSET,
    CODEC_MASK,
    CONTROL_ABORT,
    CONTROL_COMMIT,
    CONTROL_MASK,
    CRC_OFFSET,
    HEADER_SIZE,
    MIN_RECORD_BYTES,
)
from kafka_log_core.kernels.batch_header import BASE_OFFSET_AT, RECORDS_COUNT_AT, framing
from kafka_log_core.kernels.codec_kernels import LZ4_NEEDS_ROOM, LZ4_OK, decode_area, decode_limit
from kafka_log_core.kernels.crc32c import crc32c
from kafka_log_core.kernels.digest_store import S_HI, S_LO, S_OFFSET, STORE_NONE, STORE_STATE, STORE_USE
from kafka_log_core.kernels.fields import borrowed, prefetch_row, read_i16, read_i32, read_i64, read_u32
from kafka_log_core.kernels.header_scan import UNREADABLE_CONTROL
from kafka_log_core.kernels.key_digest import DIGEST_HI, DIGEST_LO, hash_rows
from kafka_log_core.kernels.offset_map import map_slot
from kafka_log_core.kernels.record_walk import (
    ERR_RECORD_COUNT,
    OK,
    R_KEY_LEN,
    R_KEY_POS,
    R_OFFSET,
    R_VALUE_LEN,
    R_WANT,
    RECORD_COLUMNS,
    SOURCE_AREAS,
    SOURCE_BUF,
    SOURCE_KAREA,
    WANT_HASH,
    WANT_STORED,
    walk_into,
)
from kafka_log_core.kernels.statuses import (
    CONTINUE,
    DONE,
    ERR_CRC,
    ERR_RECORD,
    STOP_AREA_ROOM,
    STOP_COMPRESSED,
    STOP_LEGACY,
)

# Internal chunk outcomes (why phase A stopped collecting batches).
CHUNK_DONE = 100
CHUNK_FULL = 101
CHUNK_GROW = 102
CHUNK_WALK_FAILED = 103


# decompressed area holds them (-1: the segment's own bytes).
B_POS, B_FIRST, B_WALKED, B_AREA = range(4)
AREA_SEGMENT, AREA_KERNEL = -1, -2  # B_AREA: the segment's own bytes, karea; >= 0: a Python-decompressed one
NOT_DECOMPRESSED = 100  # CHUNK_STATE.error of a batch Python could not decompress (not a record_walk.ERR_*)
NONE_CODEC, ZSTD_CODEC = int(CompressionType.NONE), int(CompressionType.ZSTD)  # the kernels decode 1..4
BATCH_COLUMNS = 4


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


@njit(cache=True)
def new_chunk(records, batches):
    """The record table (``kernels.R_*`` columns), its key digests, and the batch table (B_* columns)."""
    return (
        np.zeros((records, RECORD_COLUMNS), dtype=np.int64),
        np.zeros((records, 2), dtype=np.uint64),
        np.zeros((batches + 1, BATCH_COLUMNS), dtype=np.int64),
    )


@njit(cache=True)
def walk_chunk(
    buf, pos, end, rec, dig, bat, check_crc, hash_from, hash_upto, areas, bounds, area_next, store, sst, karea_w,
    karea_r, codecs, max_batch_bytes,
):  # fmt: skip
    """Phase A: walk the records of consecutive v2 batches from ``pos`` into the chunk and hash their
    keys. The first ``bounds.shape[0] - area_next`` batches are compressed ones Python decompressed:
    their records are ``areas[bounds[i, 0]:bounds[i, 1]]`` (a failed decompression: -1). Returns
    (outcome, stop_pos, batches, records, err, err_pos); ``outcome`` says why the chunk ends at
    ``stop_pos`` (a STOP_*/ERR_* status or _CHUNK_*). A batch whose records do not walk is the chunk's
    last, marked unwalked (phase B decides whether that matters); so is one whose record count its record
    area cannot hold: the chunk is sized by a count only once the bytes holding the records are known.
    A compressed batch decompresses here (``codecs``: :mod:`native_codecs`) to at most
    ``area_limit(count, max_batch_bytes)`` bytes."""
    nb = 0
    nr = 0
    kused = 0  # bytes of ``karea`` holding this chunk's lz4 batches, decompressed here
    kend = np.int64(0)
    outcome = CHUNK_DONE
    err = np.int64(0)
    err_pos = np.int64(0)
    n_records = rec.shape[0]
    n_batches = bat.shape[0] - 1
    while True:
        status, total, magic = framing(buf, pos, end)
        if status != CONTINUE:
            outcome = CHUNK_DONE if status == DONE else status
            break
        if magic != 2:
            outcome = STOP_LEGACY
            break
        if nb == n_batches:
            outcome = CHUNK_FULL
            break
        if check_crc and crc32c(buf, pos + ATTRIBUTES_OFFSET, total - ATTRIBUTES_OFFSET) != read_u32(
            buf, pos + CRC_OFFSET
        ):
            outcome = ERR_CRC
            break
        count = read_i32(buf, pos + RECORDS_COUNT_AT)
        attributes = np.int64(buf[pos + ATTRIBUTES_OFFSET + 1])
        codec = attributes & CODEC_MASK
        # where the batch's records are, and the bytes that hold them
        if codec and area_next < bounds.shape[0]:  # decompressed by Python (-1: it failed)
            source = SOURCE_AREAS
            a0, a1 = bounds[area_next, 0], bounds[area_next, 1]
        elif NONE_CODEC < codec <= ZSTD_CODEC:  # decoded here, into karea
            limit = decode_limit(count, max_batch_bytes)
            found, kend = decode_area(
                codecs, codec, buf, pos + HEADER_SIZE, pos + total, karea_w, kused, limit
            )
            if found == LZ4_NEEDS_ROOM:
                outcome = CHUNK_FULL if nb else STOP_AREA_ROOM
                break
            if found != LZ4_OK:
                outcome = STOP_COMPRESSED  # not a frame the kernel takes: Python's codec library decides
                break
            source = SOURCE_KAREA
            a0, a1 = kused, kend
        elif codec:
            outcome = STOP_COMPRESSED  # Python decompresses the run of compressed batches from here
            break
        else:
            source = SOURCE_BUF
            a0, a1 = pos + HEADER_SIZE, pos + total
        fits = a0 >= 0 and count * MIN_RECORD_BYTES <= a1 - a0
        if fits and nr + count > n_records:
            outcome = CHUNK_GROW if nb == 0 else CHUNK_FULL
            break
        if source == SOURCE_AREAS:
            bat[nb, B_AREA] = area_next
            area_next += 1
        elif source == SOURCE_KAREA:
            bat[nb, B_AREA] = AREA_KERNEL
            kused = kend
        else:
            bat[nb, B_AREA] = AREA_SEGMENT
        if a0 < 0:
            err = NOT_DECOMPRESSED  # Python raises the codec's error if the records are needed
        elif not fits:
            err, err_pos = ERR_RECORD_COUNT, a0
        else:
            area = areas if source == SOURCE_AREAS else (karea_r if source == SOURCE_KAREA else buf)
            err, err_pos = walk_into(area, a0, a1, count, read_i64(buf, pos + BASE_OFFSET_AT), rec, nr,
                                     (attributes & CONTROL_MASK) != 0, hash_from, hash_upto, source)  # fmt: skip
        bat[nb, B_POS] = pos
        bat[nb, B_FIRST] = nr
        bat[nb, B_WALKED] = err == OK
        nb += 1
        pos += total
        if err != OK:
            outcome = CHUNK_WALK_FAILED
            break
        nr += count
    bat[nb, B_FIRST] = nr
    if sst[0].mode == STORE_USE:
        store_take(store, sst, rec, dig, bat, nb)
    hash_rows(buf, areas, karea_r, rec, dig, 0, nr)
    return outcome, pos, nb, nr, err, err_pos, area_next


@njit(cache=True, inline="always")
def store_take(store, sst, rec, dig, bat, nb):
    """Digests of the chunk's keys from the store, while the offsets agree."""
    s = sst[0]
    for k in range(nb):
        for r in range(bat[k, B_FIRST], bat[k + 1, B_FIRST]):
            if rec[r, R_WANT] == WANT_HASH and s.mode == STORE_USE:
                c = s.used
                if c < store.shape[0] and np.int64(store[c, S_OFFSET]) == rec[r, R_OFFSET]:
                    dig[r, DIGEST_HI] = store[c, S_HI]
                    dig[r, DIGEST_LO] = store[c, S_LO]
                    rec[r, R_WANT] = WANT_STORED
                    s.used = c + 1
                else:
                    s.mode = STORE_NONE  # out of step: hash from here on


@njit(cache=True, inline="always")
def control_type(area, rec, r):
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


@njit(cache=True, inline="always")
def prefetch_slots(slots, rec, dig, nr):
    """Start fetching the map slot of every key of the chunk before the decisions need them: the
    misses overlap instead of coming one after another."""
    n_slots = slots.shape[0]
    for r in range(nr):
        if rec[r, R_WANT]:
            prefetch_row(slots, map_slot(dig[r, DIGEST_HI], n_slots))


@njit(cache=True)
def walk_segment(buf, pos, end, karea_w, karea_r, codecs, max_batch_bytes):
    """The scan every pass makes, on its own: framing, CRC32C, every record walked and every key hashed,
    from ``pos``. Returns (status, position, batches, records); stops like the passes (STOP_LEGACY,
    STOP_COMPRESSED, ERR_*). For measuring and for readers that only need the counts."""
    buf, karea_w, karea_r, codecs = borrowed(buf), borrowed(karea_w), borrowed(karea_r), borrowed(codecs)
    rec, dig, bat = new_chunk(CHUNK_RECORDS, CHUNK_BATCHES)
    batches = 0
    records = 0
    bounds = np.zeros((0, 2), dtype=np.int64)
    store = np.zeros((0, 3), dtype=np.uint64)
    sst = np.zeros(1, dtype=STORE_STATE)  # STORE_NONE
    while True:
        outcome, stop, nb, nr, err, err_pos, _ = walk_chunk(
            buf,
            pos,
            end,
            rec,
            dig,
            bat,
            True,
            -1,
            MAX_LONG,
            buf[:0],
            bounds,
            0,
            store,
            sst,
            karea_w,
            karea_r,
            codecs,
            max_batch_bytes,
        )
        if outcome == CHUNK_GROW:
            rec, dig, bat = new_chunk(
                max(2 * rec.shape[0], read_i32(buf, pos + RECORDS_COUNT_AT)), CHUNK_BATCHES
            )
            continue
        batches += nb
        records += nr
        pos = stop
        if outcome != CHUNK_FULL:
            status = (
                DONE if outcome == CHUNK_DONE else (ERR_RECORD if outcome == CHUNK_WALK_FAILED else outcome)
            )
            return status, pos, batches, records


@njit(cache=True, inline="always")
def new_chunk_state(c, nb, stop, outcome, area_next, err, err_pos):
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
        status, total, magic = framing(buf, pos, end)
        if status != CONTINUE or magic != 2:
            break
        codec = np.int64(buf[pos + ATTRIBUTES_OFFSET + 1]) & CODEC_MASK
        if codec == NONE_CODEC:
            break
        positions[n] = pos
        sizes[n] = total
        codecs[n] = codec
        n += 1
        pos += total
    return n, positions[:n], sizes[:n], codecs[:n]
