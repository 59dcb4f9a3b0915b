"""Kafka's log cleaner over the batch formats (R4, R5): log-append time, compressed batches, legacy
messages and their wrappers, on real segment files; how the cases are built and checked: ``test_cleaner``.
"""

from __future__ import annotations

import gzip
import struct

import pytest

from kafka_log_core.format import compression, legacy_records
from kafka_log_core.settings.config import BrokerConfig
from kafka_log_core.settings.kafka_version import KafkaVersion
from tests.logbuild import TS, batch, write_segment
from tests.rules.cleaner_harness import (
    DAY,
    ENTRY_HEAD,
    HORIZON_BIT,
    LAT,
    NOW,
    as_bytes,
    batches,
    clean,
    data_records,
    layout,
    legacy,
    legacy_wrapper,
    mtime_ms,
    part,
    seg_file,
    single,
)


# ================================================================================ formats (R4, R5)
@pytest.mark.parametrize("with_tombstone", [False, True], ids=["values", "with-tombstone"])
def test_filter_to_preserves_log_append_time(tmp_path, with_tombstone):
    # MemoryRecordsTest.testFilterToPreservesLogAppendTime: a rebuilt LogAppendTime batch keeps its
    # maxTimestamp (every record reads it); baseTimestamp is that time, or the horizon when one is stamped.
    appended = TS + 500
    last = ("c", None) if with_tombstone else ("c", "1")
    layout(tmp_path, {0: [batch(0, [("a", "1"), ("b", "1"), last], timestamp_type=LAT, max_timestamp=appended),
                          single(3, "a", "2")], 4: []})  # fmt: skip
    clean(tmp_path)
    rebuilt = batches(tmp_path)[0]
    assert (rebuilt.base_offset, rebuilt.last_offset, rebuilt.offsets) == (0, 2, [1, 2])
    assert rebuilt.attributes == (0x08 | (HORIZON_BIT if with_tombstone else 0))
    assert rebuilt.max_timestamp == appended
    assert rebuilt.base_timestamp == (NOW + DAY if with_tombstone else appended)
    assert [r.timestamp for r in rebuilt.records] == [appended, appended]


@pytest.mark.parametrize("codec", [compression.GZIP, compression.SNAPPY, compression.LZ4, compression.ZSTD],
                         ids=["gzip", "snappy", "lz4", "zstd"])  # fmt: skip
def test_compressed_batches_keep_their_codec(tmp_path, codec):
    # LogCleanerParameterizedIntegrationTest (all codecs): rebuilt batches are recompressed with their codec.
    whole = batch(4, [("b", "2"), ("e", "1")], codec=codec)
    layout(tmp_path, {0: [batch(0, [("a", "1"), ("b", "1"), ("c", "1"), ("d", "1")], codec=codec), whole],
                      6: [single(6, "z")]})  # fmt: skip
    clean(tmp_path)
    rebuilt, copied, _active = batches(tmp_path)
    assert (rebuilt.codec, rebuilt.base_offset, rebuilt.last_offset, rebuilt.count) == (codec, 0, 3, 3)
    assert [(r.offset, r.key) for r in rebuilt.records] == [(0, b"a"), (2, b"c"), (3, b"d")]
    assert copied.raw == whole


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [compression.NONE, compression.GZIP, compression.SNAPPY, compression.LZ4],
                         ids=["uncompressed", "gzip", "snappy", "lz4"])  # fmt: skip
