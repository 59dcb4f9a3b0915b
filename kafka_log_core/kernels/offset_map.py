"""The cleaner's key -> latest-offset map (Kafka's SkimpyOffsetMap), over one numpy array of slots.

Each slot holds the key's MD5 digest (16 bytes, as the broker's) and an 8-byte offset: 24 bytes, Kafka's
footprint, so ``log.cleaner.dedupe.buffer.size`` buys the same number of slots as on the broker
(``memory // 24``) and the map is full at ``floor(slots * log.cleaner.io.buffer.load.factor)`` keys.

What a round keeps depends only on that count of keys, not on where the keys sit. So the map *counts*
against the configured capacity but *allocates* only as many slots as the work can fill
(``max_keys``: an upper bound of the keyed records to put, from batch headers), never more than the
configured buffer: a 1 GiB dedupe buffer costs what the default one costs on the same data, and a
small map stays in the CPU caches. The slots are one ``(slots, 3)`` uint64 array (digest, digest,
offset), so a probe touches one place in memory. The probing loops live in ``kernels``.
"""

from __future__ import annotations

import math

import numpy as np

from kafka_log_core.constants import OFFSET_MAP_ENTRY_BYTES
from kafka_log_core.errors import ConfigError
from kafka_log_core.kernels import primitives as kernels

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
        self.table = np.zeros((physical, kernels.SLOT_WORDS), dtype=np.uint64)
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
        consumed, self.size, last = kernels.map_put_many(
            self.table, hi, lo, offsets, self.size, self.capacity, mask
        )
        if last >= 0:
            self.latest_offset = int(last)
        return int(consumed)

    def get_many(self, hi: np.ndarray, lo: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return kernels.map_get_many(self.table, hi, lo, mask)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset
