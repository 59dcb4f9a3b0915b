"""Offset index: broker-compatible read/lookup/sanity/truncate, exact writes, and the recovery build rule."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kafka_log_core.errors import ConfigError, CorruptIndexError, RefusedError
from kafka_log_core.format.offset_index import (
    OffsetPosition,
    encode_offset_index,
    is_full,
    max_entries,
    offset_index_from_entries,
    parse_offset_index,
    read_offset_index,
    write_offset_index,
)
from kafka_log_core.format.time_index import TimestampOffset
from kafka_log_core.log.index_builder import IndexBuilder

# Spec example E7, copied by hand from kafka-log-format.md §14.
E7_INDEX = bytes.fromhex("00 00 00 03 00 00 00 98")
E7_TIMEINDEX = bytes.fromhex("00 00 00 00 00 00 03 ED 00 00 00 0200 00 00 00 00 00 03 F2 00 00 00 09")
E7_BATCHES = [(0, 0, 1000), (70, 2, 1005), (152, 3, 1003), (222, 9, 1010)]  # (position, last offset, max ts)


def test_builder_reproduces_spec_example_e7():
    builder = IndexBuilder(0, index_interval_bytes=100)
    for position, last_offset, max_timestamp in E7_BATCHES:
        builder.append(position, last_offset, max_timestamp)
    offsets, times = builder.finish()
    assert offsets.encode() == E7_INDEX
    assert times.encode() == E7_TIMEINDEX


def test_e7_index_bytes_read_as_last_offset_and_batch_position():
    index = parse_offset_index(E7_INDEX, 0)
    assert list(index) == [OffsetPosition(3, 152)]


def test_builder_never_indexes_the_batch_at_position_zero():
    builder = IndexBuilder(100, index_interval_bytes=0)
    builder.append(0, 104, 5)
    builder.append(10, 107, 6)
    offsets, times = builder.finish()
    assert list(offsets) == [OffsetPosition(107, 10)]
    assert list(times) == [TimestampOffset(6, 107)]


def test_builder_needs_strictly_more_than_the_interval():
    builder = IndexBuilder(0, index_interval_bytes=100)
    builder.append(0, 0, -1)
    builder.append(100, 1, -1)  # 100 - 0 is not > 100
    builder.append(201, 2, -1)  # 201 - 0 > 100
    builder.append(301, 3, -1)  # 301 - 201 is not > 100
    builder.append(302, 4, -1)  # 302 - 201 > 100
    assert list(builder.finish()[0]) == [OffsetPosition(2, 201), OffsetPosition(4, 302)]


def test_builder_leaves_the_time_index_empty_without_timestamps():
    builder = IndexBuilder(0, index_interval_bytes=0)
    for n in range(5):
        builder.append(n * 30, n, -1)  # magic 0 batches carry no timestamp
    offsets, times = builder.finish()
    assert len(offsets) == 4
    assert len(times) == 0


def test_builder_finish_does_not_change_the_builder():
    builder = IndexBuilder(0, index_interval_bytes=10)
    builder.append(0, 0, 50)
    first = builder.finish()[1].encode()
    assert builder.finish()[1].encode() == first == bytes.fromhex("0000000000000032 00000000")
    builder.append(20, 1, 60)
    # (50, 0) was only the would-be final entry; the indexed batch brings the new maximum itself.
    assert list(builder.finish()[1]) == [TimestampOffset(60, 1)]


def test_builder_reports_full_offset_index_and_refuses_more_entries():
    builder = IndexBuilder(0, index_interval_bytes=0, segment_index_bytes=24)  # 3 offset slots
    builder.append(0, 0, -1)
    for n in range(1, 4):
        assert not builder.is_full
        builder.append(n * 10, n, -1)
    assert builder.offset_index_full and builder.is_full
    with pytest.raises(RefusedError, match="offset index of segment 0 is full"):
        builder.append(40, 4, -1)


def test_builder_time_index_is_full_one_entry_early():
    builder = IndexBuilder(0, index_interval_bytes=0, segment_index_bytes=36)  # 3 time slots, 4 offset slots
    builder.append(0, 0, 1)
    builder.append(10, 1, 2)
    assert not builder.is_full
    builder.append(20, 2, 3)
    assert builder.time_index_full and not builder.offset_index_full
    with pytest.raises(RefusedError, match="time index of segment 0 is full"):
        builder.append(30, 3, 4)


@pytest.mark.parametrize(
    ("position", "last_offset", "match"),
    [
        (10, 2**31 + 100, "outside the segment's range"),
        (10, 99, "outside the segment's range"),
        (0, 101, "positions must increase"),
    ],
    ids=["relative-overflow", "below-base", "position-not-increasing"],
)
def test_builder_refuses_batches_the_index_cannot_represent(position, last_offset, match):
    builder = IndexBuilder(100, path="/p/00000000000000000100.index")
    builder.append(0, 100, -1)
    with pytest.raises(CorruptIndexError, match=match):
        builder.append(position, last_offset, -1)


batch_sizes = st.lists(st.tuples(st.integers(1, 300), st.integers(1, 5), st.integers(-1, 2000)), max_size=60)


@settings(max_examples=200)
@given(batch_sizes, st.integers(0, 400))
def test_builder_entries_point_at_batch_starts_keyed_by_last_offset(sizes, interval):
    batches, position, offset = [], 0, 7
    for size, count, max_timestamp in sizes:
        batches.append((position, offset + count - 1, max_timestamp))
        position, offset = position + size, offset + count
    builder = IndexBuilder(7, index_interval_bytes=interval)
    for batch in batches:
        builder.append(*batch)
    offsets, times = builder.finish()
    by_position = {p: last for p, last, _ in batches}
    previous_position = 0
    for entry in offsets:
        assert by_position[entry.position] == entry.offset
        assert entry.position - previous_position > interval
        previous_position = entry.position
    stamps = [t.timestamp for t in times]
    assert stamps == sorted(set(stamps)) and all(t >= 0 for t in stamps)
    real = [t for _, _, t in batches if t >= 0]
    assert (stamps[-1] if stamps else None) == (max(real) if real else None)
    for entry in times:  # (T, O): T is the largest max timestamp among batches ending at or before O
        assert entry.timestamp == max(t for _, last, t in batches if last <= entry.offset)


def test_lookup_extreme_cases():
    index = offset_index_from_entries(10, [OffsetPosition(15, 100), OffsetPosition(20, 200)])
    assert index.lookup(9) == OffsetPosition(10, 0)
    assert index.lookup(14) == OffsetPosition(10, 0)
    assert index.lookup(15) == OffsetPosition(15, 100)
    assert index.lookup(19) == OffsetPosition(15, 100)
    assert index.lookup(2**63 - 1) == OffsetPosition(20, 200)
    assert index.lookup(2**70) == OffsetPosition(20, 200)
    assert parse_offset_index(b"", 10).lookup(50) == OffsetPosition(10, 0)


@given(
    st.integers(0, 2**40),
    st.lists(
        st.tuples(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1)), max_size=80, unique_by=lambda e: e[0]
    ),
    st.lists(st.integers(-(2**41), 2**42), min_size=1, max_size=20),
)
def test_write_read_lookup_agree_with_a_linear_scan(base, raw, targets):
    entries = [OffsetPosition(base + rel, pos) for rel, pos in sorted(raw)]
    data = encode_offset_index(base, entries)
    assert len(data) == 8 * len(entries)
    index = parse_offset_index(data, base)
    assert list(index) == entries
    for target in targets:
        below = [e for e in entries if e.offset <= target]
        assert index.lookup(target) == (below[-1] if below else OffsetPosition(base, 0))
        assert list(index.truncate_to(target)) == [e for e in entries if e.offset < target]


def test_write_is_exactly_eight_bytes_per_entry_and_reopens(tmp_path):
    path = tmp_path / "00000000000000000050.index"
    entries = [OffsetPosition(50, 0), OffsetPosition(60, 4100), OffsetPosition(75, 8300)]
    assert write_offset_index(path, 50, entries) == 24
    assert path.read_bytes() == bytes.fromhex("00000000 00000000 0000000a 00001004 00000019 0000206c")
    assert list(read_offset_index(path)) == entries
    assert not (tmp_path / "00000000000000000050.index.tmp").exists()
    write_offset_index(path, 50, entries[:1], atomic=False)
    assert path.stat().st_size == 8


def test_sanity_accepts_an_entry_equal_to_the_base_offset():
    parse_offset_index(bytes(8), 100).sanity_check()


def test_sanity_rejects_last_offset_below_base(tmp_path):
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(bytes.fromhex("00000001 00000000 ffffffff 00000010"))
    with pytest.raises(
        CorruptIndexError, match=re.escape(f"{path} at position 8: ") + ".*last offset 99.*base offset 100"
    ):
        read_offset_index(path).sanity_check()


def test_read_takes_whole_entries_and_sanity_flags_trailing_bytes(tmp_path):
    path = tmp_path / "00000000000000000000.index"
    path.write_bytes(bytes.fromhex("00000005 00000040 0000"))
    index = read_offset_index(path)
    assert list(index) == [OffsetPosition(5, 64)]
    with pytest.raises(
        CorruptIndexError, match=re.escape(f"{path} at position 8: ") + "offset index is 10 bytes"
    ):
        index.sanity_check()


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        ([OffsetPosition(5, 0), OffsetPosition(5, 10)], "entry 1: offset 5 is not above"),
        ([OffsetPosition(9, 0), OffsetPosition(5, 10)], "entry 1: offset 5 is not above"),
        ([OffsetPosition(4, 0)], "entry 0: offset 4 is outside"),
        ([OffsetPosition(5 + 2**31, 0)], "is outside the segment's range"),
        ([OffsetPosition(6, -1)], "position -1 is outside"),
        ([OffsetPosition(6, 2**31)], "position 2147483648 is outside"),
    ],
    ids=["equal", "decreasing", "below-base", "relative-overflow", "negative-position", "position-overflow"],
)
def test_encode_refuses_entries_the_broker_would_not_append(entries, match):
    with pytest.raises(CorruptIndexError, match=match):
        encode_offset_index(5, entries)


@pytest.mark.parametrize(("target", "kept"), [(0, 0), (10, 0), (11, 1), (20, 1), (21, 2), (100, 2)])
def test_truncate_drops_entries_at_or_above_the_offset(target, kept):
    index = offset_index_from_entries(0, [OffsetPosition(10, 0), OffsetPosition(20, 99)])
    assert len(index.truncate_to(target)) == kept


@pytest.mark.parametrize(("size", "slots"), [(10485760, 1310720), (8, 1), (15, 1), (4097, 512)])
def test_max_entries_rounds_segment_index_bytes_down(size, slots):
    assert max_entries(size) == slots
    assert not is_full(slots - 1, size)
    assert is_full(slots, size)


def test_segment_index_bytes_below_one_entry_is_refused():
    with pytest.raises(ConfigError, match="segment.index.bytes=4"):
        max_entries(4)


@given(st.binary(max_size=200), st.integers(0, 2**40), st.integers(-(2**63), 2**63 - 1))
def test_arbitrary_bytes_never_raise_anything_but_corrupt_index(data, base, target):
    index = parse_offset_index(data, base, "/x/f.index")
    index.lookup(target)
    index.truncate_to(target)
    assert len(index.encode()) == len(data) // 8 * 8
    try:
        index.sanity_check()
    except CorruptIndexError as err:
        assert "/x/f.index at position" in str(err)
