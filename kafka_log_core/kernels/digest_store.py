"""Key digests kept from pass 1 for pass 2 of the same segment (pass 2 takes them instead of hashing
again), and split cleaning's rows of every keyed record of a segment."""

from __future__ import annotations

import numpy as np
from numba import njit

from kafka_log_core.kernels.key_digest import DIGEST_HI, DIGEST_LO
from kafka_log_core.kernels.record_walk import R_OFFSET, R_WANT, WANT_NONE

# Key digests kept from pass 1 for pass 2 (one uint64 row per keyed record: digest hi, lo, offset): the
# same records of the same segment come in the same order, so pass 2 takes them instead of hashing
# again. The offset in each row is checked; out of step, pass 2 hashes the rest itself.
STORE_NONE, STORE_FILL, STORE_USE = 0, 1, 2
STORE_STATE = np.dtype([("mode", np.int64), ("used", np.int64), ("valid", np.bool_)])
NO_STORE = np.zeros((0, 3), dtype=np.uint64)


@njit(cache=True, inline="always")
def store_put(store, sst, rec, dig, r0, r1):
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
