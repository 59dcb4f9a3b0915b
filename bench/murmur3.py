"""MurmurHash3 x64 128 compiled with numba: the benchmark sets its cost against MD5's on the same keys
(``probe digest``). The offset map keys on MD5, as the broker's does."""

from __future__ import annotations

import numpy as np
from numba import njit

from kafka_log_core.kernels.fields import load_u64_le

# MurmurHash3 x64 128 (Austin Appleby, public domain): a fast non-cryptographic 128-bit digest, compiled
# here only so the benchmark can set its cost against MD5's on the same keys. The map keys on MD5: two
# keys with the same MD5 digest are one key to the broker, and to us (see docs/benchmark.md, "The key digest").
_M3_C1 = np.uint64(0x87C37B91114253D5)
_M3_C2 = np.uint64(0x4CF5AD432745937F)


@njit(cache=True, inline="always")
def _rotl64(x, r):
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


@njit(cache=True, inline="always")
def _fmix64(k):
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xFF51AFD7ED558CCD)
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xC4CEB9FE1A85EC53)
    k ^= k >> np.uint64(33)
    return k


@njit(cache=True)
def murmur3_128(b, p, n):
    """MurmurHash3_x64_128 of ``b[p:p+n]`` with seed 0, as two uint64 (h1, h2)."""
    h1 = np.uint64(0)
    h2 = np.uint64(0)
    nblocks = n // 16
    for i in range(nblocks):
        k1 = load_u64_le(b, p + 16 * i)
        k2 = load_u64_le(b, p + 16 * i + 8)
        k1 *= _M3_C1
        k1 = _rotl64(k1, 31)
        k1 *= _M3_C2
        h1 ^= k1
        h1 = _rotl64(h1, 27)
        h1 += h2
        h1 = h1 * np.uint64(5) + np.uint64(0x52DCE729)
        k2 *= _M3_C2
        k2 = _rotl64(k2, 33)
        k2 *= _M3_C1
        h2 ^= k2
        h2 = _rotl64(h2, 31)
        h2 += h1
        h2 = h2 * np.uint64(5) + np.uint64(0x38495AB5)
    tail = p + nblocks * 16
    rest = n & 15
    k1 = np.uint64(0)
    k2 = np.uint64(0)
    for i in range(rest - 1, 7, -1):
        k2 ^= np.uint64(b[tail + i]) << np.uint64(8 * (i - 8))
    if rest > 8:
        k2 *= _M3_C2
        k2 = _rotl64(k2, 33)
        k2 *= _M3_C1
        h2 ^= k2
    for i in range(min(rest, 8) - 1, -1, -1):
        k1 ^= np.uint64(b[tail + i]) << np.uint64(8 * i)
    if rest > 0:
        k1 *= _M3_C1
        k1 = _rotl64(k1, 31)
        k1 *= _M3_C2
        h1 ^= k1
    h1 ^= np.uint64(n)
    h2 ^= np.uint64(n)
    h1 += h2
    h2 += h1
    h1 = _fmix64(h1)
    h2 = _fmix64(h2)
    h1 += h2
    h2 += h1
    return h1, h2


@njit(cache=True)
def murmur3_keys(area, key_pos, key_len):
    """``hash_keys`` with MurmurHash3 x64 128 instead of MD5 (the benchmark's comparison)."""
    n = key_pos.shape[0]
    hi = np.zeros(n, dtype=np.uint64)
    lo = np.zeros(n, dtype=np.uint64)
    for i in range(n):
        if key_len[i] >= 0:
            hi[i], lo[i] = murmur3_128(area, key_pos[i], key_len[i])
    return hi, lo
