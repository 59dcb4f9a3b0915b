"""The cleaner's key -> latest-offset map (Kafka's SkimpyOffsetMap), over numpy arrays.

Each slot holds the key's MD5 digest (16 bytes, as the broker's) and an 8-byte offset: 24 bytes, Kafka's footprint, so
``log.cleaner.dedupe.buffer.size`` buys the same number of slots as on the broker
(``memory // 24``) and the map is full at ``floor(slots * log.cleaner.io.buffer.load.factor)``
keys. The probing loops live in ``kernels``.
"""

from __future__ import annotations

import numpy as np

from . import kernels
from .errors import ConfigError

BYTES_PER_ENTRY = 24


class OffsetMap:
    def __init__(self, memory_bytes: int, load_factor: float) -> None:
        self.slots = memory_bytes // BYTES_PER_ENTRY
        self.capacity = int(self.slots * load_factor)
        if self.slots * load_factor <= 1:
            raise ConfigError(
                f"log.cleaner.dedupe.buffer.size={memory_bytes} with load factor {load_factor} gives "
                f"{self.slots} slots: too small to hold more than one key (the broker refuses this too)"
            )
        self._hi = np.zeros(self.slots, dtype=np.uint64)
        self._lo = np.zeros(self.slots, dtype=np.uint64)
        # Zeroed arrays come from calloc: pages stay unmapped until a key lands there, so a map sized for
        # the broker's buffer costs memory only for the keys it holds. Slots store offset + 1 (0 = empty).
        self._off = np.zeros(self.slots, dtype=np.int64)
        self.size = 0
        self.latest_offset = -1

    @property
    def memory_bytes(self) -> int:
        return self._hi.nbytes + self._lo.nbytes + self._off.nbytes

    @property
    def full(self) -> bool:
        return self.size >= self.capacity

    @property
    def utilization(self) -> float:
        return self.size / self.slots if self.slots else 0.0

    def put_many(self, hi: np.ndarray, lo: np.ndarray, offsets: np.ndarray, mask: np.ndarray) -> int:
        """Insert the masked rows in order; returns how many rows were consumed (fewer than all when the
        map filled: the row at that index was not inserted)."""
        consumed, self.size, last = kernels.map_put_many(
            self._hi, self._lo, self._off, hi, lo, offsets, self.size, self.capacity, mask
        )
        if last >= 0:
            self.latest_offset = int(last)
        return int(consumed)

    def get_many(self, hi: np.ndarray, lo: np.ndarray, mask: np.ndarray) -> np.ndarray:
        return kernels.map_get_many(self._hi, self._lo, self._off, hi, lo, mask)

    def update_latest_offset(self, offset: int) -> None:
        self.latest_offset = offset

    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The slot arrays, for kernels that probe the map themselves."""
        return self._hi, self._lo, self._off
