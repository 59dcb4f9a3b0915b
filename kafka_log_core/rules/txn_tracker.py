"""Transaction tracking of one cleaner pass (Kafka's CleanedTransactionMetadata, spec §6).

Which transactional batches belong to an aborted transaction, which markers can go. The state the
compiled passes need per batch lives in a table they read and update themselves
(``txn_table.TXN_SLOT``: producer id -> committed / aborted / last offset observed), so committed
transactional data never comes back to Python. Python keeps what changes once per aborted
transaction: the heap of aborted transactions (``.txnindex`` entries) ordered by first offset; the
kernels stop at the first batch that reaches the next one (``next_aborted_first``) and
:meth:`TransactionTracker.consume_up_to` moves it into the table.
"""

from __future__ import annotations

import heapq

import numpy as np

from kafka_log_core.constants import MAX_LONG
from kafka_log_core.format.txn_index import AbortedTxn
from kafka_log_core.kernels import statuses, txn_table

INITIAL_SLOTS = 64


def _empty_table(slots: int) -> np.ndarray:
    table = np.zeros(slots, dtype=txn_table.TXN_SLOT)
    table["producer_id"] = txn_table.EMPTY_PID
    return table


class TransactionTracker:
    """``record_events``: kept ABORT markers report their transaction (pass 2 writes it into the output
    segment's ``.txnindex``); pass 1 only needs the decisions."""

    def __init__(self, record_events: bool = False) -> None:
        self._heap: list[tuple[int, int, int, int]] = []  # (first offset, last offset, producer id, index)
        self._seen: set[AbortedTxn] = set()
        self.aborted: list[AbortedTxn] = []
        self.table = _empty_table(INITIAL_SLOTS)
        self.state = statuses.new_state(
            txn_table.TXN_STATE,
            next_aborted_first=MAX_LONG,
            limit=INITIAL_SLOTS // 2,
            record_events=record_events,
        )
        self.events = np.zeros(INITIAL_SLOTS, dtype=np.int64)

    def add_aborted(self, txns: list[AbortedTxn]) -> None:
        for t in txns:
            if t not in self._seen:
                self._seen.add(t)
                heapq.heappush(self._heap, (t.first_offset, t.last_offset, t.producer_id, len(self.aborted)))
                self.aborted.append(t)
        if len(self.aborted) >= self.events.shape[0]:  # each aborted transaction reports at most once
            events = np.zeros(2 * len(self.aborted), dtype=np.int64)
            events[: self.events.shape[0]] = self.events
            self.events = events
        self._next()

    def consume_up_to(self, offset: int) -> None:
        """Before a batch ending at ``offset``: every aborted transaction starting at or below it becomes
        ongoing (a producer already in an aborted transaction keeps that one)."""
        while self._heap and self._heap[0][0] <= offset:
            _, _, pid, index = heapq.heappop(self._heap)
            while not txn_table.txn_mark_aborted(self.table, self.state, pid, index):
                self.grow()
        self._next()

    def grow(self) -> None:
        table = _empty_table(2 * self.table.shape[0])
        txn_table.txn_rehash(self.table, table)
        self.table = table
        self.state["limit"] = table.shape[0] // 2

    def take_events(self) -> list[AbortedTxn]:
        """Aborted transactions whose kept ABORT markers were written since the last call."""
        n = int(self.state["events"][0])
        if not n:
            return []
        self.state["events"] = 0
        return [self.aborted[i] for i in self.events[:n].tolist()]

    def _next(self) -> None:
        self.state["next_aborted_first"] = self._heap[0][0] if self._heap else MAX_LONG

    def snapshot(self, from_offset: int) -> TransactionTracker:
        """A copy of this tracker as it stands before the batch at ``from_offset``, for a pass that resumes
        there in another process (split cleaning): the producer table, the aborted transactions still in
        the heap or ongoing (renumbered), and of those already added the ones a later segment's
        ``.txnindex`` may list again (last offset >= ``from_offset``), so they are not added twice."""
        keep = sorted(
            {i for _, _, _, i in self._heap}
            | {
                int(i)
                for i in self.table["aborted_index"][
                    (self.table["producer_id"] != txn_table.EMPTY_PID) & self.table["aborted"]
                ]
            }
        )
        renumber = {old: new for new, old in enumerate(keep)}
        copy = TransactionTracker(record_events=bool(self.state["record_events"][0]))
        copy.aborted = [self.aborted[i] for i in keep]
        copy._heap = [(f, last, pid, renumber[i]) for f, last, pid, i in self._heap]
        heapq.heapify(copy._heap)
        copy._seen = {t for t in self._seen if t.last_offset >= from_offset} | set(copy.aborted)
        copy.table = self.table.copy()
        ongoing = (copy.table["producer_id"] != txn_table.EMPTY_PID) & copy.table["aborted"]
        copy.table["aborted_index"][ongoing] = [
            renumber[int(i)] for i in copy.table["aborted_index"][ongoing]
        ]
        copy.state = self.state.copy()
        copy.state["events"] = 0
        copy.events = np.zeros(max(INITIAL_SLOTS, 2 * len(copy.aborted)), dtype=np.int64)
        return copy
