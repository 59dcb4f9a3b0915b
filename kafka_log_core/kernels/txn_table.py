"""The transaction tracker's table, read and updated by the compiled passes (Kafka's
CleanedTransactionMetadata).

Transactions never send committed data back to Python: the tracker lives in a small open-addressing
table of producer ids that the kernels update (committed / aborted flags, last observed offset); only
moving an aborted transaction from the heap into the table is Python's
(:mod:`kafka_log_core.rules.txn_tracker`), once per aborted transaction. An ABORT marker whose data was
seen leaves an *event* (the transaction's index in the tracker's list) for Python to write into the
output segment's ``.txnindex``.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from kafka_log_core.format.record_batch import CONTROL_ABORT, CONTROL_COMMIT

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
