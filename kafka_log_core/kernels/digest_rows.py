"""Rows of key digests, the currency of split cleaning (``rules.split_cleaning``): pass 1 of a segment
gives rows, the combine of a digest bucket takes the rows of every segment.

A row is three ``uint64`` words (the offset map's entry, ``offset_map.SLOT_*``)::

    0  digest hi   first 8 bytes of the key's MD5 (big-endian, as the offset map reads them)
    1  digest lo   last 8 bytes
    2  offset      the record's offset

A **bucket** is a range of digests: the top ``bucket_bits`` bits of ``digest hi`` name it, so each of
the ``2^bucket_bits`` buckets is a contiguous slice of the sorted digest space. Both kernels here cut their input
further, into **parts** of a few thousand rows by the next bits of ``digest hi``, and work part by part
in a table that stays in the CPU cache: one streaming pass to count, one to scatter, then each part's
work in cache (a hash table over the whole input would miss the cache on nearly every row). The table's
slot is taken from ``digest lo``, independent of the bits that chose the part.

A key's latest record is the one with the largest offset (offsets grow along the log), so the order in
which rows arrive does not matter.

The large arrays are made in the Python functions here (by numpy, or taken from an :class:`ArrayPool`)
and filled by the compiled ones: numpy asks the kernel for huge pages where it may (``madvise``),
numba's own allocations do not, and a gigabyte of rows faulted in 4 KiB pages costs more than the work
on them.
"""

from __future__ import annotations

import numpy as np
from numba import njit

ROW_WORDS = 3
HI, LO, OFFSET = 0, 1, 2
PART_ROWS = 4096  # rows per part: its table (2-4 slots a row, 24 bytes each) stays in the L2 cache
MAX_PART_BITS = 24


@njit(cache=True, inline="always")
def _part(hi, skip, shift):
    """The part of a digest: its bits ``skip .. skip + 64 - shift`` of ``digest hi``."""
    return np.int64((hi << np.uint64(skip)) >> np.uint64(shift))


def _part_bits(n: int, least: int) -> int:
    """Enough part bits (at least ``least``, at least 1) for parts of about PART_ROWS rows."""
    bits = max(least, 1)
    while (n >> bits) > PART_ROWS and bits < MAX_PART_BITS:
        bits += 1
    return bits


@njit(cache=True)
def _count(rows, skip, bits, starts):
    """Add the rows of each part to ``starts[part + 1]``."""
    shift = 64 - bits
    for i in range(rows.shape[0]):
        starts[_part(rows[i, HI], skip, shift) + 1] += 1


@njit(cache=True)
def _scatter(rows, skip, bits, parted, fill):
    """Each row into ``parted`` at its part's next place (``fill``), in order."""
    shift = 64 - bits
    for i in range(rows.shape[0]):
        p = _part(rows[i, HI], skip, shift)
        j = fill[p]
        fill[p] = j + 1
        parted[j, HI] = rows[i, HI]
        parted[j, LO] = rows[i, LO]
        parted[j, OFFSET] = rows[i, OFFSET]


