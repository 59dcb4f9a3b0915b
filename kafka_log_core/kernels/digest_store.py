"""Key digests kept from pass 1 for pass 2 of the same segment (pass 2 takes them instead of hashing
again), and split cleaning's rows of every keyed record of a segment."""

from __future__ import annotations

import numpy as np
from numba import njit

from kafka_log_core.kernels.key_digest import DIGEST_HI, DIGEST_LO
from kafka_log_core.kernels.record_walk import R_OFFSET, R_VALUE_LEN, R_WANT, WANT_NONE

# Key digests kept from pass 1 for pass 2 (one uint64 row per keyed record: digest hi, lo, offset and,
# in a store of STORE_WORDS, where its batch is): the same records of the same segment come in the same
# order, so pass 2 takes them instead of hashing again. The offset in each row is checked; out of step,
# pass 2 hashes the rest itself. Split cleaning's stores have the first three words only.
STORE_NONE, STORE_FILL, STORE_USE = 0, 1, 2
STORE_STATE = np.dtype([("mode", np.int64), ("used", np.int64), ("valid", np.bool_)])
NO_STORE = np.zeros((0, 3), dtype=np.uint64)
S_HI, S_LO, S_OFFSET, S_BATCH = range(4)
# S_BATCH: the position of the record's batch in the segment, shifted left by one, its low bit set for a
# tombstone (value null): what pass 2 needs of a one-record batch besides the digest and the offset.
STORE_WORDS = 4


@njit(cache=True, inline="always")
def store_put(store, sst, rec, dig, r0, r1, pos):
    """The digests of one completed batch of pass 1 (at ``pos``), appended to the store (until it is
    full)."""
    s = sst[0]
    batch = store.shape[1] > S_BATCH
    for r in range(r0, r1):
        if rec[r, R_WANT] != WANT_NONE and s.mode == STORE_FILL:
            c = s.used
            if c == store.shape[0]:
                s.mode = STORE_NONE
                s.valid = False
                return
            store[c, S_HI] = dig[r, DIGEST_HI]
            store[c, S_LO] = dig[r, DIGEST_LO]
            store[c, S_OFFSET] = np.uint64(rec[r, R_OFFSET])
            if batch:
                store[c, S_BATCH] = np.uint64(pos * 2 + (rec[r, R_VALUE_LEN] < 0))
            s.used = c + 1


@njit(cache=True, inline="always")
def stored_batch(store, row):
    """(position of the batch, tombstone) of the record of row ``row`` (a store of STORE_WORDS)."""
    word = store[row, S_BATCH]
    return np.int64(word >> np.uint64(1)), (word & np.uint64(1)) != 0
