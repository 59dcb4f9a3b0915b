"""Producer state snapshots: spec example E9, the broker's rejection rules, atomic writes."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kafka_log_core.errors import CorruptCheckpointError
from kafka_log_core.format.producer_snapshot import (
    ProducerSnapshotEntry,
    encode_producer_snapshot,
    parse_producer_snapshot,
    read_producer_snapshot,
    write_producer_snapshot,
)

# Spec example E9, copied by hand from kafka-log-format.md §14.
E9_EMPTY = bytes.fromhex("00 01 48 67 4B C7 00 00 00 00")
E9_ONE = bytes.fromhex(
    "00 01 E1 CC 78 93 00 00 00 01 00 00 00 00 00 00 03 E8 00 00 00 00 00 04 00 00 00 00 00 00 00 CC 00 00 00 04"
    "00 00 01 8B CF E5 68 00 FF FF FF FF FF FF FF FF FF FF FF FF"
)
E9_ENTRY = ProducerSnapshotEntry(
    producer_id=1000,
    epoch=0,
    last_sequence=4,
    last_offset=204,
    offset_delta=4,
    timestamp=0x18BCFE56800,
    coordinator_epoch=-1,
    current_txn_first_offset=-1,
)


def test_e9_empty_snapshot():
    assert parse_producer_snapshot(E9_EMPTY) == []
    assert encode_producer_snapshot([]) == E9_EMPTY


def test_e9_one_entry_snapshot():
    assert parse_producer_snapshot(E9_ONE) == [E9_ENTRY]
    assert encode_producer_snapshot([E9_ENTRY]) == E9_ONE


def test_write_is_atomic_and_reads_back(tmp_path):
    path = tmp_path / "00000000000000000205.snapshot"
    assert write_producer_snapshot(path, [E9_ENTRY]) == len(E9_ONE)
    assert path.read_bytes() == E9_ONE
    assert read_producer_snapshot(path) == [E9_ENTRY]
    assert [p.name for p in tmp_path.iterdir()] == [path.name]


@pytest.mark.parametrize(
    ("data", "position", "match"),
    [
        (b"", 0, "producer snapshot is 0 bytes: expected at least the 10-byte header"),
        (E9_EMPTY[:9], 9, "producer snapshot is 9 bytes"),
        (E9_ONE[:-1], 55, "1 entries need 56 bytes, found 55"),
        (b"\x00\x02" + E9_ONE[2:], 0, "expected snapshot version 1, found 2"),
        (E9_ONE[:6] + b"\xff\xff\xff\xff" + E9_ONE[10:], 6, "entry count is -1"),
        (
            E9_ONE[:40] + b"\x00" + E9_ONE[41:],
            2,
            r"CRC32C of bytes \[6, 56\) is 0x[0-9a-f]{8}, stored 0xe1cc7893",
        ),
    ],
    ids=["empty-file", "short-header", "truncated-entry", "bad-version", "negative-count", "bad-crc"],
)
def test_corrupt_snapshots_name_file_and_position(tmp_path, data, position, match):
    path = tmp_path / "00000000000000000205.snapshot"
    path.write_bytes(data)
    with pytest.raises(CorruptCheckpointError, match=re.escape(f"{path} at position {position}: ") + match):
        read_producer_snapshot(path)


def test_every_single_bit_flip_is_detected():
    for index in range(len(E9_ONE)):
        for bit in range(8):
            flipped = bytearray(E9_ONE)
            flipped[index] ^= 1 << bit
            with pytest.raises(CorruptCheckpointError):
                parse_producer_snapshot(bytes(flipped))


def test_bytes_after_the_entries_are_accepted_when_the_crc_covers_them():
    # The broker parses the entries, then checks the CRC over [6, EOF): extra bytes only matter to the CRC.
    import crc32c

    body = E9_EMPTY[6:] + b"\x00\x00"
    data = E9_EMPTY[:2] + crc32c.crc32c(body).to_bytes(4, "big") + body
    assert parse_producer_snapshot(data) == []
    with pytest.raises(CorruptCheckpointError, match="CRC32C"):
        parse_producer_snapshot(E9_EMPTY + b"\x00\x00")


def test_entries_outside_the_field_ranges_are_refused():
    with pytest.raises(CorruptCheckpointError, match="entry 0: .* does not fit"):
        encode_producer_snapshot([ProducerSnapshotEntry(1, 2**15, 0, 0, 0, 0, 0)])


entries = st.builds(
    ProducerSnapshotEntry,
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**15), 2**15 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
    st.integers(-(2**31), 2**31 - 1),
    st.integers(-(2**63), 2**63 - 1),
)


@given(st.lists(entries, max_size=20))
def test_encode_parse_round_trip(snapshot):
    data = encode_producer_snapshot(snapshot)
    assert len(data) == 10 + 46 * len(snapshot)
    assert parse_producer_snapshot(data) == snapshot


@given(st.binary(max_size=200))
def test_arbitrary_bytes_never_raise_anything_but_corrupt_checkpoint(data):
    try:
        parse_producer_snapshot(data, "/p/00000000000000000000.snapshot")
    except CorruptCheckpointError as err:
        assert "/p/00000000000000000000.snapshot at position" in str(err)