def test_legacy_batches_are_cleaned(tmp_path, magic, codec):
    # Magic 0/1 entries: uncompressed entries are kept or dropped whole; a compressed wrapper is rebuilt
    # with the same magic and codec, offset = last kept offset (v1 inner offsets relative to the first kept).
    middle = [(1, "b", "1", TS + 1), (2, "a", "2", TS + 2), (3, "c", "1", TS + 3)]
    if codec == compression.NONE:
        entries = [legacy(o, k, v, magic=magic, ts=t) for o, k, v, t in middle]
    else:
        entries = [legacy_wrapper(middle, magic=magic, codec=codec)]
    layout(tmp_path, {0: [legacy(0, "a", "1", magic=magic), *entries, legacy(4, "b", "2", magic=magic, ts=TS + 4)],
                      5: [legacy(5, "d", "1", magic=magic, ts=TS + 5)]})  # fmt: skip
    clean(tmp_path)
    # Map a->2, b->4, c->3: a@0 and b@1 are superseded.
    assert data_records(tmp_path) == [(2, b"a", b"2"), (3, b"c", b"1"), (4, b"b", b"2"), (5, b"d", b"1")]
    assert {b.magic for b in batches(tmp_path)} == {magic}
    if codec != compression.NONE:
        wrapper = batches(tmp_path)[0]
        assert (wrapper.codec, wrapper.base_offset, wrapper.last_offset) == (codec, 2, 3)
        assert wrapper.max_timestamp == (TS + 3 if magic else -1)
        assert [r.timestamp for r in wrapper.records] == ([TS + 2, TS + 3] if magic else [-1, -1])


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize(("first_dirty", "expected"), [
    (None, [(0, b"a", None), (1, b"b", b"1"), (2, b"c", None), (3, b"d", b"1"), (4, b"e", b"1"), (5, b"f", b"1")]),
    (4, [(1, b"b", b"1"), (2, b"c", None), (3, b"d", b"1"), (4, b"e", b"1"), (5, b"f", b"1")]),
], ids=["first-pass", "after-a-clean-prefix"])  # fmt: skip
def test_legacy_tombstones_expire_by_segment_mtime(tmp_path, magic, first_dirty, expected):
    # Spec R3.7 for magic 0/1: legacyHorizon = mtime(last clean segment) - delete.retention.ms (0 without a
    # clean prefix); a legacy tombstone is kept iff mtime(its segment) > legacyHorizon.
    d = part(tmp_path)
    write_segment(d, 0, [legacy(0, "a", None, magic=magic), legacy(1, "b", "1", magic=magic)], mtime_ms=TS)
    write_segment(d, 2, [legacy(2, "c", None, magic=magic), legacy(3, "d", "1", magic=magic)],
                  mtime_ms=TS + DAY + 5_000)  # fmt: skip
    write_segment(d, 4, [legacy(4, "e", "1", magic=magic)], mtime_ms=TS + DAY + 6_000)
    write_segment(d, 5, [legacy(5, "f", "1", magic=magic)])
    # With checkpoint 4: legacyHorizon = TS + DAY + 5 s - DAY = TS + 5 s; segment 0 (mtime TS) is older.
    clean(tmp_path, first_dirty=first_dirty)
    assert data_records(tmp_path) == expected
    assert mtime_ms(seg_file(tmp_path, 0, ".log")) == TS + DAY + 6_000


def _wrapper_inner_messages(raw: bytes) -> list[tuple[int, int, int, int]]:
    """(inner offset, magic, attributes, timestamp) of a gzip magic-1 wrapper, parsed by hand."""
    assert raw[16] == 1 and raw[17] & 0x07 == compression.GZIP
    (value_len,) = struct.unpack_from(">i", raw, 30)
    inner = gzip.decompress(raw[34 : 34 + value_len])
    out, pos = [], 0
    while pos < len(inner):
        offset, size = ENTRY_HEAD.unpack_from(inner, pos)
        magic, attributes = inner[pos + 16], inner[pos + 17]
        ts = struct.unpack_from(">q", inner, pos + 18)[0] if magic == 1 else None
        out.append((offset, magic, attributes, ts))
        pos += 12 + size
    return out


def _handmade_wrapper(wrapper_offset, inner_entries, *, inner_magic, attributes=compression.GZIP, ts=-1):
    inner = b"".join(
        legacy_records.encode_message(rel, inner_magic, as_bytes(k), as_bytes(v), t, a)
        for rel, k, v, t, a in inner_entries
    )
    value = compression.compress(compression.GZIP, inner, 1)
    return legacy_records.encode_message(wrapper_offset, 1, None, value, ts, attributes)


