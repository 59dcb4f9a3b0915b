"""Record batches against kafka-python's codec (an implementation nobody here wrote) and the spec's hex."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder
from kafka.record.memory_records import MemoryRecords

from kafka_log_core.errors import CorruptDataError, CorruptRecordError, KafkaLogError
from kafka_log_core.format import compression, log_file, record_batch
from kafka_log_core.format.record_batch import Header, Record

CODECS = {"none": 0, "gzip": 1, "snappy": 2, "lz4": 3, "zstd": 4}
TS = 1_700_000_000_000


def hexbytes(text: str) -> bytes:
    out = []
    for tok in text.split():
        if tok.startswith("FF×"):
            out += [0xFF] * int(tok[3:])
        else:
            out.append(int(tok, 16))
    return bytes(out)


SAMPLE = [
    (b"k1", b"v1", [("h", b"x")], TS),
    (None, b"no-key", [], TS + 1),
    (b"k2", None, [("a", None), ("b", b"")], TS + 2),
    (b"", b"", [], TS - 5),
    (b"k3" * 300, b"v" * 5000, [], TS + 3),
]


def kafka_python_batch(codec: int, base_offset: int = 0, **kw) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=codec, is_transactional=kw.get("transactional", False),
        producer_id=kw.get("producer_id", -1), producer_epoch=kw.get("producer_epoch", -1),
        base_sequence=kw.get("base_sequence", -1), batch_size=1 << 20,
    )  # fmt: skip
    for i, (k, v, hdrs, ts) in enumerate(SAMPLE):
        builder.append(i, timestamp=ts, key=k, value=v, headers=hdrs)
    data = bytearray(builder.build())
    data[0:8] = base_offset.to_bytes(8, "big")
    return bytes(data)


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_decodes_batches_written_by_kafka_python(codec):
    data = kafka_python_batch(codec, base_offset=42, producer_id=7, producer_epoch=3, base_sequence=11)
    (batch,) = list(log_file.iter_batches(data))
    batch.verify()
    h = batch.header
    assert (h.base_offset, h.last_offset, h.compression) == (42, 46, codec)
    assert (h.producer_id, h.producer_epoch, h.base_sequence) == (7, 3, 11)
    assert h.max_timestamp == TS + 3
    got = [
        (r.offset, r.key, r.value, [(x.key, x.value) for x in r.headers], r.timestamp)
        for r in batch.records()
    ]
    want = [(42 + i, k, v, hdrs, ts) for i, (k, v, hdrs, ts) in enumerate(SAMPLE)]
    assert got == want


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_kafka_python_reads_our_batches(codec):
    records = [
        Record(100 + i, ts, k, v, tuple(Header(hk, hv) for hk, hv in hdrs))
        for i, (k, v, hdrs, ts) in enumerate(SAMPLE)
    ]
    data = record_batch.build_batch(
        100, records, codec=codec, producer_id=9, producer_epoch=1, base_sequence=0, partition_leader_epoch=4
    )
    batch = MemoryRecords(data).next_batch()
    assert batch.validate_crc()
    assert (batch.base_offset, batch.compression_type, batch.producer_id, batch.leader_epoch) == (
        100,
        codec,
        9,
        4,
    )
    got = [(r.offset, r.key, r.value, list(r.headers), r.timestamp) for r in batch]
    want = [(100 + i, k, v, hdrs, ts) for i, (k, v, hdrs, ts) in enumerate(SAMPLE)]
    assert got == want


def test_transactional_flag_round_trips_with_kafka_python():
    data = kafka_python_batch(0, transactional=True, producer_id=5, producer_epoch=0, base_sequence=0)
    (batch,) = log_file.iter_batches(data)
    assert batch.header.is_transactional and not batch.header.is_control


@pytest.mark.parametrize(
    "name,hexdump",
    [
        ("E1", "00 00 00 00 00 00 00 00 00 00 00 3A 00 00 00 00 02 E9 9B 8D D8 00 00 00 00 00 00 "
               "00 00 01 8B CF E5 68 00 00 00 01 8B CF E5 68 00 FF FF FF FF FF FF FF FF FF FF FF FF FF FF "
               "00 00 00 01 10 00 00 00 02 6B 02 76 00"),
        ("E2", "00 00 00 00 00 00 00 64 00 00 00 46 00 00 00 03 02 90 EA 4F 03 00 00 00 00 00 01 "
               "00 00 01 8B CF E5 68 00 00 00 01 8B CF E5 68 05 FF×8 FF FF FF FF FF FF 00 00 00 02 "
               "10 00 00 00 02 61 02 31 00 16 00 0A 02 02 62 01 02 02 68 02 78"),
    ],
)  # fmt: skip
def test_spec_examples_decode_and_reencode_byte_for_byte(name, hexdump):
    data = hexbytes(hexdump)
    (batch,) = log_file.iter_batches(data)
    batch.verify()
    h = batch.header
    rebuilt = record_batch.build_batch(
        h.base_offset, batch.records(), partition_leader_epoch=h.partition_leader_epoch
    )
    assert rebuilt == data


def test_delete_horizon_example_e3_keeps_absolute_timestamps():
    e2 = hexbytes(
        "00 00 00 00 00 00 00 64 00 00 00 46 00 00 00 03 02 90 EA 4F 03 00 00 00 00 00 01 "
        "00 00 01 8B CF E5 68 00 00 00 01 8B CF E5 68 05 FF×8 FF FF FF FF FF FF 00 00 00 02 "
        "10 00 00 00 02 61 02 31 00 16 00 0A 02 02 62 01 02 02 68 02 78"
    )
    e3 = hexbytes(
        "00 00 00 00 00 00 00 64 00 00 00 4C 00 00 00 03 02 3C 8F 44 DC 00 40 00 00 00 01 "
        "00 00 01 8B D5 0D 4A A0 00 00 01 8B CF E5 68 05 FF×8 FF FF FF FF FF FF 00 00 00 02 "
        "16 00 BF 8A BF 52 00 02 61 02 31 00 1C 00 B5 8A BF 52 02 02 62 01 02 02 68 02 78"
    )
    (b2,) = log_file.iter_batches(e2)
    rebuilt = record_batch.build_batch(
        100, b2.records(), partition_leader_epoch=3, delete_horizon_ms=1_700_086_500_000
    )
    assert rebuilt == e3
    (b3,) = log_file.iter_batches(e3)
    assert b3.header.delete_horizon_ms == 1_700_086_500_000
    assert [r.timestamp for r in b3.records()] == [TS, TS + 5]


def test_commit_marker_matches_example_e4():
    e4 = hexbytes(
        "00 00 00 00 00 00 00 C8 00 00 00 42 00 00 00 03 02 FC 84 B0 34 00 30 00 00 00 00 "
        "00 00 01 8B CF E5 68 00 00 00 01 8B CF E5 68 00 00 00 00 00 00 00 03 E8 00 00 FF FF FF FF "
        "00 00 00 01 20 00 00 00 08 00 00 00 01 0C 00 00 00 00 00 05 00"
    )
    ours = record_batch.build_control_batch(
        200, record_batch.CONTROL_COMMIT, producer_id=1000, producer_epoch=0, coordinator_epoch=5,
        timestamp=TS, partition_leader_epoch=3,
    )  # fmt: skip
    assert ours == e4
    (batch,) = log_file.iter_batches(e4)
    (rec,) = batch.records()
    marker = record_batch.decode_control_record(rec)
    assert (marker.type_name, marker.coordinator_epoch) == ("COMMIT", 5)
    kp = MemoryRecords(e4).next_batch()
    assert kp.is_control_batch and kp.is_transactional


def test_empty_batch_matches_example_e5():
    e5 = hexbytes(
        "00 00 00 00 00 00 01 2C 00 00 00 31 00 00 00 03 02 A5 BF F9 C1 00 00 00 00 00 04 "
        "FF FF FF FF FF FF FF FF 00 00 01 8B CF E5 68 00 00 00 00 00 00 00 00 07 00 02 00 00 00 0A 00 00 00 00"
    )
    ours = record_batch.build_batch(
        300, [], producer_id=7, producer_epoch=2, base_sequence=10, partition_leader_epoch=3,
        last_offset_delta=4, max_timestamp=TS,
    )  # fmt: skip
    assert ours == e5
    (batch,) = log_file.iter_batches(e5)
    assert batch.records() == [] and batch.last_offset == 304


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", [0, 1, 2, 3], ids=["none", "gzip", "snappy", "lz4"])
def test_reads_legacy_message_sets_written_by_kafka_python(magic, codec):
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=codec, batch_size=1 << 20)
    for i, (k, v) in enumerate([(b"a", b"1"), (None, b"2"), (b"c", None)]):
        builder.append(i, timestamp=TS + i if magic else None, key=k, value=v)
    data = bytearray(builder.build())
    # Shift to absolute offsets 10..12 the way a broker assigns them.
    if codec == 0:
        pos = 0
        for i in range(3):
            data[pos : pos + 8] = (10 + i).to_bytes(8, "big")
            pos += 12 + int.from_bytes(data[pos + 8 : pos + 12], "big")
    else:
        data[0:8] = (12 if magic == 1 else 2).to_bytes(8, "big")
    records = [r for b in log_file.iter_batches(bytes(data)) for r in (b.verify() or b.records())]
    offsets = [r.offset for r in records]
    assert offsets == ([10, 11, 12] if (codec == 0 or magic == 1) else [0, 1, 2])
    assert [(r.key, r.value) for r in records] == [(b"a", b"1"), (None, b"2"), (b"c", None)]
    if magic == 1:
        assert [r.timestamp for r in records] == [TS, TS + 1, TS + 2]


def test_legacy_examples_e6():
    v1 = hexbytes(
        "00 00 00 00 00 00 00 00 00 00 00 18 39 26 8C 33 01 00 00 00 01 8B CF E5 68 00 00 00 00 01 6B 00 00 00 01 76"
    )
    v0 = hexbytes("00 00 00 00 00 00 00 05 00 00 00 10 1F EC D7 0A 00 00 00 00 00 01 6B 00 00 00 01 76")
    b1, b0 = list(log_file.iter_batches(v1 + v0))
    b1.verify()
    b0.verify()
    assert (b1.magic, b1.max_timestamp, b0.magic, b0.last_offset) == (1, TS, 0, 5)
    assert [(r.key, r.value) for r in b0.records()] == [(b"k", b"v")]


@pytest.mark.parametrize("codec", CODECS.values(), ids=CODECS.keys())
def test_compression_round_trips_and_interops_with_kafka_python(codec):
    from kafka.codec import gzip_decode, lz4_decode, snappy_decode, zstd_decode

    payload = bytes(range(256)) * 700
    packed = compression.compress(codec, payload)
    decoders = {1: gzip_decode, 2: snappy_decode, 3: lz4_decode, 4: zstd_decode}
    if codec:
        assert decoders[codec](packed) == payload
    assert compression.decompress(codec, packed) == payload


record_strategy = st.builds(
    lambda delta, tsd, k, v, hs: (delta, tsd, k, v, hs),
    st.integers(0, 3),
    st.integers(-(10**12), 10**12),
    st.none() | st.binary(max_size=40),
    st.none() | st.binary(max_size=80),
    st.lists(st.tuples(st.text(max_size=8), st.none() | st.binary(max_size=8)), max_size=3),
)


@settings(max_examples=150, deadline=None)
@given(
    base=st.integers(0, 2**40),
    specs=st.lists(record_strategy, min_size=1, max_size=20),
    codec=st.sampled_from(list(CODECS.values())),
)
def test_encode_decode_round_trip(base, specs, codec):
    records, offset = [], base
    for delta, tsd, k, v, hs in specs:
        offset += delta
        records.append(Record(offset, TS + tsd, k, v, tuple(Header(a, b) for a, b in hs)))
        offset += 1
    data = record_batch.build_batch(base, records, codec=codec)
    (batch,) = log_file.iter_batches(data)
    batch.verify()
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records()]
    assert got == [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in records]
    kp = list(MemoryRecords(data).next_batch())
    assert [(r.offset, r.key, r.value) for r in kp] == [(r.offset, r.key, r.value) for r in records]


@settings(max_examples=300, deadline=None)
@given(
    cut=st.integers(0, 400),
    flip=st.integers(0, 400),
    bit=st.integers(0, 7),
    codec=st.sampled_from([0, 1, 3, 4]),
)
def test_truncated_or_bit_flipped_batches_raise_our_errors_only(cut, flip, bit, codec):
    records = [Record(i, TS + i, b"key%d" % i, b"value" * i, (Header("h", b"v"),)) for i in range(5)]
    data = bytearray(record_batch.build_batch(0, records, codec=codec))
    if flip < len(data):
        data[flip] ^= 1 << bit
    data = bytes(data[: max(len(data) - cut, 0)]) if cut % 2 else bytes(data)
    try:
        for batch in log_file.iter_batches(data, "seg.log", strict=True):
            batch.verify()
            batch.records()
    except KafkaLogError as err:
        assert isinstance(err, CorruptDataError)
        assert "seg.log" in str(err) and "position" in str(err)


def test_crc_mismatch_names_file_and_position():
    ok = record_batch.build_batch(0, [Record(0, TS, b"k", b"v")])
    bad = bytearray(ok + ok)
    bad[len(ok) + 30] ^= 0xFF
    batches = list(log_file.iter_batches(bytes(bad), "/d/t-0/00000000000000000000.log"))
    batches[0].verify()
    with pytest.raises(
        CorruptRecordError, match=r"t-0/00000000000000000000\.log at position 70: CRC32C mismatch"
    ):
        batches[1].verify()


def test_size_below_minimum_is_corruption_but_partial_tail_is_ignored():
    ok = record_batch.build_batch(0, [Record(0, TS, b"k", b"v")])
    assert len(list(log_file.iter_batches(ok + ok[:40]))) == 1
    with pytest.raises(CorruptRecordError, match="truncated segment"):
        list(log_file.iter_batches(ok + ok[:40], "x.log", strict=True))
    with pytest.raises(CorruptRecordError, match="smaller than the minimum"):
        list(log_file.iter_batches(ok + bytes(30), "x.log"))


@pytest.mark.parametrize("seq,inc,expected", [(5, 3, 8), (2**31 - 1, 1, 0), (2**31 - 2, 3, 1), (-1, 4, -1)])
def test_sequence_arithmetic_wraps_at_int32_max(seq, inc, expected):
    assert record_batch.increment_sequence(seq, inc) == expected
