"""Time index: broker-compatible read/lookup/sanity/truncate/is-full and exact writes."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_log_core.errors import ConfigError, CorruptIndexError
from kafka_log_core.format.time_index import (
    TimestampOffset,
    encode_time_index,
    is_full,
    max_entries,
    parse_time_index,
    read_time_index,
    time_index_from_entries,
    write_time_index,
)

# Spec example E7's time index, copied by hand from kafka-log-format.md §14.
E7_TIMEINDEX = bytes.fromhex("00 00 00 00 00 00 03 ED 00 00 00 0200 00 00 00 00 00 03 F2 00 00 00 09")


def test_e7_time_index_bytes_read_as_timestamp_and_shallow_offset():
    index = parse_time_index(E7_TIMEINDEX, 0)
    assert list(index) == [TimestampOffset(1005, 2), TimestampOffset(1010, 9)]
    assert index.max_timestamp == 1010


def test_lookup_is_a_floor_on_timestamps():
    index = time_index_from_entries(100, [TimestampOffset(1000, 105), TimestampOffset(2000, 110)])
    assert index.lookup(999) == TimestampOffset(-1, 100)
    assert index.lookup(1000) == TimestampOffset(1000, 105)
    assert index.lookup(1999) == TimestampOffset(1000, 105)
    assert index.lookup(2**63 - 1) == TimestampOffset(2000, 110)
    assert index.lookup(-(2**70)) == TimestampOffset(-1, 100)


def test_empty_index_has_no_timestamp_and_looks_up_to_the_base():
    index = parse_time_index(b"", 42)
    assert index.max_timestamp == -1
    assert index.last_entry == TimestampOffset(-1, 42)
    assert index.lookup(5) == TimestampOffset(-1, 42)
    index.sanity_check()


@given(
    st.integers(0, 2**40),
    st.lists(
        st.tuples(st.integers(0, 2**62), st.integers(0, 2**31 - 1)), max_size=80, unique_by=lambda e: e[0]
    ),
    st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=20),
)
def test_write_read_lookup_agree_with_a_linear_scan(base, raw, targets):
    stamps = sorted(t for t, _ in raw)
    relatives = sorted(r for _, r in raw)
    entries = [TimestampOffset(t, base + r) for t, r in zip(stamps, relatives, strict=True)]
    data = encode_time_index(base, entries)
    assert len(data) == 12 * len(entries)
    index = parse_time_index(data, base)
    assert list(index) == entries
    for target in targets:
        below = [e for e in entries if e.timestamp <= target]
        assert index.lookup(target) == (below[-1] if below else TimestampOffset(-1, base))
        kept = [e for e in entries if e.offset < target]
        assert list(index.truncate_to(target)) == kept


def test_write_is_exactly_twelve_bytes_per_entry_and_reopens(tmp_path):
    path = tmp_path / "00000000000000000000.timeindex"
    entries = [TimestampOffset(1005, 2), TimestampOffset(1010, 9)]
    assert write_time_index(path, 0, entries) == 24
    assert path.read_bytes() == E7_TIMEINDEX
    assert list(read_time_index(path)) == entries
    assert not (tmp_path / "00000000000000000000.timeindex.tmp").exists()


@pytest.mark.parametrize(
    ("entries", "match"),
    [
        ([TimestampOffset(-1, 10)], "entry 0: timestamp -1 must be above"),
        ([TimestampOffset(5, 10), TimestampOffset(5, 11)], "entry 1: timestamp 5 must be above"),
        ([TimestampOffset(5, 10), TimestampOffset(4, 11)], "entry 1: timestamp 4 must be above"),
        ([TimestampOffset(5, 12), TimestampOffset(6, 11)], "entry 1: offset 11 is below"),
        ([TimestampOffset(5, 9)], "entry 0: offset 9 is outside"),
        ([TimestampOffset(5, 10 + 2**31)], "is outside the segment's range"),
    ],
    ids=[
        "no-timestamp",
        "equal-timestamps",
        "decreasing-timestamps",
        "decreasing-offsets",
        "below-base",
        "overflow",
    ],
)
def test_encode_refuses_entries_maybe_append_would_not_write(entries, match):
    with pytest.raises(CorruptIndexError, match=match):
        encode_time_index(10, entries)


def test_encode_accepts_repeated_offsets_with_rising_timestamps():
    data = encode_time_index(0, [TimestampOffset(5, 3), TimestampOffset(6, 3)])
    assert data == bytes.fromhex("0000000000000005 00000003 0000000000000006 00000003")


def test_sanity_rejects_last_timestamp_below_first(tmp_path):
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes(bytes.fromhex("00000000000003e8 00000001 00000000000003e7 00000002"))
    with pytest.raises(
        CorruptIndexError,
        match=re.escape(f"{path} at position 12: ") + ".*last timestamp 999.*first timestamp 1000",
    ):
        read_time_index(path).sanity_check()


def test_sanity_rejects_last_offset_below_base(tmp_path):
    path = tmp_path / "00000000000000000100.timeindex"
    path.write_bytes(bytes.fromhex("00000000000003e8 fffffffe"))
    with pytest.raises(
        CorruptIndexError, match=re.escape(f"{path} at position 8: ") + ".*last offset 98.*base offset 100"
    ):
        read_time_index(path).sanity_check()


def test_read_takes_whole_entries_and_sanity_flags_trailing_bytes(tmp_path):
    path = tmp_path / "00000000000000000000.timeindex"
    path.write_bytes(E7_TIMEINDEX + bytes(5))
    index = read_time_index(path)
    assert len(index) == 2
    with pytest.raises(
        CorruptIndexError, match=re.escape(f"{path} at position 24: ") + "time index is 29 bytes"
    ):
        index.sanity_check()


def test_zero_padding_reads_as_entries_like_the_broker_does():
    # An untrimmed (preallocated) file: the broker would take the zeros as entries (0, base).
    index = parse_time_index(E7_TIMEINDEX + bytes(24), 0)
    assert len(index) == 4
    assert index.last_entry == TimestampOffset(0, 0)
    with pytest.raises(CorruptIndexError, match="last timestamp 0 is below its first timestamp 1005"):
        index.sanity_check()


@pytest.mark.parametrize(("target", "kept"), [(2, 0), (3, 1), (9, 1), (10, 2)])
def test_truncate_drops_entries_at_or_above_the_offset(target, kept):
    assert len(parse_time_index(E7_TIMEINDEX, 0).truncate_to(target)) == kept


def test_default_size_gives_873813_slots_and_keeps_the_last_for_roll():
    assert max_entries(10485760) == 873813
    assert not is_full(873811, 10485760)
    assert is_full(873812, 10485760)


@pytest.mark.parametrize(("size", "slots", "full_at"), [(12, 1, 0), (24, 2, 1), (35, 2, 1), (36, 3, 2)])
def test_time_index_is_full_one_entry_before_its_slot_count(size, slots, full_at):
    assert max_entries(size) == slots
    assert is_full(full_at, size)
    assert full_at == 0 or not is_full(full_at - 1, size)


def test_segment_index_bytes_below_one_entry_is_refused():
    with pytest.raises(ConfigError, match="segment.index.bytes=11"):
        max_entries(11)


@given(st.binary(max_size=200), st.integers(0, 2**40), st.integers(-(2**63), 2**63 - 1))
def test_arbitrary_bytes_never_raise_anything_but_corrupt_index(data, base, target):
    index = parse_time_index(data, base, "/x/f.timeindex")
    index.lookup(target)
    index.truncate_to(target)
    assert index.max_timestamp == (index.entry(len(index) - 1).timestamp if len(index) else -1)
    try:
        index.sanity_check()
    except CorruptIndexError as err:
        assert "/x/f.timeindex at position" in str(err)