def test_clean_corrupt_message_set(tmp_path):
    # LogCleanerTest.testCleanCorruptMessageSet (KAFKA-4298): magic-1 gzip wrappers around magic-0 messages
    # are rewritten with inner magic 1, duplicates or not.
    dup = _handmade_wrapper(
        28, [(i, str(k), str(25 + i), -1, 0) for i, k in enumerate([0, 1, 0, 1])], inner_magic=0
    )
    no_dup = _handmade_wrapper(
        51, [(i, str(k), str(50 + i), -1, 0) for i, k in enumerate([3, 4])], inner_magic=0
    )
    layout(tmp_path, {0: [dup, no_dup], 52: []})
    clean(tmp_path)
    assert [(o, v) for o, _k, v in data_records(tmp_path)] == [(o, str(o).encode()) for o in (27, 28, 50, 51)]
    for b in batches(tmp_path):
        assert [m[1] for m in _wrapper_inner_messages(b.raw)] == [1] * b.count


def test_legacy_log_append_time_wrapper_keeps_the_append_time(tmp_path):
    # A v1 LogAppendTime wrapper: the broker stamped only the wrapper (time W, attribute bit 3).
    w = TS + 900
    wrapper = _handmade_wrapper(2, [(0, "a", "1", TS + 1, 0), (1, "b", "1", TS + 2, 0)], inner_magic=1,
                                attributes=compression.GZIP | 0x08, ts=w)  # fmt: skip
    layout(tmp_path, {0: [wrapper, legacy(3, "a", "2")], 4: []})
    clean(tmp_path)
    rebuilt = batches(tmp_path)[0]
    assert (rebuilt.base_offset, rebuilt.last_offset, rebuilt.attributes, rebuilt.max_timestamp) == (
        2,
        2,
        0x09,
        w,
    )
    assert [(r.offset, r.key, r.timestamp) for r in rebuilt.records] == [(2, b"b", w)]
    assert [(m[0], m[3]) for m in _wrapper_inner_messages(rebuilt.raw)] == [(0, w)]


def test_rebuilt_legacy_log_append_time_inner_messages_carry_the_timestamp_type(tmp_path):
    # MemoryRecordsBuilder.appendLegacyRecord -> LegacyRecord.write(..., timestampType): inner attributes = 0x08.
    w = TS + 900
    wrapper = _handmade_wrapper(2, [(0, "a", "1", TS + 1, 0), (1, "b", "1", TS + 2, 0)], inner_magic=1,
                                attributes=compression.GZIP | 0x08, ts=w)  # fmt: skip
    layout(tmp_path, {0: [wrapper, legacy(3, "a", "2")], 4: []})
    clean(tmp_path)
    assert _wrapper_inner_messages(batches(tmp_path)[0].raw) == [(0, 1, 0x08, w)]


@pytest.mark.parametrize(("version", "hw"), [("4.3.1", None), ("4.4.0", 2)], ids=["4.3.1", "4.4.0-hw-at-2"])
def test_legacy_last_batch_of_the_round_without_kept_records_is_kept_unchanged(tmp_path, version, hw):
    # Spec R5: where rule R2.2 keeps the entry ending at 2 (the round's bound up to 4.3, the high watermark
    # from 4.4) the broker throws (empty batches are v2 only); we keep the entry as it is.
    unkeyed = legacy(1, None, "u")
    layout(tmp_path, {0: [legacy(0, "a", "1"), unkeyed], 2: [legacy(2, "b", "1")]}, hw=hw)
    clean(tmp_path, broker=BrokerConfig(kafka_version=KafkaVersion.parse(version)))
    assert batches(tmp_path)[1].raw == unkeyed
    assert data_records(tmp_path) == [(0, b"a", b"1"), (1, None, b"u"), (2, b"b", b"1")]


def test_from_4_4_a_legacy_entry_emptied_at_a_bound_below_the_high_watermark_goes(tmp_path):
    # Rule R2.2 of 4.4 does not reach it (the high watermark is the log end, 3): DELETE_EMPTY, no throw.
    layout(tmp_path, {0: [legacy(0, "a", "1"), legacy(1, None, "u")], 2: [legacy(2, "b", "1")]})
    clean(tmp_path, broker=BrokerConfig(kafka_version=KafkaVersion(4, 4)))
    assert data_records(tmp_path) == [(0, b"a", b"1"), (2, b"b", b"1")]
