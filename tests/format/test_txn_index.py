"""Transaction index: 34-byte entries, the broker's read rules, range search and appends."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_log_core.errors import CorruptIndexError
from kafka_log_core.format.txn_index import (
    AbortedTxn,
    TxnIndexSearchResult,
    append_txn_index,
    collect_aborted,
    encode_txn_index,
    parse_txn_index,
    read_txn_index,
    truncate_to,
    write_txn_index,
)

# Spec example E8, copied by hand from kafka-log-format.md §14.
E8 = bytes.fromhex(
    "00 00 00 00 00 00 00 00 03 E8 00 00 00 00 00 00 00 96 00 00 00 00 00 00 00 A0 00 00 00 00 00 00 00 A1"
)


def test_e8_bytes_are_one_aborted_transaction():
    assert parse_txn_index(E8) == [
        AbortedTxn(producer_id=1000, first_offset=150, last_offset=160, last_stable_offset=161)
    ]


def test_encode_writes_e8():
    assert encode_txn_index([AbortedTxn(1000, 150, 160, 161)]) == E8


def test_trailing_partial_entry_is_ignored():
    assert parse_txn_index(E8 + E8[:33]) == parse_txn_index(E8)


def test_version_above_zero_is_rejected_with_its_position(tmp_path):
    path = tmp_path / "00000000000000000100.txnindex"
    path.write_bytes(E8 + b"\x01" + E8[1:])
    with pytest.raises(
        CorruptIndexError,
        match=re.escape(f"{path} at position 34: ") + "aborted transaction entry 1 has version 1",
    ):
        read_txn_index(path)


def test_only_byte_zero_of_the_version_is_read_as_a_signed_byte():
    # The broker reads the version with ByteBuffer.get(0): byte 1 is ignored and 0x80.. are negative.
    assert parse_txn_index(b"\x00\x07" + E8[2:])[0].version == 0
    assert parse_txn_index(b"\xff\x00" + E8[2:])[0].version == -1


def test_entry_below_the_segment_base_is_corrupt(tmp_path):
    path = tmp_path / "00000000000000000161.txnindex"
    path.write_bytes(E8)
    with pytest.raises(
        CorruptIndexError,
        match=re.escape(f"{path} at position 18: ") + ".*last offset 160, below the segment base offset 161",
    ):
        read_txn_index(path)
    assert read_txn_index(path, base_offset=160) == parse_txn_index(E8)


def test_read_without_a_segment_name_skips_the_base_check(tmp_path):
    path = tmp_path / "copy.bin"
    path.write_bytes(E8)
    assert len(read_txn_index(path)) == 1


TXNS = [
    AbortedTxn(1, 0, 10, 11),
    AbortedTxn(2, 5, 26, 27),
    AbortedTxn(3, 18, 35, 25),
    AbortedTxn(4, 30, 45, 46),
]


@pytest.mark.parametrize(
    ("start", "end", "expected", "complete"),
    [
        (0, 5, [1], True),  # txn 1 overlaps; its LSO 11 >= 5 ends the search
        (0, 11, [1], True),  # txn 2 would overlap too, but txn 1's LSO 11 >= 11 stops first
        (11, 20, [2], True),  # txn 1 ended before 11; txn 2's LSO 27 >= 20 stops
        (27, 30, [3], True),  # txn 4 starts at 30 (not < 30) but its LSO 46 >= 30 stops
        (36, 50, [4], False),  # nothing reaches 50: search continues in the next segment
        (46, 60, [], False),
        (10, 10, [1], True),  # an ABORT marker exactly at the range start still counts
    ],
)
def test_collect_aborted_overlaps_range_and_stops_at_lso(start, end, expected, complete):
    result = collect_aborted(TXNS, start, end)
    assert [txn.producer_id for txn in result.aborted] == expected
    assert result.is_complete is complete


def test_collect_aborted_matches_a_naive_reading_of_the_rule():
    for start in range(0, 50):
        for end in range(start, 60):
            want = []
            complete = False
            for txn in TXNS:
                if txn.last_offset >= start and txn.first_offset < end:
                    want.append(txn)
                if txn.last_stable_offset >= end:
                    complete = True
                    break
            assert collect_aborted(TXNS, start, end) == TxnIndexSearchResult(tuple(want), complete)


def test_write_and_append_after_reopen(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    assert write_txn_index(path, TXNS[:2]) == 68
    assert append_txn_index(path, TXNS[2:]) == 136
    assert read_txn_index(path) == TXNS
    assert path.read_bytes()[34 * 3 : 34 * 4] == encode_txn_index(TXNS[3:])


def test_append_creates_a_missing_index(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    append_txn_index(path, [TXNS[0]])
    assert path.read_bytes() == encode_txn_index([TXNS[0]])


def test_last_offset_must_increase_across_an_append(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    write_txn_index(path, TXNS[:2])
    with pytest.raises(CorruptIndexError, match="last offset 26 is not above the previous last offset 26"):
        append_txn_index(path, [AbortedTxn(9, 20, 26, 30)])
    assert read_txn_index(path) == TXNS[:2]


def test_append_refuses_a_file_with_partial_trailing_bytes(tmp_path):
    path = tmp_path / "00000000000000000000.txnindex"
    path.write_bytes(E8 + b"\x00" * 5)
    with pytest.raises(CorruptIndexError, match=re.escape(f"{path} at position 34: ") + "cannot append"):
        append_txn_index(path, [AbortedTxn(1, 200, 300, 301)])


def test_encode_refuses_non_increasing_last_offsets_and_out_of_range_values():
    with pytest.raises(CorruptIndexError, match="entry 1: last offset 10 is not above"):
        encode_txn_index([TXNS[0], TXNS[0]])
    with pytest.raises(CorruptIndexError, match="entry 0: .* does not fit"):
        encode_txn_index([AbortedTxn(2**63, 0, 1, 2)])


@pytest.mark.parametrize(("offset", "kept"), [(0, 0), (10, 0), (11, 1), (26, 1), (27, 2), (100, 4)])
def test_truncate_drops_entries_from_the_first_last_offset_at_or_above(offset, kept):
    assert truncate_to(TXNS, offset) == TXNS[:kept]


@given(st.binary(max_size=300), st.integers(-(2**63), 2**63 - 1))
def test_arbitrary_bytes_never_raise_anything_but_corrupt_index(data, base):
    try:
        entries = parse_txn_index(data, base, "/x/f.txnindex")
    except CorruptIndexError as err:
        assert "/x/f.txnindex at position" in str(err)
    else:
        assert len(entries) == len(data) // 34


@given(
    st.lists(
        st.tuples(
            st.integers(-(2**63), 2**63 - 1),
            st.integers(-(2**63), 2**63 - 1),
            st.integers(-(2**63), 2**63 - 1),
        ),
        max_size=20,
    )
)
def test_encode_parse_round_trip(fields):
    entries = [
        AbortedTxn(pid, first, last_offset, lso) for last_offset, (pid, first, lso) in enumerate(fields)
    ]
    assert parse_txn_index(encode_txn_index(entries)) == entries
