"""The compiled kernels agree with the readable decoder and with hashlib-free reference maths."""

from __future__ import annotations

import hashlib

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_log_core.format import log_file, record_batch
from kafka_log_core.format.record_batch import Header, Record
from kafka_log_core.kernels import key_digest, offset_map, record_walk, scan

TS = 1_700_000_000_000


@settings(max_examples=120, deadline=None)
@given(
    specs=st.lists(
        st.tuples(
            st.none() | st.binary(max_size=30), st.none() | st.binary(max_size=60), st.integers(-5000, 5000)
        ),
        min_size=1,
        max_size=30,
    ),
    codec=st.sampled_from([0, 1, 2, 3, 4]),
)
def test_record_table_matches_readable_decoder(specs, codec):
    records = [
        Record(10 + 2 * i, TS + d, k, v, (Header("h", b"x"),) if i % 3 else ())
        for i, (k, v, d) in enumerate(specs)
    ]
    data = record_batch.build_batch(10, records, codec=codec)
    (batch,) = log_file.iter_batches(data)
    table = scan.record_table(batch)
    decoded = batch.records()
    assert table.offsets.tolist() == [r.offset for r in decoded]
    assert table.key_len.tolist() == [-1 if r.key is None else len(r.key) for r in decoded]
    assert table.value_null.tolist() == [r.value is None for r in decoded]
    assert table.timestamps.tolist() == [r.timestamp for r in decoded]
    # Equal keys hash equal, different keys (almost surely) differ.
    digests = {}
    for r, hi, lo in zip(decoded, table.hash_hi.tolist(), table.hash_lo.tolist(), strict=True):
        if r.key is not None:
            digests.setdefault(r.key, (hi, lo))
            assert digests[r.key] == (hi, lo)
    assert len(set(digests.values())) == len(digests)


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=300))
def test_key_digest_is_md5_like_kafkas_offset_map(data):
    arr = np.frombuffer(data, dtype=np.uint8) if data else np.zeros(0, dtype=np.uint8)
    lo, hi = key_digest.md5_128(arr, 0, len(data))
    assert int(lo).to_bytes(8, "little") + int(hi).to_bytes(8, "little") == hashlib.md5(data).digest()


def test_offset_map_keeps_latest_offset_and_stops_when_full():
    table = np.zeros((10, offset_map.SLOT_WORDS), dtype=np.uint64)  # 10 slots of 24 bytes
    hi = np.array([1, 2, 1, 3, 4, 5], dtype=np.uint64)
    lo = np.array([9, 9, 9, 9, 9, 9], dtype=np.uint64)
    offsets = np.array([100, 101, 102, 103, 104, 105], dtype=np.int64)
    mask = np.ones(6, dtype=bool)
    consumed, used, last = offset_map.map_put_many(table, hi, lo, offsets, 0, 3, mask)
    assert (consumed, used, last) == (4, 3, 103)
    got = offset_map.map_get_many(table, hi, lo, mask)
    assert got.tolist() == [102, 101, 102, 103, -1, -1]


@settings(max_examples=60, deadline=None)
@given(keys=st.lists(st.none() | st.binary(max_size=200), max_size=70))
def test_lane_hashing_of_many_keys_equals_md5_of_each(keys):
    data = b"".join(k or b"" for k in keys)
    area = np.frombuffer(data, dtype=np.uint8) if data else np.zeros(0, dtype=np.uint8)
    lens = np.array([-1 if k is None else len(k) for k in keys], dtype=np.int64)
    pos = np.zeros(len(keys), dtype=np.int64)
    if len(keys):
        pos[1:] = np.cumsum(np.maximum(lens, 0))[:-1]
    lo, hi = key_digest.hash_keys(area, pos, lens)
    for k, a, b in zip(keys, lo.tolist(), hi.tolist(), strict=True):
        if k is not None:
            assert a.to_bytes(8, "little") + b.to_bytes(8, "little") == hashlib.md5(k).digest()


# Lengths around MD5's block edges (55: the last that pads within one block); few of them, so that the
# lanes see the same length again and again (a lane then rewrites only the key's own words).
_EDGE_LENGTHS = [0, 1, 3, 4, 5, 15, 16, 17, 54, 55, 56, 63, 64, 65, 119, 120, 200]


@settings(max_examples=80, deadline=None)
@given(
    keys=st.lists(
        st.tuples(
            st.none() | st.sampled_from(_EDGE_LENGTHS).flatmap(lambda n: st.binary(min_size=n, max_size=n)),
            st.sampled_from([record_walk.SOURCE_BUF, record_walk.SOURCE_AREAS, record_walk.SOURCE_KAREA]),
            st.booleans(),
        ),
        min_size=2 * key_digest.LANES + 1,  # every lane used again, some a third time
        max_size=90,
    )
)
def test_key_digests_of_rows_equal_md5_whatever_the_lengths_sources_and_rows_skipped(keys):
    sources = {s: bytearray(b"\xaa") for s in (0, 1, 2)}  # a key never starts at 0 or ends its area
    rec = np.zeros((len(keys), record_walk.RECORD_COLUMNS), dtype=np.int64)
    for r, (key, source, wanted) in enumerate(keys):
        rec[r, record_walk.R_SOURCE] = source
        rec[r, record_walk.R_KEY_POS] = len(sources[source])
        rec[r, record_walk.R_KEY_LEN] = -1 if key is None else len(key)
        rec[r, record_walk.R_WANT] = record_walk.WANT_HASH if wanted else record_walk.WANT_NONE
        sources[source] += (key or b"") + b"\x55"
    buf, areas, karea = (np.frombuffer(bytes(sources[s]), dtype=np.uint8) for s in (0, 1, 2))
    digests = np.zeros((len(keys), 2), dtype=np.uint64)
    key_digest.hash_rows(buf, areas, karea, rec, digests, 0, len(keys))
    for (key, _, wanted), (hi, lo) in zip(keys, digests.tolist(), strict=True):
        if key is not None and wanted:
            assert hi.to_bytes(8, "little") + lo.to_bytes(8, "little") == hashlib.md5(key).digest()
        else:
            assert (hi, lo) == (0, 0)


def test_a_borrowed_view_is_the_same_memory_and_leaves_the_arrays_reference_count():
    import sys

    from numba import njit

    from kafka_log_core.kernels.fields import borrowed

    @njit
    def fill(a):
        view = borrowed(a)
        for i in range(view.shape[0]):
            view[i] = 3 * i
        return view[2]

    a = np.zeros(10, dtype=np.int64)
    before = sys.getrefcount(a)
    assert fill(a) == 6
    assert a.tolist() == [3 * i for i in range(10)]
    assert sys.getrefcount(a) == before
