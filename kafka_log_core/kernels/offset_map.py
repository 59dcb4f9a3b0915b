"""The cleaner's key -> latest-offset map (Kafka's SkimpyOffsetMap), over one numpy array of slots.

Each slot holds the key's MD5 digest (16 bytes, as the broker's) and an 8-byte offset: 24 bytes, Kafka's
footprint, so ``log.cleaner.dedupe.buffer.size`` buys the same number of slots as on the broker
(``memory // 24``) and the map is full at ``floor(slots * log.cleaner.io.buffer.load.factor)`` keys.

What a round keeps depends only on that count of keys, not on where the keys sit. So the map *counts*
against the configured capacity but *allocates* only as many slots as the work can fill
(``max_keys``: an upper bound of the keyed records to put, from batch headers), never more than the
configured buffer: a 1 GiB dedupe buffer costs what the default one costs on the same data, and a
small map stays in the CPU caches. The probes are compiled (``map_*`` below).

Slot (24 bytes, as the broker's SkimpyOffsetMap: 16-byte MD5 digest + 8-byte offset), one row of a
``(slots, 3)`` uint64 array so that a probe touches one place in memory::

    SLOT_HI  digest bytes 0-7 (little-endian)
    SLOT_LO  digest bytes 8-15
    SLOT_OFFSET  offset + 1 (0 = empty slot: a freshly calloc'ed map is all empty)
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from kafka_log_core.constants import OFFSET_MAP_ENTRY_BYTES
from kafka_log_core.errors import ConfigError

# Load of the allocated slots when they are sized to the work (the configured map is filled up to the
# broker's own load factor, 0.9 by default: at most that when the work fills the whole buffer).
SIZED_LOAD = 0.75
MIN_SLOTS = 64


class OffsetMap:
    def __init__(self, memory_bytes: int, load_factor: float, max_keys: int | None = None) -> None:
        self.slots = memory_bytes // OFFSET_MAP_ENTRY_BYTES
        self.capacity = int(self.slots * load_factor)
        if self.slots * load_factor <= 1:
            raise ConfigError(
                f"log.cleaner.dedupe.buffer.size={memory_bytes} with load factor {load_factor} gives "
                f"{self.slots} slots: too small to hold more than one key (the broker refuses this too)"
            )
        physical = self.slots
        keys = self.capacity
        if max_keys is not None:
            # at most max_keys distinct keys ever arrive, so this many slots never run out
            physical = min(self.slots, max(MIN_SLOTS, math.ceil(max_keys / SIZED_LOAD) + 1))
            keys = min(keys, max_keys)
        physical = max(physical, keys + 1)  # a free slot always remains, whatever the load factor
        # Zeroed memory comes from calloc: pages stay unmapped until a key lands there. Offsets are
        # stored + 1, so a zero slot is empty.
        self.table = np.zeros((physical, SLOT_WORDS), dtype=np.uint64)
        self.size = 0
        self.latest_offset = -1

    @property
    def physical_slots(self) -> int:
        return int(self.table.shape[0])

    @property
    def memory_bytes(self) -> int:
        """Bytes allocated for slots (at most the configured buffer)."""
        return int(self.table.nbytes)

    @property
    def full(self) -> bool:
        return self.size >= self.capacity

    @property
    def utilization(self) -> float:
        """Keys per configured slot, as the broker reports it."""
        return self.size / self.slots if self.slots else 0.0

    def put_many(self, hi: np.ndarray, lo: np.ndarray, offsets: np.ndarray, mask: np.ndarray) -> int:
        """Insert the masked rows in order; returns how many rows were consumed (fewer than all when the
        map filled: the row at that index was not inserted)."""
        consumed, self.size, last = map_put_many(self.table, hi, lo, offsets, self.size, self.capacity, mask)
        if last >= 0:
            self.latest_offset = int(last)
        return int(consumed)

    def get_many(self, hi: np.ndarray, lo: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return map_get_many(self.table, hi, lo, mask)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset


# ---------------------------------------------------------------------------------------------- offset map
SLOT_HI, SLOT_LO, SLOT_OFFSET = 0, 1, 2
SLOT_WORDS = OFFSET_MAP_ENTRY_BYTES // 8  # 3 uint64 words: digest hi, digest lo, offset


@njit(cache=True, inline="always")
def map_slot(hi, slots):
    """Home slot of a digest: the top 32 bits of its first word scaled to [0, slots) (multiply-shift:
    no division; MD5 words are uniform, and ``slots`` < 2^32)."""
    return np.int64(((hi >> np.uint64(32)) * np.uint64(slots)) >> np.uint64(32))


@njit(cache=True, inline="always")
def map_find(table, hi, lo):
    """Latest offset stored for the digest (hi, lo), or -1."""
    slots = table.shape[0]
    s = map_slot(hi, slots)
    for _ in range(slots):
        stored = table[s, SLOT_OFFSET]
        if stored == 0:
            return np.int64(-1)
        if table[s, SLOT_HI] == hi and table[s, SLOT_LO] == lo:
            return np.int64(stored) - 1
        s += 1
        if s == slots:
            s = 0
    return np.int64(-1)


@njit(cache=True, inline="always")
def map_put(table, hi, lo, offset):
    """Store ``offset`` for the digest; returns 1 when the key is new, 0 when it overwrote. The caller
    keeps the map below its capacity, so an empty slot always exists."""
    slots = table.shape[0]
    s = map_slot(hi, slots)
    while True:
        stored = table[s, SLOT_OFFSET]
        if stored == 0:
            table[s, SLOT_HI] = hi
            table[s, SLOT_LO] = lo
            table[s, SLOT_OFFSET] = np.uint64(offset + 1)
            return 1
        if table[s, SLOT_HI] == hi and table[s, SLOT_LO] == lo:
            table[s, SLOT_OFFSET] = np.uint64(offset + 1)
            return 0
        s += 1
        if s == slots:
            s = 0


@njit(cache=True)
def map_put_many(table, hi, lo, offsets, n_used, capacity, mask):
    """Insert ``(digest, offset)`` for each i where ``mask[i]``; an existing key is overwritten without
    growing. As Kafka's cleaner does, once the map holds ``capacity`` keys the next keyed record stops
    the pass, even one whose key is already present. Returns (consumed, n_used, last_put) where
    consumed = number of input rows processed (== len(hi) unless the map filled)."""
    last_put = np.int64(-1)
    for i in range(hi.shape[0]):
        if not mask[i]:
            continue
        if n_used >= capacity:
            return i, n_used, last_put
        n_used += map_put(table, hi[i], lo[i], offsets[i])
        last_put = offsets[i]
    return hi.shape[0], n_used, last_put


@njit(cache=True)
def map_get_many(table, hi, lo, mask):
    """Latest offset for each key (``-1`` when absent or masked out)."""
    out = np.full(hi.shape[0], -1, dtype=np.int64)
    for i in range(hi.shape[0]):
        if mask[i]:
            out[i] = map_find(table, hi[i], lo[i])
    return out
