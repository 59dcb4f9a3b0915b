"""The search for valid batches past the point where recovery stops (issue 24): what tells a crash tail
(nothing valid after it) from bit rot or a damaged copy (valid batches after it).

Batches are built with kafka-python's record builders (an independent codec), so what counts as valid
is what another Kafka implementation wrote, not what our writer does.
"""

from __future__ import annotations

import struct

import pytest
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from kafka_log_core.rules.valid_data import ValidData, find_valid_data


def _v2(base: int, n: int, value: bytes = b"v" * 40) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=0, is_transactional=False, producer_id=-1, producer_epoch=-1,
        base_sequence=-1, batch_size=1 << 20,
    )  # fmt: skip
    for i in range(n):
        builder.append(i, timestamp=1_700_000_000_000 + i, key=b"k%d" % i, value=value, headers=[])
    out = bytearray(builder.build())
    struct.pack_into(">q", out, 0, base)
    return bytes(out)


def _legacy(magic: int, offsets: list[int]) -> bytes:
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    for i, offset in enumerate(offsets):
        builder.append(offset, timestamp=1_700_000_000_000 + i if magic else None, key=b"k", value=b"v")
    return bytes(builder.build())


BATCHES = [_v2(3 * i, 3) for i in range(20)]
SEGMENT = b"".join(BATCHES)


def test_a_whole_segment_is_every_batch_it_holds():
    assert find_valid_data(SEGMENT, 0, 0) == ValidData(20, 60, len(SEGMENT))


@pytest.mark.parametrize("tail", [b"", bytes(1 << 16), b"\x00" * 7], ids=["nothing", "zeros", "a few zeros"])
def test_a_zero_filled_or_empty_tail_holds_nothing(tail):
    data = SEGMENT + tail
    assert find_valid_data(data, len(SEGMENT), 0) == ValidData()


def test_a_torn_last_batch_holds_nothing():
    torn = SEGMENT + _v2(60, 3)[:50]
    assert find_valid_data(torn, len(SEGMENT), 0) == ValidData()


def test_after_a_flipped_bit_the_walk_resynchronises_on_the_next_batch():
    data = bytearray(SEGMENT)
    bad = sum(map(len, BATCHES[:5]))
    data[bad + 70] ^= 0x10  # in the sixth batch's records
    found = find_valid_data(data, bad, 0)
    assert found == ValidData(14, 42, len(SEGMENT) - bad - len(BATCHES[5]))


def test_a_length_that_lies_is_searched_past_byte_by_byte():
    data = bytearray(SEGMENT)
    bad = sum(map(len, BATCHES[:5]))
    for lie in (1 << 30, 14, 60, len(BATCHES[5]) + 3):  # past the end, too short, inside, past the next start
        struct.pack_into(">i", data, bad + 8, lie)
        assert find_valid_data(data, bad, 0) == ValidData(14, 42, len(SEGMENT) - bad - len(BATCHES[5])), lie


def test_legacy_messages_count_one_record_each():
    v0, v1 = _legacy(0, [10, 11]), _legacy(1, [12, 13, 14])
    assert find_valid_data(bytes(30) + v0 + v1, 0, 10) == ValidData(5, 5, len(v0) + len(v1))


def test_batches_outside_the_segments_offset_range_are_not_counted():
    """A batch whose offsets cannot belong to the segment (below its base, or past base + 2^31 - 1) is
    not taken for valid data of it."""
    assert find_valid_data(SEGMENT, 0, 100) == ValidData()
    far = _v2(2**31, 1)
    assert find_valid_data(far, 0, 0) == ValidData()
    assert find_valid_data(far, 0, 5) == ValidData(1, 1, len(far))


def test_overlapping_plausible_headers_end_the_search_as_undetermined():
    """Every position claims a legacy message of about 2 MiB: checking each checksum would be quadratic,
    so the search gives up, and giving up counts as possibly valid data (the safe side)."""
    hostile = (bytes(8) + struct.pack(">i", 2 << 20) + bytes(4)) * (300_000)
    found = find_valid_data(hostile, 0, 0)
    assert found.undetermined and found.any and found.batches == 0