class ArrayPool:
    """Arrays kept from one piece of work to the next in a process (a Spark worker runs piece after
    piece): a fresh array of hundreds of megabytes is faulted in page by page, which costs more than the
    work on it (with huge pages, erratically more). :meth:`take` gives an uninitialised array of the shape
    asked, a view of the one kept under ``name``: the caller is done with it before it takes ``name``
    again."""

    def __init__(self) -> None:
        self._arrays: dict[str, np.ndarray] = {}

    def take(self, name: str, shape: tuple[int, ...], dtype=np.uint64) -> np.ndarray:
        size = int(np.prod(shape))
        kept = self._arrays.get(name)
        if kept is None or kept.size < size or kept.dtype != dtype:
            grown = size if kept is None else max(size, kept.size + kept.size // 4)
            self._arrays.pop(name, None)  # let it go before the larger one is made
            kept = self._arrays[name] = np.empty(grown, dtype=dtype)
        return kept[:size].reshape(shape)

    def clear(self) -> None:
        self._arrays.clear()


def _take(pool: ArrayPool | None, name: str, shape: tuple[int, ...], dtype=np.uint64) -> np.ndarray:
    return np.empty(shape, dtype=dtype) if pool is None else pool.take(name, shape, dtype)


def _parted(
    pieces: list[np.ndarray], skip: int, bits: int, parted: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``pieces``, one after the other, into ``parted`` in part order (stable): (parted,
    starts), part ``p`` at ``parted[starts[p]:starts[p + 1]]``. Two streaming passes: count, scatter."""
    starts = np.zeros((1 << bits) + 1, dtype=np.int64)
    for rows in pieces:
        _count(rows, skip, bits, starts)
    np.cumsum(starts, out=starts)
    fill = starts[:-1].copy()
    for rows in pieces:
        _scatter(rows, skip, bits, parted, fill)
    return parted, starts


@njit(cache=True, inline="always")
def _mask_for(n):
    """The mask of a table of at least 2 slots a row for ``n`` rows (a power of two, at least 16)."""
    size = 16
    while size < 2 * n:
        size *= 2
    return np.uint64(size - 1)


@njit(cache=True, inline="always")
def _put_latest(table, mask, hi, lo, offset):
    """Keep the larger offset for the digest (a slot's offset word is offset + 1: 0 marks it empty).
    Returns 1 when the digest is new to the table."""
    s = np.int64(lo & mask)
    while True:
        stored = table[s, OFFSET]
        if stored == 0:
            table[s, HI] = hi
            table[s, LO] = lo
            table[s, OFFSET] = offset + np.uint64(1)
            return 1
        if table[s, HI] == hi and table[s, LO] == lo:
            if offset + np.uint64(1) > stored:
                table[s, OFFSET] = offset + np.uint64(1)
            return 0
        s = np.int64((np.uint64(s) + np.uint64(1)) & mask)


@njit(cache=True, inline="always")
def _find(table, mask, hi, lo):
    """The offset stored for the digest, or -1."""
    s = np.int64(lo & mask)
    while True:
        stored = table[s, OFFSET]
        if stored == 0:
            return np.int64(-1)
        if table[s, HI] == hi and table[s, LO] == lo:
            return np.int64(stored - np.uint64(1))
        s = np.int64((np.uint64(s) + np.uint64(1)) & mask)


@njit(cache=True)
def _put_rows(table, mask, rows, a, b, keys):
    """Put rows from ``a`` on until ``b`` or until the table is half full; returns (next row, keys)."""
    half = np.int64(mask) // 2
    i = a
    while i < b and keys < half:
        keys += _put_latest(table, mask, rows[i, HI], rows[i, LO], rows[i, OFFSET])
        i += 1
    return i, keys


@njit(cache=True)
def _latest_of_part(table, rows, a, b):
    """The rows ``a:b`` of one part put in ``table`` (reused from part to part, replaced by a larger one
    when needed): (table, mask). It starts at 2 slots a row for at most 4 x PART_ROWS rows and doubles
    whenever it is half full, so a part of many rows of few keys (a hot key) takes a table of its keys,
    not of its rows."""
    mask = _mask_for(min(b - a, 4 * PART_ROWS))
    if table.shape[0] <= np.int64(mask):
        table = np.zeros((np.int64(mask) + 1, ROW_WORDS), dtype=np.uint64)
    table[: np.int64(mask) + 1, OFFSET] = 0
    i, keys = _put_rows(table, mask, rows, a, b, 0)
    while i < b:  # half full: twice the slots, the keys so far put again
        old = table[: np.int64(mask) + 1].copy()
        mask = mask * np.uint64(2) + np.uint64(1)
        if table.shape[0] <= np.int64(mask):
            table = np.zeros((np.int64(mask) + 1, ROW_WORDS), dtype=np.uint64)
        table[: np.int64(mask) + 1, OFFSET] = 0
        for s in range(old.shape[0]):
            if old[s, OFFSET] != 0:
                _put_latest(table, mask, old[s, HI], old[s, LO], old[s, OFFSET] - np.uint64(1))
        i, keys = _put_rows(table, mask, rows, i, b, keys)
    return table, mask


SAMPLE_ROWS = 65536  # rows reduced before deciding whether reducing the rest is worth it
WORTH = 0.9  # reduce the rest when the sample kept at most this share of its rows


@njit(cache=True)
def _latest_parts(parted, starts, bits, bucket_bits, always):
    """Each part of ``parted`` down to its latest rows, written over ``parted`` from its start (a part's
    rows are read before its output lands, never after a later part's start): (rows kept, bounds).
    Unless ``always``, once SAMPLE_ROWS rows are reduced and kept more than WORTH of them, the later
    parts' rows are moved unreduced (parts are ranges of digests, so the first ones are a fair sample
    of the keys)."""
    table = np.zeros((16, ROW_WORDS), dtype=np.uint64)
    per_bucket = bits - bucket_bits
    bounds = np.zeros((1 << bucket_bits) + 1, dtype=np.int64)
    w = 0
    reduce = True
    for p in range(starts.shape[0] - 1):
        a, b = starts[p], starts[p + 1]
        if not reduce:
            for i in range(a, b):
                parted[w, HI] = parted[i, HI]
                parted[w, LO] = parted[i, LO]
                parted[w, OFFSET] = parted[i, OFFSET]
                w += 1
        elif b > a:
            table, mask = _latest_of_part(table, parted, a, b)
            for s in range(np.int64(mask) + 1):
                stored = table[s, OFFSET]
                if stored != 0:
                    parted[w, HI] = table[s, HI]
                    parted[w, LO] = table[s, LO]
                    parted[w, OFFSET] = stored - np.uint64(1)
                    w += 1
            if not always and b >= SAMPLE_ROWS and w > WORTH * b:
                reduce = False
        bounds[(p >> per_bucket) + 1] = w
    for k in range(1, bounds.shape[0]):  # buckets without rows
        bounds[k] = max(bounds[k], bounds[k - 1])
    return w, bounds


def latest_per_digest(
    rows: np.ndarray, bucket_bits: int, *, always: bool = True, into: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """``rows`` (digest hi, lo, offset) down to one row per digest, the one with the largest offset,
    ordered by bucket (the top ``bucket_bits`` bits of digest hi): (rows, bounds), bucket ``b`` at
    ``rows[bounds[b]:bounds[b + 1]]``. Within a bucket the order is the kernel's own.

    With ``always=False`` the rows are reduced only where a sample shows it pays (more than a tenth of
    the rows go); elsewhere a digest may keep several rows (what a later combine takes the largest
    offset of anyway). ``into``: where the rows go (an uninitialised array of their shape, from an
    :class:`ArrayPool`); the result is a view of it."""
    bits = _part_bits(rows.shape[0], bucket_bits)
    parted, starts = _parted([rows], 0, bits, np.empty_like(rows) if into is None else into)
    kept, bounds = _latest_parts(parted, starts, bits, bucket_bits, always)
    return parted[:kept], bounds


@njit(cache=True)
def _combine_parts(parted, starts, wanted, wanted_starts, seg_bases, seg_groups, seg_keep, keep, keep_group,
                   found, found_group):  # fmt: skip
    """The parts of :func:`combine`; returns (keep rows, found rows)."""
    table = np.zeros((16, ROW_WORDS), dtype=np.uint64)
    nk = nf = 0
    for p in range(starts.shape[0] - 1):
        a, b = starts[p], starts[p + 1]
        if b == a:  # no key here: no lookup of this part finds one
            continue
        table, mask = _latest_of_part(table, parted, a, b)
        for s in range(np.int64(mask) + 1):
            stored = table[s, OFFSET]
            if stored != 0:
                offset = np.int64(stored - np.uint64(1))
                seg = np.searchsorted(seg_bases, offset, side="right") - 1
                if seg >= 0 and seg_keep[seg]:
                    keep[nk] = offset
                    keep_group[nk] = seg_groups[seg]
                    nk += 1
        for i in range(wanted_starts[p], wanted_starts[p + 1]):
            offset = _find(table, mask, wanted[i, HI], wanted[i, LO])
            if offset >= 0:
                found[nf, HI] = wanted[i, HI]
                found[nf, LO] = wanted[i, LO]
                found[nf, OFFSET] = np.uint64(offset)
                found_group[nf] = np.int64(wanted[i, GROUP])
                nf += 1
    return nk, nf


@njit(cache=True)
def _group_order(groups, n, bounds, order):
    """A stable counting sort of the first ``n`` rows by ``groups``: fills ``bounds`` (group ``g``'s
    rows at ``order[bounds[g]:bounds[g + 1]]``) and ``order``."""
    for i in range(n):
        bounds[groups[i] + 1] += 1
    for g in range(bounds.shape[0] - 1):
        bounds[g + 1] += bounds[g]
    fill = bounds[:-1].copy()
    for i in range(n):
        order[fill[groups[i]]] = i
        fill[groups[i]] += 1


def _grouped(
    values: np.ndarray, groups: np.ndarray, n: int, n_groups: int, pool: ArrayPool | None, name: str
) -> tuple[np.ndarray, np.ndarray]:  # fmt: skip
    """The first ``n`` rows of ``values`` ordered by ``groups`` (stable): (ordered, bounds)."""
    bounds = np.zeros(n_groups + 1, dtype=np.int64)
    order = _take(pool, "order", (n,), np.int64)
    _group_order(groups, n, bounds, order)
    out = _take(pool, name, (n, *values.shape[1:]), values.dtype)
    np.take(values, order, axis=0, out=out)
    return out, bounds


GROUP = 2  # the third word of a lookup row: the group that looks the digest up


def combine(
    pieces: list[np.ndarray], lookups: np.ndarray, bucket_bits: int, seg_bases: np.ndarray, seg_groups: np.ndarray,
    seg_keep: np.ndarray, n_groups: int, pool: ArrayPool | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:  # fmt: skip
    """One bucket's combine. ``pieces``: every segment's rows of the bucket (digest hi, lo, offset; a key
    may have several; read where they lie, e.g. memory-mapped files); ``lookups``: rows (digest hi, lo, group) of the digests a group's
    pass 2 looks up; ``seg_bases`` ascending, with each segment's group and whether pass 2 keeps its
    records by a keep list (``seg_keep``).

    Returns (keep, keep_bounds, entries, entry_bounds): ``keep`` the offsets that are their key's latest
    and lie in a keep-list segment, by group (group ``g`` at ``keep[keep_bounds[g]:keep_bounds[g + 1]]``,
    unsorted); ``entries`` rows (digest hi, lo, the key's latest offset) for the lookups whose key has
    one, by group likewise. With a ``pool`` every array is taken from it (the results too)."""
    n = sum(len(rows) for rows in pieces)
    bits = _part_bits(n, 1)
    parted, starts = _parted(pieces, bucket_bits, bits, _take(pool, "parted", (n, ROW_WORDS)))
    wanted, wanted_starts = _parted([lookups], bucket_bits, bits, _take(pool, "wanted", lookups.shape))
    keep = _take(pool, "keep", (n,), np.int64)
    keep_group = _take(pool, "keep_group", (n,), np.int64)
    found = _take(pool, "found", lookups.shape)
    found_group = _take(pool, "found_group", (lookups.shape[0],), np.int64)
    nk, nf = _combine_parts(parted, starts, wanted, wanted_starts, seg_bases, seg_groups, seg_keep, keep,
                            keep_group, found, found_group)  # fmt: skip
    keep, keep_bounds = _grouped(keep, keep_group, nk, n_groups, pool, "keep_out")
    entries, entry_bounds = _grouped(found, found_group, nf, n_groups, pool, "entries_out")
    return keep, keep_bounds, entries, entry_bounds


def table_rows(table: np.ndarray) -> np.ndarray:
    """The occupied slots of an offset-map table as rows (digest hi, lo, offset), in slot order."""
    rows = table[table[:, OFFSET] != 0]
    rows[:, OFFSET] -= np.uint64(1)
    return rows
