"""The digest-row kernels of split cleaning (``kernels.digest_rows``) against plain-Python dictionaries."""

from __future__ import annotations

import numpy as np
import pytest

from kafka_log_core.kernels import digest_rows as dr


def _rows(rng: np.random.Generator, n: int, keys: int) -> np.ndarray:
    """``n`` rows over ``keys`` random digests, unique offsets in random order."""
    his = rng.integers(0, 2**64 - 1, size=keys, dtype=np.uint64, endpoint=True)
    los = rng.integers(0, 2**64 - 1, size=keys, dtype=np.uint64, endpoint=True)
    pick = rng.integers(0, keys, size=n)
    return np.stack([his[pick], los[pick], rng.permutation(n).astype(np.uint64)], axis=1)


def _latest(rows: np.ndarray) -> dict[tuple[int, int], int]:
    out: dict[tuple[int, int], int] = {}
    for hi, lo, offset in rows.tolist():
        out[(hi, lo)] = max(out.get((hi, lo), -1), offset)
    return out


def _bucket(hi: int, bits: int) -> int:
    return hi >> (64 - bits) if bits else 0


@pytest.mark.parametrize(
    "n, keys",
    [(0, 1), (1, 1), (7, 3), (5_000, 100), (200_000, 150_000), (300_000, 4), (120_000, 120_000)],
    ids=["empty", "one", "tiny", "few-keys", "mostly-distinct", "hot-keys", "all-distinct"],
)
@pytest.mark.parametrize("bucket_bits", [1, 3])
def test_latest_per_digest_keeps_the_largest_offset_of_each_digest_in_bucket_order(n, keys, bucket_bits):
    rows = _rows(np.random.default_rng(n + keys), n, keys)
    out, bounds = dr.latest_per_digest(rows, bucket_bits)
    assert {(int(h), int(lo)): int(o) for h, lo, o in out.tolist()} == _latest(rows)
    assert len(out) == len(_latest(rows))
    assert bounds[0] == 0 and bounds[-1] == len(out) and len(bounds) == (1 << bucket_bits) + 1
    for b in range(1 << bucket_bits):
        assert all(_bucket(int(h), bucket_bits) == b for h in out[bounds[b] : bounds[b + 1], 0])


@pytest.mark.parametrize("keys", [40_000, 4_000_000], ids=["repeating-keys", "distinct-keys"])
def test_reducing_only_where_it_pays_loses_no_key_and_no_latest_offset(keys):
    """``always=False``: a sample of digest ranges decides whether the rest is reduced; either way every
    digest keeps its largest offset, and only a reduced range has one row per digest."""
    rows = _rows(np.random.default_rng(keys), 400_000, keys)
    out, bounds = dr.latest_per_digest(rows, 2, always=False)
    assert _latest(out) == _latest(rows)
    assert bounds[-1] == len(out)
    if keys == 40_000:  # 10 rows a key: worth reducing everywhere
        assert len(out) == len(_latest(rows))
    else:  # nearly every row its own key: the rest is moved as it is
        assert len(out) > len(_latest(rows))


def test_a_hot_key_takes_a_table_of_its_keys_not_of_its_rows():
    rows = np.zeros((2_000_000, 3), dtype=np.uint64)
    rows[:, 0], rows[:, 1] = 5, 7
    rows[:, 2] = np.arange(len(rows), dtype=np.uint64)[::-1]
    out, _ = dr.latest_per_digest(rows, 2)
    assert out.tolist() == [[5, 7, len(rows) - 1]]


def _combine_reference(rows, lookups, bases, groups, keep_list, n_groups):
    latest = _latest(rows)
    keep: list[list[int]] = [[] for _ in range(n_groups)]
    for offset in latest.values():
        seg = int(np.searchsorted(bases, offset, side="right")) - 1
        if seg >= 0 and keep_list[seg]:
            keep[groups[seg]].append(offset)
    entries: list[list[tuple[int, int, int]]] = [[] for _ in range(n_groups)]
    for hi, lo, group in lookups.tolist():
        if (hi, lo) in latest:
            entries[group].append((hi, lo, latest[(hi, lo)]))
    return keep, entries


@pytest.mark.parametrize("n", [0, 50, 60_000])
def test_combine_gives_each_group_its_keep_list_and_the_entries_it_looks_up(n):
    rng = np.random.default_rng(n)
    bucket_bits = 2
    rows = _rows(rng, n, max(1, n // 3))
    rows[:, 0] = (rows[:, 0] >> np.uint64(bucket_bits)) | (np.uint64(1) << np.uint64(62))  # all in bucket 1
    # segments of 1000 offsets, two a group; every third one is looked up by key (not a keep list)
    bases = np.arange(0, max(n, 1), 1000, dtype=np.int64)
    groups = (np.arange(len(bases)) // 2).astype(np.int64)
    keep_list = np.arange(len(bases)) % 3 != 0
    n_groups = int(groups.max()) + 1
    wanted = rows[rng.random(n) < 0.3][:, :2] if n else np.zeros((0, 2), dtype=np.uint64)
    strangers = _rows(rng, 20, 20)[:, :2]  # digests no row has
    strangers[:, 0] = (strangers[:, 0] >> np.uint64(bucket_bits)) | (np.uint64(1) << np.uint64(62))
    digests = np.concatenate([wanted, strangers])
    lookups = np.empty((len(digests), 3), dtype=np.uint64)
    lookups[:, :2] = digests
    lookups[:, 2] = rng.integers(0, n_groups, size=len(digests)).astype(np.uint64)

    pieces = [rows[: n // 3], rows[n // 3 : n // 2], rows[n // 2 :]]  # as the segments' files give them
    keep, keep_bounds, entries, entry_bounds = dr.combine(
        pieces, lookups, bucket_bits, bases, groups, keep_list, n_groups, dr.ArrayPool()
    )
    want_keep, want_entries = _combine_reference(rows, lookups, bases, groups, keep_list, n_groups)
    for g in range(n_groups):
        assert sorted(keep[keep_bounds[g] : keep_bounds[g + 1]].tolist()) == sorted(want_keep[g])
        got = [tuple(r) for r in entries[entry_bounds[g] : entry_bounds[g + 1]].tolist()]
        assert sorted(got) == sorted(want_entries[g])


def test_table_rows_are_the_occupied_slots_with_their_offsets():
    table = np.zeros((8, 3), dtype=np.uint64)
    table[2] = (11, 12, 1)  # offset 0 is stored as 1
    table[5] = (21, 22, 43)
    assert dr.table_rows(table).tolist() == [[11, 12, 0], [21, 22, 42]]
